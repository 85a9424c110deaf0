"""Machine-level programs that compute a circuit on vector registers, and their interpreter.

A program is what a circuit compiler emits: instructions on numbered vector registers (each holds
one bit-plane) and numbered spill slots (stack memory). The ops and their DSL counterparts:

    xor/and/or  d, a, b       d = a op b          vxor / pand / por (b may be a slot: memory operand)
    andn        d, a, b       d = ~a & b          pandn
    not         d, a          d = a ^ all-ones    vxor with the all-ones constant (a memory operand)
    ternlog     d, a, b, c    d = imm(a, b, c)    ternlog (VPTERNLOGD: d is a; c may be a slot)
    mov         d, a          register copy       vmov
    load        d, slot       reload a spill
    store       slot, a       spill a register

In the two-operand form (SSE) every op but mov/load/store writes its first source (`d == a`); the
three-operand form (VEX/EVEX) has a separate destination, except ternlog, which is always tied.
"""
from __future__ import annotations

from dataclasses import dataclass

from .netlist import Circuit, bitsliced_inputs, lut3, row_mask

OPS = ("xor", "and", "or", "andn", "not", "ternlog", "mov", "load", "store")
BINARY = ("xor", "and", "or", "andn")


class ProgramError(ValueError):
    """The program breaks a rule of its form or reads a register it never wrote."""


@dataclass(frozen=True, order=True)
class Reg:
    n: int

    def __str__(self) -> str:
        return f"r{self.n}"


@dataclass(frozen=True, order=True)
class Slot:
    n: int

    def __str__(self) -> str:
        return f"[s{self.n}]"


Operand = Reg | Slot


@dataclass(frozen=True)
class Instr:
    op: str
    dst: Operand
    srcs: tuple[Operand, ...]
    imm: int | None = None
    value: str = ""  # the circuit variable written (a role name for assembly comments)

    def __str__(self) -> str:
        imm = f", {self.imm:#04x}" if self.imm is not None else ""
        note = f"    # {self.value}" if self.value else ""
        return f"{self.op:8s}{', '.join(map(str, (self.dst, *self.srcs)))}{imm}{note}"


@dataclass(frozen=True)
class Program:
    operands: int  # 2 (destination tied to the first source) or 3
    registers: int
    instrs: tuple[Instr, ...]
    inputs: dict[str, Reg]  # where each circuit input is on entry
    outputs: dict[str, Reg]  # where each circuit output is on exit

    def counts(self) -> dict[str, int]:
        counts = dict.fromkeys(OPS, 0)
        for i in self.instrs:
            counts[i.op] += 1
        counts["memory operands"] = sum(isinstance(s, Slot) for i in self.instrs if i.op in (*BINARY, "ternlog")
                                        for s in i.srcs)
        return counts

    def slots(self) -> int:
        used = [o.n for i in self.instrs for o in (i.dst, *i.srcs) if isinstance(o, Slot)]
        return max(used) + 1 if used else 0

    def listing(self) -> str:
        return "\n".join(map(str, self.instrs))


def check_form(program: Program) -> None:
    """Raise ProgramError unless every instruction has a shape the target can encode."""
    for n, ins in enumerate(program.instrs):
        where = f"instruction {n} ({ins})"
        if ins.op not in OPS:
            raise ProgramError(f"{where}: unknown op")
        regs = [o for o in (ins.dst, *ins.srcs) if isinstance(o, Reg)]
        if any(not 0 <= r.n < program.registers for r in regs):
            raise ProgramError(f"{where}: register outside r0..r{program.registers - 1}")
        arity = {"not": 1, "mov": 1, "load": 1, "store": 1, "ternlog": 3}.get(ins.op, 2)
        if len(ins.srcs) != arity or (ins.op == "ternlog") != (ins.imm is not None):
            raise ProgramError(f"{where}: wrong operands")
        memory_ok = {"load": (0,), "store": (), "ternlog": (2,), "not": ()}.get(ins.op, (1,) if ins.op in BINARY else ())
        if any(isinstance(s, Slot) and k not in memory_ok for k, s in enumerate(ins.srcs)):
            raise ProgramError(f"{where}: memory operand in a position that takes a register")
        if (ins.op == "load" and not isinstance(ins.srcs[0], Slot)) or \
                (ins.op == "store") != isinstance(ins.dst, Slot):
            raise ProgramError(f"{where}: load/store must move between a slot and a register")
        tied = ins.op == "ternlog" or (program.operands == 2 and ins.op in (*BINARY, "not"))
        if tied and ins.dst != ins.srcs[0]:
            raise ProgramError(f"{where}: the destination must be the first source in this form")


def run(program: Program, inputs: dict[str, int], mask: int) -> dict[str, int]:
    """Interpret the program on bit-vectors (one bit per row); return each output's bit-vector."""
    check_form(program)
    state: dict[Operand, int] = {program.inputs[name]: value & mask for name, value in inputs.items()}
    if len(state) != len(inputs):
        raise ProgramError("two inputs start in the same register")

    def read(o: Operand) -> int:
        if o not in state:
            raise ProgramError(f"{o} is read before it is written")
        return state[o]

    for ins in program.instrs:
        v = [read(s) for s in ins.srcs]
        if ins.op in ("mov", "load", "store"):
            state[ins.dst] = v[0]
        elif ins.op == "xor":
            state[ins.dst] = v[0] ^ v[1]
        elif ins.op == "and":
            state[ins.dst] = v[0] & v[1]
        elif ins.op == "or":
            state[ins.dst] = v[0] | v[1]
        elif ins.op == "andn":
            state[ins.dst] = ~v[0] & v[1] & mask
        elif ins.op == "not":
            state[ins.dst] = v[0] ^ mask
        else:
            state[ins.dst] = lut3(ins.imm or 0, v[0], v[1], v[2], mask)
    return {name: read(reg) for name, reg in program.outputs.items()}


def mismatches(program: Program, circuit: Circuit) -> list[str]:
    """Outputs where the program differs from the circuit on some input row (all 2^n rows at once)."""
    n = len(circuit.inputs)
    inputs = dict(zip(circuit.inputs, bitsliced_inputs(n)))
    want = circuit.evaluate(inputs, row_mask(n))
    got = run(program, inputs, row_mask(n))
    if set(got) != set(circuit.outputs):
        return sorted(set(got) ^ set(circuit.outputs))
    return [name for name in circuit.outputs if got[name] != want[name]]


def max_live_registers(program: Program) -> int:
    """The most registers holding a value that a later instruction (or the exit) still reads."""
    live_after: list[set[Reg]] = []
    live: set[Reg] = set(program.outputs.values())
    for ins in reversed(program.instrs):
        live_after.append(set(live))
        if isinstance(ins.dst, Reg):
            live.discard(ins.dst)
        live.update(s for s in ins.srcs if isinstance(s, Reg))
    return max([len(live)] + [len(s) for s in live_after])
