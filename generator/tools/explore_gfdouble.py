"""`aesgen explore gfdouble`: core cycles per GF(2^128) doubling, for every doubling method at
every ISA width and depth this CPU can run.

Each config is a gfdouble-only file; `gfdouble_le` writes a sequence of tweaks T x^0 .. T x^(n-1)
(one doubling per 16-byte block), which is what XTS's tweaks cost without the AES around them.
A method the config check refuses (generator/doubling.refusal) is listed with its reason, not
timed. Aoki's table method is measured too (nothing ships from here), marked not constant-time
and never picked as a width's best.
"""
from __future__ import annotations

import json
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from statistics import median
from typing import Callable

from ..bench.ceiling import measure as measure_ceiling
from ..bench.timing import bench
from ..cpu import missing_features
from ..doubling import METHODS, TABLE_METHODS, refusal
from ..dsl import BuildError
from ..pipeline import generate
from ..spec import KernelSpec
from ..verify import verify_kernel

SCHEMA = "aesgen-explore-gfdouble/1"
OP = "gfdouble_le"
# Every ISA family at each width it has (128-bit code differs between sse, avx and avx512).
ISA_WIDTHS = (("sse", 128), ("avx", 128), ("avx512", 128), ("avx2", 256), ("avx512", 256), ("avx512", 512))
DEFAULT_DEPTHS = (1, 2, 4, 8)
DEFAULT_BLOCKS = 4096
# The seed's figures this exploration is read against (AES-OTR; one doubling per 16-byte block).
SEED_NAIVE_CYCLES_PER_BYTE = 0.15
SEED_NOTE = (f"seed (AES-OTR): Krovetz's 5-instruction doubling, Aoki's movemask + table; "
             f"a naive doubling costs ~{SEED_NAIVE_CYCLES_PER_BYTE} cycles/byte = "
             f"{SEED_NAIVE_CYCLES_PER_BYTE * 16:.1f} cycles per 16-byte block")


@dataclass
class DoublingPoint:
    method: str
    isa: str
    width: int
    depth: int
    status: str  # "measured", "refused", "unsupported" (this CPU), "infeasible", "verify-failed"
    reason: str = ""
    cycles_per_doubling: float | None = None  # core cycles, median over the passes
    ticks_per_block: float | None = None  # TSC ticks, median over the passes
    constant_time: bool = True

    @property
    def label(self) -> str:
        return f"{self.isa}/{self.width}"


@dataclass
class DoublingExploration:
    blocks: int
    tsc_hz: float = 0.0
    core_hz: float = 0.0
    points: list[DoublingPoint] = field(default_factory=list)

    def best(self, width: int) -> DoublingPoint | None:
        """The fewest cycles per doubling at `width` among constant-time methods (then the smaller depth)."""
        ok = [p for p in self.points if p.width == width and p.cycles_per_doubling is not None and p.constant_time]
        return min(ok, key=lambda p: (p.cycles_per_doubling, p.depth), default=None)

    def best_depth(self, method: str, isa: str, width: int) -> DoublingPoint | None:
        """A method's fastest depth on one ISA and width: the summary's cell."""
        ok = [p for p in self.points if (p.method, p.isa, p.width) == (method, isa, width)
              and p.cycles_per_doubling is not None]
        return min(ok, key=lambda p: (p.cycles_per_doubling, p.depth), default=None)

    def widths(self) -> list[int]:
        return sorted({p.width for p in self.points})

    def to_json(self) -> dict:
        d = asdict(self)
        d["schema"] = SCHEMA
        d["op"] = OP
        d["seed"] = SEED_NOTE
        d["best"] = {str(w): {"method": b.method, "isa": b.isa, "depth": b.depth,
                              "cycles_per_doubling": b.cycles_per_doubling}
                     for w in self.widths() if (b := self.best(w))}
        return d


def configs(widths: list[int], methods: tuple[str, ...]) -> list[tuple[str, int, str]]:
    """(isa, width, method) in report order: by width, then ISA, then method."""
    return [(isa, w, m) for isa, w in sorted(ISA_WIDTHS, key=lambda iw: iw[1]) if w in widths for m in methods]


def explore_doubling(widths: list[int], depths: list[int], *, methods: tuple[str, ...] = METHODS,
                     blocks: int = DEFAULT_BLOCKS, trials: int = 7, rounds: int = 3,
                     progress: Callable[[str], None] | None = None) -> DoublingExploration:
    """Build and quick-verify every config, then time all of them in `rounds` passes (a burst of
    noise then spoils one pass, not one config); each figure is the median over the passes."""
    result = DoublingExploration(blocks)
    with tempfile.TemporaryDirectory(prefix="aesgen-explore-gfdouble-") as tmp:
        runnable: list[tuple[DoublingPoint, KernelSpec, Path]] = []
        for isa, width, method in configs(widths, methods):
            for depth in depths:
                if progress:
                    progress(f"build {method} {isa}/{width} depth {depth}")
                point, spec, path = _prepare(method, isa, width, depth, Path(tmp))
                result.points.append(point)
                if path is not None:
                    runnable.append((point, spec, path))
        if runnable:
            _measure(result, runnable, trials, rounds, progress)
    return result


