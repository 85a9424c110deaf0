"""Checks for the batched kernels: set_encrypt_keys + ecb_encrypt_multikey, fixed_key_hash and
cbc_encrypt_multi (kernels/mpc.py).

Check names:
  kat ecb_encrypt_multikey <file>   FIPS-197 Appendix C, SP 800-38A F.1 (each key three times) and
                                    the CAVP ECB files: a file's vectors
                                    of one length become the keys of one call (block i of key k)
  kat fixed_key_hash <file>         the same vectors through sigma: the input sigma^-1(P) must hash
                                    to C ^ P (pi(sigma(x)) ^ sigma(x) with sigma(x) = P)
  kat cbc_encrypt_multi <file>      FIPS-197, SP 800-38A F.2 (each five times) and the CAVP CBC
                                    files: a file's vectors of one length
                                    become the streams of one call (own key and IV each); the IVs
                                    must hold the last ciphertext blocks on return
  diff <fn> <bits>                  random keys and data vs `cryptography` (each key's ECB, each
                                    stream's CBC; the hash: AES-ECB and `sigma_reference`), every key
                                    or stream count from 0 to two batches and a few, blocks 0..N,
                                    misaligned and in place; set_encrypt_keys vs the FIPS-197
                                    expansion laid out as documented (every byte it writes)
  abi / guard / simulate            through the scenes below (SCENES, collected by verify/scenes.py):
                                    every stream's key, input, output and IV has a guarded mapping
                                    of its own
"""
from __future__ import annotations

import random
import struct
from collections.abc import Iterator

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from aesgen.spec import MULTIKEY_BYTES
from aesgen.verify import vectors
from aesgen.verify.build import Kernel
from aesgen.verify.harness.isolation import Probe, Unit
from aesgen.verify.harness.memory import HeapMem, Region
from aesgen.verify.harness.scene import Scene, SceneError, fill, invoke, io_alias
from aesgen.verify.kat import expand_key
from aesgen.verify.reference.aes import aes_ecb
from aesgen.verify.results import CheckResult, verdict

BITS = (128, 192, 256)


# ================================================================ references (from the definitions)


def sigma_reference(x: bytes) -> bytes:
    """sigma(xL || xR) = (xL ^ xR) || xL, xL = bytes 0..7 and xR = bytes 8..15 of the block."""
    xl, xr = x[:8], x[8:16]
    return bytes(a ^ b for a, b in zip(xl, xr)) + xl


def sigma_inverse(s: bytes) -> bytes:
    """The x with sigma(x) = s: xL = s[8..15], xR = s[0..7] ^ s[8..15]."""
    return s[8:16] + bytes(a ^ b for a, b in zip(s[:8], s[8:16]))


def aes_cbc(key: bytes, iv: bytes, data: bytes) -> bytes:
    enc = Cipher(algorithms.AES(key), modes.CBC(iv)).encryptor()
    return enc.update(data) + enc.finalize()


def hash_reference(key: bytes, data: bytes) -> bytes:
    """pi(sigma(x)) ^ sigma(x) per block, pi = AES under `key` (cryptography)."""
    out = b""
    for i in range(0, len(data), 16):
        s = sigma_reference(data[i:i + 16])
        out += bytes(a ^ b for a, b in zip(aes_ecb(key, s), s))
    return out


def multikey_layout(lanes: int, keys: list[bytes]) -> dict[int, bytes]:
    """offset -> bytes set_encrypt_keys must write: round key r of key k at
    (k // L) * 256L + 16L * r + 16 * (k % L), its round count (32-bit) at row 15."""
    out: dict[int, bytes] = {}
    for k, key in enumerate(keys):
        g, lane = divmod(k, lanes)
        base = g * MULTIKEY_BYTES * lanes + 16 * lane
        rks = expand_key(key)
        for r, rk in enumerate(rks):
            out[base + 16 * lanes * r] = rk
        out[base + 16 * lanes * 15] = struct.pack("<I", len(rks) - 1)
    return out


