"""Run a group of checks in a forked child, so a crash, hang or exception becomes a failed check.

The child streams its CheckResults over a pipe as they complete and keeps a note of what it
is doing in shared memory (a `Probe`), so a crash can be named: the harness' SIGSEGV handler
writes the signal and fault address there, and labelled address ranges explain it
("= in + 4096").
"""
from __future__ import annotations

import ctypes
import faulthandler
import json
import mmap
import os
import pickle
import select
import signal
import struct
import time
import traceback
from collections.abc import Callable, Iterable, Sequence

from aesgen.verify.results import CheckResult

UNIT_TIMEOUT_S = 300.0
_NOTE_AT, _NOTE_MAX = 16, 4080          # shared page layout: [signo, addr][note][regions]
_REGIONS_AT, _REGIONS_MAX = 4096, 8192


class Probe:
    """Shared memory a forked check uses to say what it is doing right now."""

    def __init__(self) -> None:
        self.shm = mmap.mmap(-1, _REGIONS_AT + _REGIONS_MAX)  # MAP_SHARED | MAP_ANONYMOUS

    def fault_slot(self) -> int:
        """Address of two uint64s the harness' SIGSEGV handler fills (signo, fault address).

        Only call this in the forked child: the exported buffer pins the mapping."""
        return ctypes.addressof(ctypes.c_char.from_buffer(self.shm))

    def note(self, name: str, detail: str = "") -> None:
        data = (name + "\0" + detail).encode()[:_NOTE_MAX]
        self.shm[_NOTE_AT:_NOTE_AT + 4] = struct.pack("<I", len(data))
        self.shm[_NOTE_AT + 4:_NOTE_AT + 4 + len(data)] = data

    def regions(self, named: Sequence[tuple[str, int, int]]) -> None:
        """Label address ranges so a fault address can be explained ([lo, hi) each)."""
        data = json.dumps(list(named)).encode()[:_REGIONS_MAX - 4]
        self.shm[_REGIONS_AT:_REGIONS_AT + 4] = struct.pack("<I", len(data))
        self.shm[_REGIONS_AT + 4:_REGIONS_AT + 4 + len(data)] = data

    def read_note(self) -> tuple[str, str]:
        (n,) = struct.unpack("<I", self.shm[_NOTE_AT:_NOTE_AT + 4])
        name, _, detail = self.shm[_NOTE_AT + 4:_NOTE_AT + 4 + n].decode(errors="replace").partition("\0")
        return name, detail

    def read_fault(self) -> tuple[int, int]:
        signo, addr = struct.unpack("<QQ", self.shm[0:16])
        return signo, addr

    def explain(self, addr: int) -> str:
        (n,) = struct.unpack("<I", self.shm[_REGIONS_AT:_REGIONS_AT + 4])
        if not n:
            return ""
        for label, lo, hi in json.loads(self.shm[_REGIONS_AT + 4:_REGIONS_AT + 4 + n]):
            if lo <= addr < hi:
                return f" = {label} + {addr - lo}"
        return ""

    def close(self) -> None:
        self.shm.close()


Unit = Callable[[Probe], Iterable[CheckResult]]


def run_isolated(label: str, unit: Unit, timeout: float = UNIT_TIMEOUT_S) -> list[CheckResult]:
    """Run `unit` in a forked child; a crash, hang or exception becomes a failed check."""
    probe = Probe()
    probe.note(label, "starting")
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: stream pickled results, never return into the caller's stack
        os.close(rfd)
        faulthandler.disable()  # a kernel crash is reported by the parent, not dumped here
        code = 0
        try:
            for res in unit(probe):
                blob = pickle.dumps(res)
                os.write(wfd, struct.pack("<I", len(blob)) + blob)
        except BaseException:
            name, detail = probe.read_note()
            res = CheckResult(name or label, "fail",
                              f"verifier error during {detail}: {traceback.format_exc(limit=-3)}")
            blob = pickle.dumps(res)
            try:
                os.write(wfd, struct.pack("<I", len(blob)) + blob)
            except OSError:
                code = 3
        os._exit(code)

    os.close(wfd)
    results: list[CheckResult] = []
    buf = b""
    deadline = time.monotonic() + timeout
    timed_out = False
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                os.kill(pid, signal.SIGKILL)
                break
            ready, _, _ = select.select([rfd], [], [], left)
            if not ready:
                continue
            chunk = os.read(rfd, 1 << 16)
            if not chunk:
                break
            buf += chunk
            while len(buf) >= 4:
                (n,) = struct.unpack("<I", buf[:4])
                if len(buf) < 4 + n:
                    break
                results.append(pickle.loads(buf[4:4 + n]))
                buf = buf[4 + n:]
    finally:
        os.close(rfd)
        _, status = os.waitpid(pid, 0)
    name, detail = probe.read_note()
    name = name or label
    if timed_out:
        results.append(CheckResult(name, "fail", f"timed out after {timeout:.0f} s during {detail}"))
    elif os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        signo, addr = probe.read_fault()
        where = f" at address {addr:#x}{probe.explain(addr)}" if signo == sig else ""
        results.append(CheckResult(
            name, "fail", f"killed by {signal.Signals(sig).name}{where} during {detail}"))
    elif os.WEXITSTATUS(status) != 0:
        results.append(CheckResult(name, "fail", f"child exited with status {os.WEXITSTATUS(status)}"))
    try:
        probe.close()
    except BufferError:  # a ctypes view in this process still pins it; the GC will unmap it
        pass
    return results
