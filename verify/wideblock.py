"""Checks for the 256-bit-block kernels: Rijndael-256 (ECB) and Simpira v2 (b = 2).

Check names:
  kat rijndael256_set_{en,de}crypt_key  the schedule against the reference key expansion
                                    (30 half round keys, each replicated per lane; decrypting,
                                    the equivalent inverse cipher's: InvMixColumns, reversed)
  kat rijndael256_ecb_{en,de}crypt  Gladman's published 256/256 vector (decrypting: its
                                    ciphertext back), alone and repeated over every lane and
                                    group of a main-loop iteration, in place
  kat simpira256_permute|inverse    the published Simpira-256 of zero (and back), alone and repeated
  diff <each function>              random keys, 0..N blocks, misaligned, in place, vs
                                    reference/wideblock.py (written from the specification)
  badargs rijndael256_set_{en,de}crypt_key  every key size but 256 returns -1, and 256 returns 0
                                    (aead_checks.check_key_sizes)
  abi / guard / simulate            through the scenes below (SCENES, collected by verify/scenes.py)

The references reproduce every published vector in verify/data/wideblock_vectors.txt (all
Rijndael block and key lengths of Gladman's set), which tests/test_wideblock.py checks on its own.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from aesgen.aesref import inv_mix_columns
from aesgen.verify.aead_checks import check_key_sizes
from aesgen.verify.build import Kernel
from aesgen.verify.harness.isolation import Probe, Unit
from aesgen.verify.harness.memory import HeapMem
from aesgen.verify.harness.scene import Scene, fill, invoke, io_alias, key_or_raise, out_if_placed
from aesgen.verify.reference.wideblock import expand_key, rijndael256_ecb, simpira256_many
from aesgen.verify.results import CheckResult, verdict

SET_KEY, SET_DKEY = "rijndael256_set_encrypt_key", "rijndael256_set_decrypt_key"
ECB, ECB_DECRYPT = "rijndael256_ecb_encrypt", "rijndael256_ecb_decrypt"
PERMUTE, INVERSE = "simpira256_permute", "simpira256_inverse"
INVERSES = (ECB_DECRYPT, INVERSE)  # run a published vector backwards
KEY_SETUP = {ECB: SET_KEY, ECB_DECRYPT: SET_DKEY}
BLOCK = 32
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
    """The published vectors the kernel `fn` can run (256-bit block, 256-bit key), turned
    around for the inverse functions."""
    if fn in (PERMUTE, INVERSE):
        found = [v for v in load_vectors() if v.kind == "simpira256"]
    else:
        found = [v for v in load_vectors() if v.kind == "rijndael" and len(v.key) == len(v.given) == BLOCK]
    return [Vector(v.kind, v.key, v.want, v.given) for v in found] if fn in INVERSES else found


def group_blocks(kernel: Kernel, fn: str) -> int:
    """Blocks one main-loop iteration takes: depth x lanes."""
    mode = "simpira" if fn in (PERMUTE, INVERSE) else "rijndael256"
    return kernel.spec.depth_for(mode) * kernel.spec.width_for(mode) // 128


# ================================================================ calls


def run(kernel: Kernel, fn: str, mem, data: bytes, rng: random.Random, *, key: bytes = b"",
        in_place: bool = False, caller=None):
    args = {"in": data, "out": fill(rng, len(data)), "nblocks": len(data) // BLOCK}
    if fn in KEY_SETUP:
        args["rkey"] = key_or_raise(kernel, mem, KEY_SETUP[fn], key)
    return invoke(kernel, fn, mem, args, caller=caller, alias={"out": "in"} if in_place else None)


def reference(fn: str, key: bytes, data: bytes) -> bytes:
    if fn in (PERMUTE, INVERSE):
        return simpira256_many(data, inverse=fn == INVERSE)
    return rijndael256_ecb(key, data, decrypt=fn == ECB_DECRYPT)


# ================================================================ checks


def kat_schedule(kernel: Kernel, setup: str, probe: Probe, *, seed: int) -> CheckResult:
    name = f"kat {setup}"
    rng = random.Random(f"{seed}:{name}")
    stride, lanes = kernel.spec.key_stride, kernel.spec.width // 128
    errors: list[str] = []
    keys = [v.key for v in kernel_vectors(ECB)] + [rng.randbytes(32) for _ in range(4)] + [bytes(32), b"\xff" * 32]
    for key in keys:
        probe.note(name, key.hex())
        got = key_or_raise(kernel, HeapMem(rng), setup, key).read()
        rks = expand_key(key)
        if setup == SET_DKEY:  # the equivalent inverse cipher: dk[r] = InvMixColumns(ek[14 - r])
            rks = [rks[-1]] + [bytes(inv_mix_columns(list(k))) for k in rks[-2:0:-1]] + [rks[0]]
        halves = [half for rk in rks for half in (rk[:16], rk[16:])]
        want = b"".join(h * lanes for h in halves)
        if got[:len(want)] != want:
            i = next(k for k in range(len(want)) if got[k] != want[k]) // stride
            errors.append(f"key {key.hex()[:16]}...: half round key {i} differs")
    what = "InvMixColumns of the reference expansion, reversed" if setup == SET_DKEY else "the reference expansion"
    return verdict(name, errors, f"{len(keys)} keys: 30 half round keys vs {what}")


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
    return verdict(name, errors, f"{len(vectors)} published vector(s), 1 and {repeats[1]} copies, in place")


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
    return verdict(name, errors, f"{len(counts)} calls, 0..{max(counts)} blocks, misaligned, in place; "
                   "vs reference/wideblock.py")


# ================================================================ scenes for abi, guard and simulate


def scene_ecb(sc: Scene, fn: str, size: int, aux: int) -> tuple:
    _, rkey = sc.key(KEY_SETUP[fn], 256)
    data = sc.rng.randbytes(BLOCK * size)
    inv = sc.call(fn, {"rkey": rkey, "in": data, "out": fill(sc.rng, BLOCK * size), "nblocks": size},
                  test=True, alias=io_alias(sc))
    return (out_if_placed(inv, "out"),)


def scene_permute(sc: Scene, fn: str, size: int, aux: int) -> tuple:
    data = sc.rng.randbytes(BLOCK * size)
    inv = sc.call(fn, {"in": data, "out": fill(sc.rng, BLOCK * size), "nblocks": size},
                  test=True, alias=io_alias(sc))
    return (out_if_placed(inv, "out"),)


SCENES = {ECB: scene_ecb, ECB_DECRYPT: scene_ecb, PERMUTE: scene_permute, INVERSE: scene_permute}


# ================================================================ units


def units(kernel: Kernel, *, n: int, quick: bool, seed: int) -> list[tuple[str, Unit]]:
    have = set(kernel.fn)
    out: list[tuple[str, Unit]] = []
    for setup in (SET_KEY, SET_DKEY):
        if setup in have:
            out.append((f"kat {setup}", lambda p, s=setup: iter([kat_schedule(kernel, s, p, seed=seed)])))
            out.append((f"badargs {setup}", lambda p, s=setup: iter([check_key_sizes(kernel, s, p, seed=seed)])))
    for fn in (ECB, ECB_DECRYPT, PERMUTE, INVERSE):
        if fn in have and KEY_SETUP.get(fn, fn) in have:
            out.append((f"kat {fn}", lambda p, fn=fn: iter([kat(kernel, fn, p, seed=seed)])))
            out.append((f"diff {fn}", lambda p, fn=fn: iter([diff(kernel, fn, p, n=n, quick=quick, seed=seed)])))
    return out
