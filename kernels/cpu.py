"""P_cpu_supported(): CPUID and XGETBV checks for exactly the features the file uses."""
from __future__ import annotations

from aesgen.dsl import FunctionBuilder

from .regs import RESULT, r32
from .registry import describes

# Register roles, fixed by the instructions: cpuid takes the leaf in eax and the subleaf in ecx,
# and returns the feature words in ebx and ecx (leaf 0: the highest leaf in eax); xgetbv takes
# the XCR number in ecx and returns XCR0's low half in eax. rbx is callee-saved: pushed around.
LEAF = XCR0_LOW = RESULT  # cpuid's leaf (leaf 0 returns the highest leaf there); xgetbv's result
WORD_B, WORD_C = "rbx", "rcx"  # cpuid's feature words (the SDM's names: CPUID.(EAX=7,ECX=0):EBX)
SUBLEAF = XCR = WORD_C  # cpuid's subleaf; xgetbv's XCR number

# (CPUID leaf, output register: WORD_B or WORD_C, bit) per /proc/cpuinfo flag name.
CPUID_BITS = {
    "pclmulqdq": (1, WORD_C, 1),
    "ssse3": (1, WORD_C, 9),
    "movbe": (1, WORD_C, 22),
    "aes": (1, WORD_C, 25),
    "avx": (1, WORD_C, 28),
    "avx2": (7, WORD_B, 5),
    "bmi2": (7, WORD_B, 8),
    "avx512f": (7, WORD_B, 16),
    "avx512bw": (7, WORD_B, 30),
    "avx512vl": (7, WORD_B, 31),
    "avx512vbmi": (7, WORD_C, 1),
    "vaes": (7, WORD_C, 9),
    "vpclmulqdq": (7, WORD_C, 10),
    "gfni": (7, WORD_C, 8),
}
OSXSAVE = (1, WORD_C, 27)
# XCR0 state components (Intel SDM vol. 1, 13.1) the OS must enable for the registers used.
XCR0_BITS = {"sse": 1, "avx": 2, "opmask": 5, "zmm_hi256": 6, "hi16_zmm": 7}
XCR0_AVX = sum(1 << XCR0_BITS[c] for c in ("sse", "avx"))
XCR0_AVX512 = XCR0_AVX | sum(1 << XCR0_BITS[c] for c in ("opmask", "zmm_hi256", "hi16_zmm"))


def feature_masks(features: tuple[str, ...]) -> dict[tuple[int, str], int]:
    masks: dict[tuple[int, str], int] = {}
    bits = [CPUID_BITS[f] for f in features]
    if "avx" in features:
        bits.append(OSXSAVE)
    for leaf, reg, bit in bits:
        masks[(leaf, reg)] = masks.get((leaf, reg), 0) | (1 << bit)
    return masks


@describes("cpu_supported")
def cpu_supported_function(b: FunctionBuilder) -> None:
    features = b.spec.features
    masks = feature_masks(features)
    fail = b.label_name("no")

    def body() -> None:
        b.s("push.r64", WORD_B, comment="cpuid writes rbx (callee-saved)")
        b.s("xor.r32.r32", r32(LEAF), r32(LEAF))
        b.s("cpuid")
        top_leaf = max(leaf for leaf, _ in masks)
        b.s("cmp.r32.imm", r32(LEAF), imm=top_leaf, comment="highest CPUID leaf we read")
        b.branch("b", fail)
        for leaf in (1, 7):
            regs = {reg: m for (lf, reg), m in masks.items() if lf == leaf}
            if not regs:
                continue
            b.s("mov.r32.imm", r32(LEAF), imm=leaf)
            b.s("xor.r32.r32", r32(SUBLEAF), r32(SUBLEAF))
            b.s("cpuid")
            for reg, m in sorted(regs.items()):
                b.s("and.r32.imm", r32(reg), imm=m)
                b.s("cmp.r32.imm", r32(reg), imm=m, comment=f"leaf {leaf} {r32(reg)}: " + ", ".join(
                    f for f in features if CPUID_BITS[f][:2] == (leaf, reg)))
                b.branch("ne", fail)
        if "avx" in features:
            xcr0 = XCR0_AVX512 if "avx512f" in features else XCR0_AVX
            b.s("xor.r32.r32", r32(XCR), r32(XCR))
            b.s("xgetbv")
            b.s("and.r32.imm", r32(XCR0_LOW), imm=xcr0)
            b.s("cmp.r32.imm", r32(XCR0_LOW), imm=xcr0, comment="the OS saves the vector state")
            b.branch("ne", fail)
        b.s("mov.r32.imm", r32(RESULT), imm=1)
        b.s("pop.r64", WORD_B)
        b.s("ret")
        b.label(fail)
        b.s("xor.r32.r32", r32(RESULT), r32(RESULT))
        b.s("pop.r64", WORD_B)
        b.s("ret")

    b.single_path(None, body)
