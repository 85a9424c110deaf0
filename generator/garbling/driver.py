"""Garble and evaluate a Bristol circuit with a generated half-gates kernel, batched two ways.

The gate loop is C (driver.c, built on the fly like the verifier's objects), called through ctypes:
for the static technique the circuit compiled into it (program.py; built once per circuit, cached by
its text), for the dynamic one the circuit's arrays, prepared once (`Prepared`). `technique` is "static" (AND-depth
layers, layers.py) or "dynamic" (deferred execution); `batch` is the most AND gates per kernel call
(1: the unbatched baseline, one kernel call per gate). The tables and labels do not depend on either.

Decoding: an output wire's value is the lowest bit of the evaluator's label XOR that of its 0-label
(the point-and-permute bit).
"""
from __future__ import annotations

import ctypes
import random
from array import array
from dataclasses import dataclass, field
from collections.abc import Callable
from functools import cache, partial
from pathlib import Path

from aesgen.pipeline import generate
from aesgen.spec import KernelSpec
from aesgen.bench.build import build_so_from_text
from aesgen.verify.build import build_shared

from .bristol import Bristol
from .layers import Levels, levels
from .program import Program

OPS = {"XOR": 0, "AND": 1, "INV": 2, "EQW": 3}
TECHNIQUES = ("static", "dynamic")
LEVEL_ORDER_LABELS = False
SOURCE = Path(__file__).with_name("driver.c")
P, SZ = ctypes.c_void_p, ctypes.c_size_t


@cache
def driver_lib() -> ctypes.CDLL:
    """driver.c alone: the dynamic technique."""
    lib = ctypes.CDLL(str(build_shared(SOURCE)))
    lib.gc_dynamic.restype = ctypes.c_int64
    lib.gc_dynamic.argtypes = [ctypes.c_int, P, P, P, P, P, P, P, P, P, P, SZ, SZ, SZ, ctypes.POINTER(ctypes.c_uint64)]
    return lib


def compiled(program: Program) -> ctypes.CDLL:
    """driver.c with the circuit compiled in (program.py): the static technique. Cached by its text."""
    # -Os: the code runs once per pass, so its size (the instruction fetch) costs more than its speed
    lib = ctypes.CDLL(str(build_so_from_text(program.c_source(SOURCE.read_text()), "circuit", ".c", ("-Os",))))
    lib.gc_static.restype = ctypes.c_int64
    lib.gc_static.argtypes = [ctypes.c_int, P, P, P, P, P, SZ]
    return lib


def aligned_buffer(data: bytes | int) -> ctypes.Array:
    """A 64-byte aligned writable buffer (its first bytes `data`, or `data` zero bytes)."""
    size = data if isinstance(data, int) else len(data)
    raw = ctypes.create_string_buffer(size + 64)
    off = (-ctypes.addressof(raw)) % 64
    view = (ctypes.c_char * max(size, 1)).from_buffer(raw, off)
    if not isinstance(data, int):
        ctypes.memmove(view, data, size)
    view._keep = raw  # type: ignore[attr-defined]
    return view


@dataclass(frozen=True)
class Layout:
    """The gate arrays of one technique (op, in0, in1, out: label indices; AND id) and its labels:
    `nlabels` of them, the two last zero and delta (driver.c); the circuit's input wires are labels
    0 .. ninputs-1, its output wires the labels `outputs`."""

    arrays: tuple
    nlabels: int
    outputs: tuple[int, ...]

    @classmethod
    def of(cls, c: Bristol, gates: list[int], label: dict[int, int], nlabels: int, and_id: tuple[int, ...],
           outs: list[int]) -> "Layout":
        """`label` maps (gate index, operand) to label indices: operand 0, 1 the inputs, 2 the output."""
        zero, delta = nlabels, nlabels + 1
        gs = [(k, c.gates[k]) for k in gates]
        second = [{"INV": delta, "EQW": zero}.get(g.op) for _, g in gs]  # INV: ^ delta (or 0), EQW: ^ 0
        return cls((array("B", (OPS[g.op] for _, g in gs)), array("i", (label[k, 0] for k, _ in gs)),
                    array("i", (label[k, 1] if s is None else s for (k, _), s in zip(gs, second))),
                    array("i", (label[k, 2] for k, _ in gs)), array("q", (and_id[k] for k in gates))),
                   nlabels + 2, tuple(outs))

    def pointers(self) -> list[int]:
        return [a.buffer_info()[0] for a in self.arrays]


