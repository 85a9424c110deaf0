"""The static technique compiled: the circuit's level order (layers.py) as C code, a function per segment.

A segment is a run of linear steps and the run of AND gates after it (in the level order: the linear
gates of one AND depth, then the AND gates of the next). Free-XOR makes every linear wire's label a
XOR of labels the circuit already has: the inputs', the AND outputs' and delta's (an INV gate XORs
delta for the garbler, zero for the evaluator). A linear wire is a step (a "sum") only where its value
is needed as such (`stored`): an AND gate or an output reads it, two gates or more do, or its sum has
more than MAX_TERMS terms; any other linear wire (one linear gate reads it) is folded into its
reader's sum. A term that appears twice cancels. A sum that only its own segment's sums read is a C
variable, never stored; the others (an AND gate's inputs among them) are stored to labels.

The C code reads and writes labels at constant offsets, and calls driver.c's and_run, which hands the
_gather kernel `batch` gates at a time as their inputs are ready (READY): they read their input labels
from the label array by byte offset (a constant table per segment) and write their outputs in place
(a run's AND gates take consecutive labels). The kernel's loads overlap its rounds, where the driver's
copying into batch buffers used to be code of its own: the AES-128 circuit's driver code is 17%
smaller for it, and an instruction stream this long (some 360 KB, run once per circuit) is fetched,
not cached. Labels are
reused: one is free after its last reader, taken again from the next segment on (a sum takes the latest
freed, an AND run the lowest free range), so the labels in use stay few and in the cache (the AES-128
circuit: 1,310 labels, 21 KB, for its 31,112 wires) and a segment's steps may run in any order that keeps
their dependencies. The labels are those of the gate-by-gate order (XOR is associative), so the
tables are too.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from .bristol import Bristol
from .layers import Levels

MAX_TERMS = 8  # a longer sum is stored, and what reads it starts again from one term
# A segment's AND gates may go to the kernel in runs as their inputs are ready, every READY_EVERY
# of them: a kernel call then runs its rounds while the sums after it are fetched and run (the
# driver's code is read once per circuit, from L2, and the kernel keeps only the AES port busy).
READY_EVERY = 8
ZERO, DELTA = -1, -2  # the wires of zero and delta (driver.c sets their labels)


def stored(c: Bristol) -> set[int]:
    """The wires whose labels are needed as such, whatever their sums: inputs, AND inputs and outputs,
    wires two gates or more read, and the circuit's outputs."""
    readers: Counter[int] = Counter()
    keep = set(range(sum(c.inputs))) | set(c.output_wires)
    for g in c.gates:
        for w in set(g.ins):
            readers[w] += 1
        if g.op == "AND":
            keep.update((*g.ins, g.out))
    return keep | {w for w, n in readers.items() if n > 1}


def steps(c: Bristol, lv: Levels) -> list[tuple[str, int, tuple[int, ...]]]:
    """("sum", out wire, terms) and ("and", out wire, (a, b)) in level order; terms are wires, ZERO or
    DELTA. Wires no step reads and no output needs are dropped."""
    keep = stored(c)
    expr: dict[int, frozenset[int]] = {}

    def term(w: int) -> frozenset[int]:
        return expr.get(w, frozenset((w,)))

    out: list[tuple[str, int, tuple[int, ...]]] = []
    for k in lv.order:
        g = c.gates[k]
        if g.op == "AND":
            out.append(("and", g.out, (g.ins[0], g.ins[1])))
            continue
        e = term(g.ins[0]) ^ (term(g.ins[1]) if g.op == "XOR" else frozenset((DELTA,)) if g.op == "INV"
                              else frozenset())
        if g.out in keep or len(e) > MAX_TERMS:
            out.append(("sum", g.out, tuple(sorted(e)) or (ZERO,)))
        else:
            expr[g.out] = e
    return out


def segment_numbers(work: list[tuple[str, int, tuple[int, ...]]]) -> list[int]:
    """Per step, its segment: a run of sums and the run of AND gates after it."""
    out, n = [], 0
    for k, (kind, _, _) in enumerate(work):
        n += kind == "sum" and k > 0 and work[k - 1][0] == "and"
        out.append(n)
    return out


