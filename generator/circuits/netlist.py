"""Straight-line Boolean programs ("circuits") as data: the format, its text form, evaluation, metrics.

A circuit has named inputs, named outputs and gates in an order where every operand is an input or
an earlier gate's output (single assignment). Gates: XOR, XNOR, AND, OR (two inputs), NOT (one) and
LUT3 (three inputs, any function given by an 8-bit truth table in VPTERNLOGD's convention: bit
`(a << 2) | (b << 1) | c` of the table is the output for inputs a, b, c).

Evaluation works on ints used as bit-vectors: each variable holds one bit per row, so one pass over
the gates evaluates every row at once (the bitsliced truth table: 256 rows for an 8-bit S-box).

The text form, one statement a line, `#` starts a comment:

    circuit NAME
    inputs U0 U1 ...
    outputs S0 S1 ...
    y14 = U3 XOR U5
    t2 = y12 AND y15
    S1 = S3 XNOR tc16
    n = NOT a
    f = LUT3 0x96 a b c
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

BINARY_OPS = ("XOR", "XNOR", "AND", "OR")
OPS = (*BINARY_OPS, "NOT", "LUT3")
NONLINEAR_OPS = ("AND", "OR")  # LUT3 gates count by their table (see Gate.is_nonlinear)
# Truth tables of the three LUT3 inputs in VPTERNLOGD's index order (a is the high index bit).
LUT_A, LUT_B, LUT_C = 0xF0, 0xCC, 0xAA
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*$")


class CircuitError(ValueError):
    """A malformed circuit or circuit text; the message names the line or the variable."""


@dataclass(frozen=True)
class Gate:
    out: str
    op: str
    ins: tuple[str, ...]
    table: int | None = None  # LUT3 only

    def __post_init__(self) -> None:
        arity = {"NOT": 1, "LUT3": 3}.get(self.op, 2)
        if self.op not in OPS:
            raise CircuitError(f"{self.out}: unknown gate {self.op!r} (one of {', '.join(OPS)})")
        if len(self.ins) != arity:
            raise CircuitError(f"{self.out}: {self.op} takes {arity} inputs, got {len(self.ins)}")
        if (self.op == "LUT3") != (self.table is not None) or not 0 <= (self.table or 0) <= 0xFF:
            raise CircuitError(f"{self.out}: a truth table (0..0xff) belongs to LUT3 gates only")

    def apply(self, values: list[int], mask: int) -> int:
        """The gate on bit-vectors `values` (ordered like `ins`); `mask` has every row's bit set."""
        if self.op == "XOR":
            return values[0] ^ values[1]
        if self.op == "XNOR":
            return values[0] ^ values[1] ^ mask
        if self.op == "AND":
            return values[0] & values[1]
        if self.op == "OR":
            return values[0] | values[1]
        if self.op == "NOT":
            return values[0] ^ mask
        return lut3(self.table or 0, values[0], values[1], values[2], mask)

    def is_nonlinear(self) -> bool:
        if self.op == "LUT3":
            return not is_affine_table(self.table or 0)
        return self.op in NONLINEAR_OPS

    def text(self) -> str:
        if self.op == "NOT":
            return f"{self.out} = NOT {self.ins[0]}"
        if self.op == "LUT3":
            return f"{self.out} = LUT3 {self.table:#04x} {' '.join(self.ins)}"
        return f"{self.out} = {self.ins[0]} {self.op} {self.ins[1]}"


def lut3(table: int, a: int, b: int, c: int, mask: int) -> int:
    """VPTERNLOGD on bit-vectors: the OR of the minterms whose table bit is set."""
    result = 0
    for index in range(8):
        if table >> index & 1:
            result |= ((a if index & 4 else ~a) & (b if index & 2 else ~b) & (c if index & 1 else ~c)) & mask
    return result


def is_affine_table(table: int) -> bool:
    """True when the 3-input function is a XOR of inputs (and perhaps a constant): no AND inside."""
    affine = set()
    for coeffs in range(16):
        t = 0xFF if coeffs & 8 else 0
        for bit, pattern in ((4, LUT_A), (2, LUT_B), (1, LUT_C)):
            if coeffs & bit:
                t ^= pattern
        affine.add(t)
    return table in affine


