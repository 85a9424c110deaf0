"""The Bristol Fashion circuit format: reader, writer and plain evaluation.

Text form (Archer, Bogdanov, Lindell, ... "Bristol Fashion" MPC circuits):

    NGATES NWIRES
    NIV  len_1 ... len_NIV        the input values and their bit lengths
    NOV  len_1 ... len_NOV        the output values and their bit lengths
    (blank line)
    2 1 a b out XOR | 2 1 a b out AND | 1 1 a out INV | 1 1 a out EQW | 1 1 c out EQ (c = 0 or 1)

Input value v's bits are the wires after those of the values before it; the outputs are the last
wires, in order. Bit i of a value is wire (its first wire + i); the value is the integer
sum(bit_i << i) (for byte strings here: the little-endian integer of the bytes).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

OPS = {"XOR": 2, "AND": 2, "INV": 1, "EQW": 1, "EQ": 1}


class BristolError(ValueError):
    """A malformed circuit file or circuit; the message says where."""


@dataclass(frozen=True)
class Gate:
    op: str
    ins: tuple[int, ...]  # wires (EQ: the constant 0 or 1)
    out: int


@dataclass(frozen=True)
class Bristol:
    nwires: int
    inputs: tuple[int, ...]   # bit length of each input value
    outputs: tuple[int, ...]  # bit length of each output value
    gates: tuple[Gate, ...]

    def __post_init__(self) -> None:
        ready = [False] * self.nwires
        if sum(self.inputs) + sum(self.outputs) > self.nwires:
            raise BristolError("more input and output bits than wires")
        for w in range(sum(self.inputs)):
            ready[w] = True
        for k, g in enumerate(self.gates):
            if g.op not in OPS or len(g.ins) != OPS[g.op]:
                raise BristolError(f"gate {k}: {g.op} with {len(g.ins)} inputs")
            for w in () if g.op == "EQ" else g.ins:
                if not 0 <= w < self.nwires or not ready[w]:
                    raise BristolError(f"gate {k}: input wire {w} is not set before it")
            if not 0 <= g.out < self.nwires or ready[g.out]:
                raise BristolError(f"gate {k}: output wire {g.out} is out of range or set twice")
            ready[g.out] = True
        if not all(ready[self.nwires - sum(self.outputs):]):
            raise BristolError("an output wire is never set")

    @property
    def output_wires(self) -> range:
        return range(self.nwires - sum(self.outputs), self.nwires)

    def counts(self) -> dict[str, int]:
        return dict(sorted(Counter(g.op for g in self.gates).items()))

    @property
    def and_count(self) -> int:
        return sum(g.op == "AND" for g in self.gates)

    # -- evaluation ---------------------------------------------------------
    def evaluate_rows(self, values: list[list[int]]) -> list[list[int]]:
        """values[v][r]: input value v of row r (ints); every row at once (one bit-vector per wire)."""
        rows = len(values[0]) if values else 0
        mask = (1 << rows) - 1
        wire = [0] * self.nwires
        at = 0
        for v, bits in enumerate(self.inputs):
            for i in range(bits):
                wire[at + i] = sum(((values[v][r] >> i) & 1) << r for r in range(rows))
            at += bits
        for g in self.gates:
            if g.op == "XOR":
                wire[g.out] = wire[g.ins[0]] ^ wire[g.ins[1]]
            elif g.op == "AND":
                wire[g.out] = wire[g.ins[0]] & wire[g.ins[1]]
            elif g.op == "INV":
                wire[g.out] = wire[g.ins[0]] ^ mask
            elif g.op == "EQW":
                wire[g.out] = wire[g.ins[0]]
            else:
                wire[g.out] = mask if g.ins[0] else 0
        out, at = [], self.nwires - sum(self.outputs)
        for bits in self.outputs:
            out.append([sum(((wire[at + i] >> r) & 1) << i for i in range(bits)) for r in range(rows)])
            at += bits
        return out

    def evaluate(self, *values: int) -> list[int]:
        return [o[0] for o in self.evaluate_rows([[v] for v in values])]

    # -- text ---------------------------------------------------------------
    def text(self) -> str:
        lines = [f"{len(self.gates)} {self.nwires}", " ".join(map(str, (len(self.inputs), *self.inputs))),
                 " ".join(map(str, (len(self.outputs), *self.outputs))), ""]
        for g in self.gates:
            lines.append(f"{len(g.ins)} 1 {' '.join(map(str, g.ins))} {g.out} {g.op}")
        return "\n".join(lines) + "\n"


def parse(text: str) -> Bristol:
    lines = [line.split() for line in text.splitlines()]
    lines = [w for w in lines if w]
    try:
        ngates, nwires = map(int, lines[0])
        niv, *ins = map(int, lines[1])
        nov, *outs = map(int, lines[2])
    except (ValueError, IndexError):
        raise BristolError("the three header lines: NGATES NWIRES / NIV lengths / NOV lengths") from None
    if len(ins) != niv or len(outs) != nov:
        raise BristolError("an input or output count does not match its lengths")
    gates = []
    for number, words in enumerate(lines[3:], 4):
        try:
            nin, nout = int(words[0]), int(words[1])
            op = words[-1]
            if nout != 1 or len(words) != nin + nout + 3:
                raise ValueError
            gates.append(Gate(op, tuple(int(w) for w in words[2:2 + nin]), int(words[2 + nin])))
        except (ValueError, IndexError):
            raise BristolError(f"gate line {number}: {' '.join(words)!r}") from None
    if len(gates) != ngates:
        raise BristolError(f"header says {ngates} gates, the file has {len(gates)}")
    return Bristol(nwires, tuple(ins), tuple(outs), tuple(gates))
