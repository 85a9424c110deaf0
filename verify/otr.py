"""Checks for the AES-OTR kernels (otr_set_key, otr_encrypt, otr_decrypt: v3.1, parallel AD).

Check names:
  kat otr_encrypt|otr_decrypt       the designer's published vectors (verify/data/otr_vectors.txt,
                                    the parallel-AD suites, AES-128 and AES-256), odd cases in place
  diff otr_encrypt|otr_decrypt <bits>  random keys, nonces of 1..15 bytes, AAD and text lengths
                                    0..N (every length around chunk, vector and batch boundaries),
                                    misaligned and in place, vs reference/otr.py
  tamper otr_decrypt <bits>         a flipped tag/ciphertext/AAD/nonce bit: -1, out zeroed
  badargs otr_set_key|otr_encrypt|otr_decrypt  bad key sizes (aead_checks.check_key_sizes); nonce lengths 0 and
                                    16 (-1, and decrypting, out zeroed)
  abi / guard / simulate            through the scenes below (SCENES, collected by verify/scenes.py)

The reference (reference/otr.py) is independent of the kernels; it reproduces the designer's
vectors, which tests/test_otr_reference.py checks on its own.
"""
from __future__ import annotations

import random
from collections.abc import Iterator

from aesgen.verify.aead_checks import aead_errors, check_key_sizes, check_refusals, tamper
from aesgen.verify.build import Kernel
from aesgen.verify.harness.isolation import Probe, Unit
from aesgen.verify.harness.memory import HeapMem, Region
from aesgen.verify.harness.scene import (Invocation, Scene, fill, invoke, io_alias, key_or_raise, make_key,
                                         out_if_placed)
from aesgen.verify.reference.otr import NONCE_SIZES, load_vectors, otr_encrypt
from aesgen.verify.results import CheckResult, verdict

BAD_NONCE_LENGTHS = (0, max(NONCE_SIZES) + 1)
TAG = 16


# ================================================================ calls


def otr_call(kernel: Kernel, mem, fn: str, tkey: Region, nonce: bytes, aad: bytes, data: bytes,
             tag: bytes | None, *, rng: random.Random, in_place: bool = False, noncelen: int | None = None,
             caller=None) -> Invocation:
    """otr_encrypt (tag None: a junk-filled output) or otr_decrypt (tag: the bytes to check)."""
    args = {"tkey": tkey, "nonce": nonce or b"\0", "noncelen": len(nonce) if noncelen is None else noncelen,
            "aad": aad, "aadlen": len(aad), "in": data, "out": fill(rng, len(data)), "len": len(data),
            "tag": tag if tag is not None else fill(rng, TAG)}
    return invoke(kernel, fn, mem, args, caller=caller, alias={"out": "in"} if in_place else None)


# ================================================================ lengths


def batch_bytes(kernel: Kernel) -> int:
    """Text bytes one main-loop iteration takes: depth x lanes chunks of 32 bytes."""
    return 32 * kernel.spec.depth_for("otr") * kernel.spec.width_for("otr") // 128


def text_lengths(kernel: Kernel, quick: bool, rng: random.Random) -> list[int]:
    """Every length up to a few chunks; then every length within 2 bytes of each multiple of a
    chunk up to five batches and a vector of chunks (the tails after each loop; five: the
    software-pipelined loop body runs on state the one before carried, and its two offset
    tables, filled two batches ahead, are each refilled in the loop and read back before
    the loop goes round again); a random few."""
    batch = batch_bytes(kernel)
    top = 5 * batch + 2 * 32 * kernel.spec.width_for("otr") // 128 + 40
    dense = set(range(0, 100 if quick else 200))
    near = {k + d for k in range(32, top + 1, 32) for d in (-2, -1, 0, 1, 2) if k + d >= 0}
    if quick:
        near = {x for x in near if x % 32 in (0, 1, 31) or x > top - 70}
    extra = {rng.randrange(top) for _ in range(4 if quick else 20)}
    return sorted(dense | near | extra)