# ================================================================ calls


def _lanes_depth(kernel: Kernel, mode: str) -> tuple[int, int]:
    spec = kernel.spec
    return spec.width_for(mode) // 128, spec.depth_for(mode)


def set_keys(kernel: Kernel, mem, keys: list[bytes], bits: int, caller=None) -> tuple[int, Region]:
    size = kernel.spec.multikey_schedule_bytes(len(keys))
    inv = invoke(kernel, "set_encrypt_keys", mem, {"user_keys": b"".join(keys) or b"\0", "bits": bits,
                                                  "nkeys": len(keys), "keys": b"\xa5" * size}, caller=caller)
    return inv.ret, inv.regions["keys"]  # type: ignore[return-value]


def schedule(kernel: Kernel, mem, key: bytes, label: str, caller=None) -> Region:
    """An ordinary set_encrypt_key schedule placed under `label` (its own guarded mapping)."""
    region = mem.place(label, b"\xa5" * kernel.spec.key_bytes, aligned=True)
    inv = invoke(kernel, "set_encrypt_key", mem, {"user_key": key, "bits": 8 * len(key), "key": region},
                 caller=caller)
    if inv.ret != 0:
        raise SceneError(f"set_encrypt_key(bits={8 * len(key)}) returned {inv.ret}")
    return region


def multikey_call(sc: Scene, keys: list[bytes], bits: int, data: bytes, bpk: int) -> bytes | None:
    ret, region = set_keys(sc.kernel, sc.mem, keys, bits, caller=sc.setup_caller)
    if ret != 0:
        raise SceneError(f"set_encrypt_keys(bits={bits}) returned {ret}")
    args = {"keys": region, "nkeys": len(keys), "in": data or b"\0", "out": fill(sc.rng, max(1, len(data))),
            "blocks_per_key": bpk}
    inv = sc.call("ecb_encrypt_multikey", args, test=True, alias=io_alias(sc))
    return inv.out("out")[:len(data)] if "out" in inv.regions else None


def multi_cbc_call(sc: Scene, keys: list[bytes], ivs: list[bytes], texts: list[bytes]) -> tuple[list[bytes], list[bytes]]:
    """cbc_encrypt_multi over len(keys) streams; (outputs, IVs on return)."""
    n = len(keys)
    nblocks = len(texts[0]) // 16 if texts else 0
    ks = [schedule(sc.kernel, sc.mem, k, f"key{s}", sc.setup_caller) for s, k in enumerate(keys)]
    ins = [sc.mem.place(f"in{s}", t or b"\0") for s, t in enumerate(texts)]
    outs = ins if sc.in_place else [sc.mem.place(f"out{s}", fill(sc.rng, max(1, len(t)))) for s, t in enumerate(texts)]
    iv_regions = [sc.mem.place(f"iv{s}", iv) for s, iv in enumerate(ivs)]

    def table(regions: list[Region]) -> bytes:
        return struct.pack(f"<{n}Q", *(r.address for r in regions)) if n else b"\0" * 8

    sc.call("cbc_encrypt_multi", {"keys": table(ks), "in": table(ins), "out": table(outs), "nblocks": nblocks,
                                  "ivs": table(iv_regions), "nstreams": n}, test=True)
    return [o.read(16 * nblocks) for o in outs], [r.read() for r in iv_regions]


# ================================================================ counts and lengths


def counts(lanes: int, depth: int, quick: bool) -> list[int]:
    """Key / stream counts: 0 .. two batches and a few (every odd count on the way)."""
    top = 2 * lanes * depth + lanes + 1
    if quick:
        return sorted({0, 1, 2, 3, lanes - 1, lanes, lanes + 1, lanes * depth - 1, lanes * depth,
                       lanes * depth + 1, top} - {-1})
    return list(range(top + 1))


