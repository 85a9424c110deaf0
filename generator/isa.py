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

from .ir import BuildError, Branch, Const, Insn, Label, Mark, Mem, Phys
from .ops import Tied, info

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
        forms = info(i.op).forms
        if forms.vex is None or i.width == 512 or i.mask or any(r >= 16 for r in regs):
            if forms.evex is None:
                raise BuildError(f"{i.op} has no EVEX form but needs one (registers {regs})")
            return "evex"
        return "vex"

    def vector(self, i: Insn) -> Instruction:
        op = info(i.op)
        fam = self.family(i)
        template = {"legacy": op.forms.legacy, "vex": op.forms.vex, "evex": op.forms.evex}[fam]
        if template is None:
            raise BuildError(f"{i.op} is not available on {self.isa}")
        if fam == "evex" and i.mask and i.mask_elem == "b" and op.forms.evex_bytes:
            template = op.forms.evex_bytes
        width = 128 if op.xmm_only else i.width
        name = template.format(R=KIND[width], W=width)
        dst = i.dst
        operands = [(o, op.width_of(k, width)) for k, o in enumerate((dst, *i.srcs))]
        if i.op == "vzero":  # the register xored with itself
            operands += [(dst, width), (dst, width)]
        if i.op == "vmov" and fam == "vex" and i.srcs[0].num >= 8 and dst.num < 8:
            name = name.replace(f"VMOVDQA_{KIND[width]}_{KIND[width]}M{width}",
                                f"VMOVDQA_{KIND[width]}M{width}_{KIND[width]}")  # as GNU as encodes it
        # The destination is the first source: in every form, or in the legacy two-operand
        # ones (whose shifts by an immediate name the destination only).
        if op.tied is Tied.ALWAYS or (fam == "legacy" and (op.tied is Tied.LEGACY or i.op == "vzero")):
            if getattr(operands[1][0], "num", None) != dst.num:
                raise BuildError(f"internal: {'legacy ' if op.tied is not Tied.ALWAYS else ''}{i.op} "
                                 "with untied destination")
            del operands[1]
        ins = self._create(self._code(name), [self._operand(o, w, i) for o, w in operands], i.imm)
        if i.mask:
            ins.op_mask = gpr(i.mask)
            ins.zeroing_masking = op.memory != "write"  # masked stores merge
        return ins

    def _operand(self, o, width: int, i: Insn):
        if isinstance(o, Phys):
            return ("r", vreg(o.num, width))
        if isinstance(o, (Mem, Const)):
            return ("m", self.mem(o))
        raise BuildError(f"internal: bad operand {o!r} in {i.op}")

    def _create(self, code: int, ops: list, imm: int | None, signed: bool = False) -> Instruction:
        """Instruction.create_<operands>: registers, memory, then the immediate (a scalar
        op's as a signed 32-bit value, a vector op's as its byte)."""
        kinds = "".join(k for k, _ in ops)
        vals = [v for _, v in ops]
        maker = "create" + "".join({"r": "_reg", "m": "_mem"}[k] for k in kinds)
        if imm is not None:
            maker += "_i32" if signed else "_u32"
            vals.append(imm if signed or imm < 0 else imm & 0xFF)
        try:
            return getattr(Instruction, maker)(code, *vals)
        except (AttributeError, ValueError, TypeError, OverflowError) as e:
            raise BuildError(f"internal: cannot build {kinds}{'i' if imm is not None else ''} instruction: {e}") \
                from None

    # -- scalar ---------------------------------------------------------------
    def scalar(self, i: Insn) -> Instruction:
        """The form by the op's kinds: GNU as's short forms for small immediates, rax/eax, shifts by 1."""
        op = info(i.op)
        f = op.forms
        code = f.legacy if f.vex is None or (self.isa == "sse" and f.legacy) else f.vex
        imm = None
        if "imm" in op.operands:
            imm = i.imm
            if op.operands[0] in ("r32", "m32"):  # a 32-bit immediate, as a signed value
                imm = (i.imm & 0xFFFFFFFF) - ((i.imm & 0x80000000) << 1)
            if f.by_one and imm == 1:
                code = f.by_one
            elif f.imm8 and _fits8(imm):
                code = f.imm8
            elif f.acc and i.dst in ("rax", "eax"):
                code = f.acc
        ops, values = [], iter((i.dst, *i.srcs))
        for kind in op.operands:
            if kind == "cl":
                ops.append(("r", Register.CL))
            elif kind == "x":
                ops.append(("r", vreg(next(values).num, 128)))
            elif kind[0] == "m":
                ops.append(("m", self.mem(next(values))))
            elif kind != "imm":
                ops.append(("r", gpr(next(values))))
        return self._create(self._code(code), ops, imm, signed=True)

    # -- text -----------------------------------------------------------------
    def emit(self, item) -> Emitted:
        if isinstance(item, Label):
            return Emitted(None, f"{item.name}:", label=item.name)
        if isinstance(item, Mark):
            if not item.symbol:
                raise BuildError(f"internal: a {item.kind.value} mark has no text")
            return Emitted(None, f"{item.symbol}:", label=item.symbol)
        if isinstance(item, Branch):
            ins = Instruction.create_branch(self._code(f"{CONDITIONS[item.cond]}_REL32_64"), 0)
            mnemonic = "jmp" if item.cond == "jmp" else CONDITIONS[item.cond].lower()
            return Emitted(ins, f"{mnemonic} {item.target}", branch_target=item.target)
        ins = self.vector(item) if info(item.op).vector else self.scalar(item)
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
