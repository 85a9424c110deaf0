"""Checks for GHASH, POLYVAL, AES-GCM (one-shot and streaming) and AES-GCM-SIV kernels.

Check names (each a CheckResult):
  kat gcm_encrypt <file>        CAVP gcmEncryptExtIV128/192/256, McGrew-Viega (crypto++ gcm.txt)
  kat gcm_decrypt <file>        CAVP gcmDecrypt128/192/256 (FAIL cases: -1 and out zeroed), McGrew-Viega
  kat gcm_encrypt_update <file> the same vectors through start/aad/update/finish, random chunking
  kat gcm_decrypt_update <file>
  kat ghash <file>              GHASH known answers derived from the GCM vectors with a 96-bit IV:
                                GHASH_H(A || C || lengths) = tag xor E_K(J0)
  kat polyval RFC8452           RFC 8452 Appendix A (in one call and continued over two)
  kat polyval RFC8452-128/-256  POLYVAL derived from the Appendix C GCM-SIV cases (127 of 128 bits)
  kat gcmsiv_encrypt|decrypt RFC8452-128/-256
  diff gcm_encrypt|gcm_decrypt <bits>   vs cryptography's AESGCM (IVs of 1..7 and >128 bytes, which
                                AESGCM refuses: J0 from gf128, the rest through AESGCM)
  diff gcmsiv_encrypt|gcmsiv_decrypt <bits>  vs cryptography's AESGCMSIV
  diff ghash, diff polyval      vs gf128, random H/acc/data, nblocks 0..N, continued accumulators
  tamper gcm_decrypt|gcmsiv_decrypt <bits>  a flipped tag/ciphertext/AAD/IV bit: -1, out zeroed
  stream gcm <bits>             random chunkings of AAD and text == one-shot == reference
  badargs gcm_set_key|gcm_encrypt|gcm_decrypt|gcm_start|gcmsiv_set_key
  abi <fn>                      (called from abi.py) trampoline vs direct, stack arguments
  guard <fn> after|before|len0  (called from guard.py) every buffer flush against PROT_NONE
  simulate <fn>                 (called from simcheck.py) the same scenarios inside the simulator

Every differential call runs in canary-padded buffers at random misalignments
(keys and contexts 64-byte aligned, as the ABI promises), and also checks that
nothing outside `out`/`tag`/`acc`/`ctx` was written and that read-only
buffers (in, aad, iv, tag on decrypt, the key) were left alone.

The same scenario code drives the ABI and guard checks: `invoke` places each
buffer a function's signature (verify/signatures.py) names through a memory
strategy (canary heap, guard pages, PROT_NONE) and calls it directly or
through the trampoline.
"""
from __future__ import annotations

import ctypes
import importlib
import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM, AESGCMSIV

from aesgen.verify import gf128, signatures, vectors
from aesgen.verify.build import Kernel, harness
from aesgen.verify.runner import CheckResult, Probe, Unit

STREAM_FUNCTIONS = ("gcm_start", "gcm_aad", "gcm_encrypt_update", "gcm_decrypt_update", "gcm_finish")
GCM_BAD_BITS = (0, 64, 127, 512)
GCMSIV_BAD_BITS = (0, 64, 192, 512)
BAD_TAGLENS = (0, 3, 17)
# IV lengths the differential cycles through: 12 (the fast path) most often, then short,
# block-sized, odd and long ones.  1..7 and >128 bytes need the gf128 reference.
IV_LENGTHS = (12, 1, 12, 16, 13, 64, 12, 8, 60, 17, 12, 128, 7, 32, 12, 200)


class SceneError(RuntimeError):
    """A setup step (key setup, start) failed, so the call under test could not be made."""


# ================================================================ memory strategies


class Region:
    """One placed buffer: `size` bytes at `address`, read back through its memory."""

    __slots__ = ("label", "address", "size", "mem", "raw", "at")

    def __init__(self, label: str, address: int, size: int, mem: object,
                 raw: ctypes.Array | None = None, at: int = 0) -> None:
        self.label, self.address, self.size, self.mem, self.raw, self.at = label, address, size, mem, raw, at

    def read(self, n: int | None = None) -> bytes:
        return self.mem.read(self.address, self.size if n is None else n)  # type: ignore[attr-defined]


class HeapMem:
    """Canary-padded heap buffers, randomly misaligned unless `aligned` (keys, ctx).

    `damage` reports bytes written outside a buffer and changes to a read-only one."""

    PAD = 96

    def __init__(self, rng: random.Random | None = None) -> None:
        self.rng = rng or random.Random(0)
        self.misalign = rng is not None

    def place(self, label: str, data: bytes, *, aligned: bool = False) -> Region:
        n = len(data)
        off = 0 if aligned or not self.misalign else self.rng.randrange(64)
        canary = self.rng.randrange(256)
        raw = ctypes.create_string_buffer(bytes([canary]) * (n + 2 * self.PAD + 128))
        base = ctypes.addressof(raw)
        at = (base + self.PAD + 63) // 64 * 64 - base + off
        ctypes.memmove(base + at, data, n)
        return Region(label, base + at, n, self, raw, at)

    @staticmethod
    def read(addr: int, n: int) -> bytes:
        return ctypes.string_at(addr, n)

    @staticmethod
    def snapshot(r: Region) -> bytes | None:
        return r.raw.raw if r.raw is not None else None

    @staticmethod
    def damage(r: Region, before: bytes, readonly: bool) -> str | None:
        after = r.raw.raw  # type: ignore[union-attr]
        at, n = r.at, r.size
        if after[:at] != before[:at]:
            k = max(i for i in range(at) if after[i] != before[i])
            return f"wrote {at - k} byte(s) before {r.label}"
        if after[at + n:] != before[at + n:]:
            k = min(i for i in range(at + n, len(after)) if after[i] != before[i])
            return f"wrote byte {k - at - n} past the end of {r.label} ({n} bytes)"
        if readonly and after[at:at + n] != before[at:at + n]:
            k = min(i for i in range(at, at + n) if after[i] != before[i])
            return f"modified read-only {r.label} at byte {k - at}"
        return None


class GuardMem:
    """Each label gets its own mapping between PROT_NONE pages; a buffer is placed flush
    against the page after it ("after") or the page before it ("before")."""

    def __init__(self, where: str, probe: Probe | None = None) -> None:
        from aesgen.verify.guard import GuardedRegion

        self._region_cls = GuardedRegion
        self.where = where
        self.probe = probe
        self.regions: dict[str, object] = {}

    def _region(self, label: str, n: int):
        g = self.regions.get(label)
        if g is None or g.hi - g.lo < n + 64:  # type: ignore[attr-defined]
            if g is not None:
                g.close()  # type: ignore[attr-defined]
            g = self._region_cls(max(n + 64, 4096))
            self.regions[label] = g
            if self.probe is not None:
                self.probe.regions([lab for name, r in self.regions.items() for lab in r.labels(name)])
        return g

    def place(self, label: str, data: bytes, *, aligned: bool = False) -> Region:
        n = len(data)
        g = self._region(label, n)
        if self.where == "after":
            addr = g.hi - n
            if aligned:
                addr = addr // 64 * 64
        else:
            addr = g.lo
        ctypes.memmove(addr, data, n)
        return Region(label, addr, n, self)

    def none(self, label: str) -> int:
        """An address inside the PROT_NONE page after `label`'s mapping."""
        return self._region(label, 0).hi + 64

    @staticmethod
    def read(addr: int, n: int) -> bytes:
        return ctypes.string_at(addr, n)

    def close(self) -> None:
        for g in self.regions.values():
            g.close()  # type: ignore[attr-defined]
        self.regions.clear()


