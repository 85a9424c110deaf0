"""Checks for AES-OCB3 (RFC 7253) kernels.

Check names:
  kat ocb_encrypt|ocb_decrypt <file>  RFC 7253 Appendix A (cryptography-vectors rfc7253.txt and
                                crypto++ ocb.txt), its 104/112/120-bit nonce forms, OpenSSL's
                                long-message cases; the tag is the tail of the ciphertext field
  diff ocb_encrypt|ocb_decrypt <bits>  random keys, nonce lengths 1..15, tag lengths 1..16, AAD and
                                text lengths 0..N (partial blocks), in place, misaligned; vs
                                cryptography's AESOCB3 where it applies (12..15-byte nonces,
                                16-byte tags), else this module's reference (cross-checked with
                                AESOCB3 on every message where both apply)
  tamper ocb_decrypt <bits>     a flipped tag/ciphertext/AAD/nonce bit: -1 and out zeroed
  badargs ocb_set_key|ocb_encrypt|ocb_decrypt  bad key sizes (aead_checks.check_key_sizes); nonce
                                length 0 and 16, tag length 0 and 17 (decrypt: out zeroed)
  abi / guard / simulate        through the scenes below (SCENES, collected by verify/scenes.py)

The reference follows RFC 7253 section 4 step by step (Stretch, the L_i by doubling, Offset_i =
Offset_{i-1} ^ L_ntz(i), HASH); AES itself is `cryptography`'s ECB.
"""
from __future__ import annotations

import random
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path

from cryptography.hazmat.primitives.ciphers.aead import AESOCB3

from aesgen.verify import vectors
from aesgen.verify.aead_checks import (Message, aad_len, aead_errors, check_key_sizes, check_refusals,
                                       diff_aead, tamper, text_lengths)
from aesgen.verify.build import Kernel
from aesgen.verify.harness.isolation import Probe, Unit
from aesgen.verify.harness.memory import HeapMem, Region
from aesgen.verify.harness.scene import (Invocation, Scene, fill, invoke, io_alias, key_or_raise, make_key,
                                         out_if_placed)
from aesgen.verify.reference.aes import aes_ecb
from aesgen.verify.results import CheckResult, verdict
from aesgen.verify.xts import double_be

CRYPTOPP_OCB = Path("/usr/share/crypto++/TestVectors/ocb.txt")
BAD_NONCE_LENGTHS = (0, 16)
BAD_TAG_LENGTHS = (0, 17)
AESOCB3_NONCES = range(12, 16)  # what cryptography's AESOCB3 accepts (16-byte tags only)


# ================================================================ reference (RFC 7253 section 4)


def _xor(a: bytes, b: bytes) -> bytes:
    return bytes(p ^ q for p, q in zip(a, b))


def ntz(i: int) -> int:
    return (i & -i).bit_length() - 1


class OcbReference:
    """RFC 7253 for one key; nonces of 1..15 bytes, tags of 1..16 bytes."""

    def __init__(self, key: bytes) -> None:
        self.key = key
        self.l_star = aes_ecb(key, bytes(16))
        self.l_dollar = double_be(self.l_star)
        self.l = [double_be(self.l_dollar)]
        for _ in range(63):
            self.l.append(double_be(self.l[-1]))

    def offsets(self, start: bytes, m: int) -> list[bytes]:
        """Offset_1..Offset_m from Offset_0 = start."""
        out, cur = [], start
        for i in range(1, m + 1):
            cur = _xor(cur, self.l[ntz(i)])
            out.append(cur)
        return out

    def offset_zero(self, nonce: bytes, taglen: int) -> bytes:
        if not 1 <= len(nonce) <= 15:
            raise ValueError("OCB nonces are 1..15 bytes")
        value = ((8 * taglen) % 128) << 121 | 1 << (8 * len(nonce)) | int.from_bytes(nonce, "big")
        bottom = value & 63
        ktop = aes_ecb(self.key, (value & ~63).to_bytes(16, "big"))
        stretch = ktop + _xor(ktop[:8], ktop[1:9])
        bits = int.from_bytes(stretch, "big")  # 192 bits
        return ((bits >> (64 - bottom)) & ((1 << 128) - 1)).to_bytes(16, "big")

    def hash(self, aad: bytes) -> bytes:
        m = len(aad) // 16
        offs = self.offsets(bytes(16), m)
        total = bytes(16)
        if m:
            enc = aes_ecb(self.key, b"".join(_xor(aad[16 * i:16 * i + 16], offs[i]) for i in range(m)))
            for i in range(m):
                total = _xor(total, enc[16 * i:16 * i + 16])
        rest = aad[16 * m:]
        if rest:
            off = _xor(offs[-1] if m else bytes(16), self.l_star)
            padded = rest + b"\x80" + bytes(15 - len(rest))
            total = _xor(total, aes_ecb(self.key, _xor(padded, off)))
        return total

    def seal(self, nonce: bytes, aad: bytes, text: bytes, taglen: int, decrypt: bool = False) -> tuple[bytes, bytes]:
        """(output, tag): encrypting, text is the plaintext; decrypting, the ciphertext (the tag
        is then the one the plaintext produces)."""
        m = len(text) // 16
        offs = self.offsets(self.offset_zero(nonce, taglen), m)
        blocks = [text[16 * i:16 * i + 16] for i in range(m)]
        inner = aes_ecb(self.key, b"".join(_xor(x, o) for x, o in zip(blocks, offs)), decrypt)
        out = b"".join(_xor(inner[16 * i:16 * i + 16], offs[i]) for i in range(m))
        plain = out if decrypt else text[:16 * m]
        checksum = bytes(16)
        for i in range(m):
            checksum = _xor(checksum, plain[16 * i:16 * i + 16])
        offset = offs[-1] if m else self.offset_zero(nonce, taglen)
        rest = text[16 * m:]
        if rest:
            offset = _xor(offset, self.l_star)
            pad = aes_ecb(self.key, offset)
            tail = _xor(rest, pad)
            out += tail
            p = tail if decrypt else rest
            checksum = _xor(checksum, p + b"\x80" + bytes(15 - len(p)))
        tag = _xor(aes_ecb(self.key, _xor(_xor(checksum, offset), self.l_dollar)), self.hash(aad))
        return out, tag[:taglen]