def contiguous(free: list[int], n: int, top: int) -> tuple[int, int]:
    """n consecutive labels for an AND run (the kernel writes its outputs in place): the lowest run of
    free ones, taken out of `free`, else from `top` on; (the first label, the new top)."""
    have = set(free)
    for start in sorted(have):
        if start - 1 not in have and all(start + k in have for k in range(n)):
            taken = set(range(start, start + n))
            free[:] = [x for x in free if x not in taken]
            return start, top
    return top, top + n


@dataclass(frozen=True)
class Segment:
    """Sums (dst, terms), then AND gates (out, a, b) with ids first, first + 1, ...: their outputs are
    consecutive labels. A ref is a label (>= 0) or, ~n, the nth value no other segment reads (C's
    v<n>, never stored)."""

    sums: tuple[tuple[int, tuple[int, ...]], ...]
    ands: tuple[tuple[int, int, int], ...]
    first: int

    def lines(self, ref) -> list[str]:
        """The sums as C statements, depth first: each AND gate's inputs right after the sums they
        need, a sum kept for later segments (stored) as soon as its terms are there, so the values
        in flight stay few and in registers; every READY_EVERY AND gates a READY(k): the first k
        have their inputs (the kernel may take them while the sums go on). (Any order of a
        segment's steps that keeps their dependencies is valid: a label freed in a segment is taken
        only in a later one.)"""
        made = {dst: k for k, (dst, _) in enumerate(self.sums)}
        done: set[int] = set()
        out: list[str] = []

        users: dict[int, list[int]] = {}  # sum -> the sums it is a term of
        missing = []  # per sum: its terms' sums not yet emitted
        for k, (_, terms) in enumerate(self.sums):
            mine = {made[t] for t in terms if t in made}
            missing.append(len(mine))
            for d in mine:
                users.setdefault(d, []).append(k)

        def emit(k: int) -> None:
            if k in done:
                return
            done.add(k)  # before its terms: their eager users must not emit it again
            dst, terms = self.sums[k]
            for t in terms:
                if t in made:
                    emit(made[t])
            v = ref(terms[0])
            for t in terms[1:]:
                v = f"_mm_xor_si128({v}, {ref(t)})"
            out.append(f"ST({dst}, {v})" if dst >= 0 else f"__m128i v{~dst} = {v}")
            for u in users.get(k, ()):  # a stored sum as soon as its terms are there: they die sooner
                missing[u] -= 1
                if not missing[u] and self.sums[u][0] >= 0:
                    emit(u)

        for i, (_, a, b) in enumerate(self.ands):
            for x in (a, b):
                if x in made:
                    emit(made[x])
            if (i + 1) % READY_EVERY == 0 and i + 1 < len(self.ands):
                out.append(f"READY({i + 1})")
        for k in range(len(self.sums)):
            emit(k)
        return out


