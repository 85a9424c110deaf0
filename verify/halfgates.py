"""Checks for half-gates garbling (kernels/halfgates.py): P_halfgates_garble and P_halfgates_eval, and
their _gather forms (inputs by byte offset in a label array).

Check names:
  diff halfgates_garble <bits>    random fixed keys, deltas (lowest bit set), 0-labels and gate ids (near
                                  2^63 and 2^64 too), every gate count from 0 to two batches and a few:
                                  tables and output 0-labels vs the paper's reference
                                  (verify/reference/halfgates.py, pi from `cryptography`)
  diff halfgates_eval <bits>      the reference's tables, labels of random truth values: the kernel's
                                  output labels vs the reference evaluator's
  diff halfgates_garble_gather <bits>, diff halfgates_eval_gather <bits>
                                  the same with the labels in a wire array, read by offset: fan-out (gates
                                  sharing a wire, a gate reading one wire twice), the array's first and
                                  last wire read (the guard checks put them next to unmapped pages)
  roundtrip halfgates             the kernel garbles, the kernel evaluates each gate on all four inputs:
                                  the output label is C0 ^ (a & b) * delta, nothing else
  abi / guard / simulate          through the scenes below
"""
from __future__ import annotations

import random
import struct
from collections.abc import Iterator

from aesgen.verify.build import Kernel
from aesgen.verify.harness.isolation import Probe, Unit
from aesgen.verify.harness.memory import HeapMem, Region
from aesgen.verify.harness.scene import Scene, SceneError, fill, invoke
from aesgen.verify.reference import halfgates as ref
from aesgen.verify.results import CheckResult, verdict

BITS = (128, 192, 256)
GARBLE, EVAL = "halfgates_garble", "halfgates_eval"
GARBLE_GATHER, EVAL_GATHER = "halfgates_garble_gather", "halfgates_eval_gather"
# gate ids: small, around the signed and the unsigned wrap of the 64-bit tweak (2 id, 2 id + 1)
GATE_IDS = (0, 1, 12345, (1 << 62) - 3, (1 << 63) - 2, (1 << 64) - 5)


def random_delta(rng: random.Random) -> bytes:
    d = bytearray(rng.randbytes(16))
    d[0] |= 1  # point-and-permute needs lsb(delta) = 1
    return bytes(d)


def fixed_key(sc: Scene, key: bytes) -> Region:
    region = sc.mem.place("fixed_key", b"\xa5" * sc.kernel.spec.key_bytes, aligned=True)
    inv = invoke(sc.kernel, "set_encrypt_key", sc.mem, {"user_key": key, "bits": 8 * len(key), "key": region},
                 caller=sc.setup_caller)
    if inv.ret != 0:
        raise SceneError(f"set_encrypt_key(bits={8 * len(key)}) returned {inv.ret}")
    return region


def garble_any(sc: Scene, fn: str, key: bytes, delta: bytes, inputs: dict, gid: int, n: int
               ) -> tuple[list[bytes] | None, list[bytes] | None]:
    """`fn` (GARBLE or GARBLE_GATHER) on n gates whose input arguments are `inputs`: (tables, c0), per gate."""
    inv = sc.call(fn, {"fixed_key": fixed_key(sc, key), "delta": delta, **inputs, "first_gate_id": gid,
                       "tables": fill(sc.rng, max(1, 32 * n)), "c0": fill(sc.rng, max(1, 16 * n)), "n": n}, test=True)
    if "tables" not in inv.regions:
        return None, None
    t, c = inv.out("tables"), inv.out("c0")
    return [t[32 * i:32 * i + 32] for i in range(n)], [c[16 * i:16 * i + 16] for i in range(n)]


def eval_any(sc: Scene, fn: str, key: bytes, inputs: dict, gid: int, tables: list[bytes], n: int
             ) -> list[bytes] | None:
    """`fn` (EVAL or EVAL_GATHER) on n gates whose input arguments are `inputs`: C, per gate."""
    inv = sc.call(fn, {"fixed_key": fixed_key(sc, key), **inputs, "first_gate_id": gid,
                       "tables": b"".join(tables) or b"\0", "c": fill(sc.rng, max(1, 16 * n)), "n": n}, test=True)
    if "c" not in inv.regions:
        return None
    c = inv.out("c")
    return [c[16 * i:16 * i + 16] for i in range(n)]


