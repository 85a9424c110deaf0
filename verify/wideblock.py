"""Checks for the 256-bit-block kernels: Rijndael-256 (ECB) and Simpira v2 (b = 2).

Check names:
  kat rijndael256_set_encrypt_key   the schedule against the reference key expansion
                                    (30 half round keys, each replicated per lane)
  kat rijndael256_ecb_encrypt       Gladman's published 256/256 vector, alone and repeated
                                    over every lane and group of a main-loop iteration, in place
  kat simpira256_permute            the published Simpira-256 of zero, alone and repeated
  diff rijndael256_ecb_encrypt      random keys, 0..N blocks, misaligned, in place, vs
                                    verify/wideblock_ref.py (written from the specification)
  diff simpira256_permute           the same for the permutation
  badargs rijndael256_set_encrypt_key  every key size but 256 returns -1
  abi / guard / simulate            through verify/aead.py's scenes (SCENES below)

The references reproduce every published vector in verify/data/wideblock_vectors.txt (all
Rijndael block and key lengths of Gladman's set), which tests/test_wideblock.py checks on its own.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from aesgen.verify.aead import HeapMem, Scene, SceneError, _fill, _io_alias, _make_key, _maybe, _result, invoke
from aesgen.verify.build import Kernel
from aesgen.verify.runner import CheckResult, Probe, Unit
from aesgen.verify.wideblock_ref import expand_key, rijndael256_ecb, simpira256_many

SET_KEY, ECB, PERMUTE = "rijndael256_set_encrypt_key", "rijndael256_ecb_encrypt", "simpira256_permute"
BLOCK = 32
BAD_BITS = (0, 128, 192, 255, 257, 512)
VECTORS = Path(__file__).with_name("data") / "wideblock_vectors.txt"


@dataclass(frozen=True)
class Vector:
    kind: str  # "rijndael" or "simpira256"
    key: bytes
    given: bytes
    want: bytes


@lru_cache(maxsize=1)
def load_vectors() -> tuple[Vector, ...]:
    out = []
    for line in VECTORS.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        kind, *fields = line.split()
        vals = [bytes.fromhex(f) for f in fields]
        out.append(Vector(kind, vals[0], vals[1], vals[2]) if kind == "rijndael"
                   else Vector(kind, b"", vals[0], vals[1]))
    return tuple(out)


def kernel_vectors(fn: str) -> list[Vector]:
    """The published vectors the kernel `fn` can run (256-bit block, 256-bit key)."""
    if fn == PERMUTE:
        return [v for v in load_vectors() if v.kind == "simpira256"]
    return [v for v in load_vectors() if v.kind == "rijndael" and len(v.key) == len(v.given) == BLOCK]


def group_blocks(kernel: Kernel, fn: str) -> int:
    """Blocks one main-loop iteration takes: depth x lanes."""
    mode = "simpira" if fn == PERMUTE else "rijndael256"
    return kernel.spec.depth_for(mode) * kernel.spec.width_for(mode) // 128


# ================================================================ calls


def make_rkey(kernel: Kernel, mem, key: bytes, caller=None):
    ret, rkey = _make_key(kernel, mem, SET_KEY, key, caller=caller)
    if ret != 0:
        raise SceneError(f"{SET_KEY}(bits={8 * len(key)}) returned {ret}")
    return rkey


def run(kernel: Kernel, fn: str, mem, data: bytes, rng: random.Random, *, key: bytes = b"",
        in_place: bool = False, caller=None):
    args = {"in": data, "out": _fill(rng, len(data)), "nblocks": len(data) // BLOCK}
    if fn == ECB:
        args["rkey"] = make_rkey(kernel, mem, key)
    return invoke(kernel, fn, mem, args, caller=caller, alias={"out": "in"} if in_place else None)


def reference(fn: str, key: bytes, data: bytes) -> bytes:
    return simpira256_many(data) if fn == PERMUTE else rijndael256_ecb(key, data)


# ================================================================ checks


def kat_schedule(kernel: Kernel, probe: Probe, *, seed: int) -> CheckResult:
    name = f"kat {SET_KEY}"
    rng = random.Random(f"{seed}:{name}")
    stride, lanes = kernel.spec.key_stride, kernel.spec.width // 128
    errors: list[str] = []
    keys = [v.key for v in kernel_vectors(ECB)] + [rng.randbytes(32) for _ in range(4)] + [bytes(32), b"\xff" * 32]
    for key in keys:
        probe.note(name, key.hex())
        got = make_rkey(kernel, HeapMem(rng), key).read()
        halves = [half for rk in expand_key(key) for half in (rk[:16], rk[16:])]
        want = b"".join(h * lanes for h in halves)
        if got[:len(want)] != want:
            i = next(k for k in range(len(want)) if got[k] != want[k]) // stride
            errors.append(f"key {key.hex()[:16]}...: half round key {i} differs")
    return _result(name, errors, f"{len(keys)} keys: 30 half round keys vs the reference expansion")


def kat(kernel: Kernel, fn: str, probe: Probe, *, seed: int) -> CheckResult:
    """Each vector alone, then repeated over two iterations and a tail (every lane and group)."""
    name = f"kat {fn}"
    rng = random.Random(f"{seed}:{name}")
    vectors = kernel_vectors(fn)
    errors: list[str] = []
    repeats = (1, 2 * group_blocks(kernel, fn) + 1)
    for v in vectors:
        for count in repeats:
            for in_place in (False, True):
                probe.note(name, f"{count} copies{' in place' if in_place else ''}")
                inv = run(kernel, fn, HeapMem(rng), v.given * count, rng, key=v.key, in_place=in_place)
                if inv.out("out") != v.want * count:
                    errors.append(f"{count} copies{' in place' if in_place else ''}: got "
                                  f"{inv.out('out')[:BLOCK].hex()}, want {v.want.hex()}")
                errors += inv.damage
    return _result(name, errors, f"{len(vectors)} published vector(s), 1 and {repeats[1]} copies, in place")


def diff(kernel: Kernel, fn: str, probe: Probe, *, n: int, quick: bool, seed: int) -> CheckResult:
    name = f"diff {fn}"
    rng = random.Random(f"{seed}:{name}")
    group = group_blocks(kernel, fn)
    counts = sorted(set(range(0, 2 * group + 3)) | {3 * group - 1, 3 * group + 5, n}
                    | {rng.randrange(1, 8 * group + 9) for _ in range(3 if quick else 10)})
    errors: list[str] = []
    for i, count in enumerate(counts):
        key, data, in_place = rng.randbytes(32), rng.randbytes(BLOCK * count), i % 3 == 2
        what = f"nblocks={count}{' in place' if in_place else ''}"
        probe.note(name, what)
        inv = run(kernel, fn, HeapMem(rng), data, rng, key=key, in_place=in_place)
        want = reference(fn, key, data)
        got = inv.out("out")
        if got != want:
            k = next(j for j in range(len(got)) if got[j] != want[j])
            errors.append(f"{what}: differs from block {k // BLOCK}")
        errors += inv.damage
        if len(errors) >= 3:
            break
    return _result(name, errors, f"{len(counts)} calls, 0..{max(counts)} blocks, misaligned, in place; "
                   "vs verify/wideblock_ref.py")


def badargs(kernel: Kernel, probe: Probe, *, seed: int) -> CheckResult:
    name = f"badargs {SET_KEY}"
    rng = random.Random(f"{seed}:{name}")
    probe.note(name, "")
    errors = []
    for bits in BAD_BITS:
        ret, _ = _make_key(kernel, HeapMem(rng), SET_KEY, rng.randbytes(64), bits=bits)
        if ret != -1:
            errors.append(f"bits={bits} returned {ret}, want -1")
    return _result(name, errors, f"bits {', '.join(map(str, BAD_BITS))} rejected")


# ================================================================ scenes for abi, guard and simulate


def scene_ecb(sc: Scene, fn: str, size: int, aux: int) -> tuple:
    _, rkey = sc.key(SET_KEY, 256)
    data = sc.rng.randbytes(BLOCK * size)
    inv = sc.call(fn, {"rkey": rkey, "in": data, "out": _fill(sc.rng, BLOCK * size), "nblocks": size},
                  test=True, alias=_io_alias(sc))
    return (_maybe(inv, "out"),)


def scene_permute(sc: Scene, fn: str, size: int, aux: int) -> tuple:
    data = sc.rng.randbytes(BLOCK * size)
    inv = sc.call(fn, {"in": data, "out": _fill(sc.rng, BLOCK * size), "nblocks": size},
                  test=True, alias=_io_alias(sc))
    return (_maybe(inv, "out"),)


SCENES = {ECB: scene_ecb, PERMUTE: scene_permute}


# ================================================================ units


def units(kernel: Kernel, *, n: int, quick: bool, seed: int) -> list[tuple[str, Unit]]:
    have = set(kernel.fn)
    out: list[tuple[str, Unit]] = []
    if SET_KEY in have:
        out.append((f"kat {SET_KEY}", lambda p: iter([kat_schedule(kernel, p, seed=seed)])))
        out.append((f"badargs {SET_KEY}", lambda p: iter([badargs(kernel, p, seed=seed)])))
    for fn in (ECB, PERMUTE):
        if fn in have and (fn != ECB or SET_KEY in have):
            out.append((f"kat {fn}", lambda p, fn=fn: iter([kat(kernel, fn, p, seed=seed)])))
            out.append((f"diff {fn}", lambda p, fn=fn: iter([diff(kernel, fn, p, n=n, quick=quick, seed=seed)])))
    return out
