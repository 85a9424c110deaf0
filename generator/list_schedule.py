"""List scheduling of a GroupBlock: the groups' rounds, the riders and the closing ops ordered
by a cycle-by-cycle simulation of the target's ports, instead of in lockstep.

`schedule.interleave` (lockstep) is the reference order: it is correct by construction and
`check_order` proves it. The list scheduler builds the dependences of that order, then
issues instructions cycle by cycle:

- an instruction is ready once every producer has issued and its latency has passed;
- each cycle takes up to the target's issue width of ready instructions, each on a free pipe
  of its port class (a pipe stays busy for the class's reciprocal throughput times its pipe
  count, as in perfmodel), a memory source adding nothing but its load latency;
- among the ready ones the longest latency path to the block's end goes first (a GHASH
  reduction chain or a tweak chain starts as early as its inputs allow), ties in the
  reference order;
- register pressure: an instruction that would make more values live than the register file
  leaves for temporaries waits while another can issue.

Dependences kept: vector values (read after write, and for values written more than once,
such as pinned accumulators, write after read and after write); general-purpose registers
and masks named by any operand (every scalar instruction also stays in order with every
other, flags included); memory: a store stays in order with every other memory access (loads
among themselves may pass each other). Whatever aliasing the pointers have (in == out), the
stores and loads keep their reference order relative to each other.
"""
from __future__ import annotations

from dataclasses import dataclass

from .ir import BuildError, GroupBlock, Insn, Mem, VReg
from .ops import info
from .perfmodel import port_table
from .schedule import check_order, interleave
from .target import Target

LOAD_LATENCY = 5.0  # a memory source's extra latency where the table has no `load` entry


@dataclass(frozen=True)
class Costs:
    """Per port class and width: (pipes, latency, cycles a pipe stays busy); and the issue width."""
    issue_width: int
    classes: dict

    def of(self, port: str, width: int) -> tuple[tuple[str, ...], float, float]:
        return self.classes.get((port, width)) or self.classes.get((port, 0)) or ((), 1.0, 0.0)


def target_costs(target: Target) -> Costs:
    """The target's port table (perfmodel) as the scheduler reads it."""
    table = port_table(target)
    classes = {}
    for key in table.classes:
        name, _, suffix = key.partition("_")
        width = int(suffix) if suffix.isdigit() else 0
        for w in ((width,) if width else (0, 128, 256, 512)):
            if (name, w) in classes and not width:
                continue
            try:
                pc = table.port_class(target, name, w or 128)
            except BuildError:  # an instruction the target lacks (Zen 3: GFNI): nothing to schedule
                continue
            busy = pc.throughput * len(pc.pipes) if pc.pipes else 0.0
            classes[(name, w)] = (pc.pipes, pc.latency, busy)
    return Costs(table.issue_width, classes)


def _resources(insn: Insn) -> tuple[set[str], set[str]]:
    """Named registers (GPRs, masks) an instruction reads and writes."""
    reads: set[str] = set()
    writes: set[str] = set()
    for s in insn.srcs:
        if isinstance(s, str):
            reads.add(s)
        elif isinstance(s, Mem):
            reads.update(r for r in (s.base, s.index) if r)
    if isinstance(insn.dst, str):
        writes.add(insn.dst)
    elif isinstance(insn.dst, Mem):
        reads.update(r for r in (insn.dst.base, insn.dst.index) if r)
    if insn.mask:
        reads.add(insn.mask)
    return reads, writes


def _stores(insn: Insn) -> bool:
    return isinstance(insn.dst, Mem) or info(insn.op).memory == "write"


def _loads(insn: Insn) -> bool:
    return any(isinstance(s, Mem) for s in insn.srcs)