# ================================================================ calling through the signature table

Caller = Callable[[str, list], "int | None"]


@dataclass
class Invocation:
    ret: int | None
    regions: dict[str, Region]
    damage: list[str]

    def out(self, name: str) -> bytes:
        return self.regions[name].read()


class TrampolineCaller:
    """Calls through the harness' ABI trampoline; collects what it reports."""

    def __init__(self, kernel: Kernel, seed: int) -> None:
        self.kernel, self.seed = kernel, seed
        self.bad: list[str] = []

    def __call__(self, fn: str, argv: list) -> int | None:
        from aesgen.verify import abi

        sig = signatures.SIGNATURES[fn]
        bad, ctx = abi.call(self.kernel.address(fn), argv, sig.mask32, self.seed, self.kernel.spec.abi == "win64")
        if bad:
            self.bad.append(abi.describe(bad, ctx))
        if sig.restype is None:
            return None
        return ctypes.c_int32(ctx.ret & 0xFFFFFFFF).value


def invoke(kernel: Kernel, fn: str, mem, args: dict, *, caller: Caller | None = None,
           alias: dict[str, str] | None = None) -> Invocation:
    """Call `fn` with `args` by parameter name.  Pointer arguments are bytes (placed in
    `mem` under the parameter's name), a Region, or a raw int address; `alias` makes
    a pointer parameter reuse another's buffer (alias={"out": "in"}: in place)."""
    sig = signatures.SIGNATURES[fn]
    regions: dict[str, Region] = {}
    argv: list = []
    for p in sig.params:
        v = args[p.name]
        if not p.is_pointer:
            argv.append(int(v))
            continue
        if alias and p.name in alias:
            r = regions[alias[p.name]]
        elif isinstance(v, Region):
            r = v
        elif isinstance(v, int):
            argv.append(v)
            continue
        else:
            r = mem.place(p.name, bytes(v), aligned=p.aligned)
        regions[p.name] = r
        argv.append(r.address)
    # which placed buffers may the call change?
    written: dict[int, bool] = {}
    for name, r in regions.items():
        written[id(r)] = written.get(id(r), False) or sig.param(name).access != "r"
    snaps = []
    if isinstance(mem, HeapMem):
        seen = set()
        for name, r in regions.items():
            if id(r) not in seen and r.raw is not None:
                seen.add(id(r))
                snaps.append((r, HeapMem.snapshot(r)))
    ret = (caller or _direct(kernel))(fn, argv)
    damage = []
    for r, before in snaps:
        d = HeapMem.damage(r, before, readonly=not written[id(r)])
        if d:
            damage.append(f"{fn}: {d}")
    return Invocation(ret, regions, damage)


def _direct(kernel: Kernel) -> Caller:
    return lambda fn, argv: kernel.fn[fn](*argv)


def _fill(rng: random.Random, n: int) -> bytes:
    """Non-zero junk, so "zeroed" and "untouched" are distinguishable."""
    return rng.randbytes(n).replace(b"\0", b"\x5a")


# ================================================================ references


def gcm_reference(key: bytes, iv: bytes, aad: bytes, pt: bytes, taglen: int) -> tuple[bytes, bytes, str]:
    """(ciphertext, tag, oracle): cryptography's AESGCM where it accepts the IV; otherwise
    (IVs of 1..7 or more than 128 bytes) gf128 computes J0 and AESGCM still does the bulk:
    with a 12-byte IV' and P' = C xor keystream(IV'), AESGCM's tag T' over (A, P') equals
    E_K(J0') xor GHASH_H(A || C || lengths), so tag = E_K(J0) xor E_K(J0') xor T'."""
    if 8 <= len(iv) <= 128:
        out = AESGCM(key).encrypt(iv, pt, aad)
        return out[:-16], out[-16:][:taglen], "AESGCM"
    h = gf128.gcm_h(key)
    j0 = gf128.gcm_j0(h, iv)
    ct = gf128.gctr(key, gf128.inc32(j0, 1), pt)
    iv2 = bytes(12)
    j0_2 = iv2 + b"\0\0\0\1"
    p2 = gf128.gctr(key, gf128.inc32(j0_2, 1), ct)
    t2 = AESGCM(key).encrypt(iv2, p2, aad)[-16:]
    tag = bytes(a ^ b ^ c for a, b, c in zip(gf128.aes_ecb(key, j0), gf128.aes_ecb(key, j0_2), t2))
    return ct, tag[:taglen], "gf128 J0 + AESGCM"


def gcmsiv_reference(key: bytes, nonce: bytes, aad: bytes, pt: bytes) -> tuple[bytes, bytes]:
    out = AESGCMSIV(key).encrypt(nonce, pt, aad)
    return out[:-16], out[-16:]


def _aes_ecb(key: bytes, block: bytes, decrypt: bool = False) -> bytes:
    c = Cipher(algorithms.AES(key), modes.ECB())
    ctx = c.decryptor() if decrypt else c.encryptor()
    return ctx.update(block) + ctx.finalize()


# ================================================================ helpers


def _result(name: str, errors: list[str], ok_detail: str) -> CheckResult:
    if errors:
        more = f" (+{len(errors) - 3} more)" if len(errors) > 3 else ""
        return CheckResult(name, "fail", "; ".join(errors[:3]) + more)
    return CheckResult(name, "pass", ok_detail)


def _first_diff(got: bytes, want: bytes) -> str:
    if len(got) != len(want):
        return f"length {len(got)} want {len(want)}"
    k = next(i for i in range(len(got)) if got[i] != want[i])
    return f"differs from byte {k} (block {k // 16})"


def _make_key(kernel: Kernel, mem, setup: str, key: bytes, bits: int | None = None,
              caller: Caller | None = None) -> tuple[int, Region]:
    """Run a key setup into a 64-byte aligned, 0xA5-filled buffer of the spec's size."""
    sig = signatures.SIGNATURES[setup]
    out = sig.params[2].name
    bits = len(key) * 8 if bits is None else bits
    inv = invoke(kernel, setup, mem, {"user_key": key or b"\0", "bits": bits,
                                      out: b"\xa5" * kernel.schedule_bytes(setup)}, caller=caller)
    return inv.ret, inv.regions[out]  # type: ignore[return-value]


def _key_or_raise(kernel: Kernel, mem, setup: str, key: bytes) -> Region:
    ret, region = _make_key(kernel, mem, setup, key)
    if ret != 0:
        raise SceneError(f"{setup}(bits={8 * len(key)}) returned {ret}")
    return region


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


def _aad_len(i: int, n: int, rng: random.Random) -> int:
    """0, whole blocks, and non-multiples of 16 up to 16n+15."""
    kind = i % 4
    if kind == 0:
        return 0
    if kind == 1:
        return 16 * rng.randrange(0, n + 1)
    return rng.randrange(0, 16 * n + 16)


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


# ================================================================ GCM one-shot calls


