"""The instruction facade (aesgen.isa): iced Codes, VEX vs EVEX, and that every emitted instruction encodes.

Expected mnemonics, encodings and CPUID features come from iced-x86's own
tables (OpCodeInfo, cpuid_features) and the Intel SDM, not from aesgen.
"""
from __future__ import annotations

from functools import lru_cache

import iced_x86 as ix
import pytest

from _support import ISA_WIDTHS
from aesgen import semantics
from aesgen.ir import BuildError, Const, Insn, Mem, Phys
from aesgen.isa import KIND, Assembler
from aesgen.ops import OPS
from aesgen.pipeline import generate
from aesgen.spec import KernelSpec

MNEMONIC = {v: k for k, v in vars(ix.Mnemonic).items() if not k.startswith("_") and isinstance(v, int)}
REGISTER = {v: k for k, v in vars(ix.Register).items() if not k.startswith("_") and isinstance(v, int)}
CPUID = {v: k for k, v in vars(ix.CpuidFeature).items() if not k.startswith("_") and isinstance(v, int)}
LEGACY, VEX, EVEX = ix.EncodingKind.LEGACY, ix.EncodingKind.VEX, ix.EncodingKind.EVEX

# op -> expected mnemonic (legacy, VEX, EVEX), from the Intel SDM.
MNEMONICS = {
    "vxor": ("PXOR", "VPXOR", "VPXORD"), "vzero": ("PXOR", "VPXOR", "VPXORD"),
    "paddd": ("PADDD", "VPADDD", "VPADDD"), "pshufb": ("PSHUFB", "VPSHUFB", "VPSHUFB"),
    "aesenc": ("AESENC", "VAESENC", "VAESENC"), "aesenclast": ("AESENCLAST", "VAESENCLAST", "VAESENCLAST"),
    "aesdec": ("AESDEC", "VAESDEC", "VAESDEC"), "aesdeclast": ("AESDECLAST", "VAESDECLAST", "VAESDECLAST"),
    "aesimc": ("AESIMC", "VAESIMC", None), "aeskeygenassist": ("AESKEYGENASSIST", "VAESKEYGENASSIST", None),
    "pshufd": ("PSHUFD", "VPSHUFD", "VPSHUFD"), "pslldq": ("PSLLDQ", "VPSLLDQ", "VPSLLDQ"),
    "punpcklqdq": ("PUNPCKLQDQ", "VPUNPCKLQDQ", "VPUNPCKLQDQ"), "palignr": ("PALIGNR", "VPALIGNR", "VPALIGNR"),
    "vload": ("MOVDQU", "VMOVDQU", "VMOVDQU64"), "vstore": ("MOVDQU", "VMOVDQU", "VMOVDQU64"),
    "vload_key": ("MOVDQA", "VMOVDQA", "VMOVDQA64"), "vstore_key": ("MOVDQA", "VMOVDQA", "VMOVDQA64"),
    "vmov": ("MOVDQA", "VMOVDQA", "VMOVDQA64"), "vload64": ("MOVQ", "VMOVQ", "VMOVQ"),
    "vload32": ("MOVD", "VMOVD", "VMOVD"),
    "vload_bcast": (None, "VBROADCASTI128", "VBROADCASTI32X4"), "valignq": (None, None, "VALIGNQ"),
    "vload_bcast64": (None, "VPBROADCASTQ", "VPBROADCASTQ"),
    "vperm2i128": (None, "VPERM2I128", None), "vextract128": (None, "VEXTRACTI128", "VEXTRACTI32X4"),
    "vinserti128": (None, "VINSERTI128", None), "vinsert128": (None, "VINSERTI128", "VINSERTI32X4"),
    "vshufi32x4": (None, None, "VSHUFI32X4"),
    "vpermi2q": (None, None, "VPERMI2Q"), "permt2b": (None, None, "VPERMT2B"),
    "blendv": (None, "VPBLENDVB", None),
    "vextract256": (None, None, "VEXTRACTI64X4"), "clmul": ("PCLMULQDQ", "VPCLMULQDQ", "VPCLMULQDQ"),
    "psllq": ("PSLLQ", "VPSLLQ", "VPSLLQ"), "psrlq": ("PSRLQ", "VPSRLQ", "VPSRLQ"),
    "psrad": ("PSRAD", "VPSRAD", "VPSRAD"), "pand": ("PAND", "VPAND", "VPANDD"),
    "por": ("POR", "VPOR", "VPORD"), "pandn": ("PANDN", "VPANDN", "VPANDND"),
    "ternlog": (None, None, "VPTERNLOGD"),
    "paddq": ("PADDQ", "VPADDQ", "VPADDQ"), "psrldq": ("PSRLDQ", "VPSRLDQ", "VPSRLDQ"),
    "psllvq": (None, "VPSLLVQ", "VPSLLVQ"), "psrlvq": (None, "VPSRLVQ", "VPSRLVQ"),
    "gf2p8affineqb": ("GF2P8AFFINEQB", "VGF2P8AFFINEQB", "VGF2P8AFFINEQB"),
    "gf2p8affineinvqb": ("GF2P8AFFINEINVQB", "VGF2P8AFFINEINVQB", "VGF2P8AFFINEINVQB"),
    "prord": (None, None, "VPRORD"),
    "pmuludq": ("PMULUDQ", "VPMULUDQ", "VPMULUDQ"), "psraq": (None, None, "VPSRAQ"),
}
# Widths each op is used at (lowering: broadcasts, lane extracts/inserts and lane shuffles only above 128).
ABOVE_128 = {"vload_bcast", "vextract128", "vinserti128", "vinsert128", "vshufi32x4", "vperm2i128"}
ONLY_512 = {"vextract256", "vpermi2q"}
FAMILY_WIDTHS = ((LEGACY, (128,)), (VEX, (128, 256)), (EVEX, (128, 256, 512)))
# The op table's encoded vector ops: (legacy, VEX, EVEX) Code name templates.
VECTOR_FORMS = {op.name: (op.forms.legacy, op.forms.vex, op.forms.evex) for op in OPS.values()
                if op.vector and (op.forms.legacy or op.forms.vex or op.forms.evex)}


