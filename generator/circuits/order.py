"""Gate orders for a circuit: the listed order and greedy list schedules that keep few values live.

A list schedule repeatedly picks a ready gate (all operands computed). The greedy rule prefers the
gate that ends the most live ranges (operands read for the last time), then one whose operands were
computed most recently (short live ranges); a seeded random jitter breaks the remaining ties so a
search can try many orders and keep the cheapest — deterministic for a given seed.
"""
from __future__ import annotations

import random

from .netlist import Circuit


def listed_order(circuit: Circuit) -> list[int]:
    return list(range(len(circuit.gates)))


def greedy_order(circuit: Circuit, seed: int | None = None) -> list[int]:
    """A topological order of circuit.gates (indices), chosen gate by gate to shorten live ranges."""
    jitter = random.Random(seed) if seed is not None else None
    producer = {g.out: i for i, g in enumerate(circuit.gates)}
    remaining_reads = circuit.fanout()
    waiting = [sum(1 for s in set(g.ins) if s in producer) for g in circuit.gates]
    consumers: dict[str, list[int]] = {}
    for i, g in enumerate(circuit.gates):
        for s in set(g.ins):
            consumers.setdefault(s, []).append(i)
    born = dict.fromkeys(circuit.inputs, 0)
    ready = {i for i, w in enumerate(waiting) if w == 0}
    order: list[int] = []
    while ready:
        def score(i: int) -> tuple[float, ...]:
            g = circuit.gates[i]
            ends = sum(1 for s in set(g.ins) if remaining_reads[s] == g.ins.count(s))
            recency = max(born[s] for s in g.ins)
            noise = jitter.random() if jitter else 0.0
            return (ends, recency + noise * 8, -i)
        best = max(sorted(ready), key=score)
        ready.remove(best)
        order.append(best)
        g = circuit.gates[best]
        for s in g.ins:
            remaining_reads[s] -= 1
        born[g.out] = len(order)
        for c in consumers.get(g.out, []):
            waiting[c] -= 1
            if waiting[c] == 0:
                ready.add(c)
    if len(order) != len(circuit.gates):
        raise ValueError(f"{circuit.name}: the gates do not form a DAG")
    return order

