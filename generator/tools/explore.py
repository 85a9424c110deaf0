"""`aesgen explore`: throughput and latency over interleave depth and width.

On this CPU every feasible config is generated, quick-verified and measured
(bulk throughput, and the cycles and GB/s of short messages). GHASH, POLYVAL
and GCM are explored with both product variants, XTS with every doubling
method (the variant names them). For another
target nothing can run, so the main loop of each config goes through
llvm-mca with the target's -mcpu and the result is labelled a model.
Measured configs are sampled in turn (bench.sampler) until every median is
known to ±2% or the budget ends; the best is the cheapest of the configs
whose intervals overlap the fastest one's (the ties).
Any kernel backend (aesni, gfni, ...) is explored the same way; the
predicted knee is vaesenc's, so only the aesni backend has one.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from ..bench.ceiling import measure as measure_ceiling
from ..bench.sampler import Sampling, sample
from ..bench.stats import Interval, cheapest_tie, order_rank, ties
from ..bench.timing import pin_cpu, run_op
from ..config import ConfigError, gfmul_refusal, parse_gfmuls
from ..cpu import missing_features
from ..doubling import METHODS as DOUBLING_METHODS, TABLE_METHODS, refusal
from ..dsl import BuildError
from ..functions import EXPLORED_FUNCTIONS
from ..ir import Branch, Insn, Label
from ..kernels import build_function
from ..mainloop import main_loop
from ..model import pipe_depth
from ..ops import info
from ..pipeline import generate
from ..spec import WIDTHS_BY_ISA, KernelSpec
from ..target import Target
from ..verify import verify_kernel
from ..verify.build import build_shared
from ..verify.disasm import assemble, read_elf
from .files import UsageFailure

# The op explored per mode: the record marked `explored` (aesgen.functions).
OP_FOR_MODE = EXPLORED_FUNCTIONS
# Modes whose main loop is one batch of depth vectors, so llvm-mca's cycles per loop iteration
# give bytes per cycle; the others (OTR's pipelined pairs, multi-stream transposition, the
# two-round wide blocks...) are measured on this CPU only.
MODELLED_MODES = ("ecb", "ctr32", "cbc", "ghash", "polyval", "gcm", "xts")
HASH_MODES = ("ghash", "polyval")
# Modes with carry-less products: explored in both product variants; aggregation k = lanes x depth.
PRODUCT_MODES = (*HASH_MODES, "gcm")
# Modes explored once per GF(2^128) doubling method (the tweaks' --gfdouble).
DOUBLING_EXPLORED = ("xts",)
# Message sizes (SHORT..., BULK) when --sizes is not given: GCM's short messages are timed at 1 KiB too.
DEFAULT_SIZES = {"gcm": (256, 1024, 16384)}
FALLBACK_SIZES = (256, 16384)
SCHEMA = "aesgen-explore/2"  # /2: "best" is the cheapest tie, not the top median; figures have intervals
BUDGET = 60.0  # seconds of sampling for one exploration
TRIALS = 21  # samples per size in each config's turn of a round
LLVM_MCA = ("llvm-mca-19", "llvm-mca")


@dataclass
class Point:
    width: int
    depth: int
    status: str  # "measured", "model", "infeasible", "unsupported" (this CPU lacks a feature), "verify-failed"
    reason: str = ""
    bulk_gbps: float | None = None  # measured, from the median
    short_cycles: float | None = None  # core cycles for one message of the smallest short size (median)
    model_cycles_per_iteration: float | None = None  # llvm-mca
    model_bytes_per_cycle: float | None = None
    model_single_iteration_cycles: float | None = None  # llvm-mca, one iteration alone: latency
    variant: str = ""  # GHASH/POLYVAL/GCM: "schoolbook" or "karatsuba"; XTS: the doubling method
    k: int | None = None  # GHASH/POLYVAL/GCM: blocks per reduction, lanes x depth
    cycles_by_size: dict[str, float] = field(default_factory=dict)  # short size (str) -> core cycles (median)
    gbps_by_size: dict[str, float] = field(default_factory=dict)  # short size (str) -> GB/s (median)
    port_model_bytes_per_cycle: float | None = None  # the port model (perfmodel), with --model
    port_model_bound: str = ""  # what sets the port model's figure: ports, issue, recurrence, window
    # Measured: each figure is the median of `rounds` round medians (sampler.sample); the *_ci fields
    # are their 95% intervals [low, high] (exact order statistics, so below 95% under 6 rounds).
    # code_bytes (the explored function's machine code) settles ties after the depth.
    bulk_gbps_ci: tuple[float, float] | None = None
    cycles_ci_by_size: dict[str, tuple[float, float]] = field(default_factory=dict)
    gbps_ci_by_size: dict[str, tuple[float, float]] = field(default_factory=dict)
    rounds: int = 0
    code_bytes: int | None = None
    # The bulk round medians in two groups apart (stats.two_modes), GB/s: [slower, rounds, faster,
    # rounds]; None when they are one group.
    bulk_modes: tuple[float, int, float, int] | None = None

    def bulk_interval(self) -> Interval | None:
        return None if self.bulk_gbps is None else self._interval(self.bulk_gbps, self.bulk_gbps_ci)

    def short_interval(self) -> Interval | None:
        """Core cycles for one message of the smallest short size."""
        if self.short_cycles is None:
            return None
        return self._interval(self.short_cycles, self.cycles_ci_by_size.get(next(iter(self.cycles_by_size), "")))

    def _interval(self, value: float, ci: tuple[float, float] | None) -> Interval:
        low, high = ci or (value, value)  # no interval recorded: the value alone
        return Interval(low, value, high, self.rounds, order_rank(self.rounds)[1] if self.rounds else 0.0)

    def cost(self) -> tuple:
        """What a tie is settled by: the smallest depth, then the smallest code."""
        return self.depth, self.code_bytes if self.code_bytes is not None else 0


def cheapest(points: list[Point], profile: str = "bulk") -> Point | None:
    """The cheapest of the points tied with the best: for "bulk" the highest GB/s, for "short" the
    fewest cycles per short message."""
    of = Point.bulk_interval if profile == "bulk" else Point.short_interval
    return cheapest_tie([p for p in points if of(p)], of, Point.cost, higher_is_better=profile == "bulk")


def tied(points: list[Point], profile: str = "bulk") -> list[Point]:
    of = Point.bulk_interval if profile == "bulk" else Point.short_interval
    return ties([p for p in points if of(p)], of, higher_is_better=profile == "bulk")


@dataclass
class Exploration:
    mode: str
    target: str
    measured: bool
    bulk_size: int
    short_size: int
    predicted_knee: dict[int, int] = field(default_factory=dict)  # width -> depth the model predicts
    points: list[Point] = field(default_factory=list)
    short_sizes: list[int] = field(default_factory=list)  # every short size, ascending; short_size is the first
    backend: str = "aesni"  # the kernel family every point was generated with (KernelSpec.backend)
    sampling: str = ""  # how the sampling ended (Sampling.describe)
    isa_by_width: dict[int, str] = field(default_factory=dict)  # the ISA each width's configs were built for

    def best(self) -> Point | None:
        """Measured: the cheapest of the ties (cheapest); a model: the most bytes per cycle, smaller depth first."""
        if self.measured:
            return cheapest(self.points)
        ok = [p for p in self.points if p.model_bytes_per_cycle is not None]
        return max(ok, key=lambda p: (p.model_bytes_per_cycle, -p.depth), default=None)

    def ties(self) -> list[Point]:
        """The measured points the best cannot be told apart from (the best among them)."""
        return tied(self.points) if self.measured else []

    def to_json(self) -> dict:
        d = asdict(self)
        d["schema"] = SCHEMA
        for p, out in zip(self.points, d["points"]):
            out["bulk_gbps_halfwidth"] = (iv := p.bulk_interval()) and iv.half_width
        b = self.best()
        d["best"] = {"width": b.width, "depth": b.depth, "variant": b.variant, "k": b.k} if b else None
        d["ties"] = [{"width": p.width, "depth": p.depth, "variant": p.variant} for p in self.ties()]
        return d


def main_loop_text(asm: str, function: str) -> str:
    """The AES-128 main loop of `function` (its longest loop there), comments stripped, for llvm-mca."""
    return main_loop(asm, function).text()


def llvm_mca(text: str, mcpu: str, iterations: int = 200) -> float:
    """Cycles per iteration of the loop body, as llvm-mca models them."""
    tool = next((t for t in LLVM_MCA if shutil.which(t)), None)
    if tool is None:
        raise BuildError("llvm-mca not found (apt install llvm-19)")
    with tempfile.NamedTemporaryFile("w", suffix=".s") as f:
        f.write(text)
        f.flush()
        out = subprocess.run([tool, f"-mcpu={mcpu}", f"-iterations={iterations}", f.name],
                             capture_output=True, text=True)
    m = re.search(r"Total Cycles:\s+(\d+)", out.stdout)
    if out.returncode != 0 or not m:
        raise BuildError(f"llvm-mca -mcpu={mcpu} failed: {out.stderr.strip().splitlines()[-1:]}")
    return int(m.group(1)) / iterations


def gfmul_methods(text: str, mode: str, backend: str) -> tuple[str, ...]:
    """--gfmul LIST, checked: the GF(2^128) multiply methods to compare."""
    try:
        return parse_gfmuls(text, mode, backend, PRODUCT_MODES)
    except ConfigError as e:
        raise UsageFailure(str(e)) from None


def variants(mode: str, methods: tuple[str, ...] = DOUBLING_METHODS,
             gfmuls: tuple[str, ...] = ()) -> list[tuple[str, dict]]:
    """(variant name, KernelSpec options) each config of `mode` is built with; with `gfmuls`
    (GHASH/POLYVAL/GCM), one variant per GF(2^128) multiply method instead of per product form
    (without clmul the products are Karatsuba's)."""
    if mode in PRODUCT_MODES and gfmuls:
        return [(g, {"gfmul": g}) for g in gfmuls]
    if mode in PRODUCT_MODES:
        return [("schoolbook", {}), ("karatsuba", {"karatsuba": True})]
    if mode in DOUBLING_EXPLORED:
        return [(m, {"gfdouble": m, "table_lookups": m in TABLE_METHODS}) for m in methods]
    return [("", {})]


def explore(mode: str, target: Target, widths: list[int], depths: list[int], *, bulk: int = 16384,
            short: int | tuple[int, ...] = 256, measure: bool = True, trials: int = TRIALS, budget: float = BUDGET,
            progress: Callable[[str], None] | None = None,
            methods: tuple[str, ...] = DOUBLING_METHODS, backend: str = "aesni",
            pairs: set[tuple[int, int]] | None = None, gfmuls: tuple[str, ...] = (),
            isa: str | None = None) -> Exploration:
    """Every config is built and verified first, then timed in rounds over all of them (sampler.sample,
    `trials` samples per size per turn) until each median is known to ±2% or `budget` seconds end:
    slow drift and bursts of noise on the shared machine then land on every config alike.
    `short` is one short-message size or several; the smallest is the `short_cycles` one.
    `backend` goes to every config's KernelSpec as it is. `pairs`: only these (width, depth).
    `gfmuls`: GHASH/POLYVAL/GCM's multiply methods to compare (--gfmul ctmul,bitsliced).
    `isa`: every width built for this ISA (the 16-register kernels on an AVX-512 CPU: avx2),
    instead of the target's widest ISA for the width."""
    forced, isa = isa, isa or target.isa_for(backend) or target.isa
    shorts = sorted({short} if isinstance(short, int) else set(short))
    result = Exploration(mode, target.name, measure, bulk, shorts[0], short_sizes=shorts, backend=backend)
    for w in widths:
        # GCM: the knee of its CTR side; the knee is vaesenc's latency over its throughput
        if w in WIDTHS_BY_ISA[isa] and mode not in HASH_MODES and backend == "aesni":
            result.predicted_knee[w] = pipe_depth(target, w)
    with tempfile.TemporaryDirectory(prefix="aesgen-explore-") as tmp:
        runnable: list[tuple[Point, KernelSpec, Path]] = []
        for variant, options in variants(mode, methods, gfmuls):
            for w in widths:
                for d in depths:
                    if pairs is not None and (w, d) not in pairs:
                        continue
                    if progress:
                        progress(f"build {w}-bit depth {d} {variant}".rstrip())
                    isa_w = forced or target.isa_for_width(w, backend) or isa
                    result.isa_by_width[w] = isa_w
                    point, spec, path = _prepare(mode, target, isa_w, w, d, measure, Path(tmp), variant,
                                                 {**options, "backend": backend})
                    point.variant = variant
                    if mode in PRODUCT_MODES:
                        point.k = w // 128 * d
                    result.points.append(point)
                    if path is not None:
                        runnable.append((point, spec, path))
        if measure and runnable:
            result.sampling = _measure(mode, runnable, bulk, shorts, trials, budget, progress).describe("(configuration, size) pairs")
    return result


def _prepare(mode: str, target: Target, isa: str, width: int, depth: int, measure: bool,
             tmp: Path, variant: str = "", options: dict | None = None) -> tuple[Point, KernelSpec | None, Path | None]:
    options = options or {}
    if width not in WIDTHS_BY_ISA[isa]:
        return Point(width, depth, "infeasible", f"{isa} has no {width}-bit registers"), None, None
    if "gfdouble" in options:
        why = refusal(options["gfdouble"], isa, width, options["table_lookups"])
        if why:
            return Point(width, depth, "infeasible", why), None, None
    spec = KernelSpec((mode,), isa, width, depth, **options)
    if gfmul_refusal(spec):
        return Point(width, depth, "infeasible", gfmul_refusal(spec)), None, None
    try:
        kernel = generate(spec)
    except BuildError as e:
        return Point(width, depth, "infeasible", str(e)), None, None
    lacking = missing_features(spec.features) if measure else ()
    if lacking:
        return Point(width, depth, "unsupported", f"this CPU lacks {' '.join(lacking)}"), None, None
    op = OP_FOR_MODE[mode]
    if not measure:
        try:
            loop = main_loop_text(kernel.asm, op)
            # Steady state (iterations overlap, as an ideal out-of-order core runs them) and
            # one iteration alone (the latency a short message sees).
            cycles = llvm_mca(loop, target.llvm_mca_cpu)
            single = llvm_mca(loop, target.llvm_mca_cpu, iterations=1)
        except BuildError as e:
            return Point(width, depth, "infeasible", str(e)), None, None
        per_iteration = 16 * depth * width // 128
        return Point(width, depth, "model", "llvm-mca", model_cycles_per_iteration=cycles,
                     model_bytes_per_cycle=per_iteration / cycles,
                     model_single_iteration_cycles=single), None, None
    path = tmp / f"{spec.prefix}_{variant or 'only'}.S"
    path.write_text(kernel.asm)
    failed = [r for r in verify_kernel(path, spec, quick=True) if r.status == "fail"]
    if failed:
        return Point(width, depth, "verify-failed", failed[0].name), None, None
    return Point(width, depth, "measured", code_bytes=code_bytes(path, f"{spec.prefix}_{op}")), spec, path


def code_bytes(asm_path: Path, function: str) -> int:
    """Bytes of machine code of `function` (its symbol's size), else of every executable section."""
    elf = read_elf(assemble(asm_path).read_bytes())
    sized = [s.size for s in elf.symbols if s.name == function and s.size]
    return sized[0] if sized else sum(s.size for s in elf.sections if s.executable)


def _measure(mode: str, runnable: list, bulk: int, shorts: list[int], trials: int, budget: float,
             progress: Callable[[str], None] | None) -> Sampling:
    ceiling = measure_ceiling()
    cycles_per_tick = ceiling.core_hz / ceiling.tsc_hz
    op = OP_FOR_MODE[mode]
    sizes = [*shorts, bulk]
    cpu = pin_cpu()
    shared = [build_shared(path) for _, _, path in runnable]
    tsc_rates: list[float] = []

    def one_round(configs: list[tuple[int, int]]) -> dict[tuple[int, int], dict[tuple[int, int], list[float]]]:
        got = {}
        for n, (i, size) in enumerate(configs):
            point, spec, _ = runnable[i]
            if progress:
                progress(f"time {point.width}-bit depth {point.depth} {point.variant} ".rstrip() +
                         f" at {size} B (round {len(tsc_rates) // len(configs) + 1}, turn {n + 1} of {len(configs)})")
            tsc, _, samples, _ = run_op(spec, shared[i], op, [size], (), 128, trials, cpu,
                                        tsc_rates[0] if tsc_rates else None)
            tsc_rates.append(tsc)
            got[i, size] = {(i, size): samples[(size, "aesgen")]}
        return got

    # Each size of each configuration is a turn of its own (its own process): run after a short
    # size in one process, a shallow ymm loop's bulk figure read 3-7% low on Sapphire Rapids
    # (aesgen explore ctr32: depth 1 at 93% of depth 8 that way, 99% alone).
    sampling = sample([(i, size) for i in range(len(runnable)) for size in sizes], one_round, budget=budget)
    tsc = tsc_rates[0]  # measured once, by the first run; every figure uses it
    for i, (point, _, _) in enumerate(runnable):
        gbps = {s: sampling.interval((i, s)).reciprocal(s * tsc / 1e9) for s in sizes}
        cycles = {s: sampling.interval((i, s)).scaled(cycles_per_tick) for s in shorts}
        point.bulk_gbps, point.bulk_gbps_ci = gbps[bulk].median, (gbps[bulk].low, gbps[bulk].high)
        point.rounds = gbps[bulk].n
        if modes := sampling.modes((i, bulk)):  # in ticks per message
            point.bulk_modes = modes.rates(bulk * tsc / 1e9)
        point.gbps_by_size = {str(s): gbps[s].median for s in shorts}
        point.gbps_ci_by_size = {str(s): (gbps[s].low, gbps[s].high) for s in shorts}
        point.cycles_by_size = {str(s): cycles[s].median for s in shorts}
        point.cycles_ci_by_size = {str(s): (cycles[s].low, cycles[s].high) for s in shorts}
        point.short_cycles = point.cycles_by_size[str(shorts[0])]
    return sampling


def round_counts(spec: KernelSpec, function: str = "ctr32_encrypt") -> dict[str, int]:
    """Instructions in one pass of `function`'s round loop (all sets of planes) in a bitsliced
    file, by mnemonic family: what `aesgen explore --backend bitsliced` reports per round."""
    items = build_function(spec, function).entry
    start = next(k for k, it in enumerate(items) if isinstance(it, Label) and "_round" in it.name)
    end = next(k for k, it in enumerate(items) if isinstance(it, Branch) and it.target == items[start].name)
    counts: dict[str, int] = {}
    for it in items[start:end]:
        if isinstance(it, Insn):
            family = info(it.op).mnemonic
            counts[family] = counts.get(family, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def plot(result: Exploration, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2 if result.measured else 1, figsize=(12 if result.measured else 7, 4.5),
                             squeeze=False)
    ax = axes[0][0]
    ylabel = "bulk throughput, GB/s (measured)" if result.measured else "bytes per cycle (llvm-mca MODEL)"
    best = result.best()
    for w, variant in sorted({(p.width, p.variant) for p in result.points}):
        pts = [p for p in result.points if (p.width, p.variant) == (w, variant)
               and p.status in ("measured", "model")]
        if not pts:
            continue
        ys = [p.bulk_gbps if result.measured else p.model_bytes_per_cycle for p in pts]
        line, = ax.plot([p.depth for p in pts], ys, marker="o", label=f"{w}-bit {variant}".strip())
        if w in result.predicted_knee:
            ax.axvline(result.predicted_knee[w], color=line.get_color(), linestyle=":", alpha=0.7)
    if best:
        y = best.bulk_gbps if result.measured else best.model_bytes_per_cycle
        ax.plot([best.depth], [y], marker="*", markersize=16, color="black", linestyle="none",
                label=f"best: {best.width}-bit depth {best.depth} {best.variant}".strip())
    ax.set_xlabel("depth (independent block groups in flight); dotted: model's predicted knee")
    ax.set_ylabel(ylabel)
    ax.set_title(f"{result.mode} on {result.target}, {result.bulk_size}-byte messages")
    ax.grid(alpha=0.3)
    ax.legend()
    if result.measured:
        ax2 = axes[0][1]
        for w, variant in sorted({(p.width, p.variant) for p in result.points}):
            pts = [p for p in result.points if (p.width, p.variant) == (w, variant) and p.short_cycles]
            if pts:
                ax2.plot([p.depth for p in pts], [p.short_cycles for p in pts], marker="o",
                         label=f"{w}-bit {variant}".strip())
        ax2.set_xlabel("depth")
        ax2.set_ylabel(f"core cycles per {result.short_size}-byte message (median)")
        ax2.set_title("short-message latency")
        ax2.grid(alpha=0.3)
        ax2.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_json(result: Exploration, path: Path) -> None:
    path.write_text(json.dumps(result.to_json(), indent=1))