@dataclass(frozen=True)
class Metrics:
    gates: int
    nonlinear: int  # AND/OR gates and non-affine LUT3s: the multiplicative complexity used
    depth: int
    by_op: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Circuit:
    name: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    gates: tuple[Gate, ...]

    def __post_init__(self) -> None:
        defined: set[str] = set()
        for name in self.inputs:
            _check_new_name(name, defined, "input")
        for g in self.gates:
            for src in g.ins:
                if src not in defined:
                    raise CircuitError(f"{g.out}: operand {src!r} is not an input or an earlier gate")
            _check_new_name(g.out, defined, "gate output")
        for name in self.outputs:
            if name not in defined:
                raise CircuitError(f"output {name!r} is never computed")

    # -- evaluation ---------------------------------------------------------
    def evaluate(self, inputs: dict[str, int], mask: int) -> dict[str, int]:
        """Every variable's bit-vector, given the inputs' bit-vectors (rows selected by `mask`)."""
        values = {name: inputs[name] & mask for name in self.inputs}
        for g in self.gates:
            values[g.out] = g.apply([values[s] for s in g.ins], mask)
        return values

    def table(self) -> tuple[int, ...]:
        """The function as a lookup table: row x gives input i the bit i places from x's top bit."""
        outs = self.evaluate(dict(zip(self.inputs, bitsliced_inputs(len(self.inputs)))), row_mask(len(self.inputs)))
        return table_from_bitsliced([outs[name] for name in self.outputs], len(self.inputs))

    # -- metrics ------------------------------------------------------------
    def depths(self) -> dict[str, int]:
        depth = dict.fromkeys(self.inputs, 0)
        for g in self.gates:
            depth[g.out] = 1 + max(depth[s] for s in g.ins)
        return depth

    def metrics(self) -> Metrics:
        depth = self.depths()
        return Metrics(gates=len(self.gates), nonlinear=sum(g.is_nonlinear() for g in self.gates),
                       depth=max((depth[o] for o in self.outputs), default=0),
                       by_op=dict(sorted(Counter(g.op for g in self.gates).items())))

    def fanout(self) -> Counter[str]:
        """How many gate operands and outputs read each variable."""
        uses: Counter[str] = Counter(self.outputs)
        for g in self.gates:
            uses.update(g.ins)
        return uses

    # -- text ---------------------------------------------------------------
    def text(self, header: str = "") -> str:
        lines = [f"# {line}".rstrip() for line in header.splitlines()]
        lines += [f"circuit {self.name}", f"inputs {' '.join(self.inputs)}", f"outputs {' '.join(self.outputs)}"]
        lines += [g.text() for g in self.gates]
        return "\n".join(lines) + "\n"


def _check_new_name(name: str, defined: set[str], what: str) -> None:
    if not _NAME.match(name):
        raise CircuitError(f"{what} {name!r} is not a name")
    if name in defined:
        raise CircuitError(f"{what} {name!r} is assigned twice")
    defined.add(name)


def parse(text: str) -> Circuit:
    """Read the text form (see the module docstring)."""
    name, inputs, outputs, gates = "", (), (), []
    for number, raw in enumerate(text.splitlines(), 1):
        words = raw.split("#", 1)[0].split()
        if not words:
            continue
        try:
            if words[0] in ("circuit", "inputs", "outputs") and (len(words) < 2 or words[1] != "="):
                if words[0] == "circuit" and len(words) == 2:
                    name = words[1]
                elif words[0] == "inputs":
                    inputs = tuple(words[1:])
                elif words[0] == "outputs":
                    outputs = tuple(words[1:])
                else:
                    raise CircuitError("`circuit` takes one name")
            else:
                gates.append(_parse_gate(words))
        except CircuitError as e:
            raise CircuitError(f"line {number}: {e}") from None
    if not name or not inputs or not outputs:
        raise CircuitError("a circuit needs `circuit NAME`, `inputs ...` and `outputs ...` lines")
    return Circuit(name, inputs, outputs, tuple(gates))


def _parse_gate(words: list[str]) -> Gate:
    if len(words) < 3 or words[1] != "=":
        raise CircuitError(f"expected `out = ...`, got {' '.join(words)!r}")
    out, rhs = words[0], words[2:]
    if len(rhs) == 2 and rhs[0] == "NOT":
        return Gate(out, "NOT", (rhs[1],))
    if len(rhs) == 5 and rhs[0] == "LUT3":
        try:
            table = int(rhs[1], 0)
        except ValueError:
            raise CircuitError(f"{out}: LUT3 table {rhs[1]!r} is not a number") from None
        return Gate(out, "LUT3", tuple(rhs[2:]), table)
    if len(rhs) == 3 and rhs[1] in BINARY_OPS:
        return Gate(out, rhs[1], (rhs[0], rhs[2]))
    raise CircuitError(f"{out}: cannot read {' '.join(rhs)!r}")


# -- bitsliced truth tables -------------------------------------------------
def row_mask(n_inputs: int) -> int:
    return (1 << (1 << n_inputs)) - 1


def bitsliced_inputs(n_inputs: int) -> list[int]:
    """Input i's bit-vector over all 2^n rows: bit x is bit (n-1-i) of x (input 0 is the top bit)."""
    rows = 1 << n_inputs
    return [sum(1 << x for x in range(rows) if x >> (n_inputs - 1 - i) & 1) for i in range(n_inputs)]


def table_from_bitsliced(outputs: list[int], n_inputs: int) -> tuple[int, ...]:
    """Rows back from output bit-vectors: output j is bit (m-1-j) of each row's value."""
    m = len(outputs)
    return tuple(sum((outputs[j] >> x & 1) << (m - 1 - j) for j in range(m)) for x in range(1 << n_inputs))
