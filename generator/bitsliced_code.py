"""Bitsliced AES on physical vector registers: the transposition, the S-box circuits,
MixColumns and AddRoundKey, as instructions for one set of 8 planes (ShiftRows needs none:
bitslice.drift_entry).

The S-box programs come from the circuit compilers (generator/circuits), already allocated
onto the register file, so this code works on register numbers (`Phys`) rather than the
DSL's virtual registers: regalloc passes them through unchanged. Forms follow the ISA:
two-operand (SSE: the destination is the first source), three-operand (VEX/EVEX), and on
AVX-512 VPTERNLOGD fusing up to three inputs. Memory operands are the key schedule, the
constants and the stack frame, all aligned to 16 bytes (what legacy SSE needs).
"""
from __future__ import annotations

from functools import cache

from . import bitslice
from .circuits import load
from .circuits.compile import compile_circuit, target_for
from .circuits.netlist import LUT_A, LUT_B, LUT_C
from .circuits.program import Program, Reg, Slot
from .dsl import FunctionBuilder
from .ir import XOR3, Const, Insn, Mem, Phys
from .ops import info
from .spec import KernelSpec

PLANES = 8
AND_OF_XOR = (LUT_A ^ LUT_B) & LUT_C  # ternlog table of (a ^ b) & c: one swapmove step


def circuit_pass(spec: KernelSpec) -> str:
    """Which circuit compiler the file's S-boxes come from."""
    if spec.isa == "sse":
        return "two-operand"
    if spec.isa == "avx512" and not spec.no_ternlog:
        return "ternlog"
    return "three-operand"


@cache
def sbox_program(circuit: str, pass_name: str, registers: int) -> Program:
    return compile_circuit(load(circuit), target_for(pass_name, registers)).program


