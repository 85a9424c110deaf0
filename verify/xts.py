"""Checks for XTS-AES (IEEE 1619) and the GF(2^128) doubling sequences (gfdouble_le/be).

Check names:
  kat xts_encrypt|xts_decrypt <file>  CAVP XTSGenAES128/256 (hex tweaks and data-unit sequence
                                numbers; byte-sized data units) and IEEE 1619 Annex B (crypto++ xts.txt)
  diff xts_encrypt|xts_decrypt <bits>  random keys, tweaks and lengths 0..N (below 16: nothing
                                written), in place and misaligned, vs `cryptography` (2x128, 2x256)
                                and vs this module's reference (2x192, which OpenSSL lacks)
  diff gfdouble_le|gfdouble_be  out[i] = tweak * x^i vs the bitwise doubling of IEEE 1619 / RFC 7253
  badargs xts_set_key           bits 0, 64, 127, 512 rejected with -1
  abi / guard / simulate        through the scenes below (SCENES, collected by verify/scenes.py)

The reference is written from the standards: IEEE 1619-2007 section 5.3 (the tweak
multiplied by alpha = x with the feedback byte 0x87, byte by byte with carries) and
ciphertext stealing as in its section 5.3.2/5.4.2; AES itself is `cryptography`'s ECB.
"""
from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from aesgen.functions import FUNCTIONS
from aesgen.kernels.xts_table import Layout, layout, table_from
from aesgen.verify import vectors
from aesgen.verify.build import Kernel
from aesgen.verify.harness.isolation import Probe, Unit
from aesgen.verify.harness.memory import HeapMem, Region
from aesgen.verify.harness.scene import Invocation, Scene, SceneError, fill, invoke, io_alias, out_if_placed
from aesgen.verify.reference.aes import aes_ecb
from aesgen.verify.results import CheckResult, first_diff, verdict

CRYPTOPP_XTS = Path("/usr/share/crypto++/TestVectors/xts.txt")
FEEDBACK = 0x87  # IEEE 1619: x^128 = x^7 + x^2 + x + 1, as the byte fed back into byte 0


# ================================================================ references


def double_le(block: bytes) -> bytes:
    """IEEE 1619 section 5.2: multiply by alpha, byte j from byte j-1's carry, 0x87 fed back."""
    out = bytearray(16)
    carry = 0
    for j in range(16):
        out[j] = ((block[j] << 1) & 0xFF) | carry
        carry = block[j] >> 7
    if carry:
        out[0] ^= FEEDBACK
    return bytes(out)


def double_be(block: bytes) -> bytes:
    """RFC 7253 section 2, double(S): S << 1, xor 0x87 into the last byte if S's first bit was set."""
    return double_le(block[::-1])[::-1]


def _xor(a: bytes, b: bytes) -> bytes:
    return bytes(p ^ q for p, q in zip(a, b))


def xts_reference(key1: bytes, key2: bytes, tweak: bytes, data: bytes, decrypt: bool) -> bytes:
    """XTS-AES of one data unit (len >= 16), ciphertext stealing for a partial last block."""
    if len(data) < 16:
        raise ValueError("XTS needs at least one whole block")
    t = aes_ecb(key2, tweak)
    tweaks = []
    m, r = divmod(len(data), 16)
    for _ in range(m + 1):
        tweaks.append(t)
        t = double_le(t)

    def one(block: bytes, i: int) -> bytes:
        return _xor(aes_ecb(key1, _xor(block, tweaks[i]), decrypt), tweaks[i])

    whole = m - 1 if r else m
    out = b"".join(one(data[16 * i:16 * i + 16], i) for i in range(whole))
    if r:
        i = m - 1
        first, second = (i + 1, i) if decrypt else (i, i + 1)  # decrypting swaps the tweaks
        cc = one(data[16 * i:16 * i + 16], first)
        out += one(data[16 * m:] + cc[r:], second) + cc[:r]
    return out


def xts_oracle(key1: bytes, key2: bytes, tweak: bytes, data: bytes, decrypt: bool) -> tuple[bytes, str]:
    """cryptography's XTS where OpenSSL has it (2x128, 2x256; distinct halves), else the reference."""
    if len(key1) in (16, 32) and key1 != key2:
        c = Cipher(algorithms.AES(key1 + key2), modes.XTS(tweak))
        ctx = c.decryptor() if decrypt else c.encryptor()
        return ctx.update(data) + ctx.finalize(), "cryptography"
    return xts_reference(key1, key2, tweak, data, decrypt), "reference"


