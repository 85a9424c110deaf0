"""The one result type every verifier check returns, and how a check phrases its findings."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CheckResult:
    name: str
    status: str  # "pass" | "fail" | "skip"
    detail: str = ""
    # A skip because this CPU (as aesgen sees it: cpu.flags()) lacks these features. Such a
    # check did not run; `aesgen verify` exits with NOT_RUN_EXIT for it unless --allow-skips.
    missing: tuple[str, ...] = ()


def verdict(name: str, errors: list[str], ok_detail: str) -> CheckResult:
    """Fail with the first three findings (and how many more), or pass with `ok_detail`."""
    if errors:
        more = f" (+{len(errors) - 3} more)" if len(errors) > 3 else ""
        return CheckResult(name, "fail", "; ".join(errors[:3]) + more)
    return CheckResult(name, "pass", ok_detail)


def first_diff(got: bytes, want: bytes) -> str:
    """Where two byte strings first differ (or that their lengths do)."""
    if len(got) != len(want):
        return f"length {len(got)} want {len(want)}"
    k = next(i for i in range(len(got)) if got[i] != want[i])
    return f"differs from byte {k} (block {k // 16})"


# `aesgen verify`'s exit codes: 0 all ran and passed; 1 a check failed; 2 usage error;
# 3 nothing failed but checks did NOT run because the CPU lacks features (--allow-skips: 0).
NOT_RUN_EXIT = 3


def not_run(results) -> tuple[list[CheckResult], tuple[str, ...]]:
    """The checks skipped for a missing CPU feature, and those features (first-seen order)."""
    skipped = [r for r in results if r.status == "skip" and r.missing]
    return skipped, tuple(dict.fromkeys(f for r in skipped for f in r.missing))
