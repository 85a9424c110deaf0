"""Where a call's buffers go: canary-padded heap buffers, or mappings between guard pages.

A memory strategy places a buffer (`place(label, data, aligned=...)`, returning a `Region`)
and reads memory back (`read(addr, n)`):

- `HeapMem`: each buffer in a heap allocation padded with a random canary byte, randomly
  misaligned unless `aligned` (keys and contexts: 64-byte aligned, as the ABI promises);
  `damage` reports bytes written outside a buffer and changes to a read-only one.
- `GuardMem`: each label in a mapping of its own between PROT_NONE pages (`GuardedRegion`),
  the buffer flush against the page after it ("after") or the page before it ("before");
  `none(label)` is an address inside the inaccessible page, for the length-0 checks.

A fault in a guard page kills the forked child (`isolation.run_isolated`); the regions are
labelled on the `Probe` so the parent can say which buffer was overrun and by how much.
"""
from __future__ import annotations

import ctypes
import mmap
import random

from aesgen.verify.harness.isolation import Probe

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
        self.where = where
        self.probe = probe
        self.regions: dict[str, GuardedRegion] = {}

    def _region(self, label: str, n: int):
        g = self.regions.get(label)
        if g is None or g.hi - g.lo < n + 64:
            if g is not None:
                g.close()
            g = GuardedRegion(max(n + 64, 4096))
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
            g.close()
        self.regions.clear()