def gcm_call(kernel: Kernel, mem, fn: str, gkey: Region, iv: bytes, aad: bytes, data: bytes,
             tag: bytes | int, *, rng: random.Random, in_place: bool = False,
             ivlen: int | None = None, taglen: int | None = None,
             caller: Caller | None = None) -> Invocation:
    """gcm_encrypt (tag: its length) or gcm_decrypt (tag: the bytes) with junk-filled outputs."""
    tag_bytes = tag if isinstance(tag, bytes) else _fill(rng, tag)
    args = {"gkey": gkey, "iv": iv, "ivlen": len(iv) if ivlen is None else ivlen,
            "aad": aad, "aadlen": len(aad), "in": data, "out": _fill(rng, len(data)), "len": len(data),
            "tag": tag_bytes, "taglen": len(tag_bytes) if taglen is None else taglen}
    return invoke(kernel, fn, mem, args, caller=caller, alias={"out": "in"} if in_place else None)


def gcmsiv_call(kernel: Kernel, mem, fn: str, skey: Region, nonce: bytes, aad: bytes, data: bytes,
                tag: bytes | None, *, rng: random.Random, in_place: bool = False,
                caller: Caller | None = None) -> Invocation:
    args = {"skey": skey, "nonce": nonce, "aad": aad, "aadlen": len(aad), "in": data,
            "out": _fill(rng, len(data)), "len": len(data), "tag": tag if tag is not None else _fill(rng, 16)}
    return invoke(kernel, fn, mem, args, caller=caller, alias={"out": "in"} if in_place else None)


def gcm_stream(kernel: Kernel, mem, gkey: Region, iv: bytes, aad: bytes, data: bytes, *,
               decrypt: bool, rng: random.Random, aad_chunks: list[int] | None = None,
               text_chunks: list[int] | None = None, in_place_p: float = 0.3,
               ) -> tuple[int | None, bytes, bytes, list[str]]:
    """start / aad* / update* / finish with the given (or random) chunkings.
    Returns (start's return value, output, 16-byte tag, damage)."""
    ctx = mem.place("ctx", _fill(rng, kernel.spec.gcm_ctx_bytes), aligned=True)
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
        inv = invoke(kernel, upd, mem, {"ctx": ctx, "in": piece, "out": _fill(rng, k), "len": k},
                     alias={"out": "in"} if rng.random() < in_place_p else None)
        damage += inv.damage
        out += inv.out("out")
        pos += k
    inv = invoke(kernel, "gcm_finish", mem, {"ctx": ctx, "tag": _fill(rng, 16)})
    damage += inv.damage
    return 0, bytes(out), inv.out("tag"), damage


# ================================================================ known answers


def _gcm_files(kind: str) -> list[vectors.AeadFile]:
    files = list(vectors.gcm_cavp(kind))
    return files


def _cryptopp_skip(name: str) -> CheckResult:
    return CheckResult(name, "skip", f"crypto++ test vectors not installed ({vectors.CRYPTOPP_GCM}; "
                       "Debian package libcrypto++-utils, see APT_PACKAGES in the Makefile)")


def _sealed_mismatch(v, ret: int | None, out: bytes, tag: bytes, returned: str = "returned") -> list[str]:
    """What is wrong with an encryption of known-answer case v (at most one finding)."""
    if ret != 0:
        return [f"COUNT={v.count}: {returned} {ret}"]
    if out != v.ciphertext:
        return [f"COUNT={v.count}: ciphertext {_first_diff(out, v.ciphertext)}"]
    if tag != v.tag:
        return [f"COUNT={v.count}: tag {tag.hex()} want {v.tag.hex()}"]
    return []


def kat_gcm(kernel: Kernel, fn: str, probe: Probe, *, quick: bool, seed: int) -> Iterator[CheckResult]:
    """One-shot gcm_encrypt / gcm_decrypt over the CAVP files and the McGrew-Viega cases."""
    decrypt = fn == "gcm_decrypt"
    files = _gcm_files("gcmDecrypt" if decrypt else "gcmEncryptExtIV")
    cpp = vectors.gcm_cryptopp()
    for vf in files + ([cpp] if cpp else []):
        name = f"kat {fn} {vf.name}"
        rng = random.Random(f"{seed}:{name}")
        mem = HeapMem(None)
        errors: list[str] = []
        cases = [v for v in _sample(vf.vectors, quick) if decrypt or v.plaintext is not None]
        rejected = 0
        for v in cases:
            probe.note(name, f"COUNT={v.count}")
            gkey = _key_or_raise(kernel, mem, "gcm_set_key", v.key)
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
                    errors.append(f"COUNT={v.count}: plaintext {_first_diff(out, v.plaintext)}")
            else:
                inv = gcm_call(kernel, mem, fn, gkey, v.iv, v.aad, v.plaintext or b"", len(v.tag), rng=rng)
                errors += _sealed_mismatch(v, inv.ret, inv.out("out"), inv.out("tag"))
            errors += [f"COUNT={v.count}: {d}" for d in inv.damage]
        extra = f", {rejected} with a wrong tag" if decrypt else ""
        yield (_result(name, errors, f"{len(cases)} vectors{extra}") if cases
               else CheckResult(name, "fail", "no vectors parsed"))
    if cpp is None:
        yield _cryptopp_skip(f"kat {fn} McGrew-Viega")


def kat_gcm_stream(kernel: Kernel, fn: str, probe: Probe, *, quick: bool, seed: int) -> Iterator[CheckResult]:
    """The GCM vectors through start/aad/update/finish with random chunkings (every parameter
    group; 3 cases of each, 1 when quick: the one-shot KAT runs every case)."""
    decrypt = fn == "gcm_decrypt_update"
    files = _gcm_files("gcmDecrypt" if decrypt else "gcmEncryptExtIV")
    cpp = vectors.gcm_cryptopp()
    for vf in files + ([cpp] if cpp else []):
        name = f"kat {fn} {vf.name}"
        rng = random.Random(f"{seed}:{name}")
        mem = HeapMem(rng)
        errors: list[str] = []
        cases = _sample(vf.vectors, True, 1 if quick else 3)
        for v in cases:
            probe.note(name, f"COUNT={v.count}")
            gkey = _key_or_raise(kernel, mem, "gcm_set_key", v.key)
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
                    errors.append(f"COUNT={v.count}: plaintext {_first_diff(out, v.plaintext)}")
                elif tag[:t] != v.tag:
                    errors.append(f"COUNT={v.count}: tag {tag[:t].hex()} want {v.tag.hex()}")
            else:
                if v.plaintext is None:
                    continue
                ret, out, tag, damage = gcm_stream(kernel, mem, gkey, v.iv, v.aad, v.plaintext,
                                                   decrypt=False, rng=rng)
                errors += _sealed_mismatch(v, ret, out, tag[:t], "gcm_start returned")
            errors += [f"COUNT={v.count}: {d}" for d in damage]
        yield _result(name, errors, f"{len(cases)} vectors, random chunkings")
    if cpp is None:
        yield _cryptopp_skip(f"kat {fn} McGrew-Viega")