# ================================================================ vectors


@dataclass(frozen=True)
class XtsVector:
    key1: bytes
    key2: bytes
    tweak: bytes
    plaintext: bytes
    ciphertext: bytes
    decrypt: bool  # the CAVP section it came from


@lru_cache(maxsize=None)
def xts_cavp() -> tuple[tuple[str, tuple[XtsVector, ...]], ...]:
    """CAVP XTSGenAES128/256, both tweak forms; data units that are not whole bytes are left out
    (the ABI takes byte lengths)."""
    base = vectors.cryptography_vectors_dir() / "ciphers" / "AES" / "XTS"
    out = []
    for form in ("tweak-128hexstr", "tweak-dataunitseqno"):
        for bits in (128, 256):
            path = base / form / f"XTSGenAES{bits}.rsp"
            if not path.is_file():
                raise FileNotFoundError(f"vector file missing: {path}")
            cases = []
            for section, records in vectors.parse_rsp(path).items():
                for rec in records:
                    if int(rec["DATAUNITLEN"]) % 8:
                        continue
                    key = bytes.fromhex(rec["KEY"])
                    if "I" in rec:
                        tweak = bytes.fromhex(rec["I"])
                    else:
                        tweak = int(rec["DATAUNITSEQNUMBER"]).to_bytes(16, "little")
                    cases.append(XtsVector(key[:len(key) // 2], key[len(key) // 2:], tweak,
                                           bytes.fromhex(rec["PT"]), bytes.fromhex(rec["CT"]),
                                           section == "DECRYPT"))
            out.append((f"XTSGenAES{bits} {form}", tuple(cases)))
    return tuple(out)


@lru_cache(maxsize=None)
def xts_cryptopp() -> tuple[XtsVector, ...] | None:
    """IEEE 1619 Annex B through crypto++'s xts.txt (None if not installed)."""
    if not CRYPTOPP_XTS.is_file():
        return None
    cases = []
    for v in vectors.parse_cryptopp(CRYPTOPP_XTS, name="AES/XTS"):
        half = len(v.key) // 2
        cases.append(XtsVector(v.key[:half], v.key[half:], v.iv, v.plaintext or b"", v.ciphertext, False))
    return tuple(cases)


# ================================================================ calls


def make_xts_key(kernel: Kernel, mem, key1: bytes, key2: bytes, encrypt: bool, *, caller=None,
                 bits: int | None = None) -> tuple[int | None, Region]:
    bits = 8 * len(key1) if bits is None else bits
    inv = invoke(kernel, "xts_set_key", mem, {
        "key1": key1 or b"\0", "key2": key2 or b"\0", "bits": bits,
        "xkey": b"\xa5" * kernel.spec.xts_key_bytes, "enc": 1 if encrypt else 0}, caller=caller)
    return inv.ret, inv.regions["xkey"]


def xts_call(kernel: Kernel, mem, fn: str, xkey: Region, data: bytes, tweak: bytes, *,
             rng: random.Random, in_place: bool = False, caller=None) -> Invocation:
    return invoke(kernel, fn, mem, {"xkey": xkey, "in": data, "out": fill(rng, len(data)), "len": len(data),
                                    "tweak": tweak}, caller=caller, alias={"out": "in"} if in_place else None)


# ================================================================ checks


def kat_xts(kernel: Kernel, fn: str, probe: Probe, *, quick: bool, seed: int) -> Iterator[CheckResult]:
    decrypt = fn == "xts_decrypt"
    rng = random.Random(f"{seed}:kat {fn}")
    files = list(xts_cavp())
    extra = xts_cryptopp()
    if extra is not None:
        files.append(("IEEE1619 (crypto++ xts.txt)", extra))
    for name, cases in files:
        check = f"kat {fn} {name}"
        probe.note(check, "")
        if quick:
            cases = cases[::25]
        mem = HeapMem(rng)
        errors: list[str] = []
        for k, v in enumerate(cases):
            ret, xkey = make_xts_key(kernel, mem, v.key1, v.key2, not decrypt)
            src, want = (v.ciphertext, v.plaintext) if decrypt else (v.plaintext, v.ciphertext)
            inv = xts_call(kernel, mem, fn, xkey, src, v.tweak, rng=rng, in_place=k % 2 == 1)
            got = inv.out("out")
            if ret != 0:
                errors.append(f"case {k}: xts_set_key returned {ret}")
            elif got != want:
                errors.append(f"case {k} ({len(src)} bytes): {first_diff(got, want)}")
            errors += inv.damage
        yield verdict(check, errors, f"{len(cases)} vectors")
    if extra is None:
        yield CheckResult(f"kat {fn} IEEE1619", "skip", f"{CRYPTOPP_XTS} not installed (libcrypto++-utils)")


def batch_bytes(kernel: Kernel) -> int:
    """Bytes one main-loop iteration takes: depth x lanes blocks."""
    return 16 * kernel.spec.depth_for("xts") * kernel.spec.width_for("xts") // 128


def _lengths(n: int, quick: bool, rng: random.Random, batch: int, tables: Layout | None) -> list[int]:
    """Every length up to a few groups' worth of blocks (stealing at each); then whole
    blocks, and 1 or 15 bytes more (stealing), at every block up to a pass over every tweak
    table and half a batch past where the table loop starts (kernels/xts_table.py: the
    batch loop's entries, its iterations on each table, its exits and the tails after each);
    then random ones."""
    last = table_from(batch, tables or Layout(False, 2)) + (tables.tables if tables else 2) * batch \
        + batch // 2 + 16
    top = max(16 * n + 15, last + 15)
    every = list(range(0, min(top, 160 if quick else 16 * 24) + 1))
    near = sorted({k + d for k in range(16, last + 1, 16) for d in (0, 1, 15)} - set(every))
    if quick:
        near = [x for x in near if x % batch < 48 or x % batch > batch - 32]
    return every + near + sorted(rng.randrange(16, top + 1) for _ in range(8 if quick else 40))


def diff_xts(kernel: Kernel, fn: str, bits: int, probe: Probe, *, n: int, quick: bool,
             seed: int) -> CheckResult:
    name = f"diff {fn} {bits}"
    rng = random.Random(f"{seed}:{name}")
    mem = HeapMem(rng)
    errors: list[str] = []
    oracles: set[str] = set()
    spec = kernel.spec
    lengths = _lengths(n, quick, rng, batch_bytes(kernel), layout(spec, spec.width_for("xts"), spec.depth_for("xts")))
    for k, length in enumerate(lengths):
        probe.note(name, f"len={length}")
        key1, key2, tweak = rng.randbytes(bits // 8), rng.randbytes(bits // 8), rng.randbytes(16)
        ret, xkey = make_xts_key(kernel, mem, key1, key2, fn == "xts_encrypt")
        data, junk = rng.randbytes(length), fill(rng, length)
        in_place = k % 3 == 2
        inv = invoke(kernel, fn, mem, {"xkey": xkey, "in": data, "out": junk, "len": length, "tweak": tweak},
                     alias={"out": "in"} if in_place else None)
        got = inv.out("out")
        if length < 16:
            if got != (data if in_place else junk):
                errors.append(f"len={length}: wrote to out (less than one block must do nothing)")
        else:
            want, oracle = xts_oracle(key1, key2, tweak, data, fn == "xts_decrypt")
            oracles.add(oracle)
            if ret != 0:
                errors.append(f"xts_set_key(bits={bits}) returned {ret}")
            elif got != want:
                errors.append(f"len={length}{' in-place' if in_place else ''}: {first_diff(got, want)}")
        errors += inv.damage
        if len(errors) >= 3:
            break
    return verdict(name, errors, f"{len(lengths)} messages, lengths 0..{max(lengths)}, vs "
                   + " and ".join(sorted(oracles)))


def diff_gfdouble(kernel: Kernel, fn: str, probe: Probe, *, n: int, quick: bool, seed: int) -> CheckResult:
    name = f"diff {fn}"
    rng = random.Random(f"{seed}:{name}")
    mem = HeapMem(rng)
    double = double_le if fn == "gfdouble_le" else double_be
    errors: list[str] = []
    counts = list(range(0, 4 * n + 4)) + [rng.randrange(1, 300) for _ in range(4 if quick else 16)]
    for count in counts:
        probe.note(name, f"nblocks={count}")
        # tweaks with the top bits set exercise the carries; random ones the rest
        t = rng.choice([rng.randbytes(16), b"\xff" * 16, bytes(15) + b"\x80", b"\x80" + bytes(15)])
        want, cur = [], t
        for _ in range(count):
            want.append(cur)
            cur = double(cur)
        inv = invoke(kernel, fn, mem, {"tweak": t, "out": fill(rng, 16 * count), "nblocks": count})
        got = inv.out("out")
        if got != b"".join(want):
            errors.append(f"nblocks={count} tweak={t.hex()}: {first_diff(got, b''.join(want))}")
        errors += inv.damage
        if len(errors) >= 3:
            break
    return verdict(name, errors, f"{len(counts)} sequences, up to {max(counts)} blocks, vs bitwise doubling")


def badargs_set_key(kernel: Kernel, probe: Probe, *, seed: int) -> CheckResult:
    name = "badargs xts_set_key"
    rng = random.Random(f"{seed}:{name}")
    mem = HeapMem(rng)
    errors: list[str] = []
    probe.note(name, "")
    bad = FUNCTIONS["xts_set_key"].rejected_bits
    for bits in bad:
        for enc in (True, False):
            ret, _ = make_xts_key(kernel, mem, rng.randbytes(64), rng.randbytes(64), enc, bits=bits)
            if ret != -1:
                errors.append(f"bits={bits} returned {ret}, want -1")
    return verdict(name, errors, f"bits {', '.join(map(str, bad))} rejected")


# ================================================================ scenes for abi, guard and simulate


def scene_xts_set_key(sc: Scene, fn: str, size: int, aux: int) -> tuple:
    bits = (128, 192, 256)[size % 3]
    ret, xkey = make_xts_key(sc.kernel, sc.mem, sc.rng.randbytes(bits // 8), sc.rng.randbytes(bits // 8),
                             aux % 2 == 0, caller=sc.caller)
    return ret, xkey.read()


def scene_xts(sc: Scene, fn: str, size: int, aux: int) -> tuple:
    bits = (128, 192, 256)[aux % 3]
    ret, xkey = make_xts_key(sc.kernel, sc.mem, sc.rng.randbytes(bits // 8), sc.rng.randbytes(bits // 8),
                             fn == "xts_encrypt", caller=sc.setup_caller)
    if ret != 0:
        raise SceneError(f"xts_set_key(bits={bits}) returned {ret}")
    args = {"xkey": xkey, "in": sc.rng.randbytes(size), "out": fill(sc.rng, size), "len": size,
            "tweak": sc.rng.randbytes(16)}
    inv = sc.call(fn, args, test=True, alias=io_alias(sc))
    return (out_if_placed(inv, "out"),)


def scene_gfdouble(sc: Scene, fn: str, size: int, aux: int) -> tuple:
    inv = sc.call(fn, {"tweak": sc.rng.randbytes(16), "out": fill(sc.rng, 16 * size), "nblocks": size},
                  test=True)
    return (out_if_placed(inv, "out"),)


SCENES = {"xts_set_key": scene_xts_set_key, "xts_encrypt": scene_xts, "xts_decrypt": scene_xts,
          "gfdouble_le": scene_gfdouble, "gfdouble_be": scene_gfdouble}


# ================================================================ units


def units(kernel: Kernel, *, n: int, quick: bool, seed: int) -> list[tuple[str, Unit]]:
    have = set(kernel.fn)
    out: list[tuple[str, Unit]] = []
    for fn in ("xts_encrypt", "xts_decrypt"):
        if fn in have and "xts_set_key" in have:
            out.append((f"kat {fn}", lambda p, fn=fn: kat_xts(kernel, fn, p, quick=quick, seed=seed)))
            out.append((f"diff {fn}", lambda p, fn=fn: (
                diff_xts(kernel, fn, b, p, n=n, quick=quick, seed=seed) for b in (128, 192, 256))))
    for fn in ("gfdouble_le", "gfdouble_be"):
        if fn in have:
            out.append((f"diff {fn}", lambda p, fn=fn: iter([diff_gfdouble(kernel, fn, p, n=n, quick=quick,
                                                                             seed=seed)])))
    if "xts_set_key" in have:
        out.append(("badargs xts_set_key", lambda p: iter([badargs_set_key(kernel, p, seed=seed)])))
    return out
