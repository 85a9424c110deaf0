"""The op table: one `OpInfo` per op, every fact about it in one entry.

An entry says what the op's operands are, whether the destination is tied to the
first source (always, or only in the two-operand legacy SSE encoding) and whether
the sources commute, which iced-x86 `Code` encodes it in each family (legacy SSE,
VEX, EVEX), what it means (a function of `semantics.py`, which the simulator runs),
and which execution port class it uses (for a cost model). Register allocation,
lowering, scheduling, the instruction facade (`isa.py`) and the simulator all read
it; none of them lists ops of its own.

Naming. Vector ops are named by what they do, whatever the width or encoding
(`vxor`, `aesenc`, `vload`, `prev_lanes`): one name serves xmm, ymm and zmm and all
three encodings. Scalar ops are named `mnemonic.operands`, the operands in Intel
order, destination first: `r64`/`r32`/`r8` a general-purpose register of that size,
`m64`/`m32`/`m8` memory of that size, `m` an address (lea), `imm` an immediate (its
size follows the form GNU as picks), `cl` the count in cl, `x` an xmm register, `k`
an opmask register: `add.r64.imm`, `mov.r32.m32`, `xor.r8.m8`, `shld.r64.r64.cl`.
Ops without operands are the mnemonic alone (`ret`, `cpuid`).
"""
from __future__ import annotations

import operator
from dataclasses import dataclass
from enum import Enum
from typing import Callable

from . import semantics as sem
from .ir import XOR3, BuildError, Insn
from .semantics import Semantics, lanewise


class Tied(Enum):
    NEVER = "never"
    LEGACY = "legacy"  # the two-operand legacy SSE form overwrites the first source
    ALWAYS = "always"  # every form overwrites the first source (vpternlogd, vpermt2b, vpermi2q)


# Execution port classes (the cost model's unit of latency and throughput per target).
# `shuffle` works within 128-bit lanes, `lanes` moves data across them (Intel: port 5 only).
PORTS = ("aes", "clmul", "gfni", "shuffle", "lanes", "logic", "shift", "arith", "load", "store", "move", "mask",
         "gpr", "system")


@dataclass(frozen=True)
class Forms:
    """iced `Code` names per encoding family. Vector names are templates: {R} the register
    kind (XMM, YMM, ZMM), {W} the width. The others are the alternatives GNU as picks for
    the same text, so that the object disassembles to exactly the instructions meant."""

    legacy: str | None = None
    vex: str | None = None
    evex: str | None = None
    evex_bytes: str | None = None  # an opmask of byte granularity (vmovdqu8, CTR tails)
    imm8: str | None = None  # the immediate fits in a signed byte
    acc: str | None = None  # rax/eax with a 32-bit immediate: the short accumulator form
    by_one: str | None = None  # a shift by 1


@dataclass(frozen=True)
class OpInfo:
    """Everything about one op. `operands`: the kinds of the destination and the sources,
    then "imm" if it takes an immediate. Vector kinds: `v` a vector register of the
    instruction's width, `x`/`y` one of 128/256 bits whatever the width, `vm`/`xm`/`ym`
    such a register or memory (round keys and constants included), `m` memory, a `?`
    suffix an optional operand; scalar kinds as in the module docstring."""

    name: str
    operands: tuple[str, ...]
    port: str
    forms: Forms = Forms()
    semantics: Semantics | None = None  # None: produced by lowering, after simulation
    vector: bool = True
    tied: Tied = Tied.NEVER
    commutative: bool = False
    commutative_imm: tuple[int, ...] = ()  # immediates for which the sources commute (ternlog's XOR3)
    memory: str | None = None  # "read": a vector load; "write": a vector store

    @property
    def xmm_only(self) -> bool:
        """Works on xmm registers whatever the instruction's width (aesimc, vmovq)."""
        regs = [k for k in self.operands if k[0] in "vxy"]
        return all(k[0] == "x" for k in regs)

    @property
    def mnemonic(self) -> str:
        """The instruction family: a scalar op's mnemonic, a vector op's own name."""
        return self.name.split(".")[0]

    def width_of(self, position: int, width: int) -> int:
        """The register width of operand `position` (0: the destination) at `width`."""
        kind = self.operands[position] if position < len(self.operands) else "v"
        return {"x": 128, "y": 256}.get(kind[0], width)