def block_counts(kernel: Kernel, n: int, quick: bool) -> list[int]:
    return [0, 1, 2, 3, 5, 8] if quick else [0, 1, 2, 3, 4, 5, 7, 8, 9, 16, 17, n]


def sweep(kernel: Kernel, mode: str, n: int, quick: bool, phase: int) -> list[tuple[int, int, bool]]:
    """(count, blocks, in place) for a differential of `mode`: every key / stream count with every
    block count, one call in three in place (the i-th block count where (count + i) % 3 == phase)."""
    lanes, depth = _lanes_depth(kernel, mode)
    return [(count, blocks, (count + i) % 3 == phase) for count in counts(lanes, depth, quick)
            for i, blocks in enumerate(block_counts(kernel, n, quick))]


# ================================================================ checks


def _ecb_files() -> list[tuple[str, list[tuple[bytes, bytes, bytes]]]]:
    """(name, [(key, plaintext, ciphertext)]) : FIPS-197 Appendix C per key size, CAVP ECB files."""
    out = [(f"FIPS197-{b}", [vectors.FIPS197_APPENDIX_C[b]]) for b in BITS]
    out.append(("SP800-38A-F.1", [(vectors.SP800_38A_KEYS[b], vectors.SP800_38A_PLAINTEXT,
                                   vectors.SP800_38A_CIPHERTEXT["ECB", b]) for b in BITS for _ in range(3)]))
    for vf in vectors.cavp("ECB"):
        out.append((vf.name, [(v.key, v.plaintext, v.ciphertext) for v in vf.encrypt]))
    return out


def _by_length(cases: list) -> dict[tuple[int, int], list]:
    groups: dict[tuple[int, int], list] = {}
    for c in cases:
        groups.setdefault((len(c[0]), len(c[-2])), []).append(c)
    return groups


