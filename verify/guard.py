"""Guard pages: every buffer placed flush against a PROT_NONE page.

"after": the buffer ends where an inaccessible page begins (catches over-reads
and over-writes past the end in tail handling); "before": it starts right
after one (catches under-runs).  Both `in` and `out` (and the ctr/iv block)
are guarded at once, each in its own mapping, for every length up to N blocks
(ctr: 16N+15 bytes), separately and in place.  "len0" points every pointer,
the key schedule included, into PROT_NONE pages: length 0 must touch nothing.

The AEAD and hash functions (verify/gcm.py) get the same three checks for every
buffer they take (in, out, aad, iv/nonce, tag, acc, data, h, key, ctx).

Runs only inside a forked child (runner.run_isolated): a fault kills that
child, and the harness' handler records the address so the parent can say
which buffer was overrun and by how much.
"""
from __future__ import annotations

import ctypes
import mmap
import random
from collections.abc import Iterator

from aesgen.verify import signatures
from aesgen.verify.build import Kernel, harness
from aesgen.verify.runner import CheckResult, Probe, Unit

PAGE = mmap.PAGESIZE
PROT_NONE = 0  # not exported by the mmap module
_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
MAP_FAILED = ctypes.c_void_p(-1).value


class GuardedRegion:
    """[PROT_NONE page][read-write pages: lo..hi][PROT_NONE page]."""

    def __init__(self, nbytes: int) -> None:
        rw = max(1, -(-nbytes // PAGE)) * PAGE
        total = rw + 2 * PAGE
        base = _libc.mmap(None, total, mmap.PROT_READ | mmap.PROT_WRITE,
                          mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0)
        if base in (None, MAP_FAILED):
            raise OSError(ctypes.get_errno(), "mmap failed")
        for page in (base, base + PAGE + rw):
            if _libc.mprotect(page, PAGE, PROT_NONE) != 0:
                raise OSError(ctypes.get_errno(), "mprotect failed")
        self.base, self.total = base, total
        self.lo, self.hi = base + PAGE, base + PAGE + rw

    def labels(self, name: str) -> list[tuple[str, int, int]]:
        return [(f"guard page before {name}", self.lo - PAGE, self.lo),
                (f"{name} region", self.lo, self.hi),
                (f"guard page after {name}", self.hi, self.hi + PAGE)]

    def fill(self, data: bytes) -> None:
        ctypes.memmove(self.lo, data, min(len(data), self.hi - self.lo))

    def close(self) -> None:
        _libc.munmap(self.base, self.total)


def _is_data(fn: str) -> bool:
    return signatures.family(fn) == signatures.BLOCK


def check_placement(kernel: Kernel, fn: str, where: str, probe: Probe, *, n: int,
                    seed: int) -> Iterator[CheckResult]:
    name = f"guard {fn} {where}"
    rng = random.Random(f"{seed}:{name}")
    if harness().fault_install(probe.fault_slot()) != 0:
        yield CheckResult(name, "fail", "could not install the fault handler")
        return
    sig = signatures.SIGNATURES[fn]
    ctr = sig.has("len")  # a byte count (ctr32), else whole blocks
    top = 16 * n + 15 if ctr else 16 * n
    r_in, r_out, r_chain = GuardedRegion(top), GuardedRegion(top), GuardedRegion(16)
    probe.regions(r_in.labels("in") + r_out.labels("out") + r_chain.labels("ctr/iv"))
    r_in.fill(rng.randbytes(r_in.hi - r_in.lo))
    schedules = [kernel.make_key(sig.key_setup or "set_encrypt_key", rng.randbytes(b // 8))
                 for b in (128, 192, 256)]
    calls = 0
    lengths = range(top + 1) if ctr else range(0, top + 1, 16)
    for i, length in enumerate(lengths):
        count = length if ctr else length // 16
        ks = schedules[i % 3]
        for in_place in (False, True):
            if where == "after":
                p_in, p_out, p_chain = r_in.hi - length, r_out.hi - length, r_chain.hi - 16
            else:
                p_in, p_out, p_chain = r_in.lo, r_out.lo, r_chain.lo
            if in_place:
                p_out = p_in
            ctypes.memmove(p_chain, rng.randbytes(16), 16)
            unit = "len" if ctr else "nblocks"
            probe.note(name, f"{unit}={count}{' in-place' if in_place else ''}")
            args = [ks.address, p_in, p_out, count]
            if sig.nargs > 4:
                args.append(p_chain)
            kernel.fn[fn](*args)
            calls += 1
    yield CheckResult(name, "pass", f"{calls} calls, {where} PROT_NONE, up to {top} bytes")


def check_len0(kernel: Kernel, fn: str, probe: Probe) -> Iterator[CheckResult]:
    name = f"guard {fn} len0"
    if harness().fault_install(probe.fault_slot()) != 0:
        yield CheckResult(name, "fail", "could not install the fault handler")
        return
    regions = {k: GuardedRegion(PAGE) for k in ("key", "in", "out", "ctr/iv")}
    probe.regions([lab for k, r in regions.items() for lab in r.labels(k)])
    # every pointer aims into a PROT_NONE page; in/out/key inside the page, ctr/iv at its start
    ptr = {k: r.hi + (0 if k == "ctr/iv" else 64) for k, r in regions.items()}
    probe.note(name, "length 0, every pointer into a PROT_NONE page")
    args = [ptr["key"], ptr["in"], ptr["out"], 0]
    if signatures.SIGNATURES[fn].nargs > 4:
        args.append(ptr["ctr/iv"])
    kernel.fn[fn](*args)
    yield CheckResult(name, "pass", "touched no memory")


def check_set_key(kernel: Kernel, fn: str, where: str, probe: Probe, *, seed: int) -> Iterator[CheckResult]:
    """User key flush against a guard page; schedule buffer exactly key_bytes, flush too."""
    name = f"guard {fn} {where}"
    rng = random.Random(f"{seed}:{name}")
    if harness().fault_install(probe.fault_slot()) != 0:
        yield CheckResult(name, "fail", "could not install the fault handler")
        return
    kb = kernel.schedule_bytes(fn)
    r_key, r_ks = GuardedRegion(32), GuardedRegion(kb)
    probe.regions(r_key.labels("user_key") + r_ks.labels("key schedule"))
    for bits in signatures.SIGNATURES[fn].key_bits:
        p_key = r_key.hi - bits // 8 if where == "after" else r_key.lo
        p_ks = (r_ks.hi - kb) // 64 * 64 if where == "after" else r_ks.lo  # the ABI promises 64-byte alignment
        ctypes.memmove(p_key, rng.randbytes(bits // 8), bits // 8)
        probe.note(name, f"bits={bits} key_bytes={kb}")
        ret = kernel.fn[fn](p_key, bits, p_ks)
        if ret != 0:
            yield CheckResult(name, "fail", f"bits={bits} returned {ret}")
            return
    yield CheckResult(name, "pass", f"user key and {kb}-byte schedule {where} PROT_NONE")


def units(kernel: Kernel, *, n: int, quick: bool, seed: int) -> list[tuple[str, Unit]]:
    out: list[tuple[str, Unit]] = []
    for fn in kernel.functions:
        if fn not in kernel.fn:
            continue
        fam = signatures.family(fn)
        if fam in signatures.SCENE_FAMILIES:
            from aesgen.verify import gcm
            out.extend(gcm.guard_units(kernel, fn, n=n, quick=quick, seed=seed))
        elif fam == signatures.KEYSETUP:
            for where in ("after", "before"):
                out.append((f"guard {fn} {where}",
                            lambda p, fn=fn, w=where: check_set_key(kernel, fn, w, p, seed=seed)))
        elif _is_data(fn):
            for where in ("after", "before"):
                out.append((f"guard {fn} {where}",
                            lambda p, fn=fn, w=where: check_placement(kernel, fn, w, p, n=n, seed=seed)))
            out.append((f"guard {fn} len0", lambda p, fn=fn: check_len0(kernel, fn, p)))
    return out