def _v(name: str, operands: str, port: str, legacy: str | None = None, vex: str | None = None,
       evex: str | None = None, *, lane: Callable[..., int] | None = None, semantics: Semantics | None = None,
       evex_bytes: str | None = None, **facts) -> OpInfo:
    """A vector op. Its semantics: `lane` (one 128-bit lane of each source and the immediate),
    applied lane by lane, or `semantics` (the whole instruction); neither for an op that only
    lowering produces, after simulation."""
    run = lanewise(lane) if lane is not None else semantics
    return OpInfo(name, tuple(operands.split()), port, Forms(legacy, vex, evex, evex_bytes), run, **facts)


def _s(name: str, port: str, code: str | None, semantics: Semantics, **forms: str) -> OpInfo:
    """A scalar op: its operand kinds are in its name; `code` its (legacy or only) form."""
    return OpInfo(name, tuple(name.split(".")[1:]), port, Forms(legacy=code, **forms), semantics, vector=False)


L, A = Tied.LEGACY, Tied.ALWAYS
_XOR = ("PXOR_XMM_XMMM128", "VEX_VPXOR_{R}_{R}_{R}M{W}", "EVEX_VPXORD_{R}_K1Z_{R}_{R}M{W}B32")
_MOVDQA = ("MOVDQA_XMM_XMMM128", "VEX_VMOVDQA_{R}_{R}M{W}", "EVEX_VMOVDQA64_{R}_K1Z_{R}M{W}")
_MOVDQA_STORE = ("MOVDQA_XMMM128_XMM", "VEX_VMOVDQA_{R}M{W}_{R}", "EVEX_VMOVDQA64_{R}M{W}_K1Z_{R}")