def aad_length(i: int, kernel: Kernel, rng: random.Random) -> int:
    """0, a partial or a whole block, around a vector and a batch of blocks, or random."""
    lanes, depth = kernel.spec.width_for("otr") // 128, kernel.spec.depth_for("otr")
    choices = (0, 1 + i % 15, 16, 17, 16 * lanes - 1, 16 * lanes + 1, 16 * lanes * depth,
               16 * lanes * depth + 16 + i % 17, rng.randrange(2 * 16 * lanes * depth + 40))
    return choices[i % len(choices)]


# ================================================================ checks


def kat_otr(kernel: Kernel, fn: str, probe: Probe, *, quick: bool, seed: int) -> Iterator[CheckResult]:
    decrypt = fn == "otr_decrypt"
    rng = random.Random(f"{seed}:kat {fn}")
    cases = [v for v in load_vectors() if v.ad_mode == "parallel" and len(v.tag) == TAG]
    for suite in dict.fromkeys(v.suite for v in cases):
        check = f"kat {fn} {suite}"
        probe.note(check, "")
        mine = [v for v in cases if v.suite == suite]
        if quick:
            mine = mine[::3]
        mem = HeapMem(rng)
        errors: list[str] = []
        for k, v in enumerate(mine):
            tkey = key_or_raise(kernel, mem, "otr_set_key", v.key)
            src = v.ciphertext if decrypt else v.plaintext
            inv = otr_call(kernel, mem, fn, tkey, v.nonce, v.aad, src, v.tag if decrypt else None, rng=rng,
                           in_place=k % 2 == 1)
            errors += aead_errors(inv, decrypt, f"{v.name}", v.plaintext, v.ciphertext, v.tag)
        yield verdict(check, errors, f"{len(mine)} vectors")


