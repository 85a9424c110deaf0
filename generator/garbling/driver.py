"""Garble and evaluate a Bristol circuit with a generated half-gates kernel, batched two ways.

The gate loop is C (driver.c, built on the fly like the verifier's objects): Python prepares the
circuit's arrays once (`Prepared`) and calls it through ctypes. `technique` is "static" (AND-depth
layers, layers.py) or "dynamic" (deferred execution); `batch` is the most AND gates per kernel call
(1: the unbatched baseline, one kernel call per gate). The tables and labels do not depend on either.

Decoding: an output wire's value is the lowest bit of the evaluator's label XOR that of its 0-label
(the point-and-permute bit).
"""
from __future__ import annotations

import ctypes
import random
from array import array
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from aesgen.pipeline import generate
from aesgen.spec import KernelSpec
from aesgen.verify.build import build_shared, build_dir

from .bristol import Bristol
from .layers import Levels, levels

OPS = {"XOR": 0, "AND": 1, "INV": 2, "EQW": 3}
TECHNIQUES = ("static", "dynamic")
SOURCE = Path(__file__).with_name("driver.c")
P, SZ = ctypes.c_void_p, ctypes.c_size_t


@cache
def driver_lib() -> ctypes.CDLL:
    lib = ctypes.CDLL(str(build_shared(SOURCE)))
    lib.gc_run.restype = ctypes.c_int64
    lib.gc_run.argtypes = [ctypes.c_int, ctypes.c_int, P, P, P, P, P, P, P, P, P, P, SZ, SZ, SZ, SZ,
                           ctypes.POINTER(ctypes.c_uint64)]
    return lib


def _buffer(data: bytes | int) -> ctypes.Array:
    """A 64-byte aligned writable buffer (its first bytes `data`, or `data` zero bytes)."""
    size = data if isinstance(data, int) else len(data)
    raw = ctypes.create_string_buffer(size + 64)
    off = (-ctypes.addressof(raw)) % 64
    view = (ctypes.c_char * max(size, 1)).from_buffer(raw, off)
    if not isinstance(data, int):
        ctypes.memmove(view, data, size)
    view._keep = raw  # type: ignore[attr-defined]
    return view


def _second(c: Bristol, g, wire: list[int]) -> int:
    """A gate's second input label: INV reads delta's (or, evaluating, zero), EQW zero's (driver.c)."""
    return {"INV": c.nwires + 1, "EQW": c.nwires}.get(g.op, wire[g.ins[-1]])


def _arrays(c: Bristol, gates: list[int], wire: list[int], and_id: tuple[int, ...]) -> tuple:
    """op, in0, in1, out (renamed wires) and AND id of the gates listed, in that order."""
    gs = [c.gates[k] for k in gates]
    return (array("B", (OPS[g.op] for g in gs)), array("i", (wire[g.ins[0]] for g in gs)),
            array("i", (_second(c, g, wire) for g in gs)), array("i", (wire[g.out] for g in gs)),
            array("q", (and_id[k] for k in gates)))


@dataclass(frozen=True)
class Prepared:
    """A circuit as the C driver reads it: wires renamed in level order (the inputs first, then each
    gate's output as the level order reaches it), so a layer's AND outputs are consecutive labels and
    the static pass writes labels front to back; the gate arrays in level order (static) and in
    circuit order (dynamic)."""

    circuit: Bristol
    levels: Levels
    wire: tuple[int, ...]  # circuit wire -> label index
    by_technique: dict

    @classmethod
    def of(cls, c: Bristol) -> "Prepared":
        if any(g.op == "EQ" for g in c.gates):
            raise ValueError("EQ (constant) gates are not garbled here")
        lv = levels(c)
        wire = list(range(c.nwires))
        for n, k in enumerate(lv.order):
            wire[c.gates[k].out] = sum(c.inputs) + n
        arrays = {"static": _arrays(c, list(lv.order), wire, lv.and_id),
                  "dynamic": _arrays(c, list(range(len(c.gates))), wire, lv.and_id)}
        return cls(c, lv, tuple(wire), arrays)

    @property
    def ninputs(self) -> int:
        return sum(self.circuit.inputs)

    def pointers(self, technique: str) -> list[int]:
        return [a.buffer_info()[0] for a in self.by_technique[technique]]


