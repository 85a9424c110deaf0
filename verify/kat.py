"""Known answers: FIPS-197, CAVP KAT/MMT (of the standard mode a record names)/MCT, RFC 3686;
and key-schedule bytes.

The key schedule is checked byte for byte against an independent FIPS-197
KeyExpansion written here (S-box derived from GF(2^8) inversion + the affine
map, not pasted), laid out the way the ABI promises.
"""
from __future__ import annotations

import ctypes
import random
from collections.abc import Iterator
from functools import lru_cache

from aesgen.functions import FUNCTIONS
from aesgen.verify import signatures, vectors
from aesgen.verify.build import Kernel, harness
from aesgen.verify.differential import NO_REFERENCE, has_reference
from aesgen.verify.harness.isolation import Probe, Unit
from aesgen.verify.reference import standard
from aesgen.verify.results import CheckResult, verdict

# ---------------------------------------------------------------- FIPS-197 math


def gmul(a: int, b: int) -> int:
    """Multiply in GF(2^8) modulo x^8 + x^4 + x^3 + x + 1."""
    r = 0
    while b:
        if b & 1:
            r ^= a
        a <<= 1
        if a & 0x100:
            a ^= 0x11B
        b >>= 1
    return r


@lru_cache(maxsize=1)
def sbox() -> tuple[int, ...]:
    inv = [0] * 256
    for a in range(1, 256):
        for b in range(1, 256):
            if gmul(a, b) == 1:
                inv[a] = b
                break
    out = []
    for x in inv:
        rot = lambda v, k: ((v << k) | (v >> (8 - k))) & 0xFF  # noqa: E731
        out.append(x ^ rot(x, 1) ^ rot(x, 2) ^ rot(x, 3) ^ rot(x, 4) ^ 0x63)
    return tuple(out)


def expand_key(key: bytes) -> list[bytes]:
    """FIPS-197 KeyExpansion: the Nr+1 encryption round keys, 16 bytes each."""
    nk = len(key) // 4
    if len(key) not in (16, 24, 32):
        raise ValueError("AES key must be 16, 24 or 32 bytes")
    nr = nk + 6
    s = sbox()
    w = [list(key[4 * i:4 * i + 4]) for i in range(nk)]
    rcon = 1
    for i in range(nk, 4 * (nr + 1)):
        t = list(w[i - 1])
        if i % nk == 0:
            t = [s[b] for b in t[1:] + t[:1]]
            t[0] ^= rcon
            rcon = gmul(rcon, 2)
        elif nk > 6 and i % nk == 4:
            t = [s[b] for b in t]
        w.append([a ^ b for a, b in zip(w[i - nk], t)])
    flat = bytes(b for word in w for b in word)
    return [flat[16 * r:16 * r + 16] for r in range(nr + 1)]


def inv_mix_columns(block: bytes) -> bytes:
    out = bytearray(16)
    for c in range(4):
        a = block[4 * c:4 * c + 4]
        for r in range(4):
            out[4 * c + r] = (gmul(a[r], 14) ^ gmul(a[(r + 1) % 4], 11)
                              ^ gmul(a[(r + 2) % 4], 13) ^ gmul(a[(r + 3) % 4], 9))
    return bytes(out)


def decrypt_round_keys(key: bytes) -> list[bytes]:
    """Equivalent inverse cipher keys: dk[0]=ek[nr], dk[i]=InvMixColumns(ek[nr-i]), dk[nr]=ek[0]."""
    ek = expand_key(key)
    nr = len(ek) - 1
    return [ek[nr]] + [inv_mix_columns(ek[nr - i]) for i in range(1, nr)] + [ek[0]]


