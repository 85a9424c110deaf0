"""The port model: cycles per iteration of a generated main loop on a target, from its pipes.

Each target's `[ports]` table (see docs/costmodel.md) says, per instruction class (the
port classes of `ops.py`, plus `branch`), which pipes can take it, its latency and its
reciprocal throughput, and where each figure comes from. A loop's instructions are
classified from their text (a memory source adds a load, a memory destination a store), and

    cycles per iteration = max(port bound, issue bound, recurrence, window bound)

- port bound: the busiest set of pipes. Work that may go to any of its pipes is spread
  over them as well as possible: the bound is max over pipe sets S of (the cycles of the
  classes that can only run inside S) / |S|, which an optimal spread reaches.
- issue bound: instructions over the issue width (a compare and its branch fuse).
- recurrence: the longest chain a loop-carried register (CTR's counter, GHASH's
  accumulator) goes through in one iteration.
- window bound: Little's law on the reorder buffer. Iterations overlap as far as the
  ROB holds their instructions until they retire: one iteration alone keeps its
  instructions in flight for sum(retire times) cycles, so an iteration takes at least
  that over the ROB size. This is what a shallow interleave runs into.

The knee of a (mode, width) is the smallest depth within KNEE_SHARE of the best throughput,
the same rule for the model and for a measurement.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import combinations

from .dsl import BuildError
from .mainloop import UNITS
from .ops import OPS, Tied
from .target import Target, TargetError, targets

KNEE_SHARE = 0.95
_REG = re.compile(r"%([xyz]mm)(\d+)")
_WIDTH = {"xmm": 128, "ymm": 256, "zmm": 512}
_MEMORY_CLASSES = {"load", "store", "move"}
_FUSES_WITH_BRANCH = ("cmp", "test", "add", "sub", "dec", "inc", "and")
# Classes whose latency and throughput are the target's `[instructions]` (Target.cost), by the
# instruction that stands for them there; the port table names only their pipes.
COSTED_BY_INSTRUCTIONS = {"aes": "aesenc", "clmul": "pclmulqdq", "gfni": "gf2p8affineinvqb"}


def _mnemonic_of(code: str) -> str:
    parts = code.split("_")
    return (parts[1] if parts[0] in ("VEX", "EVEX") else parts[0]).lower()


def _mnemonic_classes() -> dict[str, set[str]]:
    """Assembler mnemonic -> the port classes of the ops spelled with it (from ops.py's forms)."""
    out: dict[str, set[str]] = {}
    for op in OPS.values():
        for code in vars(op.forms).values():
            if code:
                out.setdefault(_mnemonic_of(code), set()).add(op.port)
    return out


MNEMONIC_CLASSES = _mnemonic_classes()
_ALWAYS_TIED = {_mnemonic_of(c) for op in OPS.values() if op.tied is Tied.ALWAYS
                for c in vars(op.forms).values() if c}


@dataclass(frozen=True)
class Instruction:
    """One loop instruction as the model sees it."""
    text: str
    mnemonic: str
    classes: tuple[str, ...]  # the op's class, then "load"/"store" for memory operands
    width: int
    dest: str | None  # vector register written ("v3"), if any
    sources: tuple[str, ...]  # vector registers read


def _operands(text: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in text:
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    return out + ([cur.strip()] if cur.strip() else [])


def _vreg(operand: str) -> str | None:
    m = _REG.fullmatch(operand)
    return f"v{m.group(2)}" if m else None


def classify(line: str) -> Instruction:
    mnemonic, _, rest = line.strip().partition(" ")
    ops = _operands(rest)
    widths = [_WIDTH[k] for k, _ in _REG.findall(rest)]
    width = max(widths, default=128)
    mem_dest = bool(ops) and "(" in ops[-1]
    mem_src = any("(" in o for o in ops[:-1])
    found = MNEMONIC_CLASSES.get(mnemonic) or MNEMONIC_CLASSES.get(mnemonic.rstrip("bwlq"))
    if UNITS["vpclmulqdq"].match(mnemonic):
        found = {"clmul"}  # GNU as's vpclmul{l,h}q{l,h}qdq aliases
    if mnemonic.startswith("j"):
        base = "branch"
    elif found and found <= _MEMORY_CLASSES:
        base = "store" if mem_dest else "load" if mem_src else "move"
    elif found:
        base = sorted(found - _MEMORY_CLASSES)[0]
    elif widths:
        raise BuildError(f"the port model has no class for '{mnemonic}' ({line.strip()})")
    else:
        base = "gpr"  # dec, inc and other scalar bookkeeping
    classes = [base]
    if mem_src and base not in ("load", "gpr"):
        classes.append("load")
    if mem_dest and base not in ("store", "gpr"):
        classes.append("store")
    regs = [_vreg(o) for o in ops]
    dest = regs[-1] if regs else None
    read = [r for r in regs[:-1] if r]
    if dest and (not mnemonic.startswith("v") or mnemonic in _ALWAYS_TIED):
        read.append(dest)  # two-operand SSE forms and ternlog read their destination
    if base == "store":
        dest, read = None, [r for r in regs if r]
    return Instruction(line.strip(), mnemonic, tuple(classes), width, dest, tuple(read))


@dataclass(frozen=True)
class PortClass:
    name: str
    pipes: tuple[str, ...]
    latency: float
    throughput: float  # reciprocal, over all its pipes
    source: str
    unit: str | None = None  # a unit behind the pipes, busy `throughput` cycles (pipes: 1 cycle)

    def demands(self) -> list[tuple[frozenset[str], float]]:
        """(pipes any of which can serve it, cycles) per instruction."""
        if not self.pipes:
            return []  # eliminated at rename (register moves)
        if self.unit:
            return [(frozenset(self.pipes), 1.0), (frozenset({self.unit}), self.throughput)]
        return [(frozenset(self.pipes), self.throughput * len(self.pipes))]


@dataclass(frozen=True)
class PortTable:
    target: str
    issue_width: int
    reorder_buffer: int
    source: str
    classes: dict

    def port_class(self, target: Target, name: str, width: int) -> PortClass:
        entry = self.classes.get(f"{name}_{width}") or self.classes.get(name)
        if entry is None:
            raise BuildError(f"target {self.target} has no port entry for {name} at {width} bits")
        if name in COSTED_BY_INSTRUCTIONS:
            latency, throughput = _instruction_cost(target, COSTED_BY_INSTRUCTIONS[name], width)
        else:
            latency, throughput = float(entry["latency"]), float(entry["throughput"])
        return PortClass(name, tuple(entry["pipes"]), latency, throughput, entry.get("source", ""),
                         entry.get("unit"))


def _instruction_cost(target: Target, instruction: str, width: int) -> tuple[float, float]:
    """Target.cost at `width`; a width the table lacks takes the nearest listed one (an estimate,
    docs/costmodel.md)."""
    for w in sorted((128, 256, 512), key=lambda w: (abs(w - width), -w)):
        try:
            return target.cost(instruction, w)
        except TargetError:
            continue
    raise BuildError(f"target {target.name} has no cost for {instruction}")


def port_table(target: Target) -> PortTable:
    """The target's port table (a target may borrow another's core: `ports_from`)."""
    raw = dict(target.ports)
    if "ports_from" in raw:
        raw = {**targets()[raw.pop("ports_from")].ports, **raw}
    if not raw:
        raise BuildError(f"target {target.name} has no [ports] table")
    meta = {"issue_width", "reorder_buffer", "source", "ports_from"}
    return PortTable(target.name, int(raw["issue_width"]), int(raw["reorder_buffer"]), raw.get("source", ""),
                     {k: v for k, v in raw.items() if k not in meta})


@dataclass(frozen=True)
class Prediction:
    cycles: float  # per iteration
    port_bound: float
    issue_bound: float
    recurrence: float
    window_bound: float
    busiest: tuple[str, ...]  # the pipe set of the port bound
    busiest_classes: tuple[str, ...]  # the classes loading it
    mix: dict  # class -> instructions of it in the loop

    @property
    def bound(self) -> str:
        """Which term sets the prediction."""
        terms = {"ports": self.port_bound, "issue": self.issue_bound, "recurrence": self.recurrence,
                 "window": self.window_bound}
        return max(terms, key=terms.get)

    def explain(self) -> str:
        return (f"{self.cycles:.1f} cycles/iteration, bound by {self.bound}; busiest pipes "
                f"{'+'.join(self.busiest)} ({', '.join(self.busiest_classes)}) at {self.port_bound:.1f}; "
                f"issue {self.issue_bound:.1f}, recurrence {self.recurrence:.1f}, window {self.window_bound:.1f}")


def port_bound(demands: list[tuple[frozenset[str], float, str]]) -> tuple[float, tuple[str, ...], tuple[str, ...]]:
    """max over unions S of demand pipe sets of (cycles of demands inside S) / |S|."""
    sets = sorted({d[0] for d in demands}, key=sorted)
    best = (0.0, (), ())
    for n in range(1, len(sets) + 1):
        for combo in combinations(sets, n):
            union = frozenset().union(*combo)
            inside = [(c, name) for pipes, c, name in demands if pipes <= union]
            load = sum(c for c, _ in inside) / len(union)
            if load > best[0] + 1e-9:
                best = (load, tuple(sorted(union)), tuple(sorted({name for _, name in inside})))
    return best


def predict(target: Target, loop_instructions: list[str]) -> Prediction:
    table = port_table(target)
    insns = [classify(line) for line in loop_instructions]
    demands, mix, latency, operand_ready = [], {}, {}, {}
    for ins in insns:
        for name in ins.classes:
            pc = table.port_class(target, name, ins.width)
            demands += [(pipes, c, name) for pipes, c in pc.demands()]
            mix[name] = mix.get(name, 0) + 1
        latency[id(ins)] = table.port_class(target, ins.classes[0], ins.width).latency
        # a memory operand (round key, constant, input block) is loaded from time 0, off any chain
        operand_ready[id(ins)] = table.port_class(target, "load", ins.width).latency \
            if "load" in ins.classes[1:] else 0.0
    ports, busiest, classes = port_bound(demands)
    fused = sum(1 for a, b in zip(insns, insns[1:]) if b.mnemonic.startswith("j")
                and a.mnemonic.startswith(_FUSES_WITH_BRANCH))
    issue = (len(insns) - fused) / table.issue_width
    done = _schedule(insns, latency, operand_ready)
    retire, running = [], 0.0
    for t in done:
        running = max(running, t)
        retire.append(running)
    window = sum(retire) / table.reorder_buffer
    recurrence = _recurrence(insns, latency)
    cycles = max(ports, issue, recurrence, window)
    return Prediction(cycles, ports, issue, recurrence, window, busiest, classes, dict(sorted(mix.items())))


def _schedule(insns: list[Instruction], latency: dict, operand_ready: dict) -> list[float]:
    """Completion time of each instruction of one iteration alone, all issued at time 0."""
    ready: dict[str, float] = {}
    done = []
    for ins in insns:
        t = max([operand_ready[id(ins)], *(ready.get(r, 0.0) for r in ins.sources)]) + latency[id(ins)]
        if ins.dest:
            ready[ins.dest] = t
        done.append(t)
    return done


def _recurrence(insns: list[Instruction], latency: dict) -> float:
    """The longest path from a register's value at the top of the loop to its next value."""
    written = {i.dest for i in insns if i.dest}
    longest = 0.0
    for reg in written:
        ready: dict[str, float] = {reg: 0.0}
        for ins in insns:
            on_chain = [ready[r] for r in ins.sources if r in ready]
            if ins.dest:
                if on_chain:
                    ready[ins.dest] = max(on_chain) + latency[id(ins)]
                else:
                    ready.pop(ins.dest, None)
        # a register rewritten from scratch (a load, a fresh counter) carries nothing
        if reg in ready and _reads_before_write(insns, reg):
            longest = max(longest, ready[reg])
    return longest


def _reads_before_write(insns: list[Instruction], reg: str) -> bool:
    for ins in insns:
        if reg in ins.sources:
            return True
        if ins.dest == reg:
            return False
    return False


def blocks_per_iteration(width: int, depth: int) -> int:
    """The block modes' main loops: depth vectors of width/128 blocks each."""
    return depth * width // 128


def knee(throughput_by_depth: dict[int, float]) -> int | None:
    """The smallest depth within KNEE_SHARE of the best throughput."""
    if not throughput_by_depth:
        return None
    best = max(throughput_by_depth.values())
    return min(d for d, v in throughput_by_depth.items() if v >= KNEE_SHARE * best)


def spearman(xs: list[float], ys: list[float]) -> float | None:
    """Spearman's rank correlation (ties get their average rank); None below 3 points or with
    a constant side."""
    if len(xs) != len(ys) or len(xs) < 3:
        return None
    rx, ry = _ranks(xs), _ranks(ys)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    vx, vy = sum((a - mx) ** 2 for a in rx), sum((b - my) ** 2 for b in ry)
    return None if vx == 0 or vy == 0 else cov / (vx * vy) ** 0.5


def _ranks(values: list[float]) -> list[float]:
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return ranks