def _prepare(method: str, isa: str, width: int, depth: int,
             tmp: Path) -> tuple[DoublingPoint, KernelSpec | None, Path | None]:
    point = DoublingPoint(method, isa, width, depth, "measured", constant_time=method not in TABLE_METHODS)
    # Explore measures what could be generated: the table method is allowed here, and labelled.
    why = refusal(method, isa, width, table_lookups=True)
    if why:
        point.status, point.reason = "refused", why
        return point, None, None
    spec = KernelSpec(("gfdouble",), isa, width, depth, gfdouble=method,
                      table_lookups=method in TABLE_METHODS)
    lacking = missing_features(spec.features)
    if lacking:
        point.status, point.reason = "unsupported", f"this CPU lacks {' '.join(lacking)}"
        return point, None, None
    try:
        kernel = generate(spec)
    except BuildError as e:
        point.status, point.reason = "infeasible", str(e)
        return point, None, None
    path = tmp / f"{spec.prefix}_{method}.S"
    path.write_text(kernel.asm)
    failed = [r for r in verify_kernel(path, spec, quick=True) if r.status == "fail"]
    if failed:
        point.status, point.reason = "verify-failed", failed[0].name
        return point, None, None
    return point, spec, path


def _measure(result: DoublingExploration, runnable: list, trials: int, rounds: int,
             progress: Callable[[str], None] | None) -> None:
    ceiling = measure_ceiling()
    result.tsc_hz, result.core_hz = ceiling.tsc_hz, ceiling.core_hz
    size = 16 * result.blocks
    ticks: dict[int, list[float]] = {id(p): [] for p, _, _ in runnable}
    for r in range(rounds):
        for point, spec, path in runnable:
            if progress:
                progress(f"time {point.method} {point.label} depth {point.depth} (pass {r + 1}/{rounds})")
            res = bench(spec, path, ops=[OP], sizes=[size], trials=trials, budget=0)  # one harness run per pass
            ticks[id(point)].append(res.get(OP, size, "aesgen").median_ticks / result.blocks)
    cycles_per_tick = ceiling.core_hz / ceiling.tsc_hz
    for point, _, _ in runnable:
        point.ticks_per_block = median(ticks[id(point)])
        point.cycles_per_doubling = point.ticks_per_block * cycles_per_tick


def plot(result: DoublingExploration, path: Path) -> None:
    """Bars of cycles per doubling (each method's best depth): one group per ISA/width,
    one bar per method; the best of each width is starred."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = list(dict.fromkeys(p.label for p in result.points))
    methods = list(dict.fromkeys(p.method for p in result.points))
    bar = 0.8 / max(len(methods), 1)
    fig, ax = plt.subplots(figsize=(max(7, 1.6 * len(groups)), 4.8))
    for i, method in enumerate(methods):
        xs, ys = [], []
        for g, label in enumerate(groups):
            isa, width = label.split("/")
            p = result.best_depth(method, isa, int(width))
            if p is not None:
                xs.append(g + (i - (len(methods) - 1) / 2) * bar)
                ys.append(p.cycles_per_doubling)
        name = method + ("" if method not in TABLE_METHODS else " (not constant-time)")
        ax.bar(xs, ys, width=bar, label=name, hatch="//" if method in TABLE_METHODS else None)
    for w in result.widths():
        b = result.best(w)
        if b is not None:
            x = groups.index(b.label) + (methods.index(b.method) - (len(methods) - 1) / 2) * bar
            ax.plot([x], [b.cycles_per_doubling], marker="*", markersize=14, color="black", linestyle="none")
    ax.axhline(SEED_NAIVE_CYCLES_PER_BYTE * 16, color="grey", linestyle=":",
               label=f"seed: naive doubling ~{SEED_NAIVE_CYCLES_PER_BYTE} c/B = "
                     f"{SEED_NAIVE_CYCLES_PER_BYTE * 16:.1f} cycles/block")
    ax.set_xticks(range(len(groups)), groups)
    ax.set_xlabel("ISA / width (bars: each method at its best depth; *: best per width)")
    ax.set_ylabel("core cycles per doubling (median)")
    ax.set_title(f"{OP}: {result.blocks} blocks per call, measured on this CPU")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_json(result: DoublingExploration, path: Path) -> None:
    path.write_text(json.dumps(result.to_json(), indent=1))
