"""Checks for AES-GCM (one-shot and streaming) and GHASH kernels.

Check names (each a CheckResult):
  kat gcm_encrypt <file>        CAVP gcmEncryptExtIV128/192/256, McGrew-Viega (crypto++ gcm.txt)
  kat gcm_decrypt <file>        CAVP gcmDecrypt128/192/256 (FAIL cases: -1 and out zeroed), McGrew-Viega
  kat gcm_encrypt_update <file> the same vectors through start/aad/update/finish, random chunking
  kat gcm_decrypt_update <file>
  kat ghash <file>              GHASH known answers derived from the GCM vectors with a 96-bit IV:
                                GHASH_H(A || C || lengths) = tag xor E_K(J0)
  diff gcm_encrypt|gcm_decrypt <bits>   vs cryptography's AESGCM (IVs of 1..7 and >128 bytes, which
                                AESGCM refuses: J0 from reference/gcm.py, the rest through AESGCM)
  diff ghash                    vs reference/gcm.py, random H/acc/data, nblocks 0..N, continued accumulators
  tamper gcm_decrypt <bits>     a flipped tag/ciphertext/AAD/IV bit: -1, out zeroed
  stream gcm <bits>             random chunkings of AAD and text == one-shot == reference
  badargs gcm_set_key|gcm_encrypt|gcm_decrypt|gcm_start
  abi / guard / simulate        through the scenes below (SCENES; abi.py, guard.py, simcheck.py)

Every differential call runs in canary-padded buffers at random misalignments
(keys and contexts 64-byte aligned, as the ABI promises), and also checks that
nothing outside `out`/`tag`/`acc`/`ctx` was written and that read-only
buffers (in, aad, iv, tag on decrypt, the key) were left alone.
"""
from __future__ import annotations

import random
from functools import partial
from collections.abc import Callable, Iterator, Sequence

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from aesgen.verify import vectors
from aesgen.verify.aead_checks import (Message, aad_len, check_key_sizes, check_refusals, diff_aead,
                                       diff_hash,
                                       hash_scene_call, sealed_mismatch, tamper, text_lengths)
from aesgen.verify.build import Kernel
from aesgen.verify.harness.isolation import Probe, Unit
from aesgen.verify.harness.memory import HeapMem, Region
from aesgen.verify.harness.scene import (Caller, Invocation, Scene, SceneError, SceneFn, fill, invoke, io_alias,
                                         key_or_raise, out_if_placed)
from aesgen.verify.reference import gcm as gcm_ref
from aesgen.verify.reference.aes import aes_ecb
from aesgen.verify.results import CheckResult, first_diff, verdict

STREAM_FUNCTIONS = ("gcm_start", "gcm_aad", "gcm_encrypt_update", "gcm_decrypt_update", "gcm_finish")
BAD_TAGLENS = (0, 3, 17)
# IV lengths the differential cycles through: 12 (the fast path) most often, then short,
# block-sized, odd and long ones.  1..7 and >128 bytes need reference/gcm.py.
IV_LENGTHS = (12, 1, 12, 16, 13, 64, 12, 8, 60, 17, 12, 128, 7, 32, 12, 200)
# Messages long enough that the 32-bit counter's low byte wraps (block 254 of a 12-byte IV has
# counter 256; 8243 bytes wrap it twice), with a 12-byte IV (the public counter, the kernels'
# shuffle-free batches) and a hashed one: a fast batch whose closing increment wrapped a lane's
# byte 15 once lost that carry (avx512 512x1 and 512x3, from 4076 bytes on).
COUNTER_WRAP_LENGTHS = {4076: 12, 4111: 12, 8243: 12, 4099: 16}


# ================================================================ reference


