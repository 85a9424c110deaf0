"""What this machine can run: CPU flags as the kernel reports them."""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path


@lru_cache(maxsize=1)
def host_flags() -> frozenset[str]:
    """The /proc/cpuinfo flag set of the first CPU (empty if unreadable)."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8")
    except OSError:
        return frozenset()
    for line in text.splitlines():
        if line.startswith("flags"):
            return frozenset(line.split(":", 1)[1].split())
    return frozenset()


def missing_features(required: tuple[str, ...] | list[str]) -> list[str]:
    """Required flags this CPU lacks, in the order given."""
    have = host_flags()
    return [f for f in required if f not in have]