def kat_multikey(kernel: Kernel, probe: Probe, *, quick: bool, seed: int) -> Iterator[CheckResult]:
    rng = random.Random(f"{seed}:kat multikey")
    for name, cases in _ecb_files():
        check = f"kat ecb_encrypt_multikey {name}"
        probe.note(check, "")
        errors: list[str] = []
        for (klen, plen), group in _by_length(cases).items():
            sc = Scene(kernel, HeapMem(rng), rng, in_place=len(group) % 2 == 1)
            got = multikey_call(sc, [k for k, _, _ in group], 8 * klen, b"".join(p for _, p, _ in group), plen // 16)
            want = b"".join(c for _, _, c in group)
            errors += [f"{len(group)} keys of {plen} bytes: {e}" for e in _diff(got, want, plen)] + sc.damage
        yield verdict(check, errors, f"{len(cases)} vectors, a call per length (keys in the lanes)")


def kat_hash(kernel: Kernel, probe: Probe, *, quick: bool, seed: int) -> Iterator[CheckResult]:
    rng = random.Random(f"{seed}:kat fixed_key_hash")
    for name, cases in _ecb_files():
        check = f"kat fixed_key_hash {name}"
        probe.note(check, "")
        errors: list[str] = []
        for key, pt, ct in (cases[::4] if quick else cases):
            sc = Scene(kernel, HeapMem(rng), rng)
            x = b"".join(sigma_inverse(pt[i:i + 16]) for i in range(0, len(pt), 16))
            got = hash_call(sc, key, x)
            want = bytes(a ^ b for a, b in zip(ct, pt))
            errors += [f"key {key.hex()[:16]}..: {e}" for e in _diff(got, want, len(pt))] + sc.damage
        yield verdict(check, errors, f"{len(cases)} vectors: sigma^-1(P) hashes to C ^ P")


def hash_call(sc: Scene, key: bytes, data: bytes) -> bytes | None:
    region = schedule(sc.kernel, sc.mem, key, "key", sc.setup_caller)
    inv = sc.call("fixed_key_hash", {"key": region, "in": data or b"\0", "out": fill(sc.rng, max(1, len(data))),
                                     "nblocks": len(data) // 16}, test=True, alias=io_alias(sc))
    return inv.out("out")[:len(data)] if "out" in inv.regions else None


def kat_multi_cbc(kernel: Kernel, probe: Probe, *, quick: bool, seed: int) -> Iterator[CheckResult]:
    rng = random.Random(f"{seed}:kat cbc_encrypt_multi")
    files = [(f"FIPS197-{b}", [(vectors.FIPS197_APPENDIX_C[b][0], bytes(16), vectors.FIPS197_APPENDIX_C[b][1],
                                vectors.FIPS197_APPENDIX_C[b][2])] * 3) for b in BITS]
    files.append(("SP800-38A-F.2", [(vectors.SP800_38A_KEYS[b], vectors.SP800_38A_IV, vectors.SP800_38A_PLAINTEXT,
                                     vectors.SP800_38A_CIPHERTEXT["CBC", b]) for b in BITS for _ in range(5)]))
    files += [(vf.name, [(v.key, v.iv, v.plaintext, v.ciphertext) for v in vf.encrypt]) for vf in vectors.cavp("CBC")]
    for name, cases in files:
        check = f"kat cbc_encrypt_multi {name}"
        probe.note(check, "")
        errors: list[str] = []
        for (klen, plen), group in _by_length(cases).items():
            sc = Scene(kernel, HeapMem(rng), rng, in_place=len(group) % 2 == 0)
            outs, ivs = multi_cbc_call(sc, [g[0] for g in group], [g[1] for g in group], [g[2] for g in group])
            for s, (_, iv, _, ct) in enumerate(group):
                errors += [f"stream {s} of {len(group)}, {plen} bytes: {e}" for e in _diff(outs[s], ct, plen)]
                if ivs[s] != (ct[-16:] if ct else iv):
                    errors.append(f"stream {s} of {len(group)}: iv on return is not the last ciphertext block")
            errors += sc.damage
        yield verdict(check, errors[:5], f"{len(cases)} vectors, a call per length (streams in the lanes)")


def _diff(got: bytes | None, want: bytes, n: int) -> list[str]:
    if got == want:
        return []
    if got is None:
        return ["no output"]
    k = next((i for i in range(min(len(got), len(want))) if got[i] != want[i]), min(len(got), len(want)))
    return [f"differs from byte {k} (block {k // 16}) of {n}"]


def diff_set_keys(kernel: Kernel, bits: int, probe: Probe, *, quick: bool, seed: int) -> CheckResult:
    """Every byte the layout defines, for every key count; -1 for bad sizes."""
    name = f"diff set_encrypt_keys {bits}"
    rng = random.Random(f"{seed}:{name}")
    lanes, depth = _lanes_depth(kernel, "multikey")
    errors: list[str] = []
    ns = counts(lanes, depth, quick)
    for nkeys in ns:
        probe.note(name, f"nkeys={nkeys}")
        keys = [rng.randbytes(bits // 8) for _ in range(nkeys)]
        ret, region = set_keys(kernel, HeapMem(rng), keys, bits)
        raw = region.read()
        if ret != 0:
            errors.append(f"nkeys={nkeys}: returned {ret}")
        for off, want in multikey_layout(lanes, keys).items():
            if raw[off:off + len(want)] != want:
                errors.append(f"nkeys={nkeys}: bytes at {off} differ from the FIPS-197 expansion")
                break
    for bad in (0, 64, 127, 129, 512):
        ret, _ = set_keys(kernel, HeapMem(rng), [rng.randbytes(16)], bad)
        if ret != -1:
            errors.append(f"bits={bad}: returned {ret}, want -1")
    return verdict(name, errors[:5], f"key counts {ns[0]}..{ns[-1]}: round keys and counts where documented; bad sizes -1")


def diff_multikey(kernel: Kernel, bits: int, probe: Probe, *, n: int, quick: bool, seed: int) -> CheckResult:
    name = f"diff ecb_encrypt_multikey {bits}"
    rng = random.Random(f"{seed}:{name}")
    errors: list[str] = []
    cases = sweep(kernel, "multikey", n, quick, 2)
    for nkeys, bpk, in_place in cases:
        keys = [rng.randbytes(bits // 8) for _ in range(nkeys)]
        data = rng.randbytes(16 * nkeys * bpk)
        sc = Scene(kernel, HeapMem(rng), rng, in_place=in_place)
        what = f"nkeys={nkeys} blocks_per_key={bpk}{' in-place' if in_place else ''}"
        probe.note(name, what)
        got = multikey_call(sc, keys, bits, data, bpk)
        want = b"".join(aes_ecb(k, data[16 * bpk * j:16 * bpk * (j + 1)]) for j, k in enumerate(keys))
        errors += [f"{what}: {e}" for e in _diff(got, want, len(data))] + [f"{what}: {d}" for d in sc.damage]
        if len(errors) >= 3:
            return verdict(name, errors, "")
    return verdict(name, errors, f"{len(cases)} calls: key counts and blocks per key vs cryptography's ECB per key, "
                   "misaligned, in place")


def diff_hash(kernel: Kernel, bits: int, probe: Probe, *, n: int, quick: bool, seed: int) -> CheckResult:
    name = f"diff fixed_key_hash {bits}"
    rng = random.Random(f"{seed}:{name}")
    errors: list[str] = []
    sizes = range(0, n + 1, 3 if quick else 1)
    for nblocks in sizes:
        key, data = rng.randbytes(bits // 8), rng.randbytes(16 * nblocks)
        sc = Scene(kernel, HeapMem(rng), rng, in_place=nblocks % 3 == 1)
        what = f"nblocks={nblocks}{' in-place' if sc.in_place else ''}"
        probe.note(name, what)
        got = hash_call(sc, key, data)
        errors += [f"{what}: {e}" for e in _diff(got, hash_reference(key, data), len(data))] + sc.damage
        if len(errors) >= 3:
            break
    return verdict(name, errors, f"nblocks 0..{n}: vs AES (cryptography) and sigma_reference, misaligned, in place")


def diff_multi_cbc(kernel: Kernel, bits: int, probe: Probe, *, n: int, quick: bool, seed: int) -> CheckResult:
    name = f"diff cbc_encrypt_multi {bits}"
    rng = random.Random(f"{seed}:{name}")
    errors: list[str] = []
    cases = sweep(kernel, "cbc-multi", n, quick, 1)
    for nstreams, nblocks, in_place in cases:
        keys = [rng.randbytes(bits // 8) for _ in range(nstreams)]
        ivs = [rng.randbytes(16) for _ in range(nstreams)]
        texts = [rng.randbytes(16 * nblocks) for _ in range(nstreams)]
        sc = Scene(kernel, HeapMem(rng), rng, in_place=in_place)
        what = f"nstreams={nstreams} nblocks={nblocks}{' in-place' if in_place else ''}"
        probe.note(name, what)
        outs, got_ivs = multi_cbc_call(sc, keys, ivs, texts)
        for s in range(nstreams):
            want = aes_cbc(keys[s], ivs[s], texts[s])
            errors += [f"{what}: stream {s}: {e}" for e in _diff(outs[s], want, len(want))]
            if got_ivs[s] != (want[-16:] if nblocks else ivs[s]):
                errors.append(f"{what}: stream {s}: iv on return is not the last ciphertext block")
        errors += [f"{what}: {d}" for d in sc.damage]
        if len(errors) >= 3:
            return verdict(name, errors[:3], "")
    return verdict(name, errors, f"{len(cases)} calls: stream counts and lengths vs cryptography's CBC per stream, "
                   "misaligned, in place")


# ================================================================ scenes for abi, guard and simulate


def _count(kernel: Kernel, mode: str, size: int, aux: int) -> int:
    """A key / stream count for a scene: 1 .. two batches and a lane, from size and aux."""
    lanes, depth = _lanes_depth(kernel, mode)
    return 1 + (3 * aux + size) % (2 * lanes * depth + lanes)


def scene_set_keys(sc: Scene, fn: str, size: int, aux: int) -> tuple:
    bits = BITS[aux % 3]
    keys = [sc.rng.randbytes(bits // 8) for _ in range(size)]
    region = sc.mem.place("keys", b"\xa5" * sc.kernel.spec.multikey_schedule_bytes(size), aligned=True)
    inv = sc.call(fn, {"user_keys": b"".join(keys) or b"\0", "bits": bits, "nkeys": size, "keys": region}, test=True)
    return inv.ret, (region.read() if "keys" not in sc.none else None)


def scene_multikey(sc: Scene, fn: str, size: int, aux: int) -> tuple:
    bits = BITS[aux % 3]
    nkeys = _count(sc.kernel, "multikey", size, aux)
    keys = [sc.rng.randbytes(bits // 8) for _ in range(nkeys)]
    return (multikey_call(sc, keys, bits, sc.rng.randbytes(16 * nkeys * size), size),)


def scene_hash(sc: Scene, fn: str, size: int, aux: int) -> tuple:
    return (hash_call(sc, sc.rng.randbytes(BITS[aux % 3] // 8), sc.rng.randbytes(16 * size)),)


def scene_multi_cbc(sc: Scene, fn: str, size: int, aux: int) -> tuple:
    bits = BITS[aux % 3]
    nstreams = _count(sc.kernel, "cbc-multi", size, aux)
    keys = [sc.rng.randbytes(bits // 8) for _ in range(nstreams)]
    ivs = [sc.rng.randbytes(16) for _ in range(nstreams)]
    outs, got_ivs = multi_cbc_call(sc, keys, ivs, [sc.rng.randbytes(16 * size) for _ in range(nstreams)])
    return tuple(outs) + tuple(got_ivs)


SCENES = {"set_encrypt_keys": scene_set_keys, "ecb_encrypt_multikey": scene_multikey,
          "fixed_key_hash": scene_hash, "cbc_encrypt_multi": scene_multi_cbc}


# ================================================================ units


def units(kernel: Kernel, *, n: int, quick: bool, seed: int) -> list[tuple[str, Unit]]:
    have = set(kernel.fn)
    out: list[tuple[str, Unit]] = []
    if {"set_encrypt_keys", "ecb_encrypt_multikey"} <= have:
        out.append(("diff set_encrypt_keys", lambda p: (
            diff_set_keys(kernel, b, p, quick=quick, seed=seed) for b in BITS)))
        out.append(("kat ecb_encrypt_multikey", lambda p: kat_multikey(kernel, p, quick=quick, seed=seed)))
        out.append(("diff ecb_encrypt_multikey", lambda p: (
            diff_multikey(kernel, b, p, n=n, quick=quick, seed=seed) for b in BITS)))
    if "fixed_key_hash" in have:
        out.append(("kat fixed_key_hash", lambda p: kat_hash(kernel, p, quick=quick, seed=seed)))
        out.append(("diff fixed_key_hash", lambda p: (
            diff_hash(kernel, b, p, n=n, quick=quick, seed=seed) for b in BITS)))
    if "cbc_encrypt_multi" in have:
        out.append(("kat cbc_encrypt_multi", lambda p: kat_multi_cbc(kernel, p, quick=quick, seed=seed)))
        out.append(("diff cbc_encrypt_multi", lambda p: (
            diff_multi_cbc(kernel, b, p, n=n, quick=quick, seed=seed) for b in BITS)))
    return out