def gcm_reference(key: bytes, iv: bytes, aad: bytes, pt: bytes, taglen: int) -> tuple[bytes, bytes, str]:
    """(ciphertext, tag, oracle): cryptography's AESGCM where it accepts the IV; otherwise
    (IVs of 1..7 or more than 128 bytes) reference/gcm.py computes J0 and AESGCM still does the bulk:
    with a 12-byte IV' and P' = C xor keystream(IV'), AESGCM's tag T' over (A, P') equals
    E_K(J0') xor GHASH_H(A || C || lengths), so tag = E_K(J0) xor E_K(J0') xor T'."""
    if 8 <= len(iv) <= 128:
        out = AESGCM(key).encrypt(iv, pt, aad)
        return out[:-16], out[-16:][:taglen], "AESGCM"
    h = gcm_ref.gcm_h(key)
    j0 = gcm_ref.gcm_j0(h, iv)
    ct = gcm_ref.gctr(key, gcm_ref.inc32(j0, 1), pt)
    iv2 = bytes(12)
    j0_2 = iv2 + b"\0\0\0\1"
    p2 = gcm_ref.gctr(key, gcm_ref.inc32(j0_2, 1), ct)
    t2 = AESGCM(key).encrypt(iv2, p2, aad)[-16:]
    tag = bytes(a ^ b ^ c for a, b, c in zip(aes_ecb(key, j0), aes_ecb(key, j0_2), t2))
    return ct, tag[:taglen], "reference J0 + AESGCM"


# ================================================================ case choices


# Streaming, each of the COUNTER_WRAP_LENGTHS is split after 16r + 0..15 bytes for every r below
# this (then once more at random), so that the second update's main loop starts at each counter
# mod 64 blocks (a 12-byte IV: its shuffle-free batches; 64 blocks, the largest batch) and runs
# across the low byte's carry.
STREAM_WRAP_SPLITS = 64


def _wrap_chunks(total: int, rng: random.Random, r: int) -> list[int]:
    """`total` bytes in 2 or 3 pieces, the first 16r + 0..15 bytes."""
    cuts = sorted({16 * r + rng.randrange(16), *(rng.randrange(1, total) for _ in range(rng.randrange(2)))})
    edges = [0, *(c for c in cuts if 0 < c < total), total]
    return [b - a for a, b in zip(edges, edges[1:])]


def _chunks(total: int, rng: random.Random) -> list[int]:
    """A random split of `total` bytes: empty pieces, single bytes, partial and whole blocks."""
    out: list[int] = []
    left = total
    while left > 0:
        kind = rng.randrange(8)
        if kind == 0:
            k = 0
        elif kind == 1:
            k = 1
        elif kind == 2:
            k = rng.randrange(1, 16)
        elif kind == 3:
            k = 16
        elif kind == 4:
            k = 16 * rng.randrange(1, 5)
        elif kind == 5:
            k = rng.randrange(17, 64)
        else:
            k = rng.randrange(1, left + 1)
        k = min(k, left)
        out.append(k)
        left -= k
    if rng.randrange(4) == 0:
        out.insert(rng.randrange(len(out) + 1), 0)
    return out


def _iv_len(i: int) -> int:
    return IV_LENGTHS[i % len(IV_LENGTHS)]


def _sample(vs: Sequence[vectors.AeadVector], quick: bool, per_group: int = 1) -> list[vectors.AeadVector]:
    """Quick: per parameter group the first `per_group` accepted and rejected cases; else everything."""
    if not quick:
        return list(vs)
    seen: dict[tuple[int, bool], int] = {}
    out = []
    for v in vs:
        k = (v.group, v.plaintext is None)
        if seen.get(k, 0) < per_group:
            seen[k] = seen.get(k, 0) + 1
            out.append(v)
    return out


def _have(kernel: Kernel, *fns: str) -> bool:
    return all(f in kernel.fn for f in fns)


# ================================================================ calls


def gcm_call(kernel: Kernel, mem, fn: str, gkey: Region, iv: bytes, aad: bytes, data: bytes,
             tag: bytes | int, *, rng: random.Random, in_place: bool = False,
             ivlen: int | None = None, taglen: int | None = None,
             caller: Caller | None = None) -> Invocation:
    """gcm_encrypt (tag: its length) or gcm_decrypt (tag: the bytes) with junk-filled outputs."""
    tag_bytes = tag if isinstance(tag, bytes) else fill(rng, tag)
    args = {"gkey": gkey, "iv": iv, "ivlen": len(iv) if ivlen is None else ivlen,
            "aad": aad, "aadlen": len(aad), "in": data, "out": fill(rng, len(data)), "len": len(data),
            "tag": tag_bytes, "taglen": len(tag_bytes) if taglen is None else taglen}
    return invoke(kernel, fn, mem, args, caller=caller, alias={"out": "in"} if in_place else None)


