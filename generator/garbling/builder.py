"""Building Bristol circuits: wires, gates, embedded netlists (aesgen.circuits), adders, multipliers.

Wires are numbered as they are made (the input values' first); `finish` renumbers so the output
values are the last wires, as the format wants. Constants are not wires: XOR with a constant 1 is an
INV gate, with 0 nothing.
"""
from __future__ import annotations

from aesgen.circuits.netlist import Circuit

from .bristol import Bristol, Gate


class Builder:
    def __init__(self) -> None:
        self.nwires = 0
        self.gates: list[Gate] = []
        self.input_sizes: list[int] = []

    def _wire(self) -> int:
        self.nwires += 1
        return self.nwires - 1

    def input(self, bits: int) -> list[int]:
        if self.gates:
            raise ValueError("inputs come before any gate")
        self.input_sizes.append(bits)
        return [self._wire() for _ in range(bits)]

    def gate(self, op: str, *ins: int) -> int:
        out = self._wire()
        self.gates.append(Gate(op, ins, out))
        return out

    def xor(self, a: int, b: int) -> int:
        return self.gate("XOR", a, b)

    def and_(self, a: int, b: int) -> int:
        return self.gate("AND", a, b)

    def inv(self, a: int) -> int:
        return self.gate("INV", a)

    def xor_const(self, a: int, bit: int) -> int:
        return self.inv(a) if bit else a

    def xor_words(self, a: list[int], b: list[int]) -> list[int]:
        return [self.xor(x, y) for x, y in zip(a, b)]

    def netlist(self, circuit: Circuit, ins: list[list[int]]) -> list[list[int]]:
        """Copies of the circuit on wires ins[c] (copy c's inputs in order), written gate by gate: gate
        k of every copy, then gate k+1 (independent AND gates next to each other, as a deferred
        queue finds them); each copy's output wires. XNOR becomes XOR then INV, OR a ^ b ^ (a & b),
        NOT an INV."""
        at = [dict(zip(circuit.inputs, wires)) for wires in ins]
        for g in circuit.gates:
            for copy in at:
                x = [copy[s] for s in g.ins]
                if g.op == "XOR":
                    copy[g.out] = self.xor(*x)
                elif g.op == "XNOR":
                    copy[g.out] = self.inv(self.xor(*x))
                elif g.op == "AND":
                    copy[g.out] = self.and_(*x)
                elif g.op == "OR":
                    copy[g.out] = self.xor(self.xor(*x), self.and_(*x))
                elif g.op == "NOT":
                    copy[g.out] = self.inv(x[0])
                else:
                    raise ValueError(f"{circuit.name}: {g.op} gates have no Bristol form here")
        return [[copy[o] for o in circuit.outputs] for copy in at]

    def finish(self, outputs: list[list[int]]) -> Bristol:
        """The circuit with output value k's bits the wires after value k-1's, at the end."""
        flat = [w for value in outputs for w in value]
        inputs = set(range(sum(self.input_sizes)))
        seen: set[int] = set()
        gates = list(self.gates)
        for k, w in enumerate(flat):
            if w in inputs or w in seen:  # a copy: an output wire is set by its own gate
                flat[k] = self._wire()
                gates.append(Gate("EQW", (w,), flat[k]))
            seen.add(flat[k])
        rest = [w for w in range(self.nwires) if w not in seen]
        number = {w: i for i, w in enumerate(rest + flat)}
        return Bristol(self.nwires, tuple(self.input_sizes), tuple(len(v) for v in outputs),
                       tuple(Gate(g.op, tuple(number[i] for i in g.ins), number[g.out]) for g in gates))


def adder(b: Builder, x: list[int], y: list[int]) -> list[int]:
    """x + y mod 2^n (bit 0 first), ripple carry: one AND per bit but the last (carry = c ^ ((x ^ c) & (y ^ c)))."""
    out, carry = [], None
    for i, (a, c) in enumerate(zip(x, y)):
        if carry is None:
            out.append(b.xor(a, c))
            carry = b.and_(a, c) if len(x) > 1 else None
            continue
        ax, cx = b.xor(a, carry), b.xor(c, carry)
        out.append(b.xor(ax, c))
        if i + 1 < len(x):
            carry = b.xor(carry, b.and_(ax, cx))
    return out


def multiplier(b: Builder, x: list[int], y: list[int]) -> list[int]:
    """x * y mod 2^n (bit 0 first): shifted partial products x & y_j summed with `adder`."""
    n = len(x)
    acc = [b.and_(x[i], y[0]) for i in range(n)]
    for j in range(1, n):
        partial = [b.and_(x[i], y[j]) for i in range(n - j)]
        acc = acc[:j] + adder(b, acc[j:], partial)
    return acc


def adder_circuit(bits: int) -> Bristol:
    b = Builder()
    x, y = b.input(bits), b.input(bits)
    return b.finish([adder(b, x, y)])


def multiplier_circuit(bits: int) -> Bristol:
    b = Builder()
    x, y = b.input(bits), b.input(bits)
    return b.finish([multiplier(b, x, y)])