VECTOR = [
    # -- moves, loads and stores
    _v("vload", "v m", "load", "MOVDQU_XMM_XMMM128", "VEX_VMOVDQU_{R}_{R}M{W}", "EVEX_VMOVDQU64_{R}_K1Z_{R}M{W}",
       evex_bytes="EVEX_VMOVDQU8_{R}_K1Z_{R}M{W}", memory="read", semantics=sem.vload),
    _v("vload_key", "v m", "load", *_MOVDQA, semantics=sem.vload, memory="read"),  # aligned
    _v("vload_bcast", "v m", "load", None, "VEX_VBROADCASTI128_YMM_M128", "EVEX_VBROADCASTI32X4_{R}_K1Z_M128",
       memory="read", semantics=sem.vload_bcast),  # 16 bytes to every lane (a plain load at width 128)
    _v("vload_bcast64", "v m", "load", None, "VEX_VPBROADCASTQ_{R}_XMMM64", "EVEX_VPBROADCASTQ_{R}_K1Z_XMMM64",
       memory="read", semantics=sem.vload_bcast64),  # 8 bytes to every qword
    _v("vload64", "x m", "load", "MOVQ_XMM_XMMM64", "VEX_VMOVQ_XMM_XMMM64", "EVEX_VMOVQ_XMM_XMMM64", memory="read",
       semantics=sem.vload64),
    _v("vload32", "x m", "load", "MOVD_XMM_RM32", "VEX_VMOVD_XMM_RM32", "EVEX_VMOVD_XMM_RM32", memory="read",
       semantics=sem.vload32),
    _v("vstore", "m v", "store", "MOVDQU_XMMM128_XMM", "VEX_VMOVDQU_{R}M{W}_{R}", "EVEX_VMOVDQU64_{R}M{W}_K1Z_{R}",
       evex_bytes="EVEX_VMOVDQU8_{R}M{W}_K1Z_{R}", memory="write", semantics=sem.vstore),
    _v("vstore_key", "m v", "store", *_MOVDQA_STORE, semantics=sem.vstore, memory="write"),  # aligned
    _v("vstore_lane", "m v imm", "store", memory="write", semantics=sem.vstore_lane),  # lane imm to 16 bytes
    _v("vmov", "v v", "move", *_MOVDQA, lane=sem.vmov),
    _v("vzero", "v", "logic", *_XOR, semantics=sem.vzero),  # encoded as the register xored with itself
    # -- AES-NI, carry-less multiply, GFNI
    _v("aesenc", "v v vm", "aes", "AESENC_XMM_XMMM128", "VEX_VAESENC_{R}_{R}_{R}M{W}", "EVEX_VAESENC_{R}_{R}_{R}M{W}",
       tied=L, lane=sem.aesenc),
    _v("aesenclast", "v v vm", "aes", "AESENCLAST_XMM_XMMM128", "VEX_VAESENCLAST_{R}_{R}_{R}M{W}",
       "EVEX_VAESENCLAST_{R}_{R}_{R}M{W}", tied=L, lane=sem.aesenclast),
    _v("aesdec", "v v vm", "aes", "AESDEC_XMM_XMMM128", "VEX_VAESDEC_{R}_{R}_{R}M{W}", "EVEX_VAESDEC_{R}_{R}_{R}M{W}",
       tied=L, lane=sem.aesdec),
    _v("aesdeclast", "v v vm", "aes", "AESDECLAST_XMM_XMMM128", "VEX_VAESDECLAST_{R}_{R}_{R}M{W}",
       "EVEX_VAESDECLAST_{R}_{R}_{R}M{W}", tied=L, lane=sem.aesdeclast),
    _v("aesimc", "x xm", "aes", "AESIMC_XMM_XMMM128", "VEX_VAESIMC_XMM_XMMM128", lane=sem.aesimc),
    _v("aeskeygenassist", "x xm imm", "aes", "AESKEYGENASSIST_XMM_XMMM128_IMM8",
       "VEX_VAESKEYGENASSIST_XMM_XMMM128_IMM8", lane=sem.aeskeygenassist),
    # the qwords imm bit 0 of the first source and imm bit 4 of the second, multiplied carry-less
    _v("clmul", "v v vm imm", "clmul", "PCLMULQDQ_XMM_XMMM128_IMM8", "VEX_VPCLMULQDQ_{R}_{R}_{R}M{W}_IMM8",
       "EVEX_VPCLMULQDQ_{R}_{R}_{R}M{W}_IMM8", tied=L, lane=sem.clmul),
    # GF(2^8) affine maps per byte: dst = A * x (+ imm), or A * x^-1 (+ imm)
    _v("gf2p8affineqb", "v v vm imm", "gfni", "GF2P8AFFINEQB_XMM_XMMM128_IMM8",
       "VEX_VGF2P8AFFINEQB_{R}_{R}_{R}M{W}_IMM8", "EVEX_VGF2P8AFFINEQB_{R}_K1Z_{R}_{R}M{W}B64_IMM8", tied=L,
       lane=sem.gf2p8affineqb),
    _v("gf2p8affineinvqb", "v v vm imm", "gfni", "GF2P8AFFINEINVQB_XMM_XMMM128_IMM8",
       "VEX_VGF2P8AFFINEINVQB_{R}_{R}_{R}M{W}_IMM8", "EVEX_VGF2P8AFFINEINVQB_{R}_K1Z_{R}_{R}M{W}B64_IMM8", tied=L,
       lane=sem.gf2p8affineinvqb),
    # -- logic and arithmetic
    _v("vxor", "v v vm", "logic", *_XOR, tied=L, commutative=True, lane=sem.vxor),
    _v("pand", "v v vm", "logic", "PAND_XMM_XMMM128", "VEX_VPAND_{R}_{R}_{R}M{W}", "EVEX_VPANDD_{R}_K1Z_{R}_{R}M{W}B32",
       tied=L, commutative=True, lane=sem.pand),
    _v("por", "v v vm", "logic", "POR_XMM_XMMM128", "VEX_VPOR_{R}_{R}_{R}M{W}", "EVEX_VPORD_{R}_K1Z_{R}_{R}M{W}B32",
       tied=L, commutative=True, lane=sem.por),
    _v("pandn", "v v vm", "logic", "PANDN_XMM_XMMM128", "VEX_VPANDN_{R}_{R}_{R}M{W}",  # ~first & second
       "EVEX_VPANDND_{R}_K1Z_{R}_{R}M{W}B32", tied=L, lane=sem.pandn),
    # dst = f(dst, b, c) bit by bit, f the 8-bit truth table in imm (dst is also the first input)
    _v("ternlog", "v v v vm imm", "logic", None, None, "EVEX_VPTERNLOGD_{R}_K1Z_{R}_{R}M{W}B32_IMM8", tied=A,
       commutative_imm=(XOR3,), lane=sem.ternlog),
    # dst = the second source where the mask's byte has its top bit set, else the first
    _v("blendv", "v v vm v", "logic", None, "VEX_VPBLENDVB_{R}_{R}_{R}M{W}_{R}", None, lane=sem.blendv),
    _v("paddd", "v v vm", "arith", "PADDD_XMM_XMMM128", "VEX_VPADDD_{R}_{R}_{R}M{W}",
       "EVEX_VPADDD_{R}_K1Z_{R}_{R}M{W}B32", tied=L, commutative=True, lane=sem.paddd),
    _v("paddq", "v v vm", "arith", "PADDQ_XMM_XMMM128", "VEX_VPADDQ_{R}_{R}_{R}M{W}",
       "EVEX_VPADDQ_{R}_K1Z_{R}_{R}M{W}B64", tied=L, commutative=True, lane=sem.paddq),
    # the unsigned products of each qword's low dwords (GF(2^128) products without clmul:
    # generator/lower_gfmul.py)
    _v("pmuludq", "v v vm", "arith", "PMULUDQ_XMM_XMMM128", "VEX_VPMULUDQ_{R}_{R}_{R}M{W}",
       "EVEX_VPMULUDQ_{R}_K1Z_{R}_{R}M{W}B64", tied=L, commutative=True, lane=sem.pmuludq),
    # -- shifts (the legacy forms by an immediate name only the destination, which is the source)
    _v("psllq", "v v imm", "shift", "PSLLQ_XMM_IMM8", "VEX_VPSLLQ_{R}_{R}_IMM8", "EVEX_VPSLLQ_{R}_K1Z_{R}M{W}B64_IMM8",
       tied=L, lane=sem.psllq),
    _v("psrlq", "v v imm", "shift", "PSRLQ_XMM_IMM8", "VEX_VPSRLQ_{R}_{R}_IMM8", "EVEX_VPSRLQ_{R}_K1Z_{R}M{W}B64_IMM8",
       tied=L, lane=sem.psrlq),
    _v("psrad", "v v imm", "shift", "PSRAD_XMM_IMM8", "VEX_VPSRAD_{R}_{R}_IMM8", "EVEX_VPSRAD_{R}_K1Z_{R}M{W}B32_IMM8",
       tied=L, lane=sem.psrad),
    _v("psraq", "v vm imm", "shift", None, None, "EVEX_VPSRAQ_{R}_K1Z_{R}M{W}B64_IMM8", lane=sem.psraq),
    # per-qword shifts by per-qword counts (AVX2): counts >= 64 give 0
    _v("psllvq", "v v vm", "shift", None, "VEX_VPSLLVQ_{R}_{R}_{R}M{W}", "EVEX_VPSLLVQ_{R}_K1Z_{R}_{R}M{W}B64",
       lane=sem.psllvq),
    _v("psrlvq", "v v vm", "shift", None, "VEX_VPSRLVQ_{R}_{R}_{R}M{W}", "EVEX_VPSRLVQ_{R}_K1Z_{R}_{R}M{W}B64",
       lane=sem.psrlvq),
    _v("prord", "v vm imm", "shift", None, None, "EVEX_VPRORD_{R}_K1Z_{R}M{W}B32_IMM8", lane=sem.prord),
    # -- shuffles within a lane
    _v("pshufb", "v v vm", "shuffle", "PSHUFB_XMM_XMMM128", "VEX_VPSHUFB_{R}_{R}_{R}M{W}",
       "EVEX_VPSHUFB_{R}_K1Z_{R}_{R}M{W}", tied=L, lane=sem.pshufb),
    _v("pshufd", "v vm imm", "shuffle", "PSHUFD_XMM_XMMM128_IMM8", "VEX_VPSHUFD_{R}_{R}M{W}_IMM8",
       "EVEX_VPSHUFD_{R}_K1Z_{R}M{W}B32_IMM8", lane=sem.pshufd),
    _v("pslldq", "v v imm", "shuffle", "PSLLDQ_XMM_IMM8", "VEX_VPSLLDQ_{R}_{R}_IMM8", "EVEX_VPSLLDQ_{R}_{R}M{W}_IMM8",
       tied=L, lane=sem.pslldq),
    _v("psrldq", "v v imm", "shuffle", "PSRLDQ_XMM_IMM8", "VEX_VPSRLDQ_{R}_{R}_IMM8", "EVEX_VPSRLDQ_{R}_{R}M{W}_IMM8",
       tied=L, lane=sem.psrldq),
    _v("punpcklqdq", "v v vm", "shuffle", "PUNPCKLQDQ_XMM_XMMM128", "VEX_VPUNPCKLQDQ_{R}_{R}_{R}M{W}",
       "EVEX_VPUNPCKLQDQ_{R}_K1Z_{R}_{R}M{W}B64", tied=L, lane=sem.punpcklqdq),
    _v("palignr", "v v vm imm", "shuffle", "PALIGNR_XMM_XMMM128_IMM8", "VEX_VPALIGNR_{R}_{R}_{R}M{W}_IMM8",
       "EVEX_VPALIGNR_{R}_K1Z_{R}_{R}M{W}_IMM8", tied=L, lane=sem.palignr),
    # bytes from two tables (dst, which the result overwrites, then the last source) by the
    # byte indices in the middle source (AVX512_VBMI)
    _v("permt2b", "v v v vm", "lanes", None, None, "EVEX_VPERMT2B_{R}_K1Z_{R}_{R}M{W}", tied=A,
       semantics=sem.permt2b),
    # -- whole lanes, in the DSL (lower.py turns them into the machine ops below)
    _v("prev_lanes", "v v v", "lanes", semantics=sem.prev_lanes),
    _v("next_lanes", "v v v", "lanes", semantics=sem.next_lanes),
    _v("deal_lanes", "v v vm imm", "lanes", semantics=sem.deal_lanes),
    _v("zip_lanes", "v v vm m? imm", "lanes", semantics=sem.zip_lanes),
    _v("top_lane", "x v", "lanes", semantics=sem.top_lane),
    _v("upper_half", "v v", "lanes", semantics=sem.upper_half),
    _v("widen", "v xm", "lanes", semantics=sem.widen),
    _v("insert_lane", "v v m imm", "lanes", semantics=sem.insert_lane),
    # -- whole lanes, machine ops
    _v("valignq", "v v vm imm", "lanes", None, None, "EVEX_VALIGNQ_{R}_K1Z_{R}_{R}M{W}B64_IMM8"),
    _v("vperm2i128", "v v vm imm", "lanes", None, "VEX_VPERM2I128_YMM_YMM_YMMM256_IMM8", None),
    _v("vshufi32x4", "v v vm imm", "lanes", None, None, "EVEX_VSHUFI32X4_{R}_K1Z_{R}_{R}M{W}B32_IMM8"),
    # qwords from two tables by the qword indices in dst (which the result overwrites)
    _v("vpermi2q", "v v v vm", "lanes", None, None, "EVEX_VPERMI2Q_{R}_K1Z_{R}_{R}M{W}B64", tied=A),
    _v("vextract128", "xm v imm", "lanes", None, "VEX_VEXTRACTI128_XMMM128_YMM_IMM8",
       "EVEX_VEXTRACTI32X4_XMMM128_K1Z_{R}_IMM8"),
    _v("vextract256", "ym v imm", "lanes", None, None, "EVEX_VEXTRACTI64X4_YMMM256_K1Z_ZMM_IMM8"),
    _v("vinserti128", "v v xm imm", "lanes", None, "VEX_VINSERTI128_YMM_YMM_XMMM128_IMM8", None),
    _v("vinsert128", "v v xm imm", "lanes", None, "VEX_VINSERTI128_YMM_YMM_XMMM128_IMM8",
       "EVEX_VINSERTI32X4_{R}_K1Z_{R}_XMMM128_IMM8"),
]