@dataclass(frozen=True)
class Program:
    """The static work list as segments over `nlabels` labels: the circuit's inputs first, then zero
    and delta (ZERO_LABEL, ZERO_LABEL + 1: driver.c sets them); the circuit's outputs are the labels
    `outputs`."""

    segments: tuple[Segment, ...]
    nlabels: int
    outputs: tuple[int, ...]
    zero: int

    @classmethod
    def of(cls, c: Bristol, lv: Levels) -> "Program":
        work = steps(c, lv)
        seg = segment_numbers(work)
        readers: dict[int, set[int]] = {}
        for n, (_, _, ins) in enumerate(work):
            for x in ins:
                readers.setdefault(x, set()).add(seg[n])
        outs = set(c.output_wires)
        and_inputs = {x for kind, _, ins in work if kind == "and" for x in ins}  # the kernel reads them as labels
        local = {w: v for v, w in enumerate(w for n, (kind, w, _) in enumerate(work)
                                            if kind == "sum" and w not in outs and w not in and_inputs
                                            and readers.get(w, set()) <= {seg[n]})}
        last = {w: n for n, (_, _, ins) in enumerate(work) for w in ins}
        last.update({w: len(work) for w in (*outs, ZERO, DELTA)})  # never freed
        at = {w: w for w in range(sum(c.inputs))}
        at[ZERO], at[DELTA] = sum(c.inputs), sum(c.inputs) + 1  # read by INV gates (and sums that cancel)
        free: list[int] = []
        top = sum(c.inputs) + 2
        labelled = []
        # Free labels, by what they were taken for: a sum takes one (the latest freed), an AND run a
        # range (the kernel writes its outputs in place); an AND run's labels mostly fall free together,
        # so keeping sums out of them keeps the ranges whole, and the labels in use few.
        free_and: list[int] = []
        run_labels: set[int] = set()
        freed: list[int] = []  # free from the next segment on: a segment's steps may run in any order
        run = iter(())  # the labels of the current AND run's outputs
        ands_in = Counter(s for (kind, _, _), s in zip(work, seg) if kind == "and")
        for n, (kind, w, ins) in enumerate(work):
            if n and seg[n] != seg[n - 1]:
                free += [x for x in freed if x not in run_labels]
                free_and += [x for x in freed if x in run_labels]
                freed = []
            got = tuple(~local[x] if x in local else at[x] for x in ins)
            for x in set(ins):
                if last.get(x) == n and x in at:
                    freed.append(at.pop(x))
            if w in local:
                labelled.append((kind, ~local[w], got))
                continue
            if kind == "and" and (n == 0 or work[n - 1][0] != "and"):
                start, top = contiguous(free_and, ands_in[seg[n]], top)
                run = iter(range(start, start + ands_in[seg[n]]))
                run_labels.update(range(start, start + ands_in[seg[n]]))
            if kind == "and":
                at[w] = next(run)
            elif free:
                at[w] = free.pop()
            else:
                at[w], top = top, top + 1
            labelled.append((kind, at[w], got))
        segments: list[Segment] = []
        first = 0
        for n in range(seg[-1] + 1 if work else 0):
            mine = [step for step, s in zip(labelled, seg) if s == n]
            ands = tuple((w, *ins) for kind, w, ins in mine if kind == "and")
            if any(o != ands[0][0] + k for k, (o, _, _) in enumerate(ands)):
                raise AssertionError("a run's AND outputs are not consecutive labels")
            segments.append(Segment(tuple((w, ins) for kind, w, ins in mine if kind == "sum"), ands, first))
            first += len(ands)
        return cls(tuple(segments), top, tuple(at[w] for w in c.output_wires), at[ZERO])

    def c_source(self, runtime: str) -> str:
        """driver.c (`runtime`) with the circuit compiled in (its `circuit`): a function per segment
        whose sums and gathers are loads and stores at constant label indices, or values in variables."""
        def ref(r: int) -> str:
            return f"LD({r})" if r >= 0 else f"v{~r}"

        out = ["/* generated by aesgen.garbling.program */", "#define CIRCUIT 1", f"#define ZERO_LABEL {self.zero}",
               runtime]
        for n, s in enumerate(self.segments):
            if s.ands:  # the AND gates' input labels as byte offsets, for the _gather kernels
                offsets = ", ".join(f"{16 * a}, {16 * b}" for _, a, b in s.ands)
                out.append(f"static const uint32_t in{n}[] = {{{offsets}}};")
            out.append(f"static void segment{n}(engine *e) {{")
            out.append("    uint8_t *restrict L = e->labels;")
            if s.ands:
                out.append(f"    const uint32_t *in = in{n}; const uint64_t first = {s.first}; const size_t out = "
                           f"{s.ands[0][0]}; size_t issued = 0;")
            out.append("    (void)L;")
            out += [f"    {line};" for line in s.lines(ref)]
            if s.ands:
                out.append(f"    and_run(e, in, first, issued, {len(s.ands)}, out);")
            out.append("}")
        out.append("static void circuit(engine *e) {")
        out += [f"    segment{n}(e);" for n in range(len(self.segments))]
        out.append("}")
        return "\n".join(out) + "\n"