def gcm_stream(kernel: Kernel, mem, gkey: Region, iv: bytes, aad: bytes, data: bytes, *,
               decrypt: bool, rng: random.Random, aad_chunks: list[int] | None = None,
               text_chunks: list[int] | None = None, in_place_p: float = 0.3,
               ) -> tuple[int | None, bytes, bytes, list[str]]:
    """start / aad* / update* / finish with the given (or random) chunkings.
    Returns (start's return value, output, 16-byte tag, damage)."""
    ctx = mem.place("ctx", fill(rng, kernel.spec.gcm_ctx_bytes), aligned=True)
    damage: list[str] = []
    inv = invoke(kernel, "gcm_start", mem, {"ctx": ctx, "gkey": gkey, "iv": iv, "ivlen": len(iv)})
    damage += inv.damage
    if inv.ret != 0:
        return inv.ret, b"", b"", damage
    pos = 0
    for k in (aad_chunks if aad_chunks is not None else _chunks(len(aad), rng)):
        inv = invoke(kernel, "gcm_aad", mem, {"ctx": ctx, "aad": aad[pos:pos + k], "len": k})
        damage += inv.damage
        pos += k
    upd = "gcm_decrypt_update" if decrypt else "gcm_encrypt_update"
    out = bytearray()
    pos = 0
    for k in (text_chunks if text_chunks is not None else _chunks(len(data), rng)):
        piece = data[pos:pos + k]
        inv = invoke(kernel, upd, mem, {"ctx": ctx, "in": piece, "out": fill(rng, k), "len": k},
                     alias={"out": "in"} if rng.random() < in_place_p else None)
        damage += inv.damage
        out += inv.out("out")
        pos += k
    inv = invoke(kernel, "gcm_finish", mem, {"ctx": ctx, "tag": fill(rng, 16)})
    damage += inv.damage
    return 0, bytes(out), inv.out("tag"), damage


# ================================================================ known answers


def _gcm_files(kind: str, check: str) -> tuple[list[vectors.AeadFile], list[CheckResult]]:
    """The CAVP files of one kind, then crypto++'s McGrew-Viega cases; where crypto++ is not
    installed, the skip of `check` on those instead."""
    files, cpp = list(vectors.gcm_cavp(kind)), vectors.gcm_cryptopp()
    if cpp is not None:
        return files + [cpp], []
    return files, [CheckResult(f"{check} McGrew-Viega", "skip", "crypto++ test vectors not installed "
                               f"({vectors.CRYPTOPP_GCM}; Debian package libcrypto++-utils, see APT_PACKAGES "
                               "in the Makefile)")]


def kat_gcm(kernel: Kernel, fn: str, probe: Probe, *, quick: bool, seed: int) -> Iterator[CheckResult]:
    """One-shot gcm_encrypt / gcm_decrypt over the CAVP files and the McGrew-Viega cases."""
    decrypt = fn == "gcm_decrypt"
    files, skipped = _gcm_files("gcmDecrypt" if decrypt else "gcmEncryptExtIV", f"kat {fn}")
    for vf in files:
        name = f"kat {fn} {vf.name}"
        rng = random.Random(f"{seed}:{name}")
        mem = HeapMem(None)
        errors: list[str] = []
        cases = [v for v in _sample(vf.vectors, quick) if decrypt or v.plaintext is not None]
        rejected = 0
        for v in cases:
            probe.note(name, f"COUNT={v.count}")
            gkey = key_or_raise(kernel, mem, "gcm_set_key", v.key)
            if decrypt:
                inv = gcm_call(kernel, mem, fn, gkey, v.iv, v.aad, v.ciphertext, v.tag, rng=rng)
                out = inv.out("out")
                if v.plaintext is None:
                    rejected += 1
                    if inv.ret != -1:
                        errors.append(f"COUNT={v.count}: wrong tag accepted (returned {inv.ret})")
                    elif out != bytes(len(out)):
                        errors.append(f"COUNT={v.count}: returned -1 but out is not zeroed")
                elif inv.ret != 0:
                    errors.append(f"COUNT={v.count}: returned {inv.ret} for a valid tag")
                elif out != v.plaintext:
                    errors.append(f"COUNT={v.count}: plaintext {first_diff(out, v.plaintext)}")
            else:
                inv = gcm_call(kernel, mem, fn, gkey, v.iv, v.aad, v.plaintext or b"", len(v.tag), rng=rng)
                errors += sealed_mismatch(v, inv.ret, inv.out("out"), inv.out("tag"))
            errors += [f"COUNT={v.count}: {d}" for d in inv.damage]
        extra = f", {rejected} with a wrong tag" if decrypt else ""
        yield (verdict(name, errors, f"{len(cases)} vectors{extra}") if cases
               else CheckResult(name, "fail", "no vectors parsed"))
    yield from skipped