def ocb_oracle(key: bytes, nonce: bytes, aad: bytes, pt: bytes, taglen: int) -> tuple[bytes, bytes, str]:
    """(ciphertext, tag, oracle): AESOCB3 where it applies, else the reference."""
    if len(nonce) in AESOCB3_NONCES and taglen == 16:
        out = AESOCB3(key).encrypt(nonce, pt, aad)
        return out[:-16], out[-16:], "AESOCB3"
    ct, tag = OcbReference(key).seal(nonce, aad, pt, taglen)
    return ct, tag, "reference"


def cross_check(key: bytes, nonce: bytes, aad: bytes, pt: bytes) -> str | None:
    """Where AESOCB3 applies: does the reference agree with it (both directions)?"""
    if len(nonce) not in AESOCB3_NONCES:
        return None
    ref = OcbReference(key)
    ct, tag = ref.seal(nonce, aad, pt, 16)
    if ct + tag != AESOCB3(key).encrypt(nonce, pt, aad):
        return "the reference disagrees with AESOCB3"
    back, tag2 = ref.seal(nonce, aad, ct, 16, decrypt=True)
    if back != pt or tag2 != tag:
        return "the reference's decryption does not invert its encryption"
    return None


# ================================================================ vectors


def _parse_nist_style(path: Path) -> tuple[vectors.AeadVector, ...]:
    """cryptography-vectors' OCB3 files: COUNT/Key/Nonce/AAD/Plaintext/Ciphertext (tag appended)."""
    out, rec = [], {}

    def flush() -> None:
        if rec:
            pt, ct = bytes.fromhex(rec.get("PLAINTEXT", "")), bytes.fromhex(rec["CIPHERTEXT"])
            out.append(vectors.AeadVector(len(out), bytes.fromhex(rec["KEY"]), bytes.fromhex(rec["NONCE"]),
                                          bytes.fromhex(rec.get("AAD", "")), pt, ct[:len(pt)], ct[len(pt):]))
            rec.clear()

    for raw in path.read_text(encoding="ascii").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, _, value = line.partition("=")
        name = name.strip().upper()
        if name == "COUNT":
            flush()
        rec[name] = value.strip()
    flush()
    return tuple(out)


@lru_cache(maxsize=None)
def ocb_files() -> tuple[tuple[str, tuple[vectors.AeadVector, ...]], ...]:
    base = vectors.cryptography_vectors_dir() / "ciphers" / "AES" / "OCB3"
    out = []
    for stem in ("rfc7253", "test-vector-1-nonce104", "test-vector-1-nonce112", "test-vector-1-nonce120",
                 "openssl"):
        path = base / f"{stem}.txt"
        if not path.is_file():
            raise FileNotFoundError(f"vector file missing: {path}")
        out.append((stem, _parse_nist_style(path)))
    if CRYPTOPP_OCB.is_file():
        cases = []
        for v in vectors.parse_cryptopp(CRYPTOPP_OCB, name="AES/OCB"):
            n = len(v.plaintext or b"")
            cases.append(vectors.AeadVector(len(cases), v.key, v.iv, v.aad, v.plaintext or b"", v.ciphertext[:n],
                                            v.ciphertext[n:]))
        out.append(("RFC7253 (crypto++ ocb.txt)", tuple(cases)))
    return tuple(out)


# ================================================================ calls


