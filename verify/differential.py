"""Differential tests against `cryptography` (an independent AES).

A function whose record names its standard mode (ECB, CBC, CFB...) is compared with that
mode of `cryptography` (verify/reference/standard.py). CTR32 is modelled from ECB over
explicitly built counter blocks, so the 32-bit big-endian wrap (low word only, the other
12 bytes never carry) is exact.
Every call runs in canary-filled buffers at random misalignments, separately
and in place, and checks output, the returned ctr/iv, the canaries on both
sides of `out`, and that a separate `in` is left untouched.
"""
from __future__ import annotations

import ctypes
import random
from collections.abc import Iterator
from dataclasses import dataclass

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from aesgen.verify import signatures
from aesgen.verify.build import Kernel, KeySchedule
from aesgen.verify.harness.isolation import Probe, Unit
from aesgen.verify.reference import standard
from aesgen.verify.results import CheckResult

# The block-cipher mode functions `reference` knows (the other families check theirs in their own modules).
DATA_FUNCTIONS = tuple(f for f, s in signatures.SIGNATURES.items() if s.family == signatures.BLOCK)
PAD = 128  # canary bytes on each side of a buffer: >= 64 before, >= 65 after


# Block functions with no standard mode in `cryptography`, modelled by `reference` itself.
MODELLED_HERE = ("ctr32_encrypt",)


def has_reference(fn: str) -> bool:
    """Whether the verifier knows what block function `fn` must compute."""
    return signatures.SIGNATURES[fn].standard is not None or fn in MODELLED_HERE


NO_REFERENCE = "its record names no standard mode (aesgen.functions.StandardMode) and the verifier models none"


def reference(fn: str, key: bytes, data: bytes, chain: bytes | None) -> tuple[bytes, bytes | None]:
    """What `fn` must produce, and the ctr/iv it must leave behind: the standard mode its record
    names, through `cryptography`; CTR32 (no such mode there) modelled from ECB here."""
    std = signatures.SIGNATURES[fn].standard
    if std is not None:
        return standard.expected(std, key, data, chain)
    if fn not in MODELLED_HERE or chain is None:
        raise ValueError(f"{fn}: {NO_REFERENCE}")
    c = Cipher(algorithms.AES(key), modes.ECB()).encryptor()
    nblk = (len(data) + 15) // 16
    low = int.from_bytes(chain[12:], "big")
    blocks = b"".join(chain[:12] + ((low + j) & 0xFFFFFFFF).to_bytes(4, "big") for j in range(nblk))
    ks = c.update(blocks) + c.finalize()
    return bytes(a ^ b for a, b in zip(data, ks)), chain[:12] + ((low + nblk) & 0xFFFFFFFF).to_bytes(4, "big")


@dataclass
class Trial:
    fn: str
    bits: int
    length: int          # bytes
    in_off: int
    out_off: int
    in_place: bool

    def describe(self) -> str:
        where = f"in-place off={self.in_off}" if self.in_place else f"in_off={self.in_off} out_off={self.out_off}"
        bytewise = signatures.SIGNATURES[self.fn].bytewise
        unit = "len" if bytewise else "nblocks"
        count = self.length if bytewise else self.length // 16
        return f"{unit}={count} {where}"


def run_trial(kernel: Kernel, ks: KeySchedule, key: bytes, t: Trial, data: bytes,
              chain: bytes | None, canary: int) -> str | None:
    """One call in canary-padded buffers; a description of what went wrong, or None."""
    n = len(data)
    size = n + 2 * PAD
    src = ctypes.create_string_buffer(bytes([canary]) * size)
    dst = src if t.in_place else ctypes.create_string_buffer(bytes([canary ^ 0x5A]) * size)
    # 64-aligned start with at least 64 canary bytes in front, then the misalignment
    base_in = (ctypes.addressof(src) + 127) // 64 * 64 - ctypes.addressof(src)
    base_out = (ctypes.addressof(dst) + 127) // 64 * 64 - ctypes.addressof(dst)
    at_in = base_in + t.in_off
    at_out = at_in if t.in_place else base_out + t.out_off
    ctypes.memmove(ctypes.addressof(src) + at_in, data, n)
    before_out = dst.raw
    before_in = src.raw
    sig = signatures.SIGNATURES[t.fn]
    count = n if sig.bytewise else n // 16
    cb = ctypes.create_string_buffer(chain, 16) if chain is not None else None
    args = [ks.address, ctypes.addressof(src) + at_in, ctypes.addressof(dst) + at_out, count]
    kernel.fn[t.fn](*args, *([cb] if cb is not None else []))

    want, want_chain = reference(t.fn, key, data, chain)
    after_out = dst.raw
    got = after_out[at_out:at_out + n]
    if got != want:
        k = next(i for i in range(n) if got[i] != want[i])
        return f"output differs from byte {k} (block {k // 16})"
    if cb is not None and cb.raw[:16] != want_chain:
        return f"{sig.chain} on return {cb.raw[:16].hex()} want {want_chain.hex()}"
    if after_out[:at_out] != before_out[:at_out]:
        k = max(i for i in range(at_out) if after_out[i] != before_out[i])
        return f"wrote {at_out - k} byte(s) before out"
    if after_out[at_out + n:] != before_out[at_out + n:]:
        k = min(i for i in range(at_out + n, size) if after_out[i] != before_out[i])
        return f"wrote byte {k - at_out - n} past the end of out"
    if not t.in_place and src.raw != before_in:
        return "modified the input buffer"
    return None