def bit_planes(rk: bytes, lanes: int, turn: int = 0) -> bytes:
    """A round key as the bitsliced backend stores it (docs/abi.md): planes p = 0..7, each a
    16-byte row per lane whose byte 4 * row + col is 0xff when bit 7 - p of the key byte at
    (row, col - turn * row mod 4) is set (key i: turn i, or -i in a decryption schedule)."""
    planes = b""
    for p in range(8):
        row = bytes(0xFF if rk[4 * ((q % 4 - turn * (q // 4)) % 4) + q // 4] >> (7 - p) & 1 else 0
                    for q in range(16))
        planes += row * lanes
    return planes


def schedule_regions(stride: int, rounds_offset: int, key: bytes, decrypt: bool,
                     bitsliced: bool = False) -> list[tuple[int, bytes]]:
    """(offset, bytes) pairs the ABI defines in a key schedule; the rest is unspecified.
    Bitsliced schedules hold the encryption keys as planes, in reverse order for decryption."""
    if bitsliced:
        ek = expand_key(key)
        rks = ek[::-1] if decrypt else ek
        regions = [(i * stride, bit_planes(rk, stride // 128, -i if decrypt else i)) for i, rk in enumerate(rks)]
        regions.append((rounds_offset, (len(rks) - 1).to_bytes(4, "little")))
        return regions
    rks = decrypt_round_keys(key) if decrypt else expand_key(key)
    regions = [(i * stride, rk * (stride // 16)) for i, rk in enumerate(rks)]
    regions.append((rounds_offset, (len(rks) - 1).to_bytes(4, "little")))
    return regions


# ---------------------------------------------------------------- key schedule check

def check_key_schedule(kernel: Kernel, probe: Probe, *, seed: int, quick: bool) -> Iterator[CheckResult]:
    spec = kernel.spec
    for bits in vectors.KEY_SIZES:
        name = f"keyschedule {bits}"
        probe.note(name, "set_encrypt_key / set_decrypt_key")
        rng = random.Random(f"{seed}:{name}")
        keys = [vectors.FIPS197_APPENDIX_C[bits][0], bytes(bits // 8), b"\xff" * (bits // 8)]
        keys += [rng.randbytes(bits // 8) for _ in range(4 if quick else 16)]
        errors: list[str] = []
        for key in keys:
            for decrypt in (False, True):
                which = "set_decrypt_key" if decrypt else "set_encrypt_key"
                ks = kernel.set_key(key, decrypt=decrypt)
                if ks.ret != 0:
                    errors.append(f"{which}(bits={bits}) returned {ks.ret}")
                    continue
                raw = ks.raw()
                for off, want in schedule_regions(spec.key_stride, spec.rounds_offset, key, decrypt,
                                                 spec.backend == "bitsliced"):
                    got = raw[off:off + len(want)]
                    if got != want:
                        what = "round count" if off == spec.rounds_offset else f"round key {off // spec.key_stride}"
                        errors.append(f"{which} key={key.hex()}: {what} at offset {off} is "
                                      f"{got.hex()}, want {want.hex()}")
                        break
            if len(errors) >= 4:
                break
        yield verdict(name, errors, f"{len(keys)} keys, enc+dec layouts, stride {spec.key_stride}")

    name = "keyschedule badbits"
    probe.note(name, "")
    errors = []
    bad = FUNCTIONS["set_encrypt_key"].rejected_bits  # set_decrypt_key takes the same sizes
    for bits in bad:
        for decrypt in (False, True):
            ks = kernel.set_key(bytes(64), decrypt=decrypt, bits=bits)
            if ks.ret != -1:
                which = "set_decrypt_key" if decrypt else "set_encrypt_key"
                errors.append(f"{which}(bits={bits}) returned {ks.ret}, want -1")
    yield verdict(name, errors, "bits " + ", ".join(map(str, bad)) + " rejected")


# ---------------------------------------------------------------- known answers


def _ctr_after(ctr: bytes, nbytes: int) -> bytes:
    low = (int.from_bytes(ctr[12:], "big") + (nbytes + 15) // 16) & 0xFFFFFFFF
    return ctr[:12] + low.to_bytes(4, "big")


def _chain_after(fn: str, iv: bytes, data: bytes, want: bytes) -> bytes | None:
    """The ctr/iv `fn` must leave after turning `data` into `want` (None: it takes none)."""
    sig = signatures.SIGNATURES[fn]
    if not sig.chain:
        return None
    if sig.standard is not None:
        return standard.next_iv(sig.standard, data, want, iv)
    return _ctr_after(iv, len(data))


def _run_vector(kernel: Kernel, fn: str, key: bytes, iv: bytes, data: bytes, want: bytes) -> str | None:
    """Run one vector; a description of the mismatch, or None."""
    sig = signatures.SIGNATURES[fn]
    ks = kernel.make_key(sig.key_setup or "set_encrypt_key", key)
    if ks.ret != 0:
        return f"set key returned {ks.ret}"
    got, chain_out = kernel.run(fn, ks, data, iv if sig.chain else None)
    if got != want:
        return f"output {got.hex()[:64]} want {want.hex()[:64]}"
    want_chain = _chain_after(fn, iv, data, want)
    if chain_out != want_chain:
        return f"{sig.chain} on return {chain_out.hex()} want {want_chain.hex()}"
    return None


def _fips197(kernel: Kernel, fn: str, bits: int) -> str | None:
    """FIPS-197 Appendix C through whichever mode `fn` is (CTR: keystream of counter=PT)."""
    std = signatures.SIGNATURES[fn].standard
    if std is not None:
        return _run_vector(kernel, fn, *standard.fips197_case(std, bits))
    key, pt, ct = vectors.FIPS197_APPENDIX_C[bits]
    return _run_vector(kernel, fn, key, pt, bytes(16), ct)


def _vector_files(fn: str) -> tuple[vectors.VectorFile, ...]:
    """CAVP files of the standard mode the record names; RFC 3686 for CTR32."""
    std = signatures.SIGNATURES[fn].standard
    return standard.vector_files(std) if std is not None else vectors.ctr_rfc3686()


def _decrypts(fn: str) -> bool:
    std = signatures.SIGNATURES[fn].standard
    return std is not None and std.decrypt


def check_known_answers(kernel: Kernel, fn: str, probe: Probe) -> Iterator[CheckResult]:
    if not has_reference(fn):
        yield CheckResult(f"kat {fn}", "fail", NO_REFERENCE)
        return
    for bits in vectors.KEY_SIZES:
        name = f"kat {fn} FIPS197-{bits}"
        probe.note(name, "Appendix C")
        err = _fips197(kernel, fn, bits)
        yield CheckResult(name, "fail" if err else "pass", err or "Appendix C")

    decrypt = _decrypts(fn)
    for vf in _vector_files(fn):
        name = f"kat {fn} {vf.name}"
        section = vf.decrypt if decrypt else vf.encrypt
        errors = []
        for v in section:
            probe.note(name, f"COUNT={v.count}")
            data, want = (v.ciphertext, v.plaintext) if decrypt else (v.plaintext, v.ciphertext)
            err = _run_vector(kernel, fn, v.key, v.iv, data, want)
            if err:
                errors.append(f"COUNT={v.count}: {err}")
        if not section:
            yield CheckResult(name, "fail", "no vectors parsed")
        else:
            yield verdict(name, errors, f"{len(section)} vectors")


def check_mct(kernel: Kernel, fn: str, probe: Probe) -> Iterator[CheckResult]:
    """CAVP CBC Monte-Carlo: 100 x 1000 chained calls in C, each outer record compared."""
    h = harness()
    decrypt = fn == "cbc_decrypt"
    set_key = kernel.address("set_decrypt_key" if decrypt else "set_encrypt_key")
    for vf in vectors.cbc_mct():
        section = vf.decrypt if decrypt else vf.encrypt
        bits = len(section[0].key) * 8
        name = f"mct {fn} {bits}"
        probe.note(name, "100 x 1000 iterations")
        first = section[0]
        src = first.ciphertext if decrypt else first.plaintext
        rec = ctypes.create_string_buffer(100 * 80)
        rc = h.mct_cbc(set_key, kernel.address(fn), kernel.spec.key_bytes, bits,
                       first.key, first.iv, src, rec, kernel.spec.abi == "win64")
        if rc != 0:
            yield CheckResult(name, "fail", f"harness mct_cbc returned {rc}")
            continue
        errors = []
        for i, v in enumerate(section[:100]):
            r = rec.raw[80 * i:80 * i + 80]
            key, iv, x_in, x_out = r[:bits // 8], r[32:48], r[48:64], r[64:80]
            want_in, want_out = (v.ciphertext, v.plaintext) if decrypt else (v.plaintext, v.ciphertext)
            for field, got, want in (("KEY", key, v.key), ("IV", iv, v.iv),
                                     ("input", x_in, want_in), ("output", x_out, want_out)):
                if got != want:
                    errors.append(f"COUNT={v.count} {field} {got.hex()} want {want.hex()}")
                    break
            if errors:
                break
        yield verdict(name, errors, f"{len(section)} outer iterations")


MCT_FUNCTIONS = ("cbc_encrypt", "cbc_decrypt")  # the Monte-Carlo files cover CBC


def units(kernel: Kernel, *, quick: bool) -> list[tuple[str, Unit]]:
    """Known answers for the block-mode functions present (the other families: their own modules)."""
    out: list[tuple[str, Unit]] = []
    block = [fn for fn in kernel.functions
             if fn in kernel.fn and signatures.family(fn) == signatures.BLOCK]
    for fn in block:
        out.append((f"kat {fn}", lambda p, fn=fn: check_known_answers(kernel, fn, p)))
    for fn in block:
        if fn in MCT_FUNCTIONS:
            out.append((f"mct {fn}", lambda p, fn=fn: check_mct(kernel, fn, p)))
    return out