def usable(op: str, widths: tuple[int, ...]) -> tuple[int, ...]:
    if OPS[op].xmm_only:
        return (128,)
    if op in ABOVE_128:
        return tuple(w for w in widths if w > 128)
    if op in ONLY_512:
        return tuple(w for w in widths if w == 512)
    return widths


def test_every_op_has_an_expected_mnemonic_table_entry() -> None:
    assert set(VECTOR_FORMS) == set(MNEMONICS)


@pytest.mark.parametrize("op", sorted(VECTOR_FORMS))
def test_every_template_resolves_for_every_width_it_is_used_at(op: str) -> None:
    for (family, widths), template, mnemonic in zip(FAMILY_WIDTHS, VECTOR_FORMS[op], MNEMONICS[op]):
        assert (template is None) == (mnemonic is None), (op, family)
        if template is None:
            continue
        for width in usable(op, widths):
            w = 128 if OPS[op].xmm_only else width
            name = template.format(R=KIND[w], W=w)
            assert hasattr(ix.Code, name), f"{op}: no iced Code {name}"
            info = ix.OpCodeInfo(getattr(ix.Code, name))
            assert info.encoding == family, name
            assert MNEMONIC[info.mnemonic] == mnemonic, name
            assert KIND[w].lower() in info.instruction_string.lower(), (name, info.instruction_string)
            if op.startswith("vstore"):
                assert f"m{w}" in info.instruction_string.split(" ", 1)[1].split(",")[0], \
                    f"{name} must be the store form: {info.instruction_string}"


def test_byte_masked_forms() -> None:
    byte_masked = {op.name: op.forms.evex_bytes for op in OPS.values() if op.forms.evex_bytes}
    assert set(byte_masked) == {"vload", "vstore"}
    for op, template in byte_masked.items():
        for w in (128, 256, 512):
            info = ix.OpCodeInfo(getattr(ix.Code, template.format(R=KIND[w], W=w)))
            assert info.encoding == EVEX and MNEMONIC[info.mnemonic] == "VMOVDQU8"
            assert info.can_use_op_mask_register


# ---------------------------------------------------------------- VEX vs EVEX by rule

def P(n: int) -> Phys:
    return Phys(n, "t")


def encoding_of(isa: str, insn: Insn) -> int:
    e = Assembler(isa, {}).emit(insn)
    ix.Encoder(64).encode(e.instruction, 0)
    return e.instruction.encoding


