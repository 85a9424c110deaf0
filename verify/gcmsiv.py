"""Checks for AES-GCM-SIV (RFC 8452) and POLYVAL kernels.

Check names (each a CheckResult):
  kat polyval RFC8452           RFC 8452 Appendix A (in one call and continued over two)
  kat polyval RFC8452-128/-256  POLYVAL derived from the Appendix C GCM-SIV cases (127 of 128 bits)
  kat gcmsiv_encrypt|decrypt RFC8452-128/-256
  diff gcmsiv_encrypt|gcmsiv_decrypt <bits>  vs cryptography's AESGCMSIV
  diff polyval                  vs reference/gcmsiv.py, random H/acc/data, nblocks 0..N, continued accumulators
  tamper gcmsiv_decrypt <bits>  a flipped tag/ciphertext/AAD/nonce bit: -1, out zeroed
  badargs gcmsiv_set_key        bits 0, 64, 192, 512 rejected
  abi / guard / simulate        through the scenes below (SCENES; abi.py, guard.py, simcheck.py)

As for GCM (gcm.py), every call runs in canary-padded, misaligned buffers and also checks that
nothing outside the outputs was written and that read-only buffers were left alone.
"""
from __future__ import annotations

import random
from collections.abc import Callable, Iterator

from cryptography.hazmat.primitives.ciphers.aead import AESGCMSIV

from aesgen.verify import vectors
from aesgen.verify.aead_checks import (Message, aad_len, check_key_sizes, diff_aead, diff_hash, hash_scene_call,
                                       sealed_mismatch, tamper, text_lengths)
from aesgen.verify.build import Kernel
from aesgen.verify.harness.isolation import Probe, Unit
from aesgen.verify.harness.memory import HeapMem, Region
from aesgen.verify.harness.scene import (Caller, Invocation, Scene, SceneFn, fill, invoke, io_alias, key_or_raise,
                                         out_if_placed)
from aesgen.verify.reference import gcmsiv as gcmsiv_ref
from aesgen.verify.reference.aes import aes_ecb
from aesgen.verify.reference.gcm import pad16
from aesgen.verify.results import CheckResult, first_diff, verdict



# ================================================================ reference and calls


def gcmsiv_reference(key: bytes, nonce: bytes, aad: bytes, pt: bytes) -> tuple[bytes, bytes]:
    out = AESGCMSIV(key).encrypt(nonce, pt, aad)
    return out[:-16], out[-16:]


def gcmsiv_call(kernel: Kernel, mem, fn: str, skey: Region, nonce: bytes, aad: bytes, data: bytes,
                tag: bytes | int, *, rng: random.Random, in_place: bool = False,
                caller: Caller | None = None) -> Invocation:
    """gcmsiv_encrypt (tag: its length, 16) or gcmsiv_decrypt (tag: the bytes), junk-filled outputs."""
    args = {"skey": skey, "nonce": nonce, "aad": aad, "aadlen": len(aad), "in": data,
            "out": fill(rng, len(data)), "len": len(data), "tag": tag if isinstance(tag, bytes) else fill(rng, tag)}
    return invoke(kernel, fn, mem, args, caller=caller, alias={"out": "in"} if in_place else None)


# ================================================================ known answers