def kat_gcm_stream(kernel: Kernel, fn: str, probe: Probe, *, quick: bool, seed: int) -> Iterator[CheckResult]:
    """The GCM vectors through start/aad/update/finish with random chunkings (every parameter
    group; 3 cases of each, 1 when quick: the one-shot KAT runs every case)."""
    decrypt = fn == "gcm_decrypt_update"
    files, skipped = _gcm_files("gcmDecrypt" if decrypt else "gcmEncryptExtIV", f"kat {fn}")
    for vf in files:
        name = f"kat {fn} {vf.name}"
        rng = random.Random(f"{seed}:{name}")
        mem = HeapMem(rng)
        errors: list[str] = []
        cases = _sample(vf.vectors, True, 1 if quick else 3)
        for v in cases:
            probe.note(name, f"COUNT={v.count}")
            gkey = key_or_raise(kernel, mem, "gcm_set_key", v.key)
            t = len(v.tag)
            if decrypt:
                ret, out, tag, damage = gcm_stream(kernel, mem, gkey, v.iv, v.aad, v.ciphertext,
                                                   decrypt=True, rng=rng)
                if ret != 0:
                    errors.append(f"COUNT={v.count}: gcm_start returned {ret}")
                elif v.plaintext is None:
                    if tag[:t] == v.tag:
                        errors.append(f"COUNT={v.count}: finish produced the tag of a FAIL case")
                elif out != v.plaintext:
                    errors.append(f"COUNT={v.count}: plaintext {first_diff(out, v.plaintext)}")
                elif tag[:t] != v.tag:
                    errors.append(f"COUNT={v.count}: tag {tag[:t].hex()} want {v.tag.hex()}")
            else:
                if v.plaintext is None:
                    continue
                ret, out, tag, damage = gcm_stream(kernel, mem, gkey, v.iv, v.aad, v.plaintext,
                                                   decrypt=False, rng=rng)
                errors += sealed_mismatch(v, ret, out, tag[:t], "gcm_start returned")
            errors += [f"COUNT={v.count}: {d}" for d in damage]
        yield verdict(name, errors, f"{len(cases)} vectors, random chunkings")
    yield from skipped