def ocb_call(kernel: Kernel, mem, fn: str, okey: Region, nonce: bytes, aad: bytes, data: bytes,
             tag: bytes | int, *, rng: random.Random, in_place: bool = False, noncelen: int | None = None,
             taglen: int | None = None, caller=None) -> Invocation:
    """ocb_encrypt (tag: its length) or ocb_decrypt (tag: the bytes), junk-filled outputs."""
    tag_bytes = tag if isinstance(tag, bytes) else fill(rng, tag)
    args = {"okey": okey, "nonce": nonce, "noncelen": len(nonce) if noncelen is None else noncelen,
            "aad": aad, "aadlen": len(aad), "in": data, "out": fill(rng, len(data)), "len": len(data),
            "tag": tag_bytes, "taglen": len(tag_bytes) if taglen is None else taglen}
    return invoke(kernel, fn, mem, args, caller=caller, alias={"out": "in"} if in_place else None)


# ================================================================ checks


def kat_ocb(kernel: Kernel, fn: str, probe: Probe, *, quick: bool, seed: int) -> Iterator[CheckResult]:
    decrypt = fn == "ocb_decrypt"
    rng = random.Random(f"{seed}:kat {fn}")
    for name, cases in ocb_files():
        check = f"kat {fn} {name}"
        probe.note(check, "")
        mem = HeapMem(rng)
        errors: list[str] = []
        for k, v in enumerate(cases):
            okey = key_or_raise(kernel, mem, "ocb_set_key", v.key)
            if decrypt:
                inv = ocb_call(kernel, mem, fn, okey, v.iv, v.aad, v.ciphertext, v.tag, rng=rng, in_place=k % 2 == 1)
            else:
                inv = ocb_call(kernel, mem, fn, okey, v.iv, v.aad, v.plaintext, len(v.tag), rng=rng,
                               in_place=k % 2 == 1)
            errors += aead_errors(inv, decrypt, f"case {k}", v.plaintext, v.ciphertext, v.tag)
        yield verdict(check, errors, f"{len(cases)} vectors")
    if not CRYPTOPP_OCB.is_file():
        yield CheckResult(f"kat {fn} RFC7253 (crypto++)", "skip", f"{CRYPTOPP_OCB} not installed (libcrypto++-utils)")


