"""AND-depth layers: the order the static batching garbles in, and the gate ids every technique uses.

A wire's AND depth is the most AND gates on a path from the inputs to it (XOR, INV and EQW add
none). Layer d holds the AND gates of depth d: they depend only on wires of depth < d, so each
layer's hashes are independent. The level order lists, for d = 0, 1, ...: the AND gates of depth d
in circuit order, then the other gates of depth d by their linear depth within the layer (the most
XOR/INV/EQW gates on a path from a wire of a lower depth or an AND of this one), so consecutive
linear gates rarely wait for each other's labels. An AND gate's id is its place among
the AND gates of the level order; the tables are stored by id, so every batching of the same
circuit (any technique, any batch size) garbles gate by gate with the same tweaks and writes the
same tables.
"""
from __future__ import annotations

from dataclasses import dataclass

from .bristol import Bristol


@dataclass(frozen=True)
class Levels:
    order: tuple[int, ...]      # gate indices in level order
    and_id: tuple[int, ...]     # per gate: its AND id, or -1
    layer_sizes: tuple[int, ...]  # AND gates per layer 1..depth

    @property
    def and_depth(self) -> int:
        return len(self.layer_sizes)


def levels(c: Bristol) -> Levels:
    depth = [0] * c.nwires
    linear = [0] * c.nwires  # linear depth within the wire's layer
    gate_depth, gate_linear = [], []
    for g in c.gates:
        ins = () if g.op == "EQ" else g.ins
        d = max((depth[w] for w in ins), default=0) + (g.op == "AND")
        depth[g.out] = d
        linear[g.out] = 0 if g.op == "AND" else 1 + max((linear[w] for w in ins if depth[w] == d), default=0)
        gate_depth.append(d)
        gate_linear.append(linear[g.out])
    top = max(gate_depth, default=0)
    by_level: list[tuple[list[int], list[int]]] = [([], []) for _ in range(top + 1)]
    for k, g in enumerate(c.gates):
        by_level[gate_depth[k]][g.op != "AND"].append(k)
    order = [k for ands, rest in by_level for k in ands + sorted(rest, key=lambda k: gate_linear[k])]
    and_id = [-1] * len(c.gates)
    next_id = 0
    for k in order:
        if c.gates[k].op == "AND":
            and_id[k] = next_id
            next_id += 1
    return Levels(tuple(order), tuple(and_id), tuple(len(ands) for ands, _ in by_level[1:]))