@pytest.mark.parametrize("isa,width", [("avx", 128), ("avx2", 256), ("avx512", 128), ("avx512", 256)])
def test_vex_for_low_registers_unmasked(isa: str, width: int) -> None:
    for op in ("vxor", "aesenc", "paddd", "pshufb", "vmov"):
        srcs = (P(1),) if op == "vmov" else (P(1), P(15))
        assert encoding_of(isa, Insn(op, P(0), srcs, width=width)) == VEX, op
    assert encoding_of(isa, Insn("vload", P(3), (Mem("rsi", 32),), width=width)) == VEX
    assert encoding_of(isa, Insn("vstore", Mem("rdx", 0), (P(15),), width=width)) == VEX


@pytest.mark.parametrize("width", (128, 256, 512))
def test_evex_for_zmm_high_registers_and_masks(width: int) -> None:
    a = "avx512"
    assert encoding_of(a, Insn("aesenc", P(0), (P(1), P(2)), width=512)) == EVEX
    for regs in ((16, 1, 2), (0, 17, 2), (0, 1, 31)):
        assert encoding_of(a, Insn("vxor", P(regs[0]), (P(regs[1]), P(regs[2])), width=width)) == EVEX, regs
    masked = Insn("vload", P(0), (Mem("rsi", 0),), width=width, mask="k1")
    e = Assembler(a, {}).emit(masked).instruction
    assert e.encoding == EVEX and e.op_mask == ix.Register.K1 and e.zeroing_masking
    st = Assembler(a, {}).emit(Insn("vstore", Mem("rdx", 0), (P(0),), width=width, mask="k1", mask_elem="b"))
    assert st.instruction.encoding == EVEX and not st.instruction.zeroing_masking, "stores merge"
    assert MNEMONIC[st.instruction.mnemonic] == "VMOVDQU8"
    # EVEX-only instructions
    assert encoding_of(a, Insn("valignq", P(0), (P(1), P(2)), imm=2, width=width)) == EVEX


def test_legacy_on_sse() -> None:
    assert encoding_of("sse", Insn("aesenc", P(3), (P(3), P(4)), width=128)) == LEGACY
    assert encoding_of("sse", Insn("pslldq", P(3), (P(3),), imm=4, width=128)) == LEGACY
    with pytest.raises(BuildError, match="untied"):
        Assembler("sse", {}).emit(Insn("vxor", P(1), (P(2), P(3)), width=128))
    with pytest.raises(BuildError, match="not available on sse"):
        Assembler("sse", {}).emit(Insn("valignq", P(1), (P(1), P(3)), imm=2, width=128))


def test_xmm_only_op_in_a_high_register_has_no_encoding() -> None:
    with pytest.raises(BuildError, match="no EVEX form"):
        Assembler("avx512", {}).emit(Insn("aesimc", P(16), (P(1),), width=128))


def test_constants_are_rip_relative_labels() -> None:
    asm = Assembler("avx", {"bswap_x1": ".Lp_bswap_x1"})
    e = asm.emit(Insn("pshufb", P(0), (P(1), Const("bswap_x1", bytes(16))), width=128))
    assert e.text.endswith(".Lp_bswap_x1(%rip),%xmm1,%xmm0") or ".Lp_bswap_x1(%rip)" in e.text
    assert e.instruction.is_ip_rel_memory_operand


# ---------------------------------------------------------------- every instruction of real kernels

# /proc/cpuinfo flag -> iced CpuidFeature name
FLAG_TO_ICED = {"aes": "AES", "ssse3": "SSSE3", "avx": "AVX", "avx2": "AVX2", "bmi2": "BMI2", "vaes": "VAES",
                "avx512f": "AVX512F", "avx512bw": "AVX512BW", "avx512vl": "AVX512VL"}
# What every x86-64 CPU has; XSAVE (xgetbv) is only reached after the OSXSAVE bit is checked;
# ENDBR64 is a NOP without CET.
BASELINE = {"INTEL8086", "INTEL386", "INTEL486", "X64", "SSE", "SSE2", "CPUID", "CET_IBT"}
FORBIDDEN = {"sse": {"AVX", "AVX2", "VAES", "AVX512F", "BMI2", "XSAVE"},
             "avx": {"AVX2", "VAES", "AVX512F", "AVX512VL", "AVX512BW", "BMI2"},
             "avx2": {"AVX512F", "AVX512VL", "AVX512BW"}, "avx512": set()}


@lru_cache(maxsize=None)
def kernel(isa: str, width: int, depth: int):
    modes = ("ecb", "ctr32", "cbc")
    if isa != "avx512" and depth > 12:
        modes = ("ecb",)
    return generate(KernelSpec(modes, isa, width, depth))


