"""`aesgen explore --model`: the port model (perfmodel) next to what explore found.

On this CPU the port model stands next to the measured bulk throughput; for another
target, next to llvm-mca. Per width the knee of each (the smallest depth within 95% of
the width's best) and, over every point, Spearman's rank correlation of the two.
"""
from __future__ import annotations

from dataclasses import dataclass

from rich.console import Console
from rich.table import Table

from ..mainloop import main_loop
from ..perfmodel import blocks_per_iteration, knee, predict, spearman
from ..pipeline import generate
from ..spec import KernelSpec
from ..target import Target
from .explore import OP_FOR_MODE, Exploration, Point, variants


@dataclass(frozen=True)
class Comparison:
    knees: dict  # (width, variant) -> (model knee, other knee)
    rank_correlation: float | None
    points: int


def other_figure(result: Exploration, point: Point) -> float | None:
    """What the port model is compared with: measured GB/s here, llvm-mca's bytes/cycle elsewhere."""
    return point.bulk_gbps if result.measured else point.model_bytes_per_cycle


def annotate(result: Exploration, target: Target) -> Comparison:
    """Fill each generated point's port-model figures; knees and the rank correlation."""
    options = dict(variants(result.mode))
    for p in result.points:
        if p.status not in ("measured", "model"):
            continue
        isa = target.isa_for_width(p.width, result.backend)
        spec = KernelSpec((result.mode,), isa, p.width, p.depth,
                          **{**options.get(p.variant, {}), "backend": result.backend})
        loop = main_loop(generate(spec).asm, OP_FOR_MODE[result.mode])
        prediction = predict(target, loop.instructions)
        p.port_model_bytes_per_cycle = 16 * blocks_per_iteration(p.width, p.depth) / prediction.cycles
        p.port_model_bound = prediction.bound
    both = [p for p in result.points if p.port_model_bytes_per_cycle and other_figure(result, p)]
    knees = {}
    for key in sorted({(p.width, p.variant) for p in both}):
        group = [p for p in both if (p.width, p.variant) == key]
        knees[key] = (knee({p.depth: p.port_model_bytes_per_cycle for p in group}),
                      knee({p.depth: other_figure(result, p) for p in group}))
    rho = spearman([p.port_model_bytes_per_cycle for p in both], [other_figure(result, p) for p in both])
    return Comparison(knees, rho, len(both))


def print_comparison(result: Exploration, comparison: Comparison, console: Console) -> None:
    other = "measured bulk GB/s" if result.measured else "llvm-mca bytes/cycle"
    table = Table(title=f"explore {result.mode} on {result.target}: port model vs {other}")
    for c in ("width", "depth", "variant", other, "port model bytes/cycle", "model bound"):
        table.add_column(c, justify="right")
    for p in result.points:
        if p.port_model_bytes_per_cycle is not None:
            figure = other_figure(result, p)
            table.add_row(str(p.width), str(p.depth), p.variant, "" if figure is None else f"{figure:.2f}",
                          f"{p.port_model_bytes_per_cycle:.2f}", p.port_model_bound)
    console.print(table)
    for (width, variant), (model_knee, other_knee) in comparison.knees.items():
        near = "within 1" if None not in (model_knee, other_knee) and abs(model_knee - other_knee) <= 1 else "apart"
        console.print(f"knee {width}-bit {variant}".rstrip() + f": port model depth {model_knee}, "
                      f"{'measured' if result.measured else 'llvm-mca'} depth {other_knee} ({near})")
    rho = "n/a (fewer than 3 points or a constant column)" if comparison.rank_correlation is None \
        else f"{comparison.rank_correlation:+.3f}"
    console.print(f"rank correlation (Spearman) of port model and {other} over {comparison.points} points: {rho}")