def dependences(order: list[Insn]) -> list[set[int]]:
    """For each instruction of `order`, the indices of the earlier ones it must follow."""
    preds: list[set[int]] = [set() for _ in order]
    writer: dict[object, int] = {}
    readers: dict[object, list[int]] = {}
    last_scalar = last_store = None
    memory_since_store: list[int] = []
    for n, insn in enumerate(order):
        reads, writes = _resources(insn)
        read_keys = [("v", s.id) for s in insn.srcs if isinstance(s, VReg)] + [("r", r) for r in reads]
        write_keys = ([("v", insn.dst.id)] if isinstance(insn.dst, VReg) else []) + [("r", w) for w in writes]
        for k in read_keys:
            if k in writer:
                preds[n].add(writer[k])
        for k in write_keys:
            if k in writer:
                preds[n].add(writer[k])
            preds[n].update(readers.get(k, ()))
        for k in read_keys:
            readers.setdefault(k, []).append(n)
        for k in write_keys:
            writer[k], readers[k] = n, []
        if not info(insn.op).vector:  # flags and whatever else a scalar op touches: in order
            if last_scalar is not None:
                preds[n].add(last_scalar)
            last_scalar = n
        if _stores(insn):
            preds[n].update(memory_since_store)
            if last_store is not None:
                preds[n].add(last_store)
            last_store, memory_since_store = n, []
        elif _loads(insn):
            if last_store is not None:
                preds[n].add(last_store)
            memory_since_store.append(n)
        preds[n].discard(n)
    return preds


def list_schedule(block: GroupBlock, costs: Costs, registers: int) -> list[Insn]:
    """The block's instructions in list-scheduled order; `registers`: vector registers free for the
    block's temporaries (the allocator still decides, and may refuse)."""
    order = interleave(block)
    preds = dependences(order)
    succs: list[list[int]] = [[] for _ in order]
    for n, ps in enumerate(preds):
        for p in ps:
            succs[p].append(n)
    latency = [_latency(insn, costs) for insn in order]
    height = [0.0] * len(order)
    for n in reversed(range(len(order))):
        height[n] = latency[n] + max((height[s] for s in succs[n]), default=0.0)
    # The temporaries each instruction reads that are defined in the block: their definers.
    defined_at: dict[int, int] = {}
    sources: list[list[int]] = []
    for n, insn in enumerate(order):
        sources.append(list(dict.fromkeys(defined_at[s.id] for s in insn.srcs if isinstance(s, VReg)
                                          and not s.pinned and s.id in defined_at)))
        if isinstance(insn.dst, VReg) and not insn.dst.pinned:
            defined_at[insn.dst.id] = n
    uses = [0] * len(order)  # readers not yet scheduled, per defining instruction
    for srcs in sources:
        for d in srcs:
            uses[d] += 1
    grows = [isinstance(i.dst, VReg) and not i.dst.pinned for i in order]
    waiting = [len(p) for p in preds]
    ready_at = [0.0] * len(order)
    pipe_free: dict[str, float] = {}
    done: list[int] = []
    live, cycle = 0, 0.0
    candidates = {n for n in range(len(order)) if not waiting[n]}

    def issue(n: int) -> None:
        nonlocal live
        candidates.discard(n)
        done.append(n)
        live += int(grows[n]) - sum(1 for d in sources[n] if uses[d] == 1)
        for d in sources[n]:
            uses[d] -= 1
        for s in succs[n]:
            waiting[s] -= 1
            ready_at[s] = max(ready_at[s], cycle + latency[n])
            if not waiting[s]:
                candidates.add(s)

    while candidates:
        ready = sorted((c for c in candidates if ready_at[c] <= cycle), key=lambda c: (-height[c], c))
        issued, held = 0, []
        for n in ready:
            if issued == costs.issue_width:
                break
            frees = sum(1 for d in sources[n] if uses[d] == 1)
            if grows[n] and live + 1 - frees > registers:
                held.append(n)  # would need one register more than the file leaves
                continue
            pipes, _, busy = costs.of(info(order[n].op).port, order[n].width)
            free = [p for p in pipes if pipe_free.get(p, 0.0) <= cycle]
            if pipes and not free:
                continue
            if pipes:
                pipe_free[min(free, key=lambda p: (pipe_free.get(p, 0.0), p))] = cycle + max(busy, 1.0)
            issue(n)
            issued += 1
        if not issued and held and not any(ready_at[c] > cycle for c in candidates):
            issue(held[0])  # only register-hungry work is left: take the most urgent
        cycle += 1.0
    if len(done) != len(order):
        raise BuildError(f"internal: list schedule left {len(order) - len(done)} instructions in {block.comment}")
    out = [order[n] for n in done]
    check_order(out, block.comment)
    return out


def _latency(insn: Insn, costs: Costs) -> float:
    """The instruction's latency; a memory source (other than a load's own) adds the load's."""
    _, lat, _ = costs.of(info(insn.op).port, insn.width)
    if _loads(insn) and info(insn.op).memory != "read":
        lat += costs.of("load", insn.width)[1] or LOAD_LATENCY
    return lat