def vector_regs(ins: ix.Instruction) -> list[str]:
    names = [REGISTER[ins.op_register(k)] for k in range(ins.op_count) if ins.op_kind(k) == ix.OpKind.REGISTER]
    return [n for n in names if n[:3] in ("XMM", "YMM", "ZMM")]


@pytest.mark.parametrize("depth", (2, 16))
@pytest.mark.parametrize("isa,width", ISA_WIDTHS)
def test_every_emitted_instruction_encodes_and_decodes_back(isa: str, width: int, depth: int) -> None:
    g = kernel(isa, width, depth)
    assert g.instructions
    fmt = ix.Formatter(ix.FormatterSyntax.GAS)
    for ins in g.instructions:
        enc = ix.Encoder(64)
        n = enc.encode(ins, ins.ip)
        raw = enc.take_buffer()
        assert len(raw) == n and 1 <= n <= 15
        back = ix.Decoder(64, raw, ip=ins.ip).decode()
        assert back.code == ins.code, (fmt.format(ins), fmt.format(back))
        if not ins.is_ip_rel_memory_operand and ins.flow_control == ix.FlowControl.NEXT:
            assert fmt.format(back) == fmt.format(ins)


@pytest.mark.parametrize("isa,width", ISA_WIDTHS)
def test_instructions_need_only_the_features_the_file_checks(isa: str, width: int) -> None:
    g = kernel(isa, width, 4)
    allowed = BASELINE | {FLAG_TO_ICED[f] for f in g.spec.features} | ({"XSAVE"} if isa != "sse" else set())
    needed = {CPUID[f] for ins in g.instructions for f in ins.cpuid_features()}
    assert needed <= allowed, f"{isa}: needs {sorted(needed - allowed)} that cpu_supported does not check"
    assert not needed & FORBIDDEN[isa], f"{isa}: uses {sorted(needed & FORBIDDEN[isa])}"


@pytest.mark.parametrize("depth", (2, 16))
@pytest.mark.parametrize("isa,width", ISA_WIDTHS)
def test_encoding_family_by_rule(isa: str, width: int, depth: int) -> None:
    g = kernel(isa, width, depth)
    evex_only = {"VALIGNQ", "VSHUFI32X4", "VEXTRACTI32X4", "VBROADCASTI32X4"}
    for ins in g.instructions:
        regs = vector_regs(ins)
        if not regs and ins.encoding != EVEX:
            continue
        high = any(int(r[3:]) >= 16 for r in regs)
        zmm = any(r.startswith("ZMM") for r in regs)
        masked = ins.op_mask != ix.Register.NONE
        name = MNEMONIC[ins.mnemonic]
        if isa == "sse":
            assert ins.encoding == LEGACY, name
            assert not high and all(r.startswith("XMM") for r in regs)
        elif isa in ("avx", "avx2"):
            assert ins.encoding in (VEX, LEGACY) and not high, name
            if ins.encoding == LEGACY:
                assert not regs, f"{isa}: legacy SSE {name} mixed into VEX code"
            if isa == "avx":
                assert all(r.startswith("XMM") for r in regs), f"avx: {name} uses {regs}"
        else:
            if ins.encoding == EVEX:
                assert high or zmm or masked or name in evex_only, f"EVEX {name} {regs} without a reason"
            else:
                assert ins.encoding == VEX and not (high or zmm or masked), f"{name} {regs} needs EVEX"


def test_ternlog_encodes_vpternlogd_with_dst_as_first_input():
    from aesgen.ir import XOR3

    asm = Assembler("avx512", {})
    e = asm.emit(Insn("ternlog", Phys(3), (Phys(3), Phys(17), Phys(5)), imm=XOR3, width=512))
    assert e.text.split("#")[0].strip() == "vpternlogd $0x96,%zmm5,%zmm17,%zmm3"


def test_simulated_ternlog_follows_the_truth_table_bit_by_bit():
    import random

    rng = random.Random(7)
    for imm in (0x96, 0xE8, 0x01, 0xFE, rng.randrange(256)):
        a, b, c = (rng.getrandbits(128) for _ in range(3))
        want = sum(((imm >> ((a >> i & 1) << 2 | (b >> i & 1) << 1 | (c >> i & 1))) & 1) << i for i in range(128))
        assert semantics.ternlog(a, b, c, imm) == want