def renamed(c: Bristol, lv: Levels, level_order: bool) -> Layout:
    """A label per wire, numbered as the circuit numbers its wires or (level_order) in level order,
    the inputs first: a layer's AND outputs are then consecutive labels. Any execution order may
    use it (dynamic: circuit order)."""
    wire = list(range(c.nwires))
    if level_order:
        for n, k in enumerate(lv.order):
            wire[c.gates[k].out] = sum(c.inputs) + n
    label = {(k, i): wire[w] for k, g in enumerate(c.gates) for i, w in enumerate((g.ins[0], g.ins[-1], g.out))}
    return Layout.of(c, list(range(len(c.gates))), label, c.nwires, lv.and_id, [wire[w] for w in c.output_wires])


@dataclass(frozen=True)
class Prepared:
    """A circuit as the C driver reads it, per technique: static runs program.py's sums and AND runs
    in level order on reused labels, dynamic the circuit order on a label per wire."""

    circuit: Bristol
    levels: Levels
    by_technique: dict[str, Program | Layout]
    libs: dict[str, ctypes.CDLL] = field(default_factory=dict)  # built on first use

    @classmethod
    def of(cls, c: Bristol) -> "Prepared":
        if any(g.op == "EQ" for g in c.gates):
            raise ValueError("EQ (constant) gates are not garbled here")
        lv = levels(c)
        return cls(c, lv, {"static": Program.of(c, lv), "dynamic": renamed(c, lv, LEVEL_ORDER_LABELS)})

    def static_lib(self) -> ctypes.CDLL:
        lib = self.libs.get("static")
        if lib is None:
            lib = self.libs["static"] = compiled(self.by_technique["static"])  # type: ignore[arg-type]
        return lib

    @property
    def ninputs(self) -> int:
        return sum(self.circuit.inputs)

    @property
    def ands(self) -> int:
        return sum(self.levels.layer_sizes)


class HalfGatesKernel:
    """A generated file with the halfgates mode, built and loaded; its fixed key expanded."""

    def __init__(self, spec: KernelSpec, fixed_key: bytes) -> None:
        self.lib = ctypes.CDLL(str(build_so_from_text(generate(spec).asm, f"halfgates-{spec.prefix}")))
        self.spec = spec
        fn = {name: ctypes.cast(getattr(self.lib, spec.symbol(name)), P).value
              for name in ("halfgates_garble", "halfgates_eval", "halfgates_garble_gather", "halfgates_eval_gather")}
        self.garble_fn, self.eval_fn = fn["halfgates_garble"], fn["halfgates_eval"]  # inputs contiguous
        self.garble_gather_fn, self.eval_gather_fn = fn["halfgates_garble_gather"], fn["halfgates_eval_gather"]
        self.key = aligned_buffer(spec.key_bytes)
        setup = getattr(self.lib, spec.symbol("set_encrypt_key"))
        setup.argtypes = [P, ctypes.c_uint, P]
        if setup(bytes(fixed_key), 8 * len(fixed_key), self.key) != 0:
            raise ValueError(f"fixed key of {8 * len(fixed_key)} bits refused")


@dataclass
class Garbled:
    delta: bytes
    inputs0: bytes      # the input wires' 0-labels
    outputs0: bytes     # the output wires' 0-labels
    tables: bytes       # 32 bytes per AND gate, by id
    calls: int          # kernel calls
    flushes: int        # dynamic: queue flushes