def garble_call(sc: Scene, key: bytes, delta: bytes, a0: list[bytes], b0: list[bytes], gid: int
                ) -> tuple[list[bytes] | None, list[bytes] | None]:
    return garble_any(sc, GARBLE, key, delta, {"a0": b"".join(a0) or b"\0", "b0": b"".join(b0) or b"\0"}, gid,
                      len(a0))


def eval_call(sc: Scene, key: bytes, a: list[bytes], b: list[bytes], gid: int, tables: list[bytes]) -> list[bytes] | None:
    return eval_any(sc, EVAL, key, {"a": b"".join(a) or b"\0", "b": b"".join(b) or b"\0"}, gid, tables, len(a))


class Wires:
    """A label array of m wires and n gates reading them: gate i's inputs are wires a[i], b[i] (fan-out and
    a gate reading one wire twice included; wire 0 and wire m - 1 are read when n > 0). `offsets` is the
    _gather functions' `in`: the byte offsets 16 a[i], 16 b[i]."""

    def __init__(self, rng: random.Random, n: int) -> None:
        m = max(1, n + rng.randrange(n + 2))
        self.labels = _labels(rng, m)
        self.a = [rng.randrange(m) for _ in range(n)]
        self.b = [self.a[i] if rng.randrange(8) == 0 else rng.randrange(m) for i in range(n)]
        if n:
            self.a[0], self.b[-1] = 0, m - 1

    def inputs(self, labels: list[bytes] | None = None) -> tuple[list[bytes], list[bytes]]:
        """The gates' input labels, from `labels` (default: the array's)."""
        w = self.labels if labels is None else labels
        return [w[i] for i in self.a], [w[i] for i in self.b]

    def offsets(self) -> bytes:
        return b"".join(struct.pack("<2I", 16 * x, 16 * y) for x, y in zip(self.a, self.b)) or b"\0"


def garble_gather_call(sc: Scene, key: bytes, delta: bytes, wires: Wires, gid: int
                       ) -> tuple[list[bytes] | None, list[bytes] | None]:
    return garble_any(sc, GARBLE_GATHER, key, delta, {"labels": b"".join(wires.labels), "in": wires.offsets()}, gid,
                      len(wires.a))


def eval_gather_call(sc: Scene, key: bytes, labels: list[bytes], wires: Wires, gid: int, tables: list[bytes]
                     ) -> list[bytes] | None:
    return eval_any(sc, EVAL_GATHER, key, {"labels": b"".join(labels), "in": wires.offsets()}, gid, tables,
                    len(wires.a))


def truth(rng: random.Random, labels0: list[bytes], delta: bytes) -> list[bytes]:
    """The evaluator's labels of random truth values."""
    return [ref.xor(x, delta) if rng.getrandbits(1) else x for x in labels0]


def gate_counts(kernel: Kernel, quick: bool) -> list[int]:
    spec = kernel.spec
    lanes, depth = spec.width_for("halfgates") // 128, spec.depth_for("halfgates")
    top = 2 * lanes * depth + lanes + 1
    if quick:
        return sorted({0, 1, 2, lanes - 1, lanes, lanes + 1, lanes * depth - 1, lanes * depth, lanes * depth + 1,
                       top} - {-1})
    return list(range(top + 1))


def _labels(rng: random.Random, n: int) -> list[bytes]:
    return [rng.randbytes(16) for _ in range(n)]


def _first_diff(got: list[bytes] | None, want: list[bytes], what: str) -> list[str]:
    if got is None:
        return [f"{what}: no output"]
    bad = next((i for i, (g, w) in enumerate(zip(got, want)) if g != w), None)
    return [] if bad is None and len(got) == len(want) else [f"{what}: gate {bad} differs from the reference"]


