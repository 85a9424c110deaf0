"""`aesgen bench halfgates`: AND gates per second and cycles per AND gate, garbling and evaluating.

Rows, all timed in one process, in rounds that visit every row once (so a neighbour or a clock change
moves them alike) for a burst of BURST calls after an untimed one, each a median with its 95% interval
(aesgen.bench.stats):
  - the kernels alone (P_halfgates_garble / _eval on GATES contiguous gates, and the _gather forms
    reading random offsets of a WIRES-label array) at every width and depth of the ISA that fits
    its registers: their hashes as a share of the AES ceiling measured here
    (garbling 4, evaluating 2 AES-128 calls per gate; the ceiling: vaesenc's throughput at that width);
  - the AES-128 circuit (aesgen.garbling.aes128) garbled and evaluated by the C driver, static and
    dynamic, batch 1 (the unbatched baseline: a kernel call per AND gate) up to a whole layer.
A circuit's time includes the driver (the XOR gates; the dynamic technique's walk over the gates and its
queue) and one ctypes call.
"""
from __future__ import annotations

import ctypes
import json
import random
import struct
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from rich.table import Table

from aesgen.bench.ceiling import Ceiling
from aesgen.bench.stats import Interval, median_interval, spread
from aesgen.ir import BuildError
from aesgen.spec import WIDTHS_BY_ISA, KernelSpec

from . import driver
from .aes128 import aes128_circuit

GATES = 8192  # gates per kernel call in the kernel rows (buffers: 640 KB, in L2; the ctypes call ~1 us)
WIRES = 2048  # the label array of the by-offset rows (32 KB, as a circuit's live wires: AES-128's 1,310)
WHOLE_LAYER = 1 << 20  # a batch size no layer reaches
FIXED_KEY = bytes(range(16))  # AES-128: 10 rounds
HASHES = {True: 4, False: 2}  # AES calls per AND gate: garbling, evaluating


@dataclass
class Row:
    what: str
    config: str
    batch: str
    ands: int                       # AND gates per timed call
    hashes: int                     # AES calls per AND gate
    width: int
    run: object = field(repr=False)  # () -> None, one timed call
    samples: list[float] = field(default_factory=list)  # TSC ticks per call (a burst's mean)

    def ticks(self) -> Interval:
        return median_interval(t / self.ands for t in self.samples)


