"""What this machine can run: CPU flags as the kernel reports them, less a mask.

aesgen's view of the CPU (`native` detection, `list`, `verify`'s can-run decisions,
tune, bench, explore, demo) is /proc/cpuinfo's flag set minus the features named in
`AESGEN_CPU_MASK` (a comma list spelled as /proc/cpuinfo spells them, e.g.
`avx512f,gfni`; the global option `aesgen --cpu-mask` sets it). Masking a feature
also masks every feature that cannot exist without it (no AVX-512 extension without
avx512f, no VAES without AES-NI and AVX...), so a masked view is a CPU that could exist.
The generated `cpu_supported()` still reads CPUID: the mask is the tool's view only.
"""
from __future__ import annotations

import os
import re
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Iterator

from .spec import FEATURES_BY_ISA

MASK_ENV = "AESGEN_CPU_MASK"

# feature -> the features it cannot exist without (the CPUID dependencies aesgen relies on:
# VEX/EVEX encodings need AVX's register state, the vector forms their xmm originals).
REQUIRES: dict[str, tuple[str, ...]] = {
    "avx": ("ssse3",),
    "avx2": ("avx",),
    "fma": ("avx",),
    "vaes": ("aes", "avx"),
    "vpclmulqdq": ("pclmulqdq", "avx"),
    "avx512f": ("avx2", "fma"),
}
AVX512_PREFIX = "avx512"  # every avx512* extension needs avx512f

# The portability views CI runs the `portability` tests under (tests/conftest.py, Makefile).
PORTABILITY_MASKS = {
    "avx2-vaes": "avx512f,gfni",                      # Zen 3, Intel client cores (Alder Lake...)
    "aesni-avx": "vaes,vpclmulqdq,gfni,avx512f",      # Haswell..Skylake
    "no-aesni": "aes,pclmulqdq,gfni",                 # AES-NI off (VMs, BIOS): bitsliced only
}

# Flags aesgen reasons about beyond the ISA families' (targets, optional extensions).
EXTRA_FLAGS = ("pclmulqdq", "vpclmulqdq", "gfni", "movbe", "avx512vbmi", "avx512dq", "avx512cd", "avx512ifma",
               "avx512_vbmi2", "sha_ni")

_FLAG_NAME = re.compile(r"[a-z0-9_]+\Z")


class MaskError(ValueError):
    pass


@lru_cache(maxsize=1)
def host_flags() -> frozenset[str]:
    """The /proc/cpuinfo flag set of the first CPU (empty if unreadable), unmasked."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8")
    except OSError:
        return frozenset()
    for line in text.splitlines():
        if line.startswith("flags"):
            return frozenset(line.split(":", 1)[1].split())
    return frozenset()


def known_flags() -> frozenset[str]:
    """Names a mask may use: this CPU's flags and every flag aesgen itself reasons about."""
    named = {f for fs in FEATURES_BY_ISA.values() for f in fs} | set(EXTRA_FLAGS)
    named |= set(REQUIRES) | {d for ds in REQUIRES.values() for d in ds}
    return frozenset(named) | host_flags()


def parse_mask(text: str) -> frozenset[str]:
    """The names in a mask; MaskError (one line) for a malformed or unknown one."""
    names = [n.strip() for n in text.split(",")]
    if text.strip() == "":
        return frozenset()
    bad = [n for n in names if not _FLAG_NAME.match(n)]
    if bad:
        raise MaskError(f"{MASK_ENV}: '{text}' is not a comma list of /proc/cpuinfo flag names")
    unknown = [n for n in names if n not in known_flags()]
    if unknown:
        raise MaskError(f"{MASK_ENV}: unknown CPU feature {', '.join(repr(n) for n in unknown)} "
                        "(spell it as /proc/cpuinfo does, e.g. avx512f, vaes, gfni, aes)")
    return frozenset(names)


def closure(masked: frozenset[str], flags: frozenset[str]) -> frozenset[str]:
    """masked, plus every flag in `flags` that depends on a masked one (transitively)."""
    out = set(masked)
    changed = True
    while changed:
        changed = False
        for f in flags - out:
            needs = REQUIRES.get(f, ())
            if f.startswith(AVX512_PREFIX) and f != "avx512f":
                needs = (*needs, "avx512f")
            if any(n in out for n in needs):
                out.add(f)
                changed = True
    return frozenset(out)


def mask() -> frozenset[str]:
    """Every feature the current mask hides (named ones and their dependants)."""
    return closure(parse_mask(os.environ.get(MASK_ENV, "")), host_flags())


def flags() -> frozenset[str]:
    """aesgen's view of this CPU: the host's flags less the mask."""
    return host_flags() - mask()


@contextmanager
def view(mask_text: str | None) -> Iterator[None]:
    """Run a block under another AESGEN_CPU_MASK (None: leave the current one), then restore it."""
    if mask_text is None:
        yield
        return
    parse_mask(mask_text)  # MaskError on a bad name, before anything changes
    before = os.environ.get(MASK_ENV)
    os.environ[MASK_ENV] = mask_text
    try:
        yield
    finally:
        if before is None:
            del os.environ[MASK_ENV]
        else:
            os.environ[MASK_ENV] = before


def mask_note() -> str:
    """'' without a mask, else ' (AESGEN_CPU_MASK=avx512f,gfni)' for messages."""
    value = os.environ.get(MASK_ENV, "").strip()
    return f" ({MASK_ENV}={value})" if value else ""


def missing_features(required: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """Required flags this CPU (as masked) lacks, in the order given."""
    have = flags()
    return tuple(f for f in required if f not in have)


if __name__ == "__main__":  # `python -m aesgen.cpu --portability-masks`: NAME=MASK per line (the Makefile's)
    import sys

    if sys.argv[1:] != ["--portability-masks"]:
        sys.exit("usage: python -m aesgen.cpu --portability-masks")
    print("\n".join(f"{name}={mask}" for name, mask in PORTABILITY_MASKS.items()))