def _diff(kernel: Kernel, fn: str, bits: int, probe: Probe, quick: bool, seed: int, compare, detail: str
          ) -> CheckResult:
    """compare(scene, rng, key, delta, a0, b0, gid, what) -> errors, for every gate count; gate ids cycle
    through GATE_IDS."""
    name = f"diff {fn} {bits}"
    rng = random.Random(f"{seed}:{name}")
    errors: list[str] = []
    counts = gate_counts(kernel, quick)
    for k, n in enumerate(counts):
        key, delta, gid = rng.randbytes(bits // 8), random_delta(rng), GATE_IDS[k % len(GATE_IDS)]
        a0, b0 = _labels(rng, n), _labels(rng, n)
        what = f"n={n} first_gate_id={gid}"
        probe.note(name, what)
        sc = Scene(kernel, HeapMem(rng), rng)
        errors += compare(sc, rng, key, delta, a0, b0, gid, what) + sc.damage
        if len(errors) >= 3:
            break
    return verdict(name, errors[:3], f"gate counts {counts[0]}..{counts[-1]}, gate ids up to 2^64 - 5: {detail}")


def diff_garble(kernel: Kernel, bits: int, probe: Probe, *, quick: bool, seed: int) -> CheckResult:
    def compare(sc, rng, key, delta, a0, b0, gid, what) -> list[str]:
        tables, c0 = garble_call(sc, key, delta, a0, b0, gid)
        want_t, want_c = ref.garble(key, delta, a0, b0, gid)
        return _first_diff(tables, want_t, f"{what} tables") + _first_diff(c0, want_c, f"{what} c0")
    return _diff(kernel, GARBLE, bits, probe, quick, seed, compare, "tables and 0-labels vs the reference")


def diff_eval(kernel: Kernel, bits: int, probe: Probe, *, quick: bool, seed: int) -> CheckResult:
    def compare(sc, rng, key, delta, a0, b0, gid, what) -> list[str]:
        tables, _ = ref.garble(key, delta, a0, b0, gid)
        a = [ref.xor(x, delta) if rng.getrandbits(1) else x for x in a0]
        b = [ref.xor(x, delta) if rng.getrandbits(1) else x for x in b0]
        return _first_diff(eval_call(sc, key, a, b, gid, tables), ref.evaluate(key, a, b, gid, tables), what)
    return _diff(kernel, EVAL, bits, probe, quick, seed, compare,
                 "the output labels of random inputs vs the reference evaluator")


def diff_garble_gather(kernel: Kernel, bits: int, probe: Probe, *, quick: bool, seed: int) -> CheckResult:
    def compare(sc, rng, key, delta, a0, b0, gid, what) -> list[str]:
        wires = Wires(rng, len(a0))
        tables, c0 = garble_gather_call(sc, key, delta, wires, gid)
        want_t, want_c = ref.garble(key, delta, *wires.inputs(), gid)
        return _first_diff(tables, want_t, f"{what} tables") + _first_diff(c0, want_c, f"{what} c0")
    return _diff(kernel, GARBLE_GATHER, bits, probe, quick, seed, compare,
                 "tables and 0-labels of gates reading a wire array vs the reference")


def diff_eval_gather(kernel: Kernel, bits: int, probe: Probe, *, quick: bool, seed: int) -> CheckResult:
    def compare(sc, rng, key, delta, a0, b0, gid, what) -> list[str]:
        wires = Wires(rng, len(a0))
        tables, _ = ref.garble(key, delta, *wires.inputs(), gid)
        labels = truth(rng, wires.labels, delta)
        want = ref.evaluate(key, *wires.inputs(labels), gid, tables)
        return _first_diff(eval_gather_call(sc, key, labels, wires, gid, tables), want, what)
    return _diff(kernel, EVAL_GATHER, bits, probe, quick, seed, compare,
                 "the output labels of gates reading a wire array vs the reference evaluator")


def roundtrip(kernel: Kernel, probe: Probe, *, quick: bool, seed: int) -> Iterator[CheckResult]:
    """No reference involved: the AND gate's meaning, from the kernel's own garbling and evaluation."""
    name = "roundtrip halfgates"
    rng = random.Random(f"{seed}:{name}")
    errors: list[str] = []
    counts = gate_counts(kernel, quick)
    for k, n in enumerate(counts):
        bits = BITS[k % 3]
        key, delta, gid = rng.randbytes(bits // 8), random_delta(rng), GATE_IDS[k % len(GATE_IDS)]
        a0, b0 = _labels(rng, n), _labels(rng, n)
        probe.note(name, f"n={n}")
        sc = Scene(kernel, HeapMem(rng), rng)
        tables, c0 = garble_call(sc, key, delta, a0, b0, gid)
        if tables is None or c0 is None:
            errors.append(f"n={n}: no output")
            continue
        for va in (0, 1):
            for vb in (0, 1):
                a = [ref.xor(x, delta) if va else x for x in a0]
                b = [ref.xor(x, delta) if vb else x for x in b0]
                got = eval_call(sc, key, a, b, gid, tables)
                want = [ref.xor(c, delta) if va & vb else c for c in c0]
                if got != want:
                    errors.append(f"AES-{bits} n={n} a={va} b={vb}: the evaluated label is not C0 ^ (a & b) * delta")
        errors += sc.damage
    yield verdict(name, errors[:3], f"gate counts {counts[0]}..{counts[-1]}, every input pair: the evaluator's label "
                  "encodes a AND b")


# ================================================================ scenes for abi, guard and simulate


def scene_garble(sc: Scene, fn: str, size: int, aux: int) -> tuple:
    key, delta = sc.rng.randbytes(BITS[aux % 3] // 8), random_delta(sc.rng)
    tables, c0 = garble_call(sc, key, delta, _labels(sc.rng, size), _labels(sc.rng, size), GATE_IDS[aux % len(GATE_IDS)])
    return tuple(tables or ()), tuple(c0 or ())


def scene_eval(sc: Scene, fn: str, size: int, aux: int) -> tuple:
    key = sc.rng.randbytes(BITS[aux % 3] // 8)
    tables = [sc.rng.randbytes(32) for _ in range(size)]
    return tuple(eval_call(sc, key, _labels(sc.rng, size), _labels(sc.rng, size), GATE_IDS[aux % len(GATE_IDS)],
                           tables) or ())


def scene_garble_gather(sc: Scene, fn: str, size: int, aux: int) -> tuple:
    key, delta = sc.rng.randbytes(BITS[aux % 3] // 8), random_delta(sc.rng)
    tables, c0 = garble_gather_call(sc, key, delta, Wires(sc.rng, size), GATE_IDS[aux % len(GATE_IDS)])
    return tuple(tables or ()), tuple(c0 or ())


def scene_eval_gather(sc: Scene, fn: str, size: int, aux: int) -> tuple:
    key, wires = sc.rng.randbytes(BITS[aux % 3] // 8), Wires(sc.rng, size)
    tables = [sc.rng.randbytes(32) for _ in range(size)]
    return tuple(eval_gather_call(sc, key, wires.labels, wires, GATE_IDS[aux % len(GATE_IDS)], tables) or ())


SCENES = {GARBLE: scene_garble, EVAL: scene_eval, GARBLE_GATHER: scene_garble_gather, EVAL_GATHER: scene_eval_gather}
DIFFS = {GARBLE: diff_garble, EVAL: diff_eval, GARBLE_GATHER: diff_garble_gather, EVAL_GATHER: diff_eval_gather}


def units(kernel: Kernel, *, n: int, quick: bool, seed: int) -> list[tuple[str, Unit]]:
    have = set(kernel.fn)
    out: list[tuple[str, Unit]] = []
    for fn, diff in DIFFS.items():
        if fn in have:
            out.append((f"diff {fn}", lambda p, diff=diff: (diff(kernel, b, p, quick=quick, seed=seed) for b in BITS)))
    if {GARBLE, EVAL} <= have:
        out.append(("roundtrip halfgates", lambda p: roundtrip(kernel, p, quick=quick, seed=seed)))
    return out
