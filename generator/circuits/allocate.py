"""Register allocation of a circuit, in a given gate order, onto a target's vector registers.

One pass over the gates. Values live in registers; when none is free, the value read furthest in
the future is evicted (Belady), stored once to a spill slot if it was never stored, and later read
back as a memory operand where the instruction takes one, or reloaded. In the two-operand form and
for VPTERNLOGD the destination overwrites a source: a source read for the last time is chosen (the
commutative ops and the truth table's input permutation allow any), else one already spilled (its
slot keeps the value); only when every source lives on only in registers is one copied (mov).
"""
from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass

from .netlist import Circuit, Gate

from .program import Instr, Operand, Program, Reg, Slot

NEVER = 1 << 30  # the next use of a value nobody reads again


@dataclass(frozen=True)
class Target:
    name: str
    operands: int  # 2: SSE, the destination is the first source; 3: VEX/EVEX
    registers: int
    ternlog: bool = False  # VPTERNLOGD (AVX-512): LUT3 gates are one instruction

    def __str__(self) -> str:
        return f"{self.name} ({self.operands}-operand, {self.registers} registers)"


class AllocationError(ValueError):
    """The circuit cannot be placed on the target (too many inputs, or a gate it lacks)."""


def retable(table: int, old_inputs: tuple[str, ...], new_inputs: list[str]) -> int:
    """A LUT3 table over `old_inputs` rewritten for `new_inputs`: the same values in other positions,
    perhaps repeated (a repeated value's later positions never disagree at run time, so they are ignored)."""
    out = 0
    for index in range(8):
        bits: dict[str, int] = {}
        for k, value in enumerate(new_inputs):
            bits.setdefault(value, index >> (2 - k) & 1)
        a, b, c = (bits[v] for v in old_inputs)
        if table >> (a << 2 | b << 1 | c) & 1:
            out |= 1 << index
    return out


