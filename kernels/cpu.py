"""P_cpu_supported(): CPUID and XGETBV checks for exactly the features the file uses."""
from __future__ import annotations

from aesgen.dsl import FunctionBuilder

# (CPUID leaf, output register, bit) per /proc/cpuinfo flag name.
CPUID_BITS = {
    "pclmulqdq": (1, "ecx", 1),
    "ssse3": (1, "ecx", 9),
    "movbe": (1, "ecx", 22),
    "aes": (1, "ecx", 25),
    "avx": (1, "ecx", 28),
    "avx2": (7, "ebx", 5),
    "bmi2": (7, "ebx", 8),
    "avx512f": (7, "ebx", 16),
    "avx512bw": (7, "ebx", 30),
    "avx512vl": (7, "ebx", 31),
    "avx512vbmi": (7, "ecx", 1),
    "vaes": (7, "ecx", 9),
    "vpclmulqdq": (7, "ecx", 10),
    "gfni": (7, "ecx", 8),
}
OSXSAVE = (1, "ecx", 27)
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


def cpu_supported_function(b: FunctionBuilder) -> None:
    features = b.spec.features
    masks = feature_masks(features)
    fail = b.label_name("no")

    def body() -> None:
        b.s("push.r64", "rbx", comment="cpuid writes rbx (callee-saved)")
        b.s("xor.r32.r32", "eax", "eax")
        b.s("cpuid")
        top_leaf = max(leaf for leaf, _ in masks)
        b.s("cmp.r32.imm", "eax", imm=top_leaf, comment="highest CPUID leaf we read")
        b.branch("b", fail)
        for leaf in (1, 7):
            regs = {reg: m for (lf, reg), m in masks.items() if lf == leaf}
            if not regs:
                continue
            b.s("mov.r32.imm", "eax", imm=leaf)
            b.s("xor.r32.r32", "ecx", "ecx")
            b.s("cpuid")
            for reg, m in sorted(regs.items()):
                b.s("and.r32.imm", reg, imm=m)
                b.s("cmp.r32.imm", reg, imm=m, comment=f"leaf {leaf} {reg}: " + ", ".join(
                    f for f in features if CPUID_BITS[f][:2] == (leaf, reg)))
                b.branch("ne", fail)
        if "avx" in features:
            xcr0 = XCR0_AVX512 if "avx512f" in features else XCR0_AVX
            b.s("xor.r32.r32", "ecx", "ecx")
            b.s("xgetbv")
            b.s("and.r32.imm", "eax", imm=xcr0)
            b.s("cmp.r32.imm", "eax", imm=xcr0, comment="the OS saves the vector state")
            b.branch("ne", fail)
        b.s("mov.r32.imm", "eax", imm=1)
        b.s("pop.r64", "rbx")
        b.s("ret")
        b.label(fail)
        b.s("xor.r32.r32", "eax", "eax")
        b.s("pop.r64", "rbx")
        b.s("ret")

    b.single_path(None, body)