def kat_ghash(kernel: Kernel, probe: Probe, *, quick: bool, seed: int) -> Iterator[CheckResult]:
    """GHASH answers derived from published GCM cases with a 96-bit IV:
    MSB_t(GHASH_H(A || C || len)) = tag xor MSB_t(E_K(J0)), E_K from cryptography's AES."""
    files, skipped = _gcm_files("gcmEncryptExtIV", "kat ghash")
    for vf in files:
        name = f"kat ghash {vf.name}"
        mem = HeapMem(None)
        errors: list[str] = []
        cases = [v for v in _sample(vf.vectors, quick) if len(v.iv) == 12 and v.plaintext is not None]
        for v in cases:
            probe.note(name, f"COUNT={v.count}")
            gkey = key_or_raise(kernel, mem, "gcm_set_key", v.key)
            data = gcm_ref.gcm_mac_input(v.aad, v.ciphertext)
            inv = invoke(kernel, "ghash", mem, {"gkey": gkey, "acc": bytes(16), "data": data,
                                               "nblocks": len(data) // 16})
            t = len(v.tag)
            want = bytes(a ^ b for a, b in zip(v.tag, aes_ecb(v.key, v.iv + b"\0\0\0\1")))
            got = inv.out("acc")[:t]
            if got != want:
                errors.append(f"COUNT={v.count}: GHASH {got.hex()} want {want.hex()} (first {t} bytes)")
            errors += [f"COUNT={v.count}: {d}" for d in inv.damage]
        yield verdict(name, errors, f"{len(cases)} vectors (96-bit IVs), GHASH = tag xor E_K(J0)")
    yield from skipped


# ================================================================ differential


def diff_gcm(kernel: Kernel, fn: str, bits: int, probe: Probe, *, n: int, quick: bool,
             seed: int) -> CheckResult:
    def message(rng: random.Random, j: int, length: int) -> Message:
        ivlen, taglen = COUNTER_WRAP_LENGTHS.get(length, _iv_len(j)), 4 + j % 13
        aadlen = aad_len(j, n, rng)
        key, iv, aad, pt = (rng.randbytes(bits // 8), rng.randbytes(ivlen), rng.randbytes(aadlen),
                            rng.randbytes(length))
        ct, tag, oracle = gcm_reference(key, iv, aad, pt, taglen)
        return Message(key, iv, aad, pt, ct, tag, f"ivlen={ivlen} taglen={taglen}", oracle)

    top = 16 * n + 15
    return diff_aead(kernel, fn, bits, probe, "gcm_set_key", message, gcm_call,
                     lengths=lambda rng: text_lengths(n, quick, rng) + sorted(COUNTER_WRAP_LENGTHS),
                     quick=quick, seed=seed,
                     summary=lambda calls, lengths, oracles: f"{calls} calls, len<={top} and "
                     f"{','.join(map(str, sorted(COUNTER_WRAP_LENGTHS)))} (the counter's low byte wraps), "
                     f"AAD 0..{top}, IV lengths "
                     f"{sorted(set(IV_LENGTHS))}, taglen 4..16, misaligned, in-place; vs {'+'.join(sorted(oracles))}")


def ghash_key(kernel: Kernel, rng: random.Random, mem: HeapMem, nb: int, r: int) -> tuple[dict, Callable]:
    """diff_hash's key for ghash: H = E_K(0) for a random key of each size in turn."""
    bits = (128, 192, 256)[(nb + r) % 3]
    key = rng.randbytes(bits // 8)
    gkey = key_or_raise(kernel, mem, "gcm_set_key", key)
    h = gcm_ref.gcm_h(key)
    return {"gkey": gkey}, lambda data, acc: gcm_ref.ghash(h, data, acc)


def tamper_seal(kernel: Kernel, rng: random.Random, mem: HeapMem, key: bytes, aad: bytes, pt: bytes,
                j: int) -> tuple[Region, bytes, bytes, bytes]:
    """tamper's valid message: an IV of the j-th length, tag length 4..16."""
    iv = rng.randbytes(_iv_len(j))
    taglen = 4 + j % 13
    k = key_or_raise(kernel, mem, "gcm_set_key", key)
    ct, tag, _ = gcm_reference(key, iv, aad, pt, taglen)
    return k, iv, ct, tag


# ================================================================ streaming


def stream_gcm(kernel: Kernel, bits: int, probe: Probe, *, n: int, quick: bool, seed: int) -> CheckResult:
    """Random chunkings of AAD and text through start/aad/update/finish == one-shot == reference,
    for encryption and decryption."""
    name = f"stream gcm {bits}"
    rng = random.Random(f"{seed}:{name}")
    oneshot = _have(kernel, "gcm_encrypt", "gcm_decrypt")
    errors: list[str] = []
    trials = 0
    lengths = text_lengths(n, True, rng) if quick else text_lengths(n, False, rng)
    wraps = [(length, ivlen, k) for length, ivlen in sorted(COUNTER_WRAP_LENGTHS.items())
             for k in range(STREAM_WRAP_SPLITS)]
    for i, length in enumerate(lengths + [w[0] for w in wraps]):
        wrap = wraps[i - len(lengths)] if i >= len(lengths) else None
        ivlen = wrap[1] if wrap else _iv_len(i)
        chunk = partial(_wrap_chunks, r=wrap[2]) if wrap else _chunks
        aadlen = aad_len(i + 1, n, rng) if i % 3 else rng.randrange(1, 48)
        key, iv, aad, pt = (rng.randbytes(bits // 8), rng.randbytes(ivlen), rng.randbytes(aadlen),
                            rng.randbytes(length))
        mem = HeapMem(rng)
        gkey = key_or_raise(kernel, mem, "gcm_set_key", key)
        ct, tag, oracle = gcm_reference(key, iv, aad, pt, 16)
        a_chunks, t_chunks = _chunks(aadlen, rng), chunk(length, rng)
        what = f"len={length} aadlen={aadlen} ivlen={ivlen} aad chunks {a_chunks} text chunks {t_chunks}"
        probe.note(name, what)
        ret, out, stag, damage = gcm_stream(kernel, mem, gkey, iv, aad, pt, decrypt=False, rng=rng,
                                            aad_chunks=a_chunks, text_chunks=t_chunks)
        errors += [f"{what}: {d}" for d in damage]
        if ret != 0:
            errors.append(f"{what}: gcm_start returned {ret}")
            continue
        if oneshot:
            inv = gcm_call(kernel, mem, "gcm_encrypt", gkey, iv, aad, pt, 16, rng=rng)
            if (out, stag) != (inv.out("out"), inv.out("tag")):
                part = "ciphertext" if out != inv.out("out") else "tag"
                errors.append(f"encrypt {what}: streamed {part} differs from gcm_encrypt's")
        if out != ct:
            errors.append(f"encrypt {what}: ciphertext {first_diff(out, ct)} ({oracle})")
        elif stag != tag:
            errors.append(f"encrypt {what}: tag {stag.hex()} want {tag.hex()} ({oracle})")
        # decrypt with a different chunking
        a_chunks, t_chunks = _chunks(aadlen, rng), chunk(length, rng)
        what = f"len={length} aadlen={aadlen} ivlen={ivlen} aad chunks {a_chunks} text chunks {t_chunks}"
        ret, out, dtag, damage = gcm_stream(kernel, mem, gkey, iv, aad, ct, decrypt=True, rng=rng,
                                            aad_chunks=a_chunks, text_chunks=t_chunks)
        errors += [f"{what}: {d}" for d in damage]
        if out != pt:
            errors.append(f"decrypt {what}: plaintext {first_diff(out, pt)}")
        elif dtag != tag:
            errors.append(f"decrypt {what}: tag {dtag.hex()} want {tag.hex()}")
        elif oneshot:
            inv = gcm_call(kernel, mem, "gcm_decrypt", gkey, iv, aad, ct, tag, rng=rng)
            if inv.ret != 0 or inv.out("out") != out:
                errors.append(f"decrypt {what}: gcm_decrypt disagrees with the stream (returned {inv.ret})")
        trials += 1
        if len(errors) >= 3:
            return verdict(name, errors, "")
    against = "gcm_encrypt/gcm_decrypt and " if oneshot else ""
    return verdict(name, errors, f"{trials} messages, encrypt and decrypt, random AAD/text chunkings "
                   f"(empty, 1-byte, partial and whole blocks, in place; lengths "
                   f"{','.join(map(str, sorted(COUNTER_WRAP_LENGTHS)))} each split after 16r + 0..15 "
                   f"bytes, r < {STREAM_WRAP_SPLITS}); equal to {against}the reference")


# ================================================================ bad arguments


def badargs(kernel: Kernel, fn: str, probe: Probe, *, seed: int) -> CheckResult:
    if fn == "gcm_set_key":
        return check_key_sizes(kernel, fn, probe, seed=seed)
    decrypt = fn == "gcm_decrypt"

    def start(rng: random.Random, mem: HeapMem, gkey: Region) -> Iterator[tuple[str, Invocation, int]]:
        ctx = mem.place("ctx", fill(rng, kernel.spec.gcm_ctx_bytes), aligned=True)
        yield "ivlen=0", invoke(kernel, fn, mem, {"ctx": ctx, "gkey": gkey, "iv": rng.randbytes(12), "ivlen": 0}), 0

    def oneshot(rng: random.Random, mem: HeapMem, gkey: Region) -> Iterator[tuple[str, Invocation, int]]:
        for label, ivlen, taglen in [("ivlen=0", 0, 16)] + [(f"taglen={t}", 12, t) for t in BAD_TAGLENS]:
            for length in (0, 33):
                iv, aad, data = rng.randbytes(12), rng.randbytes(20), rng.randbytes(length)
                tag = rng.randbytes(max(taglen, 16))
                yield f"{label} len={length}", gcm_call(kernel, mem, fn, gkey, iv, aad, data,
                                                        tag if decrypt else max(taglen, 16), rng=rng, ivlen=ivlen,
                                                        taglen=taglen), length

    if fn == "gcm_start":
        return check_refusals(kernel, fn, probe, "gcm_set_key", start, "ivlen 0", zeroed=False, seed=seed)
    return check_refusals(kernel, fn, probe, "gcm_set_key", oneshot,
                          "ivlen 0, taglen " + ", ".join(map(str, BAD_TAGLENS)), zeroed=decrypt, seed=seed)


# ================================================================ scenes for abi, guard and simulate


def scene_gcm_oneshot(sc: Scene, fn: str, size: int, aux: int) -> tuple:
    key, gkey = sc.key("gcm_set_key")
    ivlen, taglen = _iv_len(aux), 4 + aux % 13
    if "iv" in sc.none:
        ivlen = 0
    aadlen = 0 if "aad" in sc.none else (size * 7 + aux) % (16 * max(1, size // 16 + 2))
    iv, aad, text = sc.rng.randbytes(ivlen), sc.rng.randbytes(aadlen), sc.rng.randbytes(size)
    if fn == "gcm_encrypt":
        args = {"gkey": gkey, "iv": iv, "ivlen": ivlen, "aad": aad, "aadlen": aadlen, "in": text,
                "out": fill(sc.rng, size), "len": size, "tag": fill(sc.rng, taglen), "taglen": taglen}
        inv = sc.call(fn, args, test=True, alias=io_alias(sc))
        return inv.ret, out_if_placed(inv, "out"), inv.out("tag")
    if "gcm_encrypt" in sc.kernel.fn:  # a valid ciphertext and tag, made by the code under test
        enc = sc.call("gcm_encrypt", {"gkey": gkey, "iv": iv, "ivlen": ivlen, "aad": aad, "aadlen": aadlen,
                                      "in": text, "out": bytes(size), "len": size, "tag": bytes(taglen),
                                      "taglen": taglen})
        ct, tag = enc.out("out"), enc.out("tag")
    else:
        ct, tag, _ = gcm_reference(key, iv, aad, text, taglen)
    if aux % 4 == 3:  # sometimes a wrong tag: the zeroing path runs too
        tag = bytes([tag[0] ^ 1]) + tag[1:]
    args = {"gkey": gkey, "iv": iv, "ivlen": ivlen, "aad": aad, "aadlen": aadlen, "in": ct,
            "out": fill(sc.rng, size), "len": size, "tag": tag, "taglen": taglen}
    inv = sc.call(fn, args, test=True, alias=io_alias(sc))
    return inv.ret, out_if_placed(inv, "out")


def scene_gcm_stream(sc: Scene, fn: str, size: int, aux: int) -> tuple:
    _, gkey = sc.key("gcm_set_key")
    ctx = sc.mem.place("ctx", fill(sc.rng, sc.kernel.spec.gcm_ctx_bytes), aligned=True)  # type: ignore[attr-defined]
    res: list = []
    ivlen = size + 1 if fn == "gcm_start" else _iv_len(aux)
    if fn == "gcm_start" and "iv" in sc.none:
        ivlen = 0
    inv = sc.call("gcm_start", {"ctx": ctx, "gkey": gkey, "iv": sc.rng.randbytes(ivlen), "ivlen": ivlen},
                  test=fn == "gcm_start")
    res.append(inv.ret)
    if inv.ret != 0:
        if fn == "gcm_start":
            return tuple(res)
        raise SceneError(f"gcm_start(ivlen={ivlen}) returned {inv.ret}")
    if fn == "gcm_aad":
        first = aux % 17
        sc.call("gcm_aad", {"ctx": ctx, "aad": sc.rng.randbytes(first), "len": first})
        sc.call("gcm_aad", {"ctx": ctx, "aad": sc.rng.randbytes(size), "len": size}, test=True)
    else:
        k = (aux * 5) % 40
        sc.call("gcm_aad", {"ctx": ctx, "aad": sc.rng.randbytes(k), "len": k})
    upd = "gcm_decrypt_update" if fn == "gcm_decrypt_update" else "gcm_encrypt_update"
    if fn in ("gcm_encrypt_update", "gcm_decrypt_update"):
        first = aux % 17
        inv = sc.call(upd, {"ctx": ctx, "in": sc.rng.randbytes(first), "out": bytes(first), "len": first})
        res.append(inv.out("out"))
        inv = sc.call(upd, {"ctx": ctx, "in": sc.rng.randbytes(size), "out": fill(sc.rng, size), "len": size},
                      test=True, alias=io_alias(sc))
        res.append(out_if_placed(inv, "out"))
    else:
        k = size if fn == "gcm_finish" else size % 50
        inv = sc.call(upd, {"ctx": ctx, "in": sc.rng.randbytes(k), "out": bytes(k), "len": k},
                      alias=io_alias(sc))
        res.append(inv.out("out"))
    inv = sc.call("gcm_finish", {"ctx": ctx, "tag": fill(sc.rng, 16)}, test=fn == "gcm_finish")
    res.append(inv.out("tag"))
    return tuple(res)


def scene_ghash(sc: Scene, fn: str, size: int, aux: int) -> tuple:
    _, gkey = sc.key("gcm_set_key")
    return hash_scene_call(sc, fn, size, {"gkey": gkey})


SCENES: dict[str, SceneFn] = {
    "gcm_encrypt": scene_gcm_oneshot, "gcm_decrypt": scene_gcm_oneshot,
    **{f: scene_gcm_stream for f in STREAM_FUNCTIONS},
    "ghash": scene_ghash,
}


# ================================================================ units


def units(kernel: Kernel, *, n: int, quick: bool, seed: int) -> list[tuple[str, Unit]]:
    """Known-answer, differential, tamper, streaming and bad-argument units for the GCM and
    GHASH functions present (ABI, guard and simulator units replay SCENES)."""
    have = set(kernel.fn)
    out: list[tuple[str, Unit]] = []
    for fn in ("gcm_encrypt", "gcm_decrypt"):
        if fn in have:
            out.append((f"kat {fn}", lambda p, fn=fn: kat_gcm(kernel, fn, p, quick=quick, seed=seed)))
    if set(STREAM_FUNCTIONS) <= have:
        for fn in ("gcm_encrypt_update", "gcm_decrypt_update"):
            out.append((f"kat {fn}", lambda p, fn=fn: kat_gcm_stream(kernel, fn, p, quick=quick, seed=seed)))
    if "ghash" in have:
        out.append(("kat ghash", lambda p: kat_ghash(kernel, p, quick=quick, seed=seed)))

    for fn in ("gcm_encrypt", "gcm_decrypt"):
        if fn in have:
            out.append((f"diff {fn}", lambda p, fn=fn: (
                diff_gcm(kernel, fn, b, p, n=n, quick=quick, seed=seed) for b in (128, 192, 256))))
    if "ghash" in have:
        out.append(("diff ghash", lambda p: iter([
            diff_hash(kernel, "ghash", p, ghash_key, "reference ghash", n=n, quick=quick, seed=seed)])))
    if "gcm_decrypt" in have:
        out.append(("tamper gcm_decrypt", lambda p: (
            tamper(kernel, "gcm_decrypt", b, p, tamper_seal, gcm_call, n=n, quick=quick, seed=seed)
            for b in (128, 192, 256))))
    if set(STREAM_FUNCTIONS) <= have:
        out.append(("stream gcm", lambda p: (
            stream_gcm(kernel, b, p, n=n, quick=quick, seed=seed) for b in (128, 192, 256))))
    bad = [fn for fn in ("gcm_set_key", "gcm_encrypt", "gcm_decrypt", "gcm_start") if fn in have]
    if bad:
        out.append(("badargs gcm", lambda p: (badargs(kernel, fn, p, seed=seed) for fn in bad)))
    return out