class Planes:
    """Emits bitsliced code into a FunctionBuilder at one vector width.

    `slots` is where the S-box programs' spill slots live (a stack offset, width/8 bytes each).
    A set of planes owns registers base .. base + nregs - 1 (two sets share AVX-512's 32);
    code refers to them by local numbers 0 .. nregs - 1.
    """

    def __init__(self, b: FunctionBuilder, spec: KernelSpec, width: int, slots: int, base: int = 0,
                 nregs: int | None = None) -> None:
        self.b, self.spec, self.width, self.slots = b, spec, width, slots
        self.base = base
        self.nregs = nregs or spec.vector_registers
        self.two_op = spec.isa == "sse"
        self.pass_name = circuit_pass(spec)
        self.ternlog = self.pass_name == "ternlog"

    # -- emitting ---------------------------------------------------------------
    def r(self, n: int, role: str = "") -> Phys:
        return Phys(self.base + n, role)

    def op(self, name: str, dst, *srcs, imm: int | None = None, comment: str = "") -> None:
        self.b.emit(Insn(name, dst, tuple(srcs), imm=imm, width=self.width, comment=comment))

    def const(self, name: str, pattern: bytes) -> Const:
        return bitslice.replicated(name, pattern, self.width)

    def binary(self, name: str, dst: Phys, a, b_, comment: str = "") -> None:
        """dst = a op b_ (b_ may be memory); in the two-operand form dst must be a (or b_ when
        the op commutes)."""
        if self.two_op and dst.num != getattr(a, "num", None):
            if info(name).commutative and isinstance(b_, Phys) and b_.num == dst.num:
                a, b_ = b_, a
            else:
                raise ValueError(f"internal: two-operand {name} with an untied destination")
        self.op(name, dst, a, b_, comment=comment)

    def xor_all(self, dst: Phys, terms: list, comment: str = "") -> None:
        """dst ^= every term (ternlog two at a time on AVX-512); memory terms go last."""
        terms = sorted(terms, key=lambda t: not isinstance(t, Phys))
        while terms:
            if self.ternlog and len(terms) >= 2:
                self.op("ternlog", dst, dst, terms[0], terms[1], imm=XOR3, comment=comment)
                terms = terms[2:]
            else:
                self.binary("vxor", dst, dst, terms[0], comment=comment)
                terms = terms[1:]
            comment = ""

    def rotate(self, dst: Phys, src: Phys, n: int, rot: tuple[Mem, Mem], comment: str = "") -> None:
        """dst = rows of src rotated by n: the pshufb control rot[n - 1] (rotation in the
        round's coordinate, see bitslice.drift_entry)."""
        if self.two_op:
            self.move(dst, src)
            src = dst
        self.op("pshufb", dst, src, rot[n - 1], comment=comment)

    def move(self, dst: Phys, src: Phys) -> None:
        if dst.num != src.num:
            self.op("vmov", dst, src)

    def permute(self, where: list[int], want: list[int], free: int) -> None:
        """Move plane p from register where[p] to want[p] (a parallel move; `free` is a spare)."""
        cur = dict(enumerate(where))
        pending = {p for p in cur if cur[p] != want[p]}
        while pending:
            holders = {cur[q]: q for q in pending}
            ready = [p for p in sorted(pending) if want[p] not in holders]
            if ready:
                p = ready[0]
                self.move(self.r(want[p]), self.r(cur[p]))
                cur[p] = want[p]
                pending.discard(p)
                continue
            p = min(pending)  # a cycle: park one plane in the spare register
            self.move(self.r(free), self.r(cur[p]))
            cur[p] = free

    # -- the transposition --------------------------------------------------------
    def byte_transpose(self, regs: list[int], control: Const | Mem | None = None) -> None:
        ctl = control or self.const("byte_transpose", bitslice.byte_transpose())
        for n in regs:
            self.binary("pshufb", self.r(n), self.r(n), ctl, comment="column-major <-> row-major bytes")

    def swapmoves(self, regs: list[int], temps: list[int]) -> None:
        """The 8x8 bit transpose of every byte position over regs[0..7] (its own inverse)."""
        for shift, mask, pairs in bitslice.SWAPMOVE_LAYERS:
            m = self.const(f"mask{mask:02x}", bytes([mask]))
            for k, (a, b_) in enumerate(pairs):
                t, xa, xb = self.r(temps[k % len(temps)]), self.r(regs[a]), self.r(regs[b_])
                note = f"swapmove planes {a},{b_} by {shift}"
                if self.two_op:
                    self.move(t, xa)
                    self.op("psrlq", t, t, imm=shift, comment=note)
                else:
                    self.op("psrlq", t, xa, imm=shift, comment=note)
                if self.ternlog:
                    self.op("ternlog", t, t, xb, m, imm=AND_OF_XOR)
                else:
                    self.binary("vxor", t, t, xb)
                    self.binary("pand", t, t, m)
                self.binary("vxor", xb, xb, t)
                self.op("psllq", t, t, imm=shift)
                self.binary("vxor", xa, xa, t)

    def to_planes(self, regs: list[int], temps: list[int], control: Const | Mem | None = None) -> None:
        """8 registers of blocks -> 8 planes (regs[p] = plane p); `control`: the byte shuffle
        (default: memory order to plane order)."""
        self.byte_transpose(regs, control)
        self.swapmoves(regs, temps)

    def from_planes(self, regs: list[int], temps: list[int], control: Const | Mem | None = None) -> None:
        """Planes -> blocks; `control`: the byte shuffle out (it commutes with the bit transpose)."""
        self.swapmoves(regs, temps)
        self.byte_transpose(regs, control)

    # -- SubBytes ---------------------------------------------------------------------
    def slot(self, n: int) -> Mem:
        return Mem("rsp", self.slots + n * self.width // 8)

    def sbox(self, inverse: bool = False) -> list[int]:
        """The (inverse) S-box circuit on planes in registers 0..7; returns where each output
        plane is."""
        name = "inv_sbox_bp121" if inverse else "sbox_bp113"
        prog = sbox_program(name, self.pass_name, self.nregs)
        ones = self.const("ones", b"\xff")
        ops = {"xor": "vxor", "and": "pand", "or": "por", "andn": "pandn"}

        def opnd(o):
            return self.r(o.n, "") if isinstance(o, Reg) else self.slot(o.n)

        for k, ins in enumerate(prog.instrs):
            note = f"{'InvSubBytes' if inverse else 'SubBytes'}: {ins.value}" if k == 0 else ins.value
            d = opnd(ins.dst)
            s = [opnd(x) for x in ins.srcs]
            if ins.op in ops:
                self.op(ops[ins.op], d, *s, comment=note)
            elif ins.op == "not":
                self.op("vxor", d, s[0], ones, comment=note)
            elif ins.op == "ternlog":
                self.op("ternlog", d, *s, imm=ins.imm, comment=note)
            elif ins.op == "mov":
                self.op("vmov", d, s[0], comment=note)
            elif ins.op == "load":
                self.op("vload", d, s[0], comment=note)
            else:  # store (the frame is 16-byte aligned: unaligned moves for ymm/zmm)
                self.op("vstore", d, s[0], comment=note)
        return [prog.outputs[f"S{p}"].n for p in range(PLANES)]

    # -- the linear layers --------------------------------------------------------------
    def add_round_key(self, regs: list[int], key: Mem) -> None:
        for p, n in enumerate(regs):
            self.binary("vxor", self.r(n), self.r(n), self.key_plane(key, p),
                        comment="AddRoundKey" if p == 0 else "")

    def key_plane(self, key: Mem, p: int) -> Mem:
        """Plane p of a round key: planes are the file's width apart (every lane holds the
        same key, so a narrower batch reads the first lane's bytes)."""
        return Mem(key.base, key.disp + p * self.spec.width // 8, key.index, key.scale)

    def free_registers(self, used: list[int]) -> list[int]:
        return [n for n in range(self.nregs) if n not in used]

    def mix_columns(self, s: list[int], rot: tuple[Mem, Mem], key: Mem | None = None) -> list[int]:
        """MixColumns (then AddRoundKey with `key`) on planes s; returns the output registers.

        out = 2u + rot1(s) + rot2(u) with u = s + rot1(s): per column row r gets
        2 s_r + 3 s_(r+1) + s_(r+2) + s_(r+3)."""
        free = self.free_registers(s)
        r1 = free[:PLANES]
        two = bitslice.times_matrix(2)
        for p in range(PLANES):
            self.rotate(self.r(r1[p]), self.r(s[p]), 1, rot, comment="MixColumns: rot1(s)" if p == 0 else "")
        for p in range(PLANES):
            self.binary("vxor", self.r(s[p]), self.r(s[p]), self.r(r1[p]), comment="u = s + rot1(s)" if p == 0 else "")
        keyed = [self.key_plane(key, p) if key is not None else None for p in range(PLANES)]
        if self.ternlog and len(free) >= 2 * PLANES:
            r2 = free[PLANES:2 * PLANES]
            for p in range(PLANES):
                self.rotate(self.r(r2[p]), self.r(s[p]), 2, rot, comment="rot2(u)" if p == 0 else "")
            for p in range(PLANES):
                terms = [self.r(r2[p])] + [self.r(s[j]) for j in two[p]] + ([keyed[p]] if key is not None else [])
                self.xor_all(self.r(r1[p]), terms, comment="2u + rot1(s) + rot2(u) + key" if p == 0 else "")
            return r1
        for p in range(PLANES):
            terms = [self.r(s[j]) for j in two[p]] + ([keyed[p]] if key is not None else [])
            self.xor_all(self.r(r1[p]), terms, comment="rot1(s) + 2u (+ key)" if p == 0 else "")
        for p in range(PLANES):
            self.rotate(self.r(s[p]), self.r(s[p]), 2, rot, comment="rot2(u)" if p == 0 else "")
        for p in range(PLANES):
            self.binary("vxor", self.r(s[p]), self.r(s[p]), self.r(r1[p]), comment="+ rot2(u)" if p == 0 else "")
        return s

    def inv_mix_columns(self, s: list[int], rot: tuple[Mem, Mem]) -> list[int]:
        """InvMixColumns = MixColumns after t = s + 4 (s + rot2(s)) (the column polynomial
        0b x^3 + 0d x^2 + 09 x + 0e is (03 x^3 + x^2 + x + 02)(04 x^2 + 05))."""
        free = self.free_registers(s)
        a = free[:PLANES]
        four = bitslice.times_matrix(4)
        for p in range(PLANES):
            self.rotate(self.r(a[p]), self.r(s[p]), 2, rot, comment="InvMixColumns: rot2(s)" if p == 0 else "")
        for p in range(PLANES):
            self.binary("vxor", self.r(a[p]), self.r(a[p]), self.r(s[p]), comment="a = s + rot2(s)" if p == 0 else "")
        for p in range(PLANES):
            self.xor_all(self.r(s[p]), [self.r(a[j]) for j in four[p]], comment="s + 4a" if p == 0 else "")
        return self.mix_columns(s, rot)
