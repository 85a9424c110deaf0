"""Run every verification check on one kernel file and collect CheckResults.

The static checks (static_ct, roundtrip, red_zone) read the `.S` and its object file.
Each runtime check group (a unit of kat, differential, the family modules, simcheck,
abi, guard) runs in a forked child (harness/isolation.py), so a kernel that crashes,
hangs or corrupts the process becomes a failed check instead of taking the verifier
down.
"""
from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from aesgen import cpu
from aesgen.spec import KernelSpec
from aesgen.verify import (abi, differential, gcm, gcmsiv, guard, halfgates, kat, macho, mpc, ocb, otr, red_zone,
                           roundtrip, signatures, simcheck, static_ct, visibility, wideblock, xts)
from aesgen.verify.build import BuildError, Kernel, build_shared, harness
from aesgen.verify.harness.isolation import Unit, run_isolated
from aesgen.verify.results import CheckResult

Progress = Callable[[str, int, int], None]  # (unit label, index, total)


def max_blocks(spec: KernelSpec, quick: bool) -> int:
    """N: enough blocks for two full interleaved groups plus every tail (quick: one group)."""
    group = spec.max_group_blocks
    return 2 * group + 1 if quick else 3 * group + 5


def _static_checks(spec: KernelSpec, path: Path) -> list[CheckResult]:
    """The checks of the assembled .S file: constant time and the round trip."""
    out: list[CheckResult] = []
    for mod, check in (("static_ct", static_ct.check), ("roundtrip", roundtrip.check), ("red_zone", red_zone.check)):
        if path.suffix != ".S":
            out.append(CheckResult(mod, "skip", f"{path.name} is not a generated .S file"))
            continue
        try:
            out.extend(check(spec, path))
        except Exception as e:  # a crash in a check is a failed check, not a dead verifier
            out.append(CheckResult(mod, "fail", f"{type(e).__name__}: {e}"))
    return out


def _runtime_groups(spec: KernelSpec) -> list[str]:
    """Group names used for skips when the runtime checks cannot run at all."""
    fset = signatures.function_set(spec)
    names: list[str] = []
    for fn in fset.usable:
        names += signatures.check_groups(fn)
    names.append("abi selftest")
    return list(dict.fromkeys(names))


def _skip_all(spec: KernelSpec, why: str, missing: tuple[str, ...] = ()) -> list[CheckResult]:
    problems = signatures.function_set(spec).problems
    return problems + [CheckResult(n, "skip", why, missing) for n in _runtime_groups(spec)]


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
    path = Path(asm_path)
    spec = spec or KernelSpec.from_asm(path)
    if spec.object_format == "macho":  # not loadable here: its own checks, then its ELF twin's
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
        return results + _skip_all(spec, "CPU lacks " + ", ".join(missing) + cpu.mask_note(), missing)
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
    units += kat.units(kernel, quick=quick)
    for family in (differential, gcm, gcmsiv, xts, ocb, otr, mpc, wideblock, halfgates):
        units += family.units(kernel, n=n, quick=quick, seed=seed)
    units.append(("simulate", lambda p: simcheck.check(kernel, p, seed=seed)))
    units.append(("abi", lambda p: abi.check(kernel, p, n=n, quick=quick, seed=seed)))
    units += guard.units(kernel, n=n, quick=quick, seed=seed)

    for i, (label, unit) in enumerate(units):
        if progress:
            progress(label, i, len(units))
        results.extend(run_isolated(label, unit))
    if progress:
        progress("done", len(units), len(units))
    return results


def _cpu_supported(kernel: Kernel) -> CheckResult:
    got = kernel.fn["cpu_supported"]()
    if got != 0:
        return CheckResult("cpu_supported", "pass", f"returned {got} on a CPU with " + ", ".join(kernel.spec.features))
    return CheckResult("cpu_supported", "fail",
                       f"returned {got} although this CPU has " + ", ".join(kernel.spec.features))