def bound(kernel: HalfGatesKernel, p: Prepared, garbler: bool, labels: ctypes.Array, tables: ctypes.Array,
          delta: ctypes.Array | None, technique: str, batch: int) -> tuple[Callable[[], int], ctypes.c_uint64]:
    """One pass of the C driver over the circuit as a call with its arguments resolved (what the bench
    times: the driver and one ctypes call), returning the kernel calls (< 0: out of memory); and
    where the dynamic technique counts its flushes."""
    if batch < 1 or technique not in TECHNIQUES:
        raise ValueError(f"batch {batch}, technique {technique!r}: a batch of 1 gate or more, one of {TECHNIQUES}")
    flushes = ctypes.c_uint64()
    lay = p.by_technique[technique]
    batch = min(batch, max(1, p.ands))  # buffers: no larger
    fn = kernel.garble_gather_fn if garbler else kernel.eval_gather_fn  # inputs by offset in the label array
    if isinstance(lay, Program):
        return partial(_kept, kernel, p.static_lib().gc_static, int(garbler), fn, kernel.key, delta, labels, tables,
                       batch), flushes
    return partial(_kept, (kernel, lay), driver_lib().gc_dynamic, int(garbler), fn, kernel.key, delta, labels, tables,
                   *lay.pointers(), len(p.circuit.gates), lay.nlabels, batch, ctypes.byref(flushes)), flushes


def _kept(keep: object, f: Callable[..., int], *args: object) -> int:
    """f(*args), with `keep` (what addresses among the arguments point into: the kernel's library, the
    gate arrays) alive as long as the call is."""
    return f(*args)


def run(kernel: HalfGatesKernel, p: Prepared, garbler: bool, labels: ctypes.Array, tables: ctypes.Array,
        delta: ctypes.Array | None, technique: str, batch: int) -> tuple[int, int]:
    """One pass of the C driver over the circuit; (kernel calls, flushes)."""
    call, flushes = bound(kernel, p, garbler, labels, tables, delta, technique, batch)
    calls = call()
    if calls < 0:
        raise MemoryError("driver: out of memory")
    return calls, flushes.value


def seeded(seed: int, ninputs: int) -> tuple[bytes, bytes]:
    """(delta with its lowest bit set, the input wires' 0-labels) from a seed."""
    rng = random.Random(seed)
    d = bytearray(rng.randbytes(16))
    d[0] |= 1
    return bytes(d), rng.randbytes(16 * ninputs)


def garble(kernel: HalfGatesKernel, p: Prepared, seed: int, technique: str, batch: int) -> Garbled:
    delta, inputs = seeded(seed, p.ninputs)
    lay = p.by_technique[technique]
    labels = aligned_buffer(16 * lay.nlabels)
    ctypes.memmove(labels, inputs, len(inputs))
    tables = aligned_buffer(32 * max(1, p.circuit.and_count))
    calls, flushes = run(kernel, p, True, labels, tables, aligned_buffer(delta), technique, batch)
    got = bytes(labels)
    return Garbled(delta, inputs, b"".join(got[16 * w:16 * w + 16] for w in lay.outputs),
                   bytes(tables)[:32 * p.circuit.and_count], calls, flushes)


def input_labels(g: Garbled, p: Prepared, values: list[int]) -> bytes:
    """The evaluator's input labels for the circuit's input values (bit i of value v: wire base + i)."""
    out, at = [], 0
    for v, bits in zip(values, p.circuit.inputs):
        for i in range(bits):
            l0 = g.inputs0[16 * (at + i):16 * (at + i) + 16]
            out.append(bytes(x ^ y for x, y in zip(l0, g.delta)) if v >> i & 1 else l0)
        at += bits
    return b"".join(out)


def evaluate(kernel: HalfGatesKernel, p: Prepared, g: Garbled, values: list[int], technique: str,
             batch: int) -> list[int]:
    """The evaluator's run on input values; the decoded output values."""
    lay = p.by_technique[technique]
    labels = aligned_buffer(16 * lay.nlabels)
    inputs = input_labels(g, p, values)
    ctypes.memmove(labels, inputs, len(inputs))
    run(kernel, p, False, labels, aligned_buffer(g.tables or b"\0"), None, technique, batch)
    got = bytes(labels)
    bits = [(got[16 * w] ^ g.outputs0[16 * k]) & 1 for k, w in enumerate(lay.outputs)]
    out, at = [], 0
    for n in p.circuit.outputs:
        out.append(sum(b << i for i, b in enumerate(bits[at:at + n])))
        at += n
    return out
