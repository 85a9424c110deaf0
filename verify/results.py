"""The one result type every verifier check returns (re-exported by `aesgen.verify.runner`)."""
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


# `aesgen verify`'s exit codes: 0 all ran and passed; 1 a check failed; 2 usage error;
# 3 nothing failed but checks did NOT run because the CPU lacks features (--allow-skips: 0).
NOT_RUN_EXIT = 3


def not_run(results) -> tuple[list[CheckResult], tuple[str, ...]]:
    """The checks skipped for a missing CPU feature, and those features (first-seen order)."""
    skipped = [r for r in results if r.status == "skip" and r.missing]
    return skipped, tuple(dict.fromkeys(f for r in skipped for f in r.missing))