def kat_ghash(kernel: Kernel, probe: Probe, *, quick: bool, seed: int) -> Iterator[CheckResult]:
    """GHASH answers derived from published GCM cases with a 96-bit IV:
    MSB_t(GHASH_H(A || C || len)) = tag xor MSB_t(E_K(J0)), E_K from cryptography's AES."""
    cpp = vectors.gcm_cryptopp()
    for vf in _gcm_files("gcmEncryptExtIV") + ([cpp] if cpp else []):
        name = f"kat ghash {vf.name}"
        mem = HeapMem(None)
        errors: list[str] = []
        cases = [v for v in _sample(vf.vectors, quick) if len(v.iv) == 12 and v.plaintext is not None]
        for v in cases:
            probe.note(name, f"COUNT={v.count}")
            gkey = _key_or_raise(kernel, mem, "gcm_set_key", v.key)
            data = gf128.gcm_mac_input(v.aad, v.ciphertext)
            inv = invoke(kernel, "ghash", mem, {"gkey": gkey, "acc": bytes(16), "data": data,
                                               "nblocks": len(data) // 16})
            t = len(v.tag)
            want = bytes(a ^ b for a, b in zip(v.tag, _aes_ecb(v.key, v.iv + b"\0\0\0\1")))
            got = inv.out("acc")[:t]
            if got != want:
                errors.append(f"COUNT={v.count}: GHASH {got.hex()} want {want.hex()} (first {t} bytes)")
            errors += [f"COUNT={v.count}: {d}" for d in inv.damage]
        yield _result(name, errors, f"{len(cases)} vectors (96-bit IVs), GHASH = tag xor E_K(J0)")
    if cpp is None:
        yield _cryptopp_skip("kat ghash McGrew-Viega")


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
    yield _result(name, errors, "Appendix A, one call and continued over two")

    # POLYVAL inside the Appendix C AES-GCM-SIV cases: the tag decrypted under the message
    # encryption key is POLYVAL xor nonce with the top bit cleared.
    for vf in vectors.gcmsiv_rfc8452():
        name = f"kat polyval {vf.name}"
        errors = []
        for v in vf.vectors:
            probe.note(name, f"COUNT={v.count}")
            auth, enc = gf128.gcmsiv_keys(v.key, v.iv)
            s = bytearray(_aes_ecb(enc, v.tag, decrypt=True))
            for i in range(12):
                s[i] ^= v.iv[i]
            pt = v.plaintext or b""
            data = gf128.pad16(v.aad) + gf128.pad16(pt) + (8 * len(v.aad)).to_bytes(8, "little") \
                + (8 * len(pt)).to_bytes(8, "little")
            inv = invoke(kernel, "polyval", mem, {"h": auth, "acc": bytes(16), "data": data,
                                                  "nblocks": len(data) // 16})
            got = bytearray(inv.out("acc"))
            got[15] &= 0x7F
            if bytes(got) != bytes(s):
                errors.append(f"COUNT={v.count}: POLYVAL {bytes(got).hex()} want {bytes(s).hex()} (bit 127 ignored)")
            errors += inv.damage
        yield _result(name, errors, f"{len(vf.vectors)} GCM-SIV cases, 127 of 128 bits")


def kat_gcmsiv(kernel: Kernel, fn: str, probe: Probe, *, quick: bool, seed: int) -> Iterator[CheckResult]:
    decrypt = fn == "gcmsiv_decrypt"
    for vf in vectors.gcmsiv_rfc8452():
        name = f"kat {fn} {vf.name}"
        rng = random.Random(f"{seed}:{name}")
        mem = HeapMem(None)
        errors: list[str] = []
        for v in vf.vectors:
            probe.note(name, f"COUNT={v.count}")
            skey = _key_or_raise(kernel, mem, "gcmsiv_set_key", v.key)
            pt = v.plaintext or b""
            if decrypt:
                inv = gcmsiv_call(kernel, mem, fn, skey, v.iv, v.aad, v.ciphertext, v.tag, rng=rng)
                if inv.ret != 0:
                    errors.append(f"COUNT={v.count}: returned {inv.ret} for a valid tag")
                elif inv.out("out") != pt:
                    errors.append(f"COUNT={v.count}: plaintext {_first_diff(inv.out('out'), pt)}")
            else:
                inv = gcmsiv_call(kernel, mem, fn, skey, v.iv, v.aad, pt, None, rng=rng)
                errors += _sealed_mismatch(v, inv.ret, inv.out("out"), inv.out("tag"))
            errors += [f"COUNT={v.count}: {d}" for d in inv.damage]
        yield _result(name, errors, f"{len(vf.vectors)} vectors (Appendix C, incl. counter wrap)")


# ================================================================ differential


def _text_lengths(n: int, quick: bool, rng: random.Random) -> list[int]:
    """Every byte length 0..16n+15 (quick: every tail at 0, 1 and n blocks plus a sample)."""
    top = 16 * n + 16
    if not quick:
        return list(range(top))
    dense = {16 * k + r for k in (0, 1, n) for r in range(16)}
    rest = [x for x in range(top) if x not in dense]
    return sorted(dense | set(rng.sample(rest, min(len(rest), 4 * n))))


def diff_gcm(kernel: Kernel, fn: str, bits: int, probe: Probe, *, n: int, quick: bool,
             seed: int) -> CheckResult:
    name = f"diff {fn} {bits}"
    rng = random.Random(f"{seed}:{name}")
    decrypt = fn == "gcm_decrypt"
    errors: list[str] = []
    calls = 0
    oracles: set[str] = set()
    for i, length in enumerate(_text_lengths(n, quick, rng)):
        for in_place in (False, True):
            if quick and in_place and i % 2:
                continue
            j = 2 * i + in_place
            ivlen, taglen = _iv_len(j), 4 + j % 13
            aadlen = _aad_len(j, n, rng)
            key, iv, aad, pt = (rng.randbytes(bits // 8), rng.randbytes(ivlen), rng.randbytes(aadlen),
                                rng.randbytes(length))
            mem = HeapMem(rng)
            gkey = _key_or_raise(kernel, mem, "gcm_set_key", key)
            ct, tag, oracle = gcm_reference(key, iv, aad, pt, taglen)
            oracles.add(oracle)
            what = (f"len={length} aadlen={aadlen} ivlen={ivlen} taglen={taglen}"
                    f"{' in-place' if in_place else ''}")
            probe.note(name, what)
            if decrypt:
                inv = gcm_call(kernel, mem, fn, gkey, iv, aad, ct, tag, rng=rng, in_place=in_place)
            else:
                inv = gcm_call(kernel, mem, fn, gkey, iv, aad, pt, taglen, rng=rng, in_place=in_place)
            errors += _aead_errors(inv, decrypt, what, pt, ct, tag, f" ({oracle})")
            calls += 1
            if len(errors) >= 3:
                return _result(name, errors, "")
    top = 16 * n + 15
    return _result(name, errors, f"{calls} calls, len<={top}, AAD 0..{top}, IV lengths "
                   f"{sorted(set(IV_LENGTHS))}, taglen 4..16, misaligned, in-place; vs {'+'.join(sorted(oracles))}")


def _aead_errors(inv, decrypt: bool, what: str, pt: bytes, ct: bytes, tag: bytes, oracle: str = "") -> list[str]:
    """What an AEAD call did wrong against the reference: return value, text, tag, damage."""
    errors: list[str] = []
    if decrypt:
        if inv.ret != 0:
            errors.append(f"{what}: returned {inv.ret} for a valid tag")
        elif inv.out("out") != pt:
            errors.append(f"{what}: plaintext {_first_diff(inv.out('out'), pt)}")
    elif inv.ret != 0:
        errors.append(f"{what}: returned {inv.ret}")
    elif inv.out("out") != ct:
        errors.append(f"{what}: ciphertext {_first_diff(inv.out('out'), ct)}")
    elif inv.out("tag") != tag:
        errors.append(f"{what}: tag {inv.out('tag').hex()} want {tag.hex()}{oracle}")
    return errors + [f"{what}: {d}" for d in inv.damage]


def diff_gcmsiv(kernel: Kernel, fn: str, bits: int, probe: Probe, *, n: int, quick: bool,
                seed: int) -> CheckResult:
    name = f"diff {fn} {bits}"
    rng = random.Random(f"{seed}:{name}")
    decrypt = fn == "gcmsiv_decrypt"
    errors: list[str] = []
    calls = 0
    for i, length in enumerate(_text_lengths(n, quick, rng)):
        for in_place in (False, True):
            if quick and in_place and i % 2:
                continue
            j = 2 * i + in_place
            aadlen = _aad_len(j, n, rng)
            key, nonce, aad, pt = rng.randbytes(bits // 8), rng.randbytes(12), rng.randbytes(aadlen), \
                rng.randbytes(length)
            mem = HeapMem(rng)
            skey = _key_or_raise(kernel, mem, "gcmsiv_set_key", key)
            ct, tag = gcmsiv_reference(key, nonce, aad, pt)
            what = f"len={length} aadlen={aadlen}{' in-place' if in_place else ''}"
            probe.note(name, what)
            if decrypt:
                inv = gcmsiv_call(kernel, mem, fn, skey, nonce, aad, ct, tag, rng=rng, in_place=in_place)
            else:
                inv = gcmsiv_call(kernel, mem, fn, skey, nonce, aad, pt, None, rng=rng, in_place=in_place)
            errors += _aead_errors(inv, decrypt, what, pt, ct, tag)
            calls += 1
            if len(errors) >= 3:
                return _result(name, errors, "")
    return _result(name, errors, f"{calls} calls, len<={16 * n + 15}, AAD 0..{16 * n + 15}, "
                   "misaligned, in-place; vs AESGCMSIV")


def diff_hash(kernel: Kernel, fn: str, probe: Probe, *, n: int, quick: bool, seed: int) -> CheckResult:
    """ghash / polyval vs gf128: random H (ghash: H = E_K(0) for a random key) and acc, nblocks
    0..N, misaligned; then the same data split into two calls must give the same acc."""
    name = f"diff {fn}"
    rng = random.Random(f"{seed}:{name}")
    errors: list[str] = []
    calls = 0
    rounds = 2 if quick else 4
    for r in range(rounds):
        for nb in range(n + 1):
            mem = HeapMem(rng)
            acc0, data = rng.randbytes(16), rng.randbytes(16 * nb)
            if r == 0 and nb < 2:
                acc0 = bytes(16)
            if fn == "ghash":
                bits = (128, 192, 256)[(nb + r) % 3]
                key = rng.randbytes(bits // 8)
                gkey = _key_or_raise(kernel, mem, "gcm_set_key", key)
                h = gf128.gcm_h(key)
                want = gf128.ghash(h, data, acc0)
                keyarg = {"gkey": gkey}
            else:
                h = rng.randbytes(16)
                want = gf128.polyval(h, data, acc0)
                keyarg = {"h": h}
            what = f"nblocks={nb} acc={acc0.hex()[:8]}.."
            probe.note(name, what)
            inv = invoke(kernel, fn, mem, {**keyarg, "acc": acc0, "data": data, "nblocks": nb})
            calls += 1
            if inv.out("acc") != want:
                errors.append(f"{what}: acc {inv.out('acc').hex()} want {want.hex()}")
            errors += [f"{what}: {d}" for d in inv.damage]
            # continued: the same blocks in two calls
            split = rng.randrange(nb + 1)
            acc = acc0
            for part in (data[:16 * split], data[16 * split:]):
                inv = invoke(kernel, fn, mem, {**keyarg, "acc": acc, "data": part, "nblocks": len(part) // 16})
                acc = inv.out("acc")
                calls += 1
            if acc != want:
                errors.append(f"{what}: split {split}+{nb - split} gives {acc.hex()} want {want.hex()} "
                              "(accumulator not continued)")
            if len(errors) >= 3:
                return _result(name, errors, "")
    return _result(name, errors, f"{calls} calls, nblocks 0..{n}, random acc, split into two calls; "
                   f"vs gf128.{fn}")


def tamper(kernel: Kernel, fn: str, bits: int, probe: Probe, *, n: int, quick: bool,
           seed: int) -> CheckResult:
    """A flipped bit in the tag, ciphertext, AAD or IV/nonce: -1 and all len bytes of out zeroed
    (separate buffers and in place), nothing else written."""
    name = f"tamper {fn} {bits}"
    rng = random.Random(f"{seed}:{name}")
    siv = fn == "gcmsiv_decrypt"
    errors: list[str] = []
    calls = 0
    lengths = sorted({0, 1, 15, 16, 17, 16 * n, 16 * n + 15} | set(rng.sample(range(16 * n + 16), 8 if quick else 24)))
    for i, length in enumerate(lengths):
        for target in ("tag", "ct", "aad", "iv"):
            j = 4 * i + ("tag", "ct", "aad", "iv").index(target)
            aadlen = max(_aad_len(j, n, rng), 1 if target == "aad" else 0)
            if target == "ct" and length == 0:
                continue
            key, pt, aad = rng.randbytes(bits // 8), rng.randbytes(length), rng.randbytes(aadlen)
            in_place = bool(j % 2)
            mem = HeapMem(rng)
            if siv:
                iv = rng.randbytes(12)
                k = _key_or_raise(kernel, mem, "gcmsiv_set_key", key)
                ct, tag = gcmsiv_reference(key, iv, aad, pt)
            else:
                iv = rng.randbytes(_iv_len(j))
                taglen = 4 + j % 13
                k = _key_or_raise(kernel, mem, "gcm_set_key", key)
                ct, tag, _ = gcm_reference(key, iv, aad, pt, taglen)

            def flip(b: bytes) -> bytes:
                x = bytearray(b)
                bit = rng.randrange(8 * len(x))
                x[bit // 8] ^= 1 << (bit % 8)
                return bytes(x)

            if target == "tag":
                tag = flip(tag)
            elif target == "ct":
                ct = flip(ct)
            elif target == "aad":
                aad = flip(aad)
            else:
                iv = flip(iv)
            what = f"{target} bit flipped, len={length} aadlen={aadlen}{' in-place' if in_place else ''}"
            probe.note(name, what)
            if siv:
                inv = gcmsiv_call(kernel, mem, fn, k, iv, aad, ct, tag, rng=rng, in_place=in_place)
            else:
                inv = gcm_call(kernel, mem, fn, k, iv, aad, ct, tag, rng=rng, in_place=in_place)
            calls += 1
            out = inv.out("out")
            if inv.ret != -1:
                errors.append(f"{what}: returned {inv.ret}, want -1")
            elif out != bytes(length):
                nz = sum(1 for b in out if b)
                errors.append(f"{what}: returned -1 but {nz} of {length} out bytes are not zero")
            errors += [f"{what}: {d}" for d in inv.damage]
            if len(errors) >= 3:
                return _result(name, errors, "")
    return _result(name, errors, f"{calls} calls: tag/ciphertext/AAD/IV bit flips rejected, out zeroed")


# ================================================================ streaming


def stream_gcm(kernel: Kernel, bits: int, probe: Probe, *, n: int, quick: bool, seed: int) -> CheckResult:
    """Random chunkings of AAD and text through start/aad/update/finish == one-shot == reference,
    for encryption and decryption."""
    name = f"stream gcm {bits}"
    rng = random.Random(f"{seed}:{name}")
    oneshot = _have(kernel, "gcm_encrypt", "gcm_decrypt")
    errors: list[str] = []
    trials = 0
    lengths = _text_lengths(n, True, rng) if quick else _text_lengths(n, False, rng)
    for i, length in enumerate(lengths):
        ivlen = _iv_len(i)
        aadlen = _aad_len(i + 1, n, rng) if i % 3 else rng.randrange(1, 48)
        key, iv, aad, pt = (rng.randbytes(bits // 8), rng.randbytes(ivlen), rng.randbytes(aadlen),
                            rng.randbytes(length))
        mem = HeapMem(rng)
        gkey = _key_or_raise(kernel, mem, "gcm_set_key", key)
        ct, tag, oracle = gcm_reference(key, iv, aad, pt, 16)
        a_chunks, t_chunks = _chunks(aadlen, rng), _chunks(length, rng)
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
            errors.append(f"encrypt {what}: ciphertext {_first_diff(out, ct)} ({oracle})")
        elif stag != tag:
            errors.append(f"encrypt {what}: tag {stag.hex()} want {tag.hex()} ({oracle})")
        # decrypt with a different chunking
        a_chunks, t_chunks = _chunks(aadlen, rng), _chunks(length, rng)
        what = f"len={length} aadlen={aadlen} ivlen={ivlen} aad chunks {a_chunks} text chunks {t_chunks}"
        ret, out, dtag, damage = gcm_stream(kernel, mem, gkey, iv, aad, ct, decrypt=True, rng=rng,
                                            aad_chunks=a_chunks, text_chunks=t_chunks)
        errors += [f"{what}: {d}" for d in damage]
        if out != pt:
            errors.append(f"decrypt {what}: plaintext {_first_diff(out, pt)}")
        elif dtag != tag:
            errors.append(f"decrypt {what}: tag {dtag.hex()} want {tag.hex()}")
        elif oneshot:
            inv = gcm_call(kernel, mem, "gcm_decrypt", gkey, iv, aad, ct, tag, rng=rng)
            if inv.ret != 0 or inv.out("out") != out:
                errors.append(f"decrypt {what}: gcm_decrypt disagrees with the stream (returned {inv.ret})")
        trials += 1
        if len(errors) >= 3:
            return _result(name, errors, "")
    against = "gcm_encrypt/gcm_decrypt and " if oneshot else ""
    return _result(name, errors, f"{trials} messages, encrypt and decrypt, random AAD/text chunkings "
                   f"(empty, 1-byte, partial and whole blocks, in place); equal to {against}the reference")


# ================================================================ bad arguments


def badargs(kernel: Kernel, fn: str, probe: Probe, *, seed: int) -> CheckResult:
    name = f"badargs {fn}"
    rng = random.Random(f"{seed}:{name}")
    mem = HeapMem(rng)
    errors: list[str] = []
    probe.note(name, "")
    if signatures.family(fn) == signatures.KEYSETUP:
        sig = signatures.SIGNATURES[fn]
        bad = GCMSIV_BAD_BITS if fn == "gcmsiv_set_key" else GCM_BAD_BITS
        for bits in bad:
            ret, _ = _make_key(kernel, mem, fn, rng.randbytes(64), bits=bits)
            if ret != -1:
                errors.append(f"bits={bits} returned {ret}, want -1")
        for bits in sig.key_bits:
            ret, _ = _make_key(kernel, mem, fn, rng.randbytes(bits // 8))
            if ret != 0:
                errors.append(f"bits={bits} returned {ret}, want 0")
        return _result(name, errors, f"bits {', '.join(map(str, bad))} rejected, "
                       f"{', '.join(map(str, sig.key_bits))} accepted")
    gkey = _key_or_raise(kernel, mem, "gcm_set_key", rng.randbytes(16))
    if fn == "gcm_start":
        ctx = mem.place("ctx", _fill(rng, kernel.spec.gcm_ctx_bytes), aligned=True)
        inv = invoke(kernel, fn, mem, {"ctx": ctx, "gkey": gkey, "iv": rng.randbytes(12), "ivlen": 0})
        if inv.ret != -1:
            errors.append(f"ivlen=0 returned {inv.ret}, want -1")
        return _result(name, errors + inv.damage, "ivlen 0 rejected")
    decrypt = fn == "gcm_decrypt"
    for label, ivlen, taglen in [("ivlen=0", 0, 16)] + [(f"taglen={t}", 12, t) for t in BAD_TAGLENS]:
        for length in (0, 33):
            iv, aad, data = rng.randbytes(12), rng.randbytes(20), rng.randbytes(length)
            tag = rng.randbytes(max(taglen, 16))
            inv = gcm_call(kernel, mem, fn, gkey, iv, aad, data, tag if decrypt else max(taglen, 16),
                           rng=rng, ivlen=ivlen, taglen=taglen)
            if inv.ret != -1:
                errors.append(f"{label} len={length}: returned {inv.ret}, want -1")
            elif decrypt and inv.out("out") != bytes(length):
                errors.append(f"{label} len={length}: returned -1 but out is not zeroed")
            errors += [f"{label}: {d}" for d in inv.damage]
    what = "ivlen 0, taglen " + ", ".join(map(str, BAD_TAGLENS)) + " rejected" + (", out zeroed" if decrypt else "")
    return _result(name, errors, what)


# ================================================================ scenarios for abi and guard


@dataclass
class Scene:
    """One realistic use of a function: set-up calls made directly, the call under test
    through `caller`, every buffer placed by `mem`."""

    kernel: Kernel
    mem: object
    rng: random.Random
    caller: Caller | None = None
    in_place: bool = False
    none: set[str] = field(default_factory=set)  # pointer params to aim into PROT_NONE (len0)
    damage: list[str] = field(default_factory=list)
    setup_caller: Caller | None = None  # for the set-up calls (None: the kernel, directly)

    def call(self, fn: str, args: dict, *, test: bool = False, alias: dict | None = None) -> Invocation:
        if test and self.none:
            args = {k: (self.mem.none(k) if k in self.none else v) for k, v in args.items()}  # type: ignore[attr-defined]
            alias = None
        inv = invoke(self.kernel, fn, self.mem, args, caller=self.caller if test else self.setup_caller,
                     alias=alias)
        self.damage += inv.damage
        return inv

    def key(self, setup: str, bits: int | None = None) -> tuple[bytes, Region]:
        sig = signatures.SIGNATURES[setup]
        bits = bits or sig.key_bits[self.rng.randrange(len(sig.key_bits))]
        key = self.rng.randbytes(bits // 8)
        ret, region = _make_key(self.kernel, self.mem, setup, key, caller=self.setup_caller)
        if ret != 0:
            raise SceneError(f"{setup}(bits={bits}) returned {ret}")
        return key, region


def _io_alias(sc: Scene) -> dict | None:
    return {"out": "in"} if sc.in_place else None


def scene_gcm_oneshot(sc: Scene, fn: str, size: int, aux: int) -> tuple:
    key, gkey = sc.key("gcm_set_key")
    ivlen, taglen = _iv_len(aux), 4 + aux % 13
    if "iv" in sc.none:
        ivlen = 0
    aadlen = 0 if "aad" in sc.none else (size * 7 + aux) % (16 * max(1, size // 16 + 2))
    iv, aad, text = sc.rng.randbytes(ivlen), sc.rng.randbytes(aadlen), sc.rng.randbytes(size)
    if fn == "gcm_encrypt":
        args = {"gkey": gkey, "iv": iv, "ivlen": ivlen, "aad": aad, "aadlen": aadlen, "in": text,
                "out": _fill(sc.rng, size), "len": size, "tag": _fill(sc.rng, taglen), "taglen": taglen}
        inv = sc.call(fn, args, test=True, alias=_io_alias(sc))
        return inv.ret, _maybe(inv, "out"), inv.out("tag")
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
            "out": _fill(sc.rng, size), "len": size, "tag": tag, "taglen": taglen}
    inv = sc.call(fn, args, test=True, alias=_io_alias(sc))
    return inv.ret, _maybe(inv, "out")


def _maybe(inv: Invocation, name: str) -> bytes | None:
    return inv.out(name) if name in inv.regions else None


def scene_gcm_stream(sc: Scene, fn: str, size: int, aux: int) -> tuple:
    _, gkey = sc.key("gcm_set_key")
    ctx = sc.mem.place("ctx", _fill(sc.rng, sc.kernel.spec.gcm_ctx_bytes), aligned=True)  # type: ignore[attr-defined]
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
        inv = sc.call(upd, {"ctx": ctx, "in": sc.rng.randbytes(size), "out": _fill(sc.rng, size), "len": size},
                      test=True, alias=_io_alias(sc))
        res.append(_maybe(inv, "out"))
    else:
        k = size if fn == "gcm_finish" else size % 50
        inv = sc.call(upd, {"ctx": ctx, "in": sc.rng.randbytes(k), "out": bytes(k), "len": k},
                      alias=_io_alias(sc))
        res.append(inv.out("out"))
    inv = sc.call("gcm_finish", {"ctx": ctx, "tag": _fill(sc.rng, 16)}, test=fn == "gcm_finish")
    res.append(inv.out("tag"))
    return tuple(res)


def scene_hash(sc: Scene, fn: str, size: int, aux: int) -> tuple:
    if fn == "ghash":
        _, gkey = sc.key("gcm_set_key")
        keyarg: dict = {"gkey": gkey}
    else:
        keyarg = {"h": sc.rng.randbytes(16)}
    args = {**keyarg, "acc": sc.rng.randbytes(16), "data": sc.rng.randbytes(16 * size), "nblocks": size}
    inv = sc.call(fn, args, test=True)
    return (_maybe(inv, "acc"),)


def scene_gcmsiv(sc: Scene, fn: str, size: int, aux: int) -> tuple:
    key, skey = sc.key("gcmsiv_set_key")
    aadlen = 0 if "aad" in sc.none else (size * 7 + aux) % (16 * max(1, size // 16 + 2))
    nonce, aad, text = sc.rng.randbytes(12), sc.rng.randbytes(aadlen), sc.rng.randbytes(size)
    if fn == "gcmsiv_encrypt":
        args = {"skey": skey, "nonce": nonce, "aad": aad, "aadlen": aadlen, "in": text,
                "out": _fill(sc.rng, size), "len": size, "tag": _fill(sc.rng, 16)}
        inv = sc.call(fn, args, test=True, alias=_io_alias(sc))
        return inv.ret, _maybe(inv, "out"), inv.out("tag")
    ct, tag = gcmsiv_reference(key, nonce, aad, text)
    if aux % 4 == 3:
        tag = bytes([tag[0] ^ 1]) + tag[1:]
    args = {"skey": skey, "nonce": nonce, "aad": aad, "aadlen": aadlen, "in": ct,
            "out": _fill(sc.rng, size), "len": size, "tag": tag}
    inv = sc.call(fn, args, test=True, alias=_io_alias(sc))
    return inv.ret, _maybe(inv, "out")


SceneFn = Callable[[Scene, str, int, int], tuple]
SCENES: dict[str, SceneFn] = {
    "gcm_encrypt": scene_gcm_oneshot, "gcm_decrypt": scene_gcm_oneshot,
    **{f: scene_gcm_stream for f in STREAM_FUNCTIONS},
    "ghash": scene_hash, "polyval": scene_hash,
    "gcmsiv_encrypt": scene_gcmsiv, "gcmsiv_decrypt": scene_gcmsiv,
}
# Modules with a SCENES table of their own (they import this one, so they are looked up late).
SCENE_MODULES = ("aesgen.verify.xts", "aesgen.verify.ocb", "aesgen.verify.otr_checks", "aesgen.verify.wideblock",
                 "aesgen.verify.mpc")


def scene_for(fn: str) -> SceneFn | None:
    if fn in SCENES:
        return SCENES[fn]
    for name in SCENE_MODULES:
        table = importlib.import_module(name).SCENES
        if fn in table:
            return table[fn]
    return None


def _sizes(fn: str, n: int) -> range:
    """The length dimension guard/abi sweep: nblocks for hashes, IV bytes-1 for gcm_start,
    else text (or AAD) bytes."""
    if signatures.family(fn) in signatures.BLOCK_COUNTED:
        return range(n + 1)
    if not _has_length(fn):
        return range(3)  # key setup: one call per key size
    if fn == "gcm_start":
        return range(16 * n + 15)
    return range(16 * n + 16)


def _has_length(fn: str) -> bool:
    return any(signatures.SIGNATURES[fn].has(p)
               for p in ("len", "aadlen", "ivlen", "nblocks", "nkeys", "blocks_per_key"))


def _has_io(fn: str) -> bool:
    sig = signatures.SIGNATURES[fn]
    return sig.has("in") and sig.has("out")


def abi_check(kernel: Kernel, fn: str, probe: Probe, *, n: int, trials: int, seed: int) -> CheckResult:
    """The call under test through the trampoline and directly, from the same random state:
    no ABI violation, identical results."""
    name = f"abi {fn}"
    scene = scene_for(fn)
    if scene is None:
        return CheckResult(name, "fail", f"no call scenario for {fn} in verify/gcm.py")
    rng = random.Random(f"{seed}:{name}")
    top = _sizes(fn, n)[-1]
    group = kernel.spec.max_group_blocks
    one_group = group if signatures.family(fn) in signatures.BLOCK_COUNTED else 16 * group + 7
    problems: list[str] = []
    for trial in range(trials):
        size = (top, 1, min(top, one_group))[trial % 3]
        sub, cseed = rng.getrandbits(64), rng.getrandbits(64)
        in_place = _has_io(fn) and trial % 2 == 1
        probe.note(name, f"trial {trial} size={size}{' in-place' if in_place else ''}")
        outs = []
        for via in (True, False):
            caller = TrampolineCaller(kernel, cseed) if via else None
            sc = Scene(kernel, HeapMem(random.Random(sub)), random.Random(sub), caller, in_place)
            try:
                outs.append(scene(sc, fn, size, trial))
            except SceneError as e:
                problems.append(f"setup failed: {e}")
                break
            if caller is not None:
                problems += [f"{b} (size {size})" for b in caller.bad]
            problems += sc.damage
        if len(outs) == 2 and outs[0] != outs[1]:
            problems.append(f"result through the trampoline differs from a direct call (size {size})")
        if len(problems) >= 3:
            break
    if problems:
        return CheckResult(name, "fail", "; ".join(dict.fromkeys(problems)))
    sig = signatures.SIGNATURES[fn]
    stack = f", {sig.nargs - 6} stack arguments checked" if sig.nargs > 6 else ""
    how = " through the Microsoft x64 convention (rdi, rsi, xmm6-15 seeded too)" if kernel.spec.abi == "win64" else ""
    return CheckResult(name, "pass", f"{trials} calls with seeded callee-saved registers{how}{stack}")


def guard_placement(kernel: Kernel, fn: str, where: str, probe: Probe, *, n: int,
                    seed: int) -> Iterator[CheckResult]:
    name = f"guard {fn} {where}"
    if harness().fault_install(probe.fault_slot()) != 0:
        yield CheckResult(name, "fail", "could not install the fault handler")
        return
    rng = random.Random(f"{seed}:{name}")
    mem = GuardMem(where, probe)
    scene = scene_for(fn)
    calls = 0
    unit = "nblocks" if signatures.family(fn) in signatures.BLOCK_COUNTED else (
        "ivlen-1" if fn == "gcm_start" else "aadlen" if fn == "gcm_aad" else "len")
    for size in _sizes(fn, n):
        for in_place in ((False, True) if _has_io(fn) else (False,)):
            probe.note(name, f"{unit}={size}{' in-place' if in_place else ''}")
            sc = Scene(kernel, mem, rng, None, in_place)
            try:
                scene(sc, fn, size, size + in_place)
            except SceneError as e:
                yield CheckResult(name, "fail", f"{unit}={size}: setup failed: {e}")
                mem.close()
                return
            calls += 1
    mem.close()
    yield CheckResult(name, "pass", f"{calls} calls, every buffer {where} PROT_NONE, {unit} 0..{_sizes(fn, n)[-1]}")


def guard_len0(kernel: Kernel, fn: str, probe: Probe, *, seed: int) -> Iterator[CheckResult]:
    """Zero lengths with their pointers aimed into PROT_NONE pages (ghash/polyval with
    nblocks 0: every pointer; gcm_start and the one-shots also with ivlen 0 and the iv
    pointer in PROT_NONE); the other buffers valid, flush against guard pages."""
    name = f"guard {fn} len0"
    if harness().fault_install(probe.fault_slot()) != 0:
        yield CheckResult(name, "fail", "could not install the fault handler")
        return
    rng = random.Random(f"{seed}:{name}")
    sig = signatures.SIGNATURES[fn]
    mem = GuardMem("after", probe)
    scene = scene_for(fn)
    if sig.len0_touches_nothing:
        cases = [({p.name for p in sig.pointers}, 0, None)]
    elif fn == "gcm_start":
        cases = [({"iv"}, 0, -1)]
    else:
        zero = {p.name for p in sig.pointers if p.size in ("len", "aadlen")}
        want = 0 if sig.restype is not None else None
        if fn in STREAM_FUNCTIONS:
            want = 0  # gcm_start's return value comes first in a stream scene
        cases = [(zero, 0, want)]
        if sig.zero_on_fail:  # aux 3: a wrong tag; returns -1 and still touches no out byte
            cases.append((zero, 3, -1))
        nonce = next((p for p in ("iv", "nonce") if sig.has(f"{p}len")), None)
        if nonce:  # an empty IV/nonce is refused without touching it
            cases.append((zero | {nonce}, 0, -1))
    problems = []
    described = []
    for none, aux, want in cases:
        empty = next((f", {p}len 0" for p in ("iv", "nonce") if p in none), "")
        what = f"{', '.join(sorted(none))} in PROT_NONE" + (", wrong tag" if aux == 3 else "") + empty
        described.append(what)
        probe.note(name, what)
        sc = Scene(kernel, mem, rng, None, False, set(none))
        res = scene(sc, fn, 0, aux)
        if want is not None and res[0] != want:
            problems.append(f"{what}: returned {res[0]}, want {want}")
    mem.close()
    yield _result(name, problems, "length 0: " + "; ".join(described) + ": touched no memory")


def guard_units(kernel: Kernel, fn: str, *, n: int, quick: bool, seed: int) -> list[tuple[str, Unit]]:
    out: list[tuple[str, Unit]] = []
    if scene_for(fn) is None:
        return [(f"guard {fn}", lambda p: iter([CheckResult(f"guard {fn}", "fail",
                                                            f"no call scenario for {fn} in verify/gcm.py")]))]
    for where in ("after", "before"):
        out.append((f"guard {fn} {where}",
                    lambda p, w=where: guard_placement(kernel, fn, w, p, n=n, seed=seed)))
    if fn != "gcm_finish" and _has_length(fn):
        out.append((f"guard {fn} len0", lambda p: guard_len0(kernel, fn, p, seed=seed)))
    return out


# ================================================================ units


def units(kernel: Kernel, *, n: int, quick: bool, seed: int) -> list[tuple[str, Unit]]:
    """Known-answer, differential, tamper, streaming and bad-argument units for the AEAD and
    hash functions present (ABI and guard units come through abi.py and guard.py)."""
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
    if "polyval" in have:
        out.append(("kat polyval", lambda p: kat_polyval(kernel, p, quick=quick, seed=seed)))
    for fn in ("gcmsiv_encrypt", "gcmsiv_decrypt"):
        if fn in have:
            out.append((f"kat {fn}", lambda p, fn=fn: kat_gcmsiv(kernel, fn, p, quick=quick, seed=seed)))

    for fn in ("gcm_encrypt", "gcm_decrypt"):
        if fn in have:
            out.append((f"diff {fn}", lambda p, fn=fn: (
                diff_gcm(kernel, fn, b, p, n=n, quick=quick, seed=seed) for b in (128, 192, 256))))
    for fn in ("gcmsiv_encrypt", "gcmsiv_decrypt"):
        if fn in have:
            out.append((f"diff {fn}", lambda p, fn=fn: (
                diff_gcmsiv(kernel, fn, b, p, n=n, quick=quick, seed=seed) for b in (128, 256))))
    for fn in ("ghash", "polyval"):
        if fn in have:
            out.append((f"diff {fn}", lambda p, fn=fn: iter([diff_hash(kernel, fn, p, n=n, quick=quick, seed=seed)])))
    for fn, sizes in (("gcm_decrypt", (128, 192, 256)), ("gcmsiv_decrypt", (128, 256))):
        if fn in have:
            out.append((f"tamper {fn}", lambda p, fn=fn, sizes=sizes: (
                tamper(kernel, fn, b, p, n=n, quick=quick, seed=seed) for b in sizes)))
    if set(STREAM_FUNCTIONS) <= have:
        out.append(("stream gcm", lambda p: (
            stream_gcm(kernel, b, p, n=n, quick=quick, seed=seed) for b in (128, 192, 256))))
    bad = [fn for fn in ("gcm_set_key", "gcm_encrypt", "gcm_decrypt", "gcm_start", "gcmsiv_set_key") if fn in have]
    if bad:
        out.append(("badargs", lambda p: (badargs(kernel, fn, p, seed=seed) for fn in bad)))
    return out