def kat_polyval(kernel: Kernel, probe: Probe, *, quick: bool, seed: int) -> Iterator[CheckResult]:
    name = "kat polyval RFC8452"
    probe.note(name, "Appendix A")
    ex = vectors.RFC8452_POLYVAL
    mem = HeapMem(None)
    errors = []
    inv = invoke(kernel, "polyval", mem, {"h": ex["H"], "acc": bytes(16), "data": ex["X"], "nblocks": 2})
    if inv.out("acc") != ex["POLYVAL"]:
        errors.append(f"POLYVAL(H, X1, X2) = {inv.out('acc').hex()} want {ex['POLYVAL'].hex()}")
    errors += inv.damage
    acc = bytes(16)
    for i in range(2):
        inv = invoke(kernel, "polyval", mem, {"h": ex["H"], "acc": acc, "data": ex["X"][16 * i:16 * i + 16],
                                              "nblocks": 1})
        acc = inv.out("acc")
    if acc != ex["POLYVAL"]:
        errors.append(f"continued over two calls: {acc.hex()} want {ex['POLYVAL'].hex()}")
    yield verdict(name, errors, "Appendix A, one call and continued over two")

    # POLYVAL inside the Appendix C AES-GCM-SIV cases: the tag decrypted under the message
    # encryption key is POLYVAL xor nonce with the top bit cleared.
    for vf in vectors.gcmsiv_rfc8452():
        name = f"kat polyval {vf.name}"
        errors = []
        for v in vf.vectors:
            probe.note(name, f"COUNT={v.count}")
            auth, enc = gcmsiv_ref.gcmsiv_keys(v.key, v.iv)
            s = bytearray(aes_ecb(enc, v.tag, decrypt=True))
            for i in range(12):
                s[i] ^= v.iv[i]
            pt = v.plaintext or b""
            data = pad16(v.aad) + pad16(pt) + (8 * len(v.aad)).to_bytes(8, "little") \
                + (8 * len(pt)).to_bytes(8, "little")
            inv = invoke(kernel, "polyval", mem, {"h": auth, "acc": bytes(16), "data": data,
                                                  "nblocks": len(data) // 16})
            got = bytearray(inv.out("acc"))
            got[15] &= 0x7F
            if bytes(got) != bytes(s):
                errors.append(f"COUNT={v.count}: POLYVAL {bytes(got).hex()} want {bytes(s).hex()} (bit 127 ignored)")
            errors += inv.damage
        yield verdict(name, errors, f"{len(vf.vectors)} GCM-SIV cases, 127 of 128 bits")


def kat_gcmsiv(kernel: Kernel, fn: str, probe: Probe, *, quick: bool, seed: int) -> Iterator[CheckResult]:
    decrypt = fn == "gcmsiv_decrypt"
    for vf in vectors.gcmsiv_rfc8452():
        name = f"kat {fn} {vf.name}"
        rng = random.Random(f"{seed}:{name}")
        mem = HeapMem(None)
        errors: list[str] = []
        for v in vf.vectors:
            probe.note(name, f"COUNT={v.count}")
            skey = key_or_raise(kernel, mem, "gcmsiv_set_key", v.key)
            pt = v.plaintext or b""
            if decrypt:
                inv = gcmsiv_call(kernel, mem, fn, skey, v.iv, v.aad, v.ciphertext, v.tag, rng=rng)
                if inv.ret != 0:
                    errors.append(f"COUNT={v.count}: returned {inv.ret} for a valid tag")
                elif inv.out("out") != pt:
                    errors.append(f"COUNT={v.count}: plaintext {first_diff(inv.out('out'), pt)}")
            else:
                inv = gcmsiv_call(kernel, mem, fn, skey, v.iv, v.aad, pt, 16, rng=rng)
                errors += sealed_mismatch(v, inv.ret, inv.out("out"), inv.out("tag"))
            errors += [f"COUNT={v.count}: {d}" for d in inv.damage]
        yield verdict(name, errors, f"{len(vf.vectors)} vectors (Appendix C, incl. counter wrap)")


# ================================================================ differential


def diff_gcmsiv(kernel: Kernel, fn: str, bits: int, probe: Probe, *, n: int, quick: bool,
                seed: int) -> CheckResult:
    def message(rng: random.Random, j: int, length: int) -> Message:
        aadlen = aad_len(j, n, rng)
        key, nonce, aad, pt = rng.randbytes(bits // 8), rng.randbytes(12), rng.randbytes(aadlen), rng.randbytes(length)
        return Message(key, nonce, aad, pt, *gcmsiv_reference(key, nonce, aad, pt))

    return diff_aead(kernel, fn, bits, probe, "gcmsiv_set_key", message, gcmsiv_call,
                     lengths=lambda rng: text_lengths(n, quick, rng), quick=quick, seed=seed,
                     summary=lambda calls, lengths, oracles: f"{calls} calls, len<={16 * n + 15}, "
                     f"AAD 0..{16 * n + 15}, misaligned, in-place; vs AESGCMSIV")


def polyval_key(kernel: Kernel, rng: random.Random, mem: HeapMem, nb: int, r: int) -> tuple[dict, Callable]:
    """diff_hash's key for polyval: a random H."""
    h = rng.randbytes(16)
    return {"h": h}, lambda data, acc: gcmsiv_ref.polyval(h, data, acc)


def tamper_seal(kernel: Kernel, rng: random.Random, mem: HeapMem, key: bytes, aad: bytes, pt: bytes,
                j: int) -> tuple[Region, bytes, bytes, bytes]:
    """tamper's valid message: a random 12-byte nonce."""
    nonce = rng.randbytes(12)
    k = key_or_raise(kernel, mem, "gcmsiv_set_key", key)
    ct, tag = gcmsiv_reference(key, nonce, aad, pt)
    return k, nonce, ct, tag


# ================================================================ scenes for abi, guard and simulate


def scene_polyval(sc: Scene, fn: str, size: int, aux: int) -> tuple:
    return hash_scene_call(sc, fn, size, {"h": sc.rng.randbytes(16)})


def scene_gcmsiv(sc: Scene, fn: str, size: int, aux: int) -> tuple:
    key, skey = sc.key("gcmsiv_set_key")
    aadlen = 0 if "aad" in sc.none else (size * 7 + aux) % (16 * max(1, size // 16 + 2))
    nonce, aad, text = sc.rng.randbytes(12), sc.rng.randbytes(aadlen), sc.rng.randbytes(size)
    if fn == "gcmsiv_encrypt":
        args = {"skey": skey, "nonce": nonce, "aad": aad, "aadlen": aadlen, "in": text,
                "out": fill(sc.rng, size), "len": size, "tag": fill(sc.rng, 16)}
        inv = sc.call(fn, args, test=True, alias=io_alias(sc))
        return inv.ret, out_if_placed(inv, "out"), inv.out("tag")
    ct, tag = gcmsiv_reference(key, nonce, aad, text)
    if aux % 4 == 3:
        tag = bytes([tag[0] ^ 1]) + tag[1:]
    args = {"skey": skey, "nonce": nonce, "aad": aad, "aadlen": aadlen, "in": ct,
            "out": fill(sc.rng, size), "len": size, "tag": tag}
    inv = sc.call(fn, args, test=True, alias=io_alias(sc))
    return inv.ret, out_if_placed(inv, "out")


SCENES: dict[str, SceneFn] = {
    "polyval": scene_polyval, "gcmsiv_encrypt": scene_gcmsiv, "gcmsiv_decrypt": scene_gcmsiv,
}


# ================================================================ units


def units(kernel: Kernel, *, n: int, quick: bool, seed: int) -> list[tuple[str, Unit]]:
    """Known-answer, differential, tamper and bad-argument units for the GCM-SIV and POLYVAL
    functions present (ABI, guard and simulator units replay SCENES)."""
    have = set(kernel.fn)
    out: list[tuple[str, Unit]] = []
    if "polyval" in have:
        out.append(("kat polyval", lambda p: kat_polyval(kernel, p, quick=quick, seed=seed)))
    for fn in ("gcmsiv_encrypt", "gcmsiv_decrypt"):
        if fn in have:
            out.append((f"kat {fn}", lambda p, fn=fn: kat_gcmsiv(kernel, fn, p, quick=quick, seed=seed)))

    for fn in ("gcmsiv_encrypt", "gcmsiv_decrypt"):
        if fn in have:
            out.append((f"diff {fn}", lambda p, fn=fn: (
                diff_gcmsiv(kernel, fn, b, p, n=n, quick=quick, seed=seed) for b in (128, 256))))
    if "polyval" in have:
        out.append(("diff polyval", lambda p: iter([
            diff_hash(kernel, "polyval", p, polyval_key, "reference polyval", n=n, quick=quick, seed=seed)])))
    if "gcmsiv_decrypt" in have:
        out.append(("tamper gcmsiv_decrypt", lambda p: (
            tamper(kernel, "gcmsiv_decrypt", b, p, tamper_seal, gcmsiv_call, n=n, quick=quick, seed=seed)
            for b in (128, 256))))
    if "gcmsiv_set_key" in have:
        out.append(("badargs gcmsiv_set_key", lambda p: iter([
            check_key_sizes(kernel, "gcmsiv_set_key", p, seed=seed)])))
    return out
