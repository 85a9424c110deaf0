"""The instruction facade over iced-x86: machine ops to encoded, GAS-formatted instructions.

Each allocated op maps to one iced `Code`. Encoding family by rule: legacy
SSE for `--isa sse`; otherwise VEX (shorter) unless the op needs EVEX: a zmm
register, a register numbered 16-31, an opmask, or an EVEX-only instruction.
Every instruction is encoded by iced (an invalid operand combination fails
here, at generation time) and formatted as GAS text. Forms are chosen the way
GNU as chooses them for the same text (imm8 vs imm32, the eax short forms, the
store form of VEX register moves), so the object's disassembly is exactly the
instruction list the generator meant.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from iced_x86 import Code, Encoder, Formatter, FormatterSyntax, Instruction, MemoryOperand, Register

from .dsl import BuildError
from .ir import ALWAYS_TIED, VECTOR_OPS, Branch, Const, Insn, Label, Mem
from .regalloc import Phys

# op -> (legacy SSE, VEX, EVEX) Code name templates; {R} register kind, {W} width.
VECTOR_FORMS: dict[str, tuple[str | None, str | None, str | None]] = {
    "vxor": ("PXOR_XMM_XMMM128", "VEX_VPXOR_{R}_{R}_{R}M{W}", "EVEX_VPXORD_{R}_K1Z_{R}_{R}M{W}B32"),
    "vzero": ("PXOR_XMM_XMMM128", "VEX_VPXOR_{R}_{R}_{R}M{W}", "EVEX_VPXORD_{R}_K1Z_{R}_{R}M{W}B32"),
    "paddd": ("PADDD_XMM_XMMM128", "VEX_VPADDD_{R}_{R}_{R}M{W}", "EVEX_VPADDD_{R}_K1Z_{R}_{R}M{W}B32"),
    "pshufb": ("PSHUFB_XMM_XMMM128", "VEX_VPSHUFB_{R}_{R}_{R}M{W}", "EVEX_VPSHUFB_{R}_K1Z_{R}_{R}M{W}"),
    "aesenc": ("AESENC_XMM_XMMM128", "VEX_VAESENC_{R}_{R}_{R}M{W}", "EVEX_VAESENC_{R}_{R}_{R}M{W}"),
    "aesenclast": ("AESENCLAST_XMM_XMMM128", "VEX_VAESENCLAST_{R}_{R}_{R}M{W}",
                   "EVEX_VAESENCLAST_{R}_{R}_{R}M{W}"),
    "aesdec": ("AESDEC_XMM_XMMM128", "VEX_VAESDEC_{R}_{R}_{R}M{W}", "EVEX_VAESDEC_{R}_{R}_{R}M{W}"),
    "aesdeclast": ("AESDECLAST_XMM_XMMM128", "VEX_VAESDECLAST_{R}_{R}_{R}M{W}",
                   "EVEX_VAESDECLAST_{R}_{R}_{R}M{W}"),
    "aesimc": ("AESIMC_XMM_XMMM128", "VEX_VAESIMC_XMM_XMMM128", None),
    "aeskeygenassist": ("AESKEYGENASSIST_XMM_XMMM128_IMM8", "VEX_VAESKEYGENASSIST_XMM_XMMM128_IMM8", None),
    "pshufd": ("PSHUFD_XMM_XMMM128_IMM8", "VEX_VPSHUFD_{R}_{R}M{W}_IMM8", "EVEX_VPSHUFD_{R}_K1Z_{R}M{W}B32_IMM8"),
    "pslldq": ("PSLLDQ_XMM_IMM8", "VEX_VPSLLDQ_{R}_{R}_IMM8", "EVEX_VPSLLDQ_{R}_{R}M{W}_IMM8"),
    "punpcklqdq": ("PUNPCKLQDQ_XMM_XMMM128", "VEX_VPUNPCKLQDQ_{R}_{R}_{R}M{W}",
                   "EVEX_VPUNPCKLQDQ_{R}_K1Z_{R}_{R}M{W}B64"),
    "palignr": ("PALIGNR_XMM_XMMM128_IMM8", "VEX_VPALIGNR_{R}_{R}_{R}M{W}_IMM8",
                "EVEX_VPALIGNR_{R}_K1Z_{R}_{R}M{W}_IMM8"),
    "vload": ("MOVDQU_XMM_XMMM128", "VEX_VMOVDQU_{R}_{R}M{W}", "EVEX_VMOVDQU64_{R}_K1Z_{R}M{W}"),
    "vload_key": ("MOVDQA_XMM_XMMM128", "VEX_VMOVDQA_{R}_{R}M{W}", "EVEX_VMOVDQA64_{R}_K1Z_{R}M{W}"),
    "vmov": ("MOVDQA_XMM_XMMM128", "VEX_VMOVDQA_{R}_{R}M{W}", "EVEX_VMOVDQA64_{R}_K1Z_{R}M{W}"),
    "vload64": ("MOVQ_XMM_XMMM64", "VEX_VMOVQ_XMM_XMMM64", "EVEX_VMOVQ_XMM_XMMM64"),
    "vload32": ("MOVD_XMM_RM32", "VEX_VMOVD_XMM_RM32", "EVEX_VMOVD_XMM_RM32"),
    "vstore": ("MOVDQU_XMMM128_XMM", "VEX_VMOVDQU_{R}M{W}_{R}", "EVEX_VMOVDQU64_{R}M{W}_K1Z_{R}"),
    "vstore_key": ("MOVDQA_XMMM128_XMM", "VEX_VMOVDQA_{R}M{W}_{R}", "EVEX_VMOVDQA64_{R}M{W}_K1Z_{R}"),
    "vload_bcast": (None, "VEX_VBROADCASTI128_YMM_M128", "EVEX_VBROADCASTI32X4_{R}_K1Z_M128"),
    "valignq": (None, None, "EVEX_VALIGNQ_{R}_K1Z_{R}_{R}M{W}B64_IMM8"),
    "vperm2i128": (None, "VEX_VPERM2I128_YMM_YMM_YMMM256_IMM8", None),
    "vextract128": (None, "VEX_VEXTRACTI128_XMMM128_YMM_IMM8", "EVEX_VEXTRACTI32X4_XMMM128_K1Z_{R}_IMM8"),
    "vinserti128": (None, "VEX_VINSERTI128_YMM_YMM_XMMM128_IMM8", None),
    "vinsert128": (None, "VEX_VINSERTI128_YMM_YMM_XMMM128_IMM8", "EVEX_VINSERTI32X4_{R}_K1Z_{R}_XMMM128_IMM8"),
    "vshufi32x4": (None, None, "EVEX_VSHUFI32X4_{R}_K1Z_{R}_{R}M{W}B32_IMM8"),
    # qwords from two tables by the qword indices in dst (which the result overwrites)
    "vpermi2q": (None, None, "EVEX_VPERMI2Q_{R}_K1Z_{R}_{R}M{W}B64"),
    "vextract256": (None, None, "EVEX_VEXTRACTI64X4_YMMM256_K1Z_ZMM_IMM8"),
    # bytes from two tables (dst, which the result overwrites, then the last source) by the
    # byte indices in the middle source (AVX512_VBMI)
    "permt2b": (None, None, "EVEX_VPERMT2B_{R}_K1Z_{R}_{R}M{W}"),
    # dst = the second source where the mask's byte has its top bit set, else the first (VEX only)
    "blendv": (None, "VEX_VPBLENDVB_{R}_{R}_{R}M{W}_{R}", None),
    "clmul": ("PCLMULQDQ_XMM_XMMM128_IMM8", "VEX_VPCLMULQDQ_{R}_{R}_{R}M{W}_IMM8",
              "EVEX_VPCLMULQDQ_{R}_{R}_{R}M{W}_IMM8"),
    "psllq": ("PSLLQ_XMM_IMM8", "VEX_VPSLLQ_{R}_{R}_IMM8", "EVEX_VPSLLQ_{R}_K1Z_{R}M{W}B64_IMM8"),
    "psrlq": ("PSRLQ_XMM_IMM8", "VEX_VPSRLQ_{R}_{R}_IMM8", "EVEX_VPSRLQ_{R}_K1Z_{R}M{W}B64_IMM8"),
    "psrad": ("PSRAD_XMM_IMM8", "VEX_VPSRAD_{R}_{R}_IMM8", "EVEX_VPSRAD_{R}_K1Z_{R}M{W}B32_IMM8"),
    "pand": ("PAND_XMM_XMMM128", "VEX_VPAND_{R}_{R}_{R}M{W}", "EVEX_VPANDD_{R}_K1Z_{R}_{R}M{W}B32"),
    "por": ("POR_XMM_XMMM128", "VEX_VPOR_{R}_{R}_{R}M{W}", "EVEX_VPORD_{R}_K1Z_{R}_{R}M{W}B32"),
    # dst = ~first & second (bitsliced S-box gates)
    "pandn": ("PANDN_XMM_XMMM128", "VEX_VPANDN_{R}_{R}_{R}M{W}", "EVEX_VPANDND_{R}_K1Z_{R}_{R}M{W}B32"),
    "paddq": ("PADDQ_XMM_XMMM128", "VEX_VPADDQ_{R}_{R}_{R}M{W}", "EVEX_VPADDQ_{R}_K1Z_{R}_{R}M{W}B64"),
    "psrldq": ("PSRLDQ_XMM_IMM8", "VEX_VPSRLDQ_{R}_{R}_IMM8", "EVEX_VPSRLDQ_{R}_{R}M{W}_IMM8"),
    # per-qword shifts by per-qword counts (AVX2): counts >= 64 give 0
    # GF(2^8) affine maps per byte (GFNI): dst = A * x (+ imm), or A * x^-1 (+ imm)
    "gf2p8affineqb": ("GF2P8AFFINEQB_XMM_XMMM128_IMM8", "VEX_VGF2P8AFFINEQB_{R}_{R}_{R}M{W}_IMM8",
                      "EVEX_VGF2P8AFFINEQB_{R}_K1Z_{R}_{R}M{W}B64_IMM8"),
    "gf2p8affineinvqb": ("GF2P8AFFINEINVQB_XMM_XMMM128_IMM8", "VEX_VGF2P8AFFINEINVQB_{R}_{R}_{R}M{W}_IMM8",
                         "EVEX_VGF2P8AFFINEINVQB_{R}_K1Z_{R}_{R}M{W}B64_IMM8"),
    "prord": (None, None, "EVEX_VPRORD_{R}_K1Z_{R}M{W}B32_IMM8"),
    "psllvq": (None, "VEX_VPSLLVQ_{R}_{R}_{R}M{W}", "EVEX_VPSLLVQ_{R}_K1Z_{R}_{R}M{W}B64"),
    "psrlvq": (None, "VEX_VPSRLVQ_{R}_{R}_{R}M{W}", "EVEX_VPSRLVQ_{R}_K1Z_{R}_{R}M{W}B64"),
    # dst = f(dst, b, c) bit by bit, f the 8-bit truth table in imm (dst is also the first input)
    "ternlog": (None, None, "EVEX_VPTERNLOGD_{R}_K1Z_{R}_{R}M{W}B32_IMM8"),
}
# Legacy SSE shifts by an immediate name only the destination register.
LEGACY_SHIFTS = {"pslldq", "psrldq", "psllq", "psrlq", "psrad"}
# Byte-granular masked moves (CTR tails) use vmovdqu8 instead of vmovdqu64.
BYTE_MASKED = {"vload": "EVEX_VMOVDQU8_{R}_K1Z_{R}M{W}", "vstore": "EVEX_VMOVDQU8_{R}M{W}_K1Z_{R}"}
# Ops that only ever work on xmm registers (whatever the file's width).
XMM_ONLY = {"aesimc", "aeskeygenassist", "vload64", "vload32"}
KIND = {128: "XMM", 256: "YMM", 512: "ZMM"}
CONDITIONS = {"b": "JB", "ae": "JAE", "e": "JE", "ne": "JNE", "a": "JA", "be": "JBE", "jmp": "JMP"}
RIP_SENTINEL = 0x10000000


@dataclass
class Emitted:
    """One instruction: what iced encodes, and the line of GAS text for the file."""

    instruction: Instruction | None  # None for labels
    text: str
    comment: str = ""
    label: str | None = None
    branch_target: str | None = None


def _fits8(v: int) -> bool:
    return -128 <= v <= 127


def vreg(num: int, width: int) -> int:
    return getattr(Register, f"{KIND[width]}{num}")


def gpr(name: str) -> int:
    if name.startswith("r") and name.endswith("b") and name[1:-1].isdigit():
        name = name[:-1] + "l"  # r11b is iced's R11L
    return getattr(Register, name.upper())


class Assembler:
    """Turns allocated instructions into iced instructions and GAS text."""

    def __init__(self, isa: str, const_labels: dict[str, str], label_prefix: str = ".L") -> None:
        self.isa = isa
        self.const_labels = const_labels  # Const name -> .L label
        self.label_prefix = label_prefix
        self.late_consts: dict[str, Const] = {}  # constants first met here (lowering's)
        self.encoder = Encoder(64)
        self.fmt = Formatter(FormatterSyntax.GAS)
        self.fmt.uppercase_hex = False
        self._rip: dict[int, str] = {}
        self._rip_addr: dict[str, int] = {}

    # -- operands -------------------------------------------------------------
    def mem(self, m: Mem | Const) -> MemoryOperand:
        if isinstance(m, Const):
            if m.name not in self.const_labels:
                self.const_labels[m.name] = f"{self.label_prefix}{m.name}"
                self.late_consts[m.name] = m
            # One placeholder address per constant, replaced by its label in the text.
            label = self.const_labels[m.name]
            addr = self._rip_addr.setdefault(label, RIP_SENTINEL + 0x1000 * (len(self._rip_addr) + 1))
            self._rip[addr] = label
            return MemoryOperand(Register.RIP, Register.NONE, 1, addr, 8)
        index = gpr(m.index) if m.index else Register.NONE
        size = 0 if m.disp == 0 else 1  # iced picks disp8, disp8*N or disp32
        return MemoryOperand(gpr(m.base), index, m.scale, m.disp, size)

    def _code(self, name: str) -> int:
        try:
            return getattr(Code, name)
        except AttributeError:
            raise BuildError(f"internal: no iced Code {name}") from None

    # -- vector ---------------------------------------------------------------
    def family(self, i: Insn) -> str:
        if self.isa == "sse":
            return "legacy"
        regs = [o.num for o in (i.dst, *i.srcs) if isinstance(o, Phys)]
        legacy, vex, evex = VECTOR_FORMS[i.op]
        if vex is None or i.width == 512 or i.mask or any(r >= 16 for r in regs):
            if evex is None:
                raise BuildError(f"{i.op} has no EVEX form but needs one (registers {regs})")
            return "evex"
        return "vex"

    def vector(self, i: Insn) -> Instruction:
        fam = self.family(i)
        forms = VECTOR_FORMS[i.op]
        template = {"legacy": forms[0], "vex": forms[1], "evex": forms[2]}[fam]
        if template is None:
            raise BuildError(f"{i.op} is not available on {self.isa}")
        if fam == "evex" and i.mask and i.mask_elem == "b" and i.op in BYTE_MASKED:
            template = BYTE_MASKED[i.op]
        width = 128 if i.op in XMM_ONLY else i.width
        name = template.format(R=KIND[width], W=width)
        dst, srcs = i.dst, list(i.srcs)
        if i.op == "vzero":
            srcs = [dst, dst]
        if i.op == "vmov" and fam == "vex" and srcs[0].num >= 8 and dst.num < 8:
            name = name.replace(f"VMOVDQA_{KIND[width]}_{KIND[width]}M{width}",
                                f"VMOVDQA_{KIND[width]}M{width}_{KIND[width]}")  # as GNU as encodes it
        if i.op in ALWAYS_TIED:
            if not (isinstance(srcs[0], Phys) and srcs[0] == dst or srcs[0].num == dst.num):
                raise BuildError(f"internal: {i.op} with untied destination")
            srcs = srcs[1:]
        elif fam == "legacy" and len(srcs) == 2:
            if not (isinstance(srcs[0], Phys) and srcs[0] == dst or srcs[0].num == dst.num):
                raise BuildError(f"internal: legacy {i.op} with untied destination")
            srcs = srcs[1:]
        if fam == "legacy" and i.op in LEGACY_SHIFTS:
            srcs = []
        ops = [self._operand(dst, i, width, is_dst=True)] + [self._operand(s, i, width) for s in srcs]
        ins = self._create(self._code(name), ops, i.imm)
        if i.mask:
            ins.op_mask = gpr(i.mask)
            ins.zeroing_masking = not i.op.startswith("vstore")
        return ins

    def _operand(self, o, i: Insn, width: int, is_dst: bool = False):
        if isinstance(o, Phys):
            w = width
            if i.op == "vextract128" and is_dst:
                w = 128
            if i.op == "vextract256" and is_dst:
                w = 256
            if i.op in ("vinserti128", "vinsert128") and not is_dst and o is i.srcs[1]:
                w = 128
            return ("r", vreg(o.num, w))
        if isinstance(o, (Mem, Const)):
            return ("m", self.mem(o))
        raise BuildError(f"internal: bad operand {o!r} in {i.op}")

    def _create(self, code: int, ops: list, imm: int | None) -> Instruction:
        kinds = "".join(k for k, _ in ops) + ("i" if imm is not None else "")
        vals = [v for _, v in ops]
        if imm is not None:
            vals.append(imm & 0xFF if kinds.endswith("i") and imm >= 0 else imm)
        makers = {
            "r": Instruction.create_reg, "rr": Instruction.create_reg_reg, "rm": Instruction.create_reg_mem,
            "mr": Instruction.create_mem_reg, "rrr": Instruction.create_reg_reg_reg,
            "rrm": Instruction.create_reg_reg_mem, "ri": Instruction.create_reg_u32,
            "rri": Instruction.create_reg_reg_u32, "rmi": Instruction.create_reg_mem_u32,
            "rrri": Instruction.create_reg_reg_reg_u32, "rrmi": Instruction.create_reg_reg_mem_u32,
            "rrrr": Instruction.create_reg_reg_reg_reg, "rrmr": Instruction.create_reg_reg_mem_reg,
            "mri": Instruction.create_mem_reg_u32,
        }
        try:
            return makers[kinds](code, *vals)
        except (KeyError, ValueError, TypeError) as e:
            raise BuildError(f"internal: cannot build {kinds} instruction: {e}") from None

    # -- scalar ---------------------------------------------------------------
    def scalar(self, i: Insn) -> Instruction:
        op, d, s, imm = i.op, i.dst, i.srcs, i.imm
        C = self._code
        if op == "mov":
            return Instruction.create_reg_reg(C("MOV_RM64_R64"), gpr(d), gpr(s[0]))
        if op == "movi":
            return Instruction.create_reg_i32(C("MOV_RM64_IMM32"), gpr(d), imm)
        if op == "mov32i":
            return Instruction.create_reg_u32(C("MOV_R32_IMM32"), gpr(d), imm & 0xFFFFFFFF)
        if op == "mov32r":  # zero-extends: a 32-bit argument's upper bits are garbage
            return Instruction.create_reg_reg(C("MOV_RM32_R32"), gpr(d), gpr(s[0]))
        if op == "mov32":
            return Instruction.create_reg_mem(C("MOV_R32_RM32"), gpr(d), self.mem(s[0]))
        if op == "store32":
            return Instruction.create_mem_reg(C("MOV_RM32_R32"), self.mem(d), gpr(s[0]))
        if op == "store32i":
            return Instruction.create_mem_u32(C("MOV_RM32_IMM32"), self.mem(d), imm & 0xFFFFFFFF)
        if op == "movzb":
            return Instruction.create_reg_mem(C("MOVZX_R32_RM8"), gpr(d), self.mem(s[0]))
        if op == "xor8m":
            return Instruction.create_reg_mem(C("XOR_R8_RM8"), gpr(d), self.mem(s[0]))
        if op == "store8":
            return Instruction.create_mem_reg(C("MOV_RM8_R8"), self.mem(d), gpr(s[0]))
        if op in ("add", "sub", "cmp"):
            name = op.upper()
            if _fits8(imm):
                return Instruction.create_reg_i32(C(f"{name}_RM64_IMM8"), gpr(d), imm)
            if d == "rax":
                return Instruction.create_reg_i32(C(f"{name}_RAX_IMM32"), gpr(d), imm)
            return Instruction.create_reg_i32(C(f"{name}_RM64_IMM32"), gpr(d), imm)
        if op in ("cmp32", "and32i"):
            name = "CMP" if op == "cmp32" else "AND"
            if _fits8(imm if imm < 0x80000000 else imm - (1 << 32)):
                return Instruction.create_reg_i32(C(f"{name}_RM32_IMM8"), gpr(d), imm)
            form = f"{name}_EAX_IMM32" if d == "eax" else f"{name}_RM32_IMM32"
            return Instruction.create_reg_u32(C(form), gpr(d), imm & 0xFFFFFFFF)
        if op == "load64":
            return Instruction.create_reg_mem(C("MOV_R64_RM64"), gpr(d), self.mem(s[0]))
        if op == "store64":
            return Instruction.create_mem_reg(C("MOV_RM64_R64"), self.mem(d), gpr(s[0]))
        if op == "movbe_store64":  # a store with its bytes reversed
            return Instruction.create_mem_reg(C("MOVBE_M64_R64"), self.mem(d), gpr(s[0]))
        if op == "bswap64":
            return Instruction.create_reg(C("BSWAP_R64"), gpr(d))
        if op == "neg":
            return Instruction.create_reg(C("NEG_RM64"), gpr(d))
        if op == "adc_r":
            return Instruction.create_reg_reg(C("ADC_RM64_R64"), gpr(d), gpr(s[0]))
        if op == "sbb_r":
            return Instruction.create_reg_reg(C("SBB_RM64_R64"), gpr(d), gpr(s[0]))
        if op == "or8r":
            return Instruction.create_reg_reg(C("OR_RM8_R8"), gpr(d), gpr(s[0]))
        if op == "or_r":
            return Instruction.create_reg_reg(C("OR_RM64_R64"), gpr(d), gpr(s[0]))
        if op == "xor_r":
            return Instruction.create_reg_reg(C("XOR_RM64_R64"), gpr(d), gpr(s[0]))
        if op == "shld":  # d = d << imm | s >> (64 - imm)
            return Instruction.create_reg_reg_u32(C("SHLD_RM64_R64_IMM8"), gpr(d), gpr(s[0]), imm)
        if op == "shld_cl":  # the same by cl (mod 64): a variable shift, constant time
            return Instruction.create_reg_reg_reg(C("SHLD_RM64_R64_CL"), gpr(d), gpr(s[0]), Register.CL)
        if op == "bsf":  # index of the lowest set bit (the source is never 0 here)
            return Instruction.create_reg_reg(C("BSF_R64_RM64"), gpr(d), gpr(s[0]))
        if op in ("add_r", "sub_r"):
            return Instruction.create_reg_reg(C(f"{op[:3].upper()}_RM64_R64"), gpr(d), gpr(s[0]))
        if op == "and":
            form = "AND_RM64_IMM8" if _fits8(imm) else "AND_RM64_IMM32"
            return Instruction.create_reg_i32(C(form), gpr(d), imm)
        if op == "add32r":
            return Instruction.create_reg_reg(C("ADD_RM32_R32"), gpr(d), gpr(s[0]))
        if op == "cmpr":
            return Instruction.create_reg_reg(C("CMP_RM64_R64"), gpr(d), gpr(s[0]))
        if op == "test":
            return Instruction.create_reg_reg(C("TEST_RM64_R64"), gpr(d), gpr(s[0]))
        if op == "xor32":
            return Instruction.create_reg_reg(C("XOR_RM32_R32"), gpr(d), gpr(s[0]))
        if op == "xor32m":
            return Instruction.create_reg_mem(C("XOR_R32_RM32"), gpr(d), self.mem(s[0]))
        if op == "xor32i":
            form = "XOR_RM32_IMM8" if _fits8(imm) else "XOR_RM32_IMM32"
            return Instruction.create_reg_i32(C(form), gpr(d), imm)
        if op == "ror32":
            return Instruction.create_reg_u32(C("ROR_RM32_IMM8"), gpr(d), imm)
        if op in ("shl", "shr"):
            if imm == 1:
                return Instruction.create_reg_i32(C(f"{op.upper()}_RM64_1"), gpr(d), 1)
            return Instruction.create_reg_u32(C(f"{op.upper()}_RM64_IMM8"), gpr(d), imm)
        if op == "bswap32":
            return Instruction.create_reg(C("BSWAP_R32"), gpr(d))
        if op == "lea":
            return Instruction.create_reg_mem(C("LEA_R64_M"), gpr(d), self.mem(s[0]))
        if op == "bzhi":
            return Instruction.create_reg_reg_reg(C("VEX_BZHI_R64_RM64_R64"), gpr(d), gpr(s[0]), gpr(s[1]))
        if op == "sarx":  # d = s0 >> s1 (arithmetic, count mod 64), flags untouched (BMI2)
            return Instruction.create_reg_reg_reg(C("VEX_SARX_R64_RM64_R64"), gpr(d), gpr(s[0]), gpr(s[1]))
        if op == "movmskpd":  # the two qwords' sign bits of an xmm (no EVEX form: xmm0-15 only)
            form = "MOVMSKPD_R32_XMM" if self.isa == "sse" else "VEX_VMOVMSKPD_R32_XMM"
            return Instruction.create_reg_reg(C(form), gpr(d), vreg(s[0].num, 128))
        if op == "kmovq":
            return Instruction.create_reg_reg(C("VEX_KMOVQ_KR_R64"), gpr(d), gpr(s[0]))
        if op in ("push", "pop"):
            return Instruction.create_reg(C(f"{op.upper()}_R64"), gpr(d))
        simple = {"cpuid": "CPUID", "xgetbv": "XGETBV", "ret": "RETNQ", "vzeroupper": "VEX_VZEROUPPER",
                  "endbr64": "ENDBR64"}
        if op in simple:
            return Instruction.create(C(simple[op]))
        raise BuildError(f"internal: unknown scalar op {op}")

    # -- text -----------------------------------------------------------------
    def emit(self, item) -> Emitted:
        if isinstance(item, Label):
            return Emitted(None, f"{item.name}:", label=item.name)
        if isinstance(item, Branch):
            ins = Instruction.create_branch(self._code(f"{CONDITIONS[item.cond]}_REL32_64"), 0)
            mnemonic = "jmp" if item.cond == "jmp" else CONDITIONS[item.cond].lower()
            return Emitted(ins, f"{mnemonic} {item.target}", branch_target=item.target)
        is_vec = item.op in VECTOR_OPS or item.op in VECTOR_FORMS
        ins = self.vector(item) if is_vec else self.scalar(item)
        self.encoder.encode(ins, 0)  # raises on an invalid operand combination
        text = self.fmt.format(ins)
        for addr, label in self._rip.items():
            text = re.sub(hex(addr) + r"\b", f"{label}(%rip)", text, flags=re.IGNORECASE)
        return Emitted(ins, text, comment=_comment(item))


def _comment(i: Insn) -> str:
    roles = [o.role for o in (i.dst, *i.srcs) if isinstance(o, Phys) and o.role]
    parts = [i.comment] if i.comment else []
    if roles and not all(r in ("t", "ld") for r in roles):
        parts.append(" ".join(dict.fromkeys(r for r in roles if r not in ("t", "ld"))))
    return "; ".join(parts)