class HalfGatesKernel:
    """A generated file with the halfgates mode, built and loaded; its fixed key expanded."""

    def __init__(self, spec: KernelSpec, fixed_key: bytes) -> None:
        text = generate(spec).asm
        src = build_dir() / f"halfgates-{spec.prefix}-{abs(hash(text)) % (1 << 40):x}.S"
        src.write_text(text)
        self.lib = ctypes.CDLL(str(build_shared(src)))
        self.spec = spec
        self.garble_fn = ctypes.cast(getattr(self.lib, spec.symbol("halfgates_garble")), P).value
        self.eval_fn = ctypes.cast(getattr(self.lib, spec.symbol("halfgates_eval")), P).value
        self.key = _buffer(spec.key_bytes)
        setup = getattr(self.lib, spec.symbol("set_encrypt_key"))
        setup.argtypes = [P, ctypes.c_uint, P]
        if setup(bytes(fixed_key), 8 * len(fixed_key), self.key) != 0:
            raise ValueError(f"fixed key of {8 * len(fixed_key)} bits refused")


@dataclass
class Garbled:
    delta: bytes
    labels0: bytes      # every wire's 0-label
    tables: bytes       # 32 bytes per AND gate, by id
    calls: int          # kernel calls
    flushes: int        # dynamic: queue flushes


def run(kernel: HalfGatesKernel, p: Prepared, garbler: bool, labels: ctypes.Array, tables: ctypes.Array,
        delta: ctypes.Array | None, technique: str, batch: int) -> tuple[int, int]:
    """One pass of the C driver over the circuit; (kernel calls, flushes)."""
    flushes = ctypes.c_uint64()
    c = p.circuit
    calls = driver_lib().gc_run(int(garbler), TECHNIQUES.index(technique),
                                kernel.garble_fn if garbler else kernel.eval_fn, kernel.key,
                                delta, labels, tables, *p.pointers(technique), len(c.gates), c.nwires + 2, p.ninputs,
                                batch, ctypes.byref(flushes))
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
    labels = _buffer(16 * (p.circuit.nwires + 2))
    ctypes.memmove(labels, inputs, len(inputs))
    tables = _buffer(32 * max(1, p.circuit.and_count))
    dbuf = _buffer(delta)
    calls, flushes = run(kernel, p, True, labels, tables, dbuf, technique, batch)
    return Garbled(delta, bytes(labels)[:16 * p.circuit.nwires], bytes(tables)[:32 * p.circuit.and_count], calls,
                   flushes)


def input_labels(g: Garbled, p: Prepared, values: list[int]) -> bytes:
    """The evaluator's input labels for the circuit's input values (bit i of value v: wire base + i)."""
    out, at = [], 0
    for v, bits in zip(values, p.circuit.inputs):
        for i in range(bits):
            l0 = g.labels0[16 * (at + i):16 * (at + i) + 16]
            out.append(bytes(x ^ y for x, y in zip(l0, g.delta)) if v >> i & 1 else l0)
        at += bits
    return b"".join(out)


def evaluate(kernel: HalfGatesKernel, p: Prepared, g: Garbled, values: list[int], technique: str,
             batch: int) -> list[int]:
    """The evaluator's run on input values; the decoded output values."""
    labels = _buffer(16 * (p.circuit.nwires + 2))
    inputs = input_labels(g, p, values)
    ctypes.memmove(labels, inputs, len(inputs))
    tables = _buffer(g.tables or b"\0")
    run(kernel, p, False, labels, tables, None, technique, batch)
    got = bytes(labels)
    out, at = [], p.circuit.nwires - sum(p.circuit.outputs)
    for bits in p.circuit.outputs:
        ws = [p.wire[at + i] for i in range(bits)]
        out.append(sum(((got[16 * w] ^ g.labels0[16 * w]) & 1) << i for i, w in enumerate(ws)))
        at += bits
    return out