def _nonce_len(j: int) -> int:
    """12..15 (AESOCB3's) every other call, the rest 1..11."""
    return 12 + j % 4 if j % 2 == 0 else 1 + (j // 2) % 11


def _tag_len(j: int) -> int:
    return 16 if j % 3 else 1 + (j // 3) % 16


def diff_ocb(kernel: Kernel, fn: str, bits: int, probe: Probe, *, n: int, quick: bool,
             seed: int) -> CheckResult:
    group = kernel.spec.ocb_batch_blocks

    def lengths(rng: random.Random) -> list[int]:
        # beyond N: a few messages that reach batches at 4B and 8B (Q_ntz with more trailing zeros)
        return text_lengths(n, quick, rng) + [16 * rng.randrange(4 * group, 9 * group + 2) + rng.randrange(16)
                                              for _ in range(3)]

    def message(rng: random.Random, j: int, length: int) -> Message:
        noncelen, taglen, aadlen = _nonce_len(j), _tag_len(j), aad_len(j, n, rng)
        key, nonce, aad, pt = (rng.randbytes(bits // 8), rng.randbytes(noncelen), rng.randbytes(aadlen),
                               rng.randbytes(length))
        ct, tag, oracle = ocb_oracle(key, nonce, aad, pt, taglen)
        bad = cross_check(key, nonce, aad, pt) if j % 16 == 0 else None
        return Message(key, nonce, aad, pt, ct, tag, f"noncelen={noncelen} taglen={taglen}", oracle,
                       (bad,) if bad else ())

    return diff_aead(kernel, fn, bits, probe, "ocb_set_key", message, ocb_call, lengths=lengths, quick=quick,
                     seed=seed, summary=lambda calls, lengths, oracles: f"{calls} calls, len<={max(lengths)}, "
                     f"AAD 0..{16 * n + 15}, nonce 1..15 bytes, tags 1..16 bytes, misaligned, in-place; "
                     f"vs {'+'.join(sorted(oracles))}")


def tamper_seal(kernel: Kernel, rng: random.Random, mem: HeapMem, key: bytes, aad: bytes, pt: bytes,
                j: int) -> tuple[Region, bytes, bytes, bytes]:
    """tamper's valid message: a nonce of 1..15 bytes and a tag of 1..16, as the differential cycles them."""
    nonce = rng.randbytes(_nonce_len(j))
    ct, tag, _ = ocb_oracle(key, nonce, aad, pt, _tag_len(j))
    return key_or_raise(kernel, mem, "ocb_set_key", key), nonce, ct, tag


def badargs_ocb(kernel: Kernel, fn: str, probe: Probe, *, seed: int) -> CheckResult:
    if fn == "ocb_set_key":
        return check_key_sizes(kernel, fn, probe, seed=seed)
    decrypt = fn == "ocb_decrypt"

    def refusals(rng: random.Random, mem: HeapMem, okey: Region) -> Iterator[tuple[str, Invocation, int]]:
        cases = [(f"noncelen={k}", k, 16) for k in BAD_NONCE_LENGTHS] + [(f"taglen={t}", 12, t) for t in BAD_TAG_LENGTHS]
        for label, noncelen, taglen in cases:
            for length in (0, 33):
                nonce, aad, data = rng.randbytes(16), rng.randbytes(20), rng.randbytes(length)
                tag = rng.randbytes(17)
                yield f"{label} len={length}", ocb_call(kernel, mem, fn, okey, nonce, aad, data,
                                                        tag if decrypt else 17, rng=rng, noncelen=noncelen,
                                                        taglen=taglen), length

    rejected = (f"nonce lengths {', '.join(map(str, BAD_NONCE_LENGTHS))}, tag lengths "
                f"{', '.join(map(str, BAD_TAG_LENGTHS))}")
    return check_refusals(kernel, fn, probe, "ocb_set_key", refusals, rejected, zeroed=decrypt, seed=seed)


# ================================================================ scenes for abi, guard and simulate


def scene_ocb_set_key(sc: Scene, fn: str, size: int, aux: int) -> tuple:
    bits = (128, 192, 256)[size % 3]
    ret, okey = make_key(sc.kernel, sc.mem, "ocb_set_key", sc.rng.randbytes(bits // 8), caller=sc.caller)
    return ret, okey.read()


def scene_ocb(sc: Scene, fn: str, size: int, aux: int) -> tuple:
    key, okey = sc.key("ocb_set_key")
    noncelen, taglen = _nonce_len(aux), _tag_len(aux)
    if "nonce" in sc.none:  # the guard check's empty nonce: -1, nothing touched
        noncelen = 0
    aadlen = 0 if "aad" in sc.none else (size * 7 + aux) % (16 * max(1, size // 16 + 2))
    nonce, aad, text = sc.rng.randbytes(noncelen), sc.rng.randbytes(aadlen), sc.rng.randbytes(size)
    common = {"okey": okey, "nonce": nonce, "noncelen": noncelen, "aad": aad, "aadlen": aadlen}
    if fn == "ocb_encrypt":
        inv = sc.call(fn, {**common, "in": text, "out": fill(sc.rng, size), "len": size,
                           "tag": fill(sc.rng, taglen), "taglen": taglen}, test=True, alias=io_alias(sc))
        return inv.ret, out_if_placed(inv, "out"), inv.out("tag")
    if noncelen == 0:  # rejected before anything is read: any ciphertext and tag will do
        ct, tag = text, sc.rng.randbytes(taglen)
    else:
        ct, tag, _ = ocb_oracle(key, nonce, aad, text, taglen)
    if aux % 4 == 3:  # sometimes a wrong tag: the zeroing path runs too
        tag = bytes([tag[0] ^ 1]) + tag[1:]
    inv = sc.call(fn, {**common, "in": ct, "out": fill(sc.rng, size), "len": size, "tag": tag, "taglen": taglen},
                  test=True, alias=io_alias(sc))
    return inv.ret, out_if_placed(inv, "out")


SCENES = {"ocb_set_key": scene_ocb_set_key, "ocb_encrypt": scene_ocb, "ocb_decrypt": scene_ocb}


# ================================================================ units


def units(kernel: Kernel, *, n: int, quick: bool, seed: int) -> list[tuple[str, Unit]]:
    have = set(kernel.fn)
    if "ocb_set_key" not in have:
        return []
    out: list[tuple[str, Unit]] = []
    for fn in ("ocb_encrypt", "ocb_decrypt"):
        if fn in have:
            out.append((f"kat {fn}", lambda p, fn=fn: kat_ocb(kernel, fn, p, quick=quick, seed=seed)))
            out.append((f"diff {fn}", lambda p, fn=fn: (
                diff_ocb(kernel, fn, b, p, n=n, quick=quick, seed=seed) for b in (128, 192, 256))))
    if "ocb_decrypt" in have:
        out.append(("tamper ocb_decrypt", lambda p: (
            tamper(kernel, "ocb_decrypt", b, p, tamper_seal, ocb_call, n=n, quick=quick, seed=seed, iv="nonce")
            for b in (128, 192, 256))))
    bad = [fn for fn in ("ocb_set_key", "ocb_encrypt", "ocb_decrypt") if fn in have]
    out.append(("badargs ocb", lambda p: (badargs_ocb(kernel, fn, p, seed=seed) for fn in bad)))
    return out
