"""Ternlog fusion: cover a circuit with cones of at most three inputs, one LUT3 gate per cone.

A gate read by exactly one other gate (and not a circuit output) needs no register of its own when
its consumer absorbs it: going through the gates in order, each gate grows its cone by absorbing
such single-reader operands (with their own cones) while the cone has at most three leaves. Every
cone becomes one LUT3 gate whose truth table is the cone evaluated on VPTERNLOGD's input patterns;
a cone that is a lone XOR, AND or OR stays that gate (a non-destructive 3-operand instruction).
"""
from __future__ import annotations

from .netlist import LUT_A, LUT_B, LUT_C, Circuit, Gate

PLAIN = ("XOR", "AND", "OR")


def _absorbable(circuit: Circuit) -> set[str]:
    fanout = circuit.fanout()
    outputs = set(circuit.outputs)
    return {g.out for g in circuit.gates if fanout[g.out] == 1 and g.out not in outputs}


def _cones(circuit: Circuit) -> tuple[dict[str, list[str]], dict[str, list[Gate]]]:
    """Each gate's cone: its leaves (in first-seen order) and member gates (in circuit order)."""
    absorbable = _absorbable(circuit)
    leaves: dict[str, list[str]] = {}
    members: dict[str, list[Gate]] = {}
    for g in circuit.gates:
        cone_leaves, cone_members = list(dict.fromkeys(g.ins)), [g]
        grew = True
        while grew:
            grew = False
            options = []
            for p in cone_leaves:
                if p in absorbable and p in leaves:
                    merged = list(dict.fromkeys([x for x in cone_leaves if x != p] + leaves[p]))
                    if len(merged) <= 3:
                        options.append((len(merged), cone_leaves.index(p), p, merged))
            if options:
                _, _, p, merged = min(options)
                cone_leaves, cone_members = merged, members[p] + cone_members
                grew = True
        leaves[g.out], members[g.out] = cone_leaves, cone_members
    return leaves, members


def _cone_table(cone_leaves: list[str], cone_members: list[Gate]) -> int:
    values = dict(zip(cone_leaves, (LUT_A, LUT_B, LUT_C)))
    for g in cone_members:  # topological: an absorbed operand's members come before its reader
        values[g.out] = g.apply([values[s] for s in g.ins], 0xFF)
    return values[cone_members[-1].out]


def fuse_ternlog(circuit: Circuit) -> Circuit:
    """An equivalent circuit of LUT3 gates (and lone XOR/AND/OR gates), one per cone."""
    leaves, members = _cones(circuit)
    absorbed = {m.out for root in circuit.gates for m in members[root.out][:-1]}
    gates = []
    for g in circuit.gates:
        if g.out in absorbed:
            continue
        cone_leaves, cone_members = leaves[g.out], members[g.out]
        if len(cone_members) == 1 and g.op in PLAIN:
            gates.append(g)
            continue
        table = _cone_table(cone_leaves, cone_members)
        padded = (cone_leaves + [cone_leaves[0]] * 3)[:3]
        gates.append(Gate(g.out, "LUT3", tuple(padded), table))
    return Circuit(f"{circuit.name}_ternlog", circuit.inputs, circuit.outputs, tuple(gates))