def ceiling_ticks(ceiling: Ceiling, width: int, hashes: int) -> float | None:
    """TSC ticks per AND gate at the AES ceiling: `hashes` AES-128 blocks, 10 rounds each."""
    c = ceiling.cost("vaesenc", width)
    return None if c is None else hashes * 10 * c.throughput_ticks / (width // 128)


def kernel_rows(spec: KernelSpec) -> list[Row]:
    """The kernels alone, every width and depth of spec's ISA that builds (depths 1, 2, 4)."""
    rows = []
    for width in WIDTHS_BY_ISA[spec.isa]:
        for depth in (1, 2, 4):
            s = replace(spec, width=width, depth=depth)  # the rest as asked (backend, schedule, ...)
            try:
                k = driver.HalfGatesKernel(s, FIXED_KEY)
            except BuildError:
                continue  # more hashes in flight than the registers hold
            rows += [_kernel_row(k, garbler, f"{spec.isa} {width}x{depth}", gather)
                     for gather in (False, True) for garbler in (True, False)]
    return rows


def _kernel_row(k: driver.HalfGatesKernel, garbler: bool, config: str, gather: bool) -> Row:
    """The kernel on GATES gates: inputs in two arrays, or (gather) from WIRES labels at random offsets
    (the _gather functions take the label array and the offsets where the others take a and b)."""
    if gather:
        rng = random.Random(0)
        a = driver.aligned_buffer(16 * WIRES)
        b = driver.aligned_buffer(b"".join(struct.pack("<2I", 16 * rng.randrange(WIRES), 16 * rng.randrange(WIRES))
                                           for _ in range(GATES)))
    else:
        a, b = driver.aligned_buffer(16 * GATES), driver.aligned_buffer(16 * GATES)
    tables, out, delta = driver.aligned_buffer(32 * GATES), driver.aligned_buffer(16 * GATES), driver.aligned_buffer(b"\x01" * 16)
    P = ctypes.c_void_p
    what = f"{'garble' if garbler else 'eval'} kernel{', by offset' if gather else ''}"
    if garbler:
        fn = ctypes.CFUNCTYPE(None, P, P, P, P, ctypes.c_uint64, P, P, ctypes.c_size_t)(
            k.garble_gather_fn if gather else k.garble_fn)
        run = lambda: fn(ctypes.addressof(k.key), ctypes.addressof(delta), ctypes.addressof(a), ctypes.addressof(b),
                         0, ctypes.addressof(tables), ctypes.addressof(out), GATES)
    else:
        fn = ctypes.CFUNCTYPE(None, P, P, P, ctypes.c_uint64, P, P, ctypes.c_size_t)(
            k.eval_gather_fn if gather else k.eval_fn)
        run = lambda: fn(ctypes.addressof(k.key), ctypes.addressof(a), ctypes.addressof(b), 0,
                         ctypes.addressof(tables), ctypes.addressof(out), GATES)
    return Row(what, config, str(GATES), GATES, HASHES[garbler], k.spec.width, run)


def circuit_rows(spec: KernelSpec) -> list[Row]:
    k = driver.HalfGatesKernel(spec, FIXED_KEY)
    p = driver.Prepared.of(aes128_circuit())
    g = driver.garble(k, p, 1, "static", 64)
    group = spec.width // 128 * spec.depth
    config = f"{spec.isa} {spec.width}x{spec.depth}"
    rows = []
    for garbler in (True, False):
        for technique in driver.TECHNIQUES:
            for batch in dict.fromkeys((1, group, 4 * group, 8 * group, WHOLE_LAYER)):  # group 1: no repeats
                lay = p.by_technique[technique]
                labels = driver.aligned_buffer(16 * lay.nlabels)
                ctypes.memmove(labels, g.inputs0, len(g.inputs0))  # the evaluator's inputs: any labels do
                tables = driver.aligned_buffer(g.tables)
                delta = driver.aligned_buffer(g.delta) if garbler else None
                run, _ = driver.bound(k, p, garbler, labels, tables, delta, technique, batch)
                rows.append(Row(f"{'garble' if garbler else 'eval'} AES-128 {technique}", config,
                                "layer" if batch == WHOLE_LAYER else str(batch), p.circuit.and_count,
                                HASHES[garbler], spec.width, run))
    return rows


BURST = 8  # timed calls per sample, after one untimed call (warm caches, the wide vector unit powered up)


def measure(rows: list[Row], rounds: int, tsc_hz: float) -> None:
    for row in rows:  # warm up: code, the driver's build
        row.run()
    for _ in range(rounds):
        for row in rows:
            row.run()
            t0 = time.perf_counter_ns()
            for _ in range(BURST):
                row.run()
            row.samples.append((time.perf_counter_ns() - t0) * 1e-9 * tsc_hz / BURST)


def report(rows: list[Row], ceiling: Ceiling, rounds: int) -> list[dict]:
    out = []
    for row in rows:
        t = row.ticks()
        top = ceiling_ticks(ceiling, row.width, row.hashes)
        share = None if top is None else t.reciprocal(top)
        out.append({"what": row.what, "config": row.config, "batch": row.batch,
                    "mands_per_s": ceiling.tsc_hz / t.median / 1e6,
                    "ticks_per_and": spread(t.median, t.half_width, 1, rounds),
                    "cycles_per_and": t.median * ceiling.core_hz / ceiling.tsc_hz,
                    "ceiling_share": None if share is None else spread(100 * share.median, 100 * share.half_width, 0,
                                                                        rounds)})
    return out


def speedups(rows: list[Row]) -> list[str]:
    """Batched over unbatched, per circuit row group: the best batch's median over batch 1's."""
    lines = []
    for what in dict.fromkeys(r.what for r in rows if "AES-128" in r.what):
        group = [r for r in rows if r.what == what]
        base = next(r for r in group if r.batch == "1").ticks().median
        best = min(group, key=lambda r: r.ticks().median)
        lines.append(f"{what}: batch {best.batch} is {base / best.ticks().median:.2f}x batch 1")
    return lines


def run_bench(spec: KernelSpec, ceiling: Ceiling, rounds: int, console, json_path: Path | None = None) -> list[dict]:
    rows = kernel_rows(spec) + circuit_rows(spec)
    measure(rows, rounds, ceiling.tsc_hz)
    table = report(rows, ceiling, rounds)
    t = Table(title=f"half-gates, AES-128 fixed key: {rounds} sampling rounds, medians ±95% interval "
                    f"(TSC {ceiling.tsc_hz / 1e9:.2f} GHz, core {ceiling.core_hz / 1e9:.2f} GHz)")
    for col in ("what", "config", "batch", "M AND/s", "TSC ticks/AND", "cycles/AND", "% AES ceiling"):
        t.add_column(col, justify="left" if col in ("what", "config") else "right", no_wrap=True)
    for r in table:
        t.add_row(r["what"], r["config"], r["batch"], f"{r['mands_per_s']:.1f}", r["ticks_per_and"],
                  f"{r['cycles_per_and']:.1f}", f"{r['ceiling_share']}%" if r["ceiling_share"] else "n/a")
    console.print(t)
    for line in speedups(rows):
        console.print(line)
    if json_path:
        json_path.write_text(json.dumps({"schema": "aesgen-halfgates-bench/1", "rows": table}, indent=1))
    return table
