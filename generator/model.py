"""The performance model: per mode, which ISA, width and depth a target wants.

Depth fills the AES pipe: with latency L and reciprocal throughput T cycles,
ceil(L / T) independent vaesenc must be in flight (8 on Zen 5, 4 on Zen 4's
half-rate zmm, 4 on Skylake). Per mode: ECB and CBC decryption are that many independent groups;
CTR32 too (its counter arithmetic runs on other ports); CBC encryption is one
serial chain, so its depth does not matter (CBC decryption sets it). A target
file may record a measured depth for a mode and width where this rule falls
short (its `[depths]` table, with the measurement it comes from). A depth
the register file cannot hold is lowered to the largest that fits.
"""
from __future__ import annotations

import math
import multiprocessing
import os
from dataclasses import dataclass
from functools import lru_cache

from .dsl import BuildError
from .pipeline import check_fits
from .spec import MAX_DEPTH, REGISTERS_BY_ISA, KernelSpec, default_prefix
from .target import Target


@dataclass(frozen=True)
class ModeChoice:
    mode: str
    isa: str
    width: int
    depth: int
    reason: str


def pipe_depth(target: Target, width: int) -> int:
    lat, tput = target.cost("aesenc", width)
    return max(1, math.ceil(lat / tput))


@lru_cache(maxsize=None)
def builds(isa: str, width: int, mode: str, depth: int, backend: str = "aesni") -> bool:
    """The mode's kernel builds at this depth: it fits the register file, and the mode takes the
    depth (OCB's batches are a power of two blocks). An internal error is a generator bug, not a
    refusal: it is raised, so that a depth search cannot quietly settle on a shallower kernel."""
    try:
        check_fits(KernelSpec((mode,), isa, width, depth, backend=backend))
        return True
    except BuildError as e:
        if str(e).startswith("internal:"):
            raise
        return False


@lru_cache(maxsize=None)
def max_depth(isa: str, width: int, mode: str, backend: str = "aesni") -> int:
    """The largest depth whose kernel fits the register file (0 if none)."""
    def fits(depth: int) -> bool:
        return builds(isa, width, mode, depth, backend)

    if fits(MAX_DEPTH):  # most modes on 32 registers: one build instead of a bisection
        return MAX_DEPTH
    lo, hi = 0, MAX_DEPTH - 1  # feasibility is monotone in depth: bisect
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def max_depths(configs: list[tuple[str, int, str]]) -> dict[tuple[str, int, str], int]:
    """max_depth of each (isa, width, mode), worked out on every core (`aesgen list`: a hundred
    of them, each a few kernel builds)."""
    todo = list(dict.fromkeys(configs))
    workers = min(len(todo), len(os.sched_getaffinity(0)))
    if workers < 2:
        return {c: max_depth(*c) for c in todo}
    # Slowest first (16-register ISAs bisect over depth; 32-register ones mostly fit at once), so
    # the pool does not wait on one long build at the end.
    todo.sort(key=lambda c: REGISTERS_BY_ISA[c[0]])
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        return dict(zip(todo, pool.starmap(max_depth, todo, chunksize=1)))


def choose(target: Target, mode: str, isa: str | None = None, width: int | None = None) -> ModeChoice:
    isa = isa or target.isa
    width = width or target.widths(isa)[0]
    want = pipe_depth(target, width)
    lat, tput = target.cost("aesenc", width)
    reason = f"vaesenc {width}-bit: latency {lat:g} / throughput {tput:g} cycles -> {want} in flight"
    if measured := target.measured_depth(mode, width, isa):
        # A stitched loop (GCM's GHASH beside the rounds) wants more in flight than the AES pipe.
        want, source = measured
        reason = f"{mode} {width}-bit: depth {want}, {source}"
    fits = max_depth(isa, width, mode)
    depth = min(want, fits)
    if depth < want:
        reason += f"; {fits} fit the {target.vector_registers} registers"
    if not builds(isa, width, mode, depth):
        # a depth the mode does not take: the next one up that builds (more in flight than the
        # pipe needs costs nothing), else the next one down
        up = [d for d in range(depth + 1, fits + 1) if builds(isa, width, mode, d)]
        down = [d for d in range(depth - 1, 0, -1) if builds(isa, width, mode, d)]
        taken = (up or down or [depth])[0]
        reason += f"; {mode} takes depth {taken}, not {depth}"
        depth = taken
    return ModeChoice(mode, isa, width, depth, reason)


def bitsliced_depth(isa: str) -> int:
    """Sets of 8 bit-planes interleaved: two fit AVX-512's 32 registers, one the others' 16."""
    return 2 if isa == "avx512" else 1


def backend_isa_width(target: Target, backend: str, isa: str | None = None,
                      width: int | None = None) -> tuple[str, int]:
    """The ISA and width a backend runs at on the target: the richest ISA it runs on there and
    the target's preferred width of it, unless given."""
    isa = isa or target.isa_for(backend)
    if isa is None:
        raise BuildError(f"target {target.name} cannot run --backend {backend} on any ISA "
                         f"(it has {' '.join(target.features) or 'no listed feature'})")
    return isa, width or target.widths(isa)[0]


def backend_choice(target: Target, mode: str, backend: str, isa: str | None = None,
                   width: int | None = None) -> ModeChoice:
    """A backend without a pipe model (gfni, bitsliced): the target's richest ISA for it and its
    preferred width there; depth: bitsliced's plane sets, gfni the deepest up to 8 that fits."""
    isa, width = backend_isa_width(target, backend, isa, width)
    if backend == "bitsliced":
        return ModeChoice(mode, isa, width, bitsliced_depth(isa), "bitsliced: plane sets the registers hold")
    depth = min(8, max_depth(isa, width, mode, backend))
    return ModeChoice(mode, isa, width, depth, f"{backend}: depth 8 or the deepest that fits")


def spec_for(target: Target, modes: tuple[str, ...], prefix: str | None = None,
             choices: dict[str, ModeChoice] | None = None, backend: str = "aesni") -> KernelSpec:
    """One file for the target: the widest chosen width sets the key stride; per-mode overrides."""
    choices = choices or {m: choose(target, m) for m in modes}
    isa = choices[modes[0]].isa
    width = max(c.width for c in choices.values())
    depth = max(c.depth for c in choices.values())
    overrides = tuple((m, c.width, c.depth) for m, c in choices.items() if (c.width, c.depth) != (width, depth))
    return KernelSpec(modes=modes, isa=isa, width=width, depth=depth, backend=backend,
                      prefix=prefix or default_prefix(f"aesgen_{target.name}", modes), overrides=overrides)