def _ctr_block(rng: random.Random, i: int, nblk: int) -> bytes:
    """Counters that exercise the wrap: random, just below 2^32 (wrapping inside the call), 2^32-1,
    and a low byte about to carry (a batch of the main loop then takes the byte-reversed
    path between big-endian ones: modes.FastCounter)."""
    prefix = rng.randbytes(12)
    kind = i % 5
    if kind == 0:
        low = rng.getrandbits(32)
    elif kind == 1:
        low = 0xFFFFFFFF - rng.randrange(max(nblk, 1))
    elif kind == 2:
        low = 0xFFFFFFFF
    elif kind == 3:
        low = rng.randrange(0xFFFFFFF0, 1 << 32)
    else:
        low = rng.getrandbits(24) << 8 | rng.randrange(0xC0, 0x100)
    return prefix + low.to_bytes(4, "big")


def lengths(fn: str, n: int, quick: bool, rng: random.Random) -> list[int]:
    """Byte lengths: every block count 0..n (ctr: every byte length 0..16n+15)."""
    if not signatures.SIGNATURES[fn].bytewise:
        return [16 * k for k in range(n + 1)]
    if not quick:
        return list(range(16 * n + 16))
    # quick: every tail size at block counts 0, 1 and n, plus a random sample of the rest
    dense = {16 * k + r for k in (0, 1, n) for r in range(16)}
    rest = [x for x in range(16 * n + 16) if x not in dense]
    return sorted(dense | set(rng.sample(rest, min(len(rest), 8 * n))))


def check_function(kernel: Kernel, fn: str, bits: int, probe: Probe, *, n: int, quick: bool,
                   seed: int) -> CheckResult:
    name = f"diff {fn} {bits}"
    rng = random.Random(f"{seed}:{name}")
    sig = signatures.SIGNATURES[fn]
    if not has_reference(fn):
        return CheckResult(name, "fail", NO_REFERENCE)
    setup = sig.key_setup or "set_encrypt_key"
    errors: list[str] = []
    trials = 0
    for i, length in enumerate(lengths(fn, n, quick, rng)):
        key = rng.randbytes(bits // 8)
        ks = kernel.make_key(setup, key)
        if ks.ret != 0:
            return CheckResult(name, "fail", f"set key returned {ks.ret}")
        for in_place in (False, True):
            if quick and in_place and i % 2:
                continue
            t = Trial(fn, bits, length, rng.randrange(64), rng.randrange(64), in_place)
            data = rng.randbytes(length)
            chain = None
            if sig.chain == "ctr":
                chain = _ctr_block(rng, i, (length + 15) // 16)
            elif sig.chain:
                chain = rng.randbytes(16)
            probe.note(name, t.describe())
            err = run_trial(kernel, ks, key, t, data, chain, rng.randrange(256))
            trials += 1
            if err:
                extra = f" ctr={chain.hex()}" if sig.chain == "ctr" else ""
                errors.append(f"{t.describe()}{extra}: {err}")
        if len(errors) >= 3:
            break
    if errors:
        return CheckResult(name, "fail", "; ".join(errors))
    top = f"len<={16 * n + 15}" if sig.bytewise else f"nblocks<={n}"
    return CheckResult(name, "pass", f"{trials} calls, {top}, offsets 0..63, in-place")


def units(kernel: Kernel, *, n: int, quick: bool, seed: int) -> list[tuple[str, Unit]]:
    """One unit per block-mode function present (the other families: their own modules)."""
    out: list[tuple[str, Unit]] = []
    for fn in kernel.functions:
        if fn not in kernel.fn or fn not in DATA_FUNCTIONS:
            continue

        def unit(p: Probe, fn: str = fn) -> Iterator[CheckResult]:
            for bits in (128, 192, 256):
                yield check_function(kernel, fn, bits, p, n=n, quick=quick, seed=seed)

        out.append((f"diff {fn}", unit))
    return out