def diff_otr(kernel: Kernel, fn: str, bits: int, probe: Probe, *, quick: bool, seed: int) -> CheckResult:
    name = f"diff {fn} {bits}"
    rng = random.Random(f"{seed}:{name}")
    decrypt = fn == "otr_decrypt"
    errors: list[str] = []
    lengths = text_lengths(kernel, quick, rng)
    for i, length in enumerate(lengths):
        key, nonce = rng.randbytes(bits // 8), rng.randbytes(NONCE_SIZES[i % len(NONCE_SIZES)])
        aad, pt = rng.randbytes(aad_length(i, kernel, rng)), rng.randbytes(length)
        in_place = i % 3 == 2
        mem = HeapMem(rng)
        tkey = key_or_raise(kernel, mem, "otr_set_key", key)
        ct, tag = otr_encrypt(key, nonce, aad, pt)
        what = f"len={length} aadlen={len(aad)} noncelen={len(nonce)}{' in-place' if in_place else ''}"
        probe.note(name, what)
        inv = otr_call(kernel, mem, fn, tkey, nonce, aad, ct if decrypt else pt, tag if decrypt else None,
                       rng=rng, in_place=in_place)
        errors += aead_errors(inv, decrypt, what, pt, ct, tag, " (reference)")
        if len(errors) >= 3:
            break
    return verdict(name, errors, f"{len(lengths)} messages, len 0..{max(lengths)}, nonces 1..15 bytes, "
                   "AAD around vector and batch sizes, misaligned, in place; vs reference/otr.py")


def tamper_lengths(kernel: Kernel, quick: bool, rng: random.Random) -> list[int]:
    """The edges of a chunk and of a batch, and a random few up to two batches."""
    batch = batch_bytes(kernel)
    return sorted({0, 1, 16, 17, 32, 33, batch, batch + 31} | {rng.randrange(2 * batch) for _ in range(4 if quick else 12)})


def tamper_seal(kernel: Kernel, rng: random.Random, mem: HeapMem, key: bytes, aad: bytes, pt: bytes,
                j: int) -> tuple[Region, bytes, bytes, bytes]:
    """tamper's valid message: a nonce of 1..15 bytes."""
    nonce = rng.randbytes(1 + j % 15)
    ct, tag = otr_encrypt(key, nonce, aad, pt)
    return key_or_raise(kernel, mem, "otr_set_key", key), nonce, ct, tag


def badargs_otr(kernel: Kernel, fn: str, probe: Probe, *, seed: int) -> CheckResult:
    """Nonce lengths 0 and 16: -1, and decrypting, out zeroed (otr_set_key: aead_checks.check_key_sizes)."""
    if fn == "otr_set_key":
        return check_key_sizes(kernel, fn, probe, seed=seed)
    decrypt = fn == "otr_decrypt"

    def refusals(rng: random.Random, mem: HeapMem, tkey: Region) -> Iterator[tuple[str, Invocation, int]]:
        for noncelen in BAD_NONCE_LENGTHS:
            for length in (0, 33):
                yield f"noncelen={noncelen} len={length}", otr_call(
                    kernel, mem, fn, tkey, rng.randbytes(16), rng.randbytes(20), rng.randbytes(length),
                    rng.randbytes(TAG) if decrypt else None, rng=rng, noncelen=noncelen), length

    rejected = "nonce lengths " + ", ".join(map(str, BAD_NONCE_LENGTHS))
    return check_refusals(kernel, fn, probe, "otr_set_key", refusals, rejected, zeroed=decrypt, seed=seed)


# ================================================================ scenes for abi, guard and simulate


def scene_otr_set_key(sc: Scene, fn: str, size: int, aux: int) -> tuple:
    bits = (128, 192, 256)[size % 3]
    ret, tkey = make_key(sc.kernel, sc.mem, "otr_set_key", sc.rng.randbytes(bits // 8), caller=sc.caller)
    return ret, tkey.read()


def scene_otr(sc: Scene, fn: str, size: int, aux: int) -> tuple:
    """A message of `size` bytes; aux picks the key size, nonce and AAD lengths (and, decrypting,
    a wrong tag one time in four). A nonce aimed into PROT_NONE (len0) is given length 0."""
    key, tkey = sc.key("otr_set_key", (128, 192, 256)[aux % 3])
    noncelen = 0 if "nonce" in sc.none else 1 + (aux * 7 + size) % 15
    aadlen = 0 if "aad" in sc.none else (size * 5 + aux) % 70
    nonce, aad, text = sc.rng.randbytes(noncelen), sc.rng.randbytes(aadlen), sc.rng.randbytes(size)
    args = {"tkey": tkey, "nonce": nonce or b"\0", "noncelen": noncelen, "aad": aad, "aadlen": aadlen,
            "in": text, "out": fill(sc.rng, size), "len": size}
    if fn == "otr_encrypt":
        inv = sc.call(fn, {**args, "tag": fill(sc.rng, TAG)}, test=True, alias=io_alias(sc))
        return inv.ret, out_if_placed(inv, "out"), inv.out("tag")
    ct, tag = otr_encrypt(key, nonce, aad, text) if noncelen else (text, bytes(TAG))
    if aux % 4 == 3:
        tag = bytes([tag[0] ^ 1]) + tag[1:]
    inv = sc.call(fn, {**args, "in": ct, "tag": tag}, test=True, alias=io_alias(sc))
    return inv.ret, out_if_placed(inv, "out")


SCENES = {"otr_set_key": scene_otr_set_key, "otr_encrypt": scene_otr, "otr_decrypt": scene_otr}


# ================================================================ units


def units(kernel: Kernel, *, n: int, quick: bool, seed: int) -> list[tuple[str, Unit]]:
    have = set(kernel.fn)
    out: list[tuple[str, Unit]] = []
    if "otr_set_key" not in have:
        return out
    for fn in ("otr_encrypt", "otr_decrypt"):
        if fn in have:
            out.append((f"kat {fn}", lambda p, fn=fn: kat_otr(kernel, fn, p, quick=quick, seed=seed)))
            out.append((f"diff {fn}", lambda p, fn=fn: (
                diff_otr(kernel, fn, b, p, quick=quick, seed=seed) for b in (128, 192, 256))))
    if "otr_decrypt" in have:
        out.append(("tamper otr_decrypt", lambda p: (
            tamper(kernel, "otr_decrypt", b, p, tamper_seal, otr_call, n=n, quick=quick, seed=seed, iv="nonce",
                   lengths=lambda rng: tamper_lengths(kernel, quick, rng),
                   aad_length=lambda j, rng: aad_length(j, kernel, rng)) for b in (128, 192, 256))))
    bad = [fn for fn in ("otr_set_key", "otr_encrypt", "otr_decrypt") if fn in have]
    out.append(("badargs otr", lambda p: (badargs_otr(kernel, fn, p, seed=seed) for fn in bad)))
    return out
