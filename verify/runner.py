"""Run every verification check on one kernel file and collect CheckResults.

Each runtime check group runs in a forked child, so a kernel that crashes,
hangs or corrupts the process becomes a failed check instead of taking the
verifier down.  The child streams results over a pipe as they complete and
keeps a note of what it is doing in shared memory, so a crash can be named.
"""
from __future__ import annotations

import ctypes
import faulthandler
import importlib
import json
import mmap
import os
import pickle
import select
import signal
import tempfile
import struct
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from aesgen.spec import KernelSpec


try:  # one result type for every check: verify/results.py (shared with the static checks)
    from aesgen.verify.results import CheckResult
except ImportError:  # pragma: no cover - only if results.py is absent
    @dataclass(frozen=True)
    class CheckResult:  # type: ignore[no-redef]
        name: str
        status: str  # "pass" | "fail" | "skip"
        detail: str = ""


Progress = Callable[[str, int, int], None]  # (unit label, index, total)

UNIT_TIMEOUT_S = 300.0
_NOTE_AT, _NOTE_MAX = 16, 4080          # shared page layout: [signo, addr][note][regions]
_REGIONS_AT, _REGIONS_MAX = 4096, 8192


def max_blocks(spec: KernelSpec, quick: bool) -> int:
    """N: enough blocks for two full interleaved groups plus every tail (quick: one group)."""
    group = spec.max_group_blocks
    return 2 * group + 1 if quick else 3 * group + 5


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


def _static_checks(spec: KernelSpec, path: Path) -> list[CheckResult]:
    """The other engineer's static checks, imported lazily so their absence is a skip."""
    out: list[CheckResult] = []
    for mod in ("static_ct", "roundtrip", "red_zone"):
        if path.suffix != ".S":
            out.append(CheckResult(mod, "skip", f"{path.name} is not a generated .S file"))
            continue
        full = f"aesgen.verify.{mod}"
        try:
            module = importlib.import_module(full)
        except ModuleNotFoundError as e:
            if e.name == full:
                out.append(CheckResult(mod, "skip", f"{full} not available yet"))
            else:
                out.append(CheckResult(mod, "fail", f"importing {full}: {e}"))
            continue
        check = getattr(module, "check", None)
        if check is None:
            out.append(CheckResult(mod, "skip", f"{full}.check not available yet"))
            continue
        try:
            out.extend(check(spec, path))
        except Exception as e:  # a crash in a check is a failed check, not a dead verifier
            out.append(CheckResult(mod, "fail", f"{type(e).__name__}: {e}"))
    return out


def _runtime_groups(spec: KernelSpec) -> list[str]:
    """Group names used for skips when the runtime checks cannot run at all."""
    from aesgen.verify import signatures

    fset = signatures.function_set(spec)
    names: list[str] = []
    for fn in fset.usable:
        names += signatures.check_groups(fn)
    names.append("abi selftest")
    return list(dict.fromkeys(names))


def _skip_all(spec: KernelSpec, why: str) -> list[CheckResult]:
    from aesgen.verify import signatures

    problems = signatures.function_set(spec).problems
    return problems + [CheckResult(n, "skip", why) for n in _runtime_groups(spec)]


def verify_kernel(
    asm_path: Path | str,
    spec: KernelSpec | None = None,
    *,
    quick: bool = False,
    seed: int = 1,
    progress: Progress | None = None,
    extra_flags: Sequence[str] = (),
) -> list[CheckResult]:
    """Every check for one kernel file (.S, or a .c test fixture); never raises for kernel bugs."""
    from aesgen import cpu
    from aesgen.verify import (abi, aead, differential, guard, kat, mpc, ocb, otr_checks, simcheck, visibility,
                               wideblock, xts)
    from aesgen.verify.build import BuildError, Kernel, build_shared, harness

    path = Path(asm_path)
    spec = spec or KernelSpec.from_asm(path)
    if getattr(spec, "object_format", "elf") == "macho":  # not loadable here: its own checks, then its ELF twin's
        from aesgen.verify import macho

        with tempfile.TemporaryDirectory(prefix="aesgen-twin-") as tmp:
            twin, twin_path = macho.elf_twin(spec, Path(tmp))
            return macho.check(spec, path) + verify_kernel(twin_path, twin, quick=quick, seed=seed, progress=progress,
                                                           extra_flags=extra_flags)
    results = _static_checks(spec, path)

    try:
        so = build_shared(path, extra_flags)
        harness()
    except BuildError as e:
        results.append(CheckResult("build", "fail", str(e)))
        return results + _skip_all(spec, "build failed")
    results.append(CheckResult("build", "pass", so.name))
    results.append(visibility.check(spec, so))

    missing = cpu.missing_features(spec.features)
    if missing:
        return results + _skip_all(spec, "CPU lacks " + ", ".join(missing))
    # win64 files: Kernel calls through ms_abi pointers, the trampoline through the Microsoft convention.
    kernel = Kernel(so, spec)
    results.extend(kernel.problems)  # unknown modes/functions, missing KernelSpec size attributes
    if kernel.missing:
        results.append(CheckResult("symbols", "fail", "missing: " + ", ".join(kernel.missing)))
        if any(spec.symbol(f) in kernel.missing for f in ("set_encrypt_key", "set_decrypt_key")):
            return results + [r for r in _skip_all(spec, "key setup symbols missing")
                              if r.status == "skip"]
    else:
        results.append(CheckResult("symbols", "pass", f"{len(kernel.functions)} functions"))

    n = max_blocks(spec, quick)
    units: list[tuple[str, Unit]] = []
    if "cpu_supported" in kernel.fn:
        units.append(("cpu_supported", lambda p: [_cpu_supported(kernel)]))
    units.append(("keyschedule", lambda p: kat.check_key_schedule(kernel, p, seed=seed, quick=quick)))
    for unit in kat.units(kernel, quick=quick):
        units.append(unit)
    for unit in differential.units(kernel, n=n, quick=quick, seed=seed):
        units.append(unit)
    for unit in aead.units(kernel, n=n, quick=quick, seed=seed):
        units.append(unit)
    for unit in xts.units(kernel, n=n, quick=quick, seed=seed):
        units.append(unit)
    for unit in ocb.units(kernel, n=n, quick=quick, seed=seed):
        units.append(unit)
    for unit in otr_checks.units(kernel, n=n, quick=quick, seed=seed):
        units.append(unit)
    for unit in mpc.units(kernel, n=n, quick=quick, seed=seed):
        units.append(unit)
    for unit in wideblock.units(kernel, n=n, quick=quick, seed=seed):
        units.append(unit)
    units.append(("simulate", lambda p: simcheck.check(kernel, p, seed=seed)))
    units.append(("abi", lambda p: abi.check(kernel, p, n=n, quick=quick, seed=seed)))
    for unit in guard.units(kernel, n=n, quick=quick, seed=seed):
        units.append(unit)

    for i, (label, unit) in enumerate(units):
        if progress:
            progress(label, i, len(units))
        results.extend(run_isolated(label, unit))
    if progress:
        progress("done", len(units), len(units))
    return results


def _cpu_supported(kernel) -> CheckResult:
    got = kernel.fn["cpu_supported"]()
    if got != 0:
        return CheckResult("cpu_supported", "pass", f"returned {got} on a CPU with " + ", ".join(kernel.spec.features))
    return CheckResult("cpu_supported", "fail",
                       f"returned {got} although this CPU has " + ", ".join(kernel.spec.features))