# GNU as's short forms of `op r, imm` (the accumulator's only with a 32-bit immediate).
_SHORT64 = {"imm8": "{}_RM64_IMM8", "acc": "{}_RAX_IMM32"}
_SHORT32 = {"imm8": "{}_RM32_IMM8", "acc": "{}_EAX_IMM32"}


def _arith(op: str, f: Callable[[int, int], int], short: dict[str, str], bits: int = 64,
           write: bool = True) -> OpInfo:
    """op r, imm (r of `bits`): the imm32 form and the `short` ones; write=False: flags only."""
    mn = op.upper()
    return _s(f"{op}.r{bits}.imm", "gpr", f"{mn}_RM{bits}_IMM32", sem.alu(f, bits, write),
              **{k: v.format(mn) for k, v in short.items()})


SCALAR = [
    # -- moves
    _s("mov.r64.r64", "move", "MOV_RM64_R64", sem.copy),
    _s("mov.r32.r32", "move", "MOV_RM32_R32", sem.copy),  # zero-extends: a 32-bit argument's upper bits are garbage
    _s("mov.r64.imm", "move", "MOV_RM64_IMM32", sem.set_imm),  # sign-extended 32-bit immediate
    _s("mov.r32.imm", "move", "MOV_R32_IMM32", sem.set_imm),
    _s("mov.r64.m64", "load", "MOV_R64_RM64", sem.load(8)),
    _s("mov.r32.m32", "load", "MOV_R32_RM32", sem.load(4)),
    _s("movzx.r32.m8", "load", "MOVZX_R32_RM8", sem.load(1)),
    _s("mov.m64.r64", "store", "MOV_RM64_R64", sem.store(8)),
    _s("mov.m32.r32", "store", "MOV_RM32_R32", sem.store(4)),
    _s("mov.m32.imm", "store", "MOV_RM32_IMM32", sem.store(4)),
    _s("mov.m8.r8", "store", "MOV_RM8_R8", sem.store(1)),
    _s("movbe.m64.r64", "store", "MOVBE_M64_R64", sem.store(8, swap=True)),  # a store with its bytes reversed
    _s("lea.r64.m", "gpr", "LEA_R64_M", sem.lea),
    _s("push.r64", "store", "PUSH_R64", sem.push),
    _s("pop.r64", "load", "POP_R64", sem.pop),
    # -- arithmetic and logic (CF and ZF modelled where a kernel reads them)
    _arith("add", operator.add, _SHORT64),
    _arith("sub", operator.sub, _SHORT64),
    _arith("cmp", operator.sub, _SHORT64, write=False),
    _arith("and", operator.and_, {"imm8": "{}_RM64_IMM8"}),
    _arith("cmp", operator.sub, _SHORT32, bits=32, write=False),
    _arith("and", operator.and_, _SHORT32, bits=32),
    _arith("xor", operator.xor, {"imm8": "{}_RM32_IMM8"}, bits=32),
    _s("add.r64.r64", "gpr", "ADD_RM64_R64", sem.alu(operator.add)),
    _s("sub.r64.r64", "gpr", "SUB_RM64_R64", sem.alu(operator.sub)),
    _s("cmp.r64.r64", "gpr", "CMP_RM64_R64", sem.alu(operator.sub, write=False)),
    _s("test.r64.r64", "gpr", "TEST_RM64_R64", sem.alu(operator.and_, write=False)),
    _s("or.r64.r64", "gpr", "OR_RM64_R64", sem.alu(operator.or_)),
    _s("xor.r64.r64", "gpr", "XOR_RM64_R64", sem.alu(operator.xor)),
    _s("adc.r64.r64", "gpr", "ADC_RM64_R64", sem.adc),
    _s("sbb.r64.r64", "gpr", "SBB_RM64_R64", sem.sbb_self),  # of a register with itself: -CF
    _s("add.r32.r32", "gpr", "ADD_RM32_R32", sem.alu(operator.add, 32)),
    _s("xor.r32.r32", "gpr", "XOR_RM32_R32", sem.alu(operator.xor, 32)),
    _s("xor.r32.m32", "gpr", "XOR_R32_RM32", sem.xor_mem(4)),
    _s("xor.r64.m64", "gpr", "XOR_R64_RM64", sem.xor_mem(8)),
    _s("and.r64.m64", "gpr", "AND_R64_RM64", sem.and_mem(8)),
    # rdx:rax = rax * the memory qword (unsigned, 128-bit product)
    _s("mul.m64", "gpr", "MUL_RM64", sem.mul_wide),
    _s("xor.r8.m8", "gpr", "XOR_R8_RM8", sem.xor_mem(1)),
    _s("or.r8.r8", "gpr", "OR_RM8_R8", sem.or_byte),
    _s("neg.r64", "gpr", "NEG_RM64", sem.neg),
    _s("bswap.r64", "gpr", "BSWAP_R64", sem.bswap(8)),
    _s("bswap.r32", "gpr", "BSWAP_R32", sem.bswap(4)),
    _s("bsf.r64.r64", "gpr", "BSF_R64_RM64", sem.bsf),  # index of the lowest set bit (never of 0 here)
    # -- shifts
    _s("shl.r64.imm", "gpr", "SHL_RM64_IMM8", sem.shl, by_one="SHL_RM64_1"),
    _s("shr.r64.imm", "gpr", "SHR_RM64_IMM8", sem.shr, by_one="SHR_RM64_1"),
    _s("sar.r64.imm", "gpr", "SAR_RM64_IMM8", sem.sar, by_one="SAR_RM64_1"),  # arithmetic
    _s("ror.r32.imm", "gpr", "ROR_RM32_IMM8", sem.ror32),
    _s("shld.r64.r64.imm", "gpr", "SHLD_RM64_R64_IMM8", sem.shld(lambda it, i: i.imm)),  # d << imm | s >> (64 - imm)
    _s("shld.r64.r64.cl", "gpr", "SHLD_RM64_R64_CL", sem.shld(lambda it, i: it.m.get("rcx"))),  # constant time
    _s("bt.r64.imm", "gpr", "BT_RM64_IMM8", sem.bt),  # CF = bit imm (flags only)
    _s("sarx.r64.r64.r64", "gpr", None, sem.sarx, vex="VEX_SARX_R64_RM64_R64"),  # arithmetic, flags kept (BMI2)
    _s("bzhi.r64.r64.r64", "gpr", None, sem.bzhi, vex="VEX_BZHI_R64_RM64_R64"),
    _s("shlx.r64.r64.r64", "gpr", None, sem.shlx, vex="VEX_SHLX_R64_RM64_R64"),  # count mod 64, flags kept (BMI2)
    _s("shrx.r64.r64.r64", "gpr", None, sem.shrx, vex="VEX_SHRX_R64_RM64_R64"),
    # -- vector state, masks, CPU
    # the two qwords' sign bits of an xmm (no EVEX form: xmm0-15 only)
    _s("movmskpd.r32.x", "move", "MOVMSKPD_R32_XMM", sem.movmskpd, vex="VEX_VMOVMSKPD_R32_XMM"),
    _s("kmovq.k.r64", "mask", None, sem.kmovq, vex="VEX_KMOVQ_KR_R64"),
    _s("cpuid", "system", "CPUID", sem.cpuid),
    _s("xgetbv", "system", "XGETBV", sem.xgetbv),
    _s("vzeroupper", "system", None, sem.nothing, vex="VEX_VZEROUPPER"),
    _s("endbr64", "system", "ENDBR64", sem.nothing),
    _s("ret", "system", "RETNQ", sem.nothing),  # the interpreter returns rax
]

OPS: dict[str, OpInfo] = {op.name: op for op in VECTOR + SCALAR}


def info(op: str) -> OpInfo:
    try:
        return OPS[op]
    except KeyError:
        raise BuildError(f"internal: unknown op {op}") from None


def tied(op: str, legacy: bool) -> bool:
    """Does the op overwrite its first source (in the legacy SSE encoding when `legacy`)?"""
    t = info(op).tied
    return t is Tied.ALWAYS or (legacy and t is Tied.LEGACY)


def commutative(insn: Insn) -> bool:
    i = info(insn.op)
    return i.commutative or insn.imm in i.commutative_imm
