"""The circuit compilers: a circuit to a verified program for a target, in the cheapest gate order found.

Three passes, one per instruction-set form:
- three-operand (AVX/AVX2, or AVX-512 without ternlog): separate destinations, XNOR = xor + not;
- two-operand (SSE): the destination overwrites a source, so copies (mov) appear where no source dies;
- ternlog (AVX-512): the circuit is first fused into 3-input cones (fuse.py), one VPTERNLOGD each.
Each pass tries the listed gate order, the greedy list schedule and `tries` seeded variants of it, and
keeps the program with the fewest instructions (then the fewest spill instructions). Every returned
program has been run against the source circuit on all 2^n inputs.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from .allocate import Target, allocate
from .fuse import fuse_ternlog
from .netlist import Circuit
from .order import greedy_order, listed_order
from .program import Program, mismatches

THREE_OPERAND = Target("avx2", 3, 16)
TWO_OPERAND = Target("sse", 2, 16)
TERNLOG = Target("avx512", 3, 32, ternlog=True)
PASSES = {"three-operand": THREE_OPERAND, "two-operand": TWO_OPERAND, "ternlog": TERNLOG}
DEFAULT_TRIES = 128


class CompileError(RuntimeError):
    """A compiled program disagrees with its circuit: a compiler bug, never emitted."""


@dataclass(frozen=True)
class Compiled:
    source: Circuit  # what was allocated: the circuit itself, or its ternlog-fused form
    target: Target
    program: Program
    order: str  # which gate order won

    def spills(self) -> int:
        counts = self.program.counts()
        return counts["store"] + counts["load"]


def target_for(pass_name: str, registers: int) -> Target:
    if pass_name not in PASSES:
        raise KeyError(f"no pass {pass_name!r}; passes: {', '.join(PASSES)}")
    return replace(PASSES[pass_name], registers=registers)


def compile_circuit(circuit: Circuit, target: Target, tries: int = DEFAULT_TRIES) -> Compiled:
    source = fuse_ternlog(circuit) if target.ternlog else circuit
    orders = [("listed", listed_order(source)), ("greedy", greedy_order(source))]
    orders += [(f"greedy, seed {seed}", greedy_order(source, seed)) for seed in range(tries)]
    best: Compiled | None = None
    for name, order in orders:
        program = allocate(source, order, target)
        candidate = Compiled(source, target, program, name)
        if best is None or (len(program.instrs), candidate.spills()) < (len(best.program.instrs), best.spills()):
            best = candidate
    assert best is not None
    wrong = mismatches(best.program, circuit)
    if wrong:
        raise CompileError(f"{circuit.name} on {target}: outputs {', '.join(wrong)} differ from the circuit")
    return best