class _Allocator:
    def __init__(self, circuit: Circuit, order: list[int], target: Target) -> None:
        if len(circuit.inputs) > target.registers:
            raise AllocationError(f"{circuit.name}: {len(circuit.inputs)} inputs do not fit in "
                                  f"{target.registers} registers")
        self.target = target
        self.gates = [circuit.gates[i] for i in order]
        self.end = len(self.gates)
        self.uses: dict[str, list[int]] = {}
        for pos, g in enumerate(self.gates):
            for src in dict.fromkeys(g.ins):
                self.uses.setdefault(src, []).append(pos)
        for name in circuit.outputs:
            self.uses.setdefault(name, []).append(self.end)
        self.holder: list[str | None] = [None] * target.registers
        self.reg_of: dict[str, int] = {}
        self.slot_of: dict[str, int] = {}
        self.free_slots: list[int] = []
        self.slot_count = 0
        self.code: list[Instr] = []
        self.circuit = circuit
        for n, name in enumerate(circuit.inputs):
            self._place(name, n)

    # -- bookkeeping ------------------------------------------------------------
    def next_use(self, value: str, pos: int) -> int:
        uses = self.uses.get(value, [])
        k = bisect_left(uses, pos)
        return uses[k] if k < len(uses) else NEVER

    def _place(self, value: str, reg: int) -> None:
        self.holder[reg] = value
        self.reg_of[value] = reg

    def _forget(self, value: str) -> None:
        """A dead value gives back its register and its slot."""
        reg = self.reg_of.pop(value, None)
        if reg is not None:
            self.holder[reg] = None
        slot = self.slot_of.pop(value, None)
        if slot is not None:
            self.free_slots.append(slot)
            self.free_slots.sort()

    def _emit(self, op: str, dst: Operand, *srcs: Operand, imm: int | None = None, value: str = "") -> None:
        self.code.append(Instr(op, dst, tuple(srcs), imm, value))

    def _operand(self, value: str) -> Operand:
        return Reg(self.reg_of[value]) if value in self.reg_of else Slot(self.slot_of[value])

    def _register(self, pos: int, keep: set[str]) -> int:
        """A free register, evicting the value (not in `keep`) read furthest in the future."""
        for reg, value in enumerate(self.holder):
            if value is None:
                return reg
        victims = [(self.next_use(v, pos), v in self.slot_of, -reg) for reg, v in enumerate(self.holder)
                   if v not in keep]
        if not victims:
            raise AllocationError(f"{self.circuit.name}: one gate needs more than {self.target.registers} registers")
        _, _, neg_reg = max(victims)
        reg = -neg_reg
        value = self.holder[reg]
        assert value is not None
        if value not in self.slot_of:
            if self.free_slots:
                self.slot_of[value] = self.free_slots.pop(0)
            else:
                self.slot_of[value] = self.slot_count
                self.slot_count += 1
            self._emit("store", Slot(self.slot_of[value]), Reg(reg), value=value)
        del self.reg_of[value]
        self.holder[reg] = None
        return reg

    def _load(self, value: str, pos: int, keep: set[str]) -> None:
        reg = self._register(pos, keep)
        self._emit("load", Reg(reg), Slot(self.slot_of[value]), value=value)
        self._place(value, reg)

    # -- gates ------------------------------------------------------------------
    def run(self) -> Program:
        for pos, g in enumerate(self.gates):
            self._gate(pos, g)
        keep = set(self.circuit.outputs)
        for name in self.circuit.outputs:
            if name not in self.reg_of:
                self._load(name, self.end, keep)
        return Program(self.target.operands, self.target.registers, tuple(self.code),
                       {name: Reg(n) for n, name in enumerate(self.circuit.inputs)},
                       {name: Reg(self.reg_of[name]) for name in self.circuit.outputs})

    def _gate(self, pos: int, g: Gate) -> None:
        if g.op == "LUT3" and not self.target.ternlog:
            raise AllocationError(f"{g.out}: {self.target.name} has no 3-input gates (VPTERNLOGD)")
        srcs = list(dict.fromkeys(g.ins))
        keep = set(srcs)
        # The last source position may be a memory operand (not for NOT); the rest need registers.
        in_memory = sorted((s for s in srcs if s not in self.reg_of), key=lambda s: (self.next_use(s, pos + 1), s))
        allowed = min(1, len(srcs) - 1)
        for value in in_memory[:max(0, len(in_memory) - allowed)]:
            self._load(value, pos, keep)
        dying = [s for s in srcs if self.next_use(s, pos + 1) == NEVER]
        tied = g.op == "LUT3" or self.target.operands == 2
        if tied:
            self._tied_gate(pos, g, srcs, dying, keep)
        else:
            self._three_operand_gate(pos, g, srcs, dying, keep)
        if self.next_use(g.out, pos + 1) == NEVER:
            self._forget(g.out)

    def _three_operand_gate(self, pos: int, g: Gate, srcs: list[str], dying: list[str], keep: set[str]) -> None:
        operands = self._ordered_operands(srcs)
        for value in dying:
            self._forget_register_only(value)
        reg = self._register(pos, keep)
        self._emit_gate(g, Reg(reg), operands)
        for value in dying:
            self._forget(value)
        self._place(g.out, reg)

    def _tied_gate(self, pos: int, g: Gate, srcs: list[str], dying: list[str], keep: set[str]) -> None:
        in_regs = [s for s in srcs if s in self.reg_of]
        # Overwrite a source read for the last time, else one already spilled (memory still has it).
        tie = next((s for s in in_regs if s in dying), None) or \
            next((s for s in sorted(in_regs, key=lambda s: -self.next_use(s, pos + 1)) if s in self.slot_of), None)
        if tie is None:  # every source lives on: copy one into a fresh register and overwrite the copy
            original = in_regs[0]
            reg = self._register(pos, keep)
            self._emit("mov", Reg(reg), Reg(self.reg_of[original]), value=original)
        else:
            reg = self.reg_of[tie]
            original = tie
        if g.op == "LUT3":
            self._emit_ternlog(g, Reg(reg), original)
        else:
            self._emit_gate(g, Reg(reg), [Reg(reg), *self._ordered_operands([s for s in srcs if s != original])])
        for value in dying:
            self._forget(value)
        if self.holder[reg] is not None:  # the overwritten spilled source lives on in its slot
            del self.reg_of[self.holder[reg]]
        self._place(g.out, reg)

    def _forget_register_only(self, value: str) -> None:
        """A source read for the last time here: its register may take the result."""
        reg = self.reg_of.get(value)
        if reg is not None:
            self.holder[reg] = None

    def _ordered_operands(self, values: list[str]) -> list[Operand]:
        """Register operands first, the memory operand (at most one) last."""
        return sorted((self._operand(v) for v in values), key=lambda o: isinstance(o, Slot))

    def _emit_gate(self, g: Gate, dst: Reg, operands: list[Operand]) -> None:
        """A 2-input gate or NOT as machine ops on `operands` (its distinct sources, memory last)."""
        op = {"XOR": "xor", "XNOR": "xor", "AND": "and", "OR": "or", "NOT": "not"}[g.op]
        if g.op == "NOT":
            self._emit("not", dst, operands[0], value=g.out)
            return
        a, b = (operands * 2)[:2]  # a gate may read one value twice
        self._emit(op, dst, a, b, value=g.out)
        if g.op == "XNOR":
            self._emit("not", dst, dst, value=g.out)

    def _emit_ternlog(self, g: Gate, dst: Reg, first: str) -> None:
        # Position 0 is the tied destination holding `first`; padding repeats it; memory goes last.
        rest = sorted((v for v in dict.fromkeys(g.ins) if v != first), key=lambda v: isinstance(self._operand(v), Slot))
        values = [first] * (3 - len(rest)) + rest
        operands = [dst] + [self._operand(v) for v in values[1:]]
        self._emit("ternlog", dst, *operands, imm=retable(g.table or 0, g.ins, values), value=g.out)


def allocate(circuit: Circuit, order: list[int], target: Target) -> Program:
    """The circuit as a program for `target`, its gates taken in `order` (indices into circuit.gates)."""
    return _Allocator(circuit, order, target).run()
