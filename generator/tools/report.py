"""What the `aesgen` commands print: the tables and summary lines of verify, bench, explore,
tune, list, targets and circuits (and `make demo`, which prints the same tables).

Every function prints to `console` (rich); the commands in cli.py compute, then call one of these.
"""
from __future__ import annotations

from rich.console import Console
from rich.table import Table

from ..bench.stats import speeds_text, spread
from ..bench.timing import DOUBLING_OPS, ceiling_line, two_speeds, unavailable_by_op
from ..circuits.report import KASPER_SCHWABE, ternlog_cell, three_operand_cell, two_operand_cell
from ..cpu import mask_note, missing_features
from .explore import round_counts
from .explore_gfdouble import OP, SEED_NOTE
from ..model import choose, max_depths
from ..spec import ISAS, MODE_FUNCTIONS, MODES, WIDTHS_BY_ISA, KernelSpec, required_features
from ..target import native, targets
from ..verify.results import not_run

console = Console(highlight=False)


def spread_range(value: float, ci: tuple[float, float] | None, rounds: int, digits: int = 2) -> str:
    return spread(value, (ci[1] - ci[0]) / 2, digits, rounds) if ci else f"{value:.{digits}f}"


def print_verification(results, verbose: bool) -> None:
    """`aesgen verify`: the failed (with verbose, every) check, then the counts."""
    shown = [r for r in results if verbose or r.status != "pass"]
    if shown:
        table = Table(show_header=True, header_style="bold")
        table.add_column("check")
        table.add_column("result")
        table.add_column("detail", overflow="fold")
        style = {"pass": "green", "fail": "bold red", "skip": "yellow"}
        for r in shown:
            status = "NOT RUN" if r.status == "skip" and r.missing else r.status
            table.add_row(r.name, f"[{style[r.status]}]{status}[/]", r.detail)
        console.print(table)
    skipped, lacking = not_run(results)
    other = sum(r.status == "skip" and not r.missing for r in results)
    if other:
        console.print(f"{other} skipped (see the table: not for want of a CPU feature)")
    passed = sum(r.status == "pass" for r in results)
    failed = sum(r.status == "fail" for r in results)
    console.print(f"{passed} passed, {failed} failed")
    if skipped:
        console.print(f"[bold red]{len(skipped)} checks NOT RUN: CPU lacks {', '.join(lacking)}{mask_note()}[/]", soft_wrap=True)


def print_ceiling(ceiling) -> None:
    table = Table(title=f"instruction ceiling (TSC {ceiling.tsc_hz / 1e9:.2f} GHz, "
                        f"core ~{ceiling.core_hz / 1e9:.2f} GHz from a 1-cycle add chain)")
    for col in ("instruction", "width", "throughput (cycles)", "latency (cycles)", "AES-128 GB/s allowed"):
        table.add_column(col, justify="right")
    for c in ceiling.costs:
        gbps = f"{c.aes_bytes_per_tick() * ceiling.tsc_hz / 1e9:.1f}" if c.instruction == "vaesenc" else ""
        table.add_row(c.instruction, str(c.width), f"{c.throughput_cycles:.2f}", f"{c.latency_cycles:.2f}", gbps)
    console.print(table)


def print_bench(spec: KernelSpec, result) -> None:
    for peer, info in result.peers.items():
        console.print(f"{peer}: {info}")
    for peer, ops, info in unavailable_by_op(result):
        console.print(f"{peer} for {', '.join(ops)}: {info}")
    for r in result.refused:
        console.print(f"{r.impl} refused {r.op} at {r.size} B ({r.why}): not timed there")
    ciphers = [m for m in result.measurements if m.impl == "aesgen" and m.op not in DOUBLING_OPS]
    if ciphers:
        print_cipher_bench(spec, result, ciphers)
    doublings = [m for m in result.measurements if m.impl == "aesgen" and m.op in DOUBLING_OPS]
    if doublings:
        print_doubling_bench(spec, result, doublings)
    for op in dict.fromkeys(m.op for m in result.measurements):
        line = ceiling_line(spec, result, op)
        if line:
            console.print(line, soft_wrap=True)


def print_doubling_bench(spec: KernelSpec, result, measurements) -> None:
    """gfdouble: one doubling per 16-byte block, so the figure is cycles per block."""
    table = Table(title=f"{spec.prefix}: {spec.gfdouble} doubling, median TSC ticks, core cycles from "
                        "the ceiling's add chain, one call per sequence")
    for col in ("op", "blocks", "ticks/block", "cycles/block"):
        table.add_column(col, justify="right")
    for m in measurements:
        cycles = result.cycles_per_block(m.op, m.size)
        rel, n = m.ticks().relative, m.rounds
        table.add_row(m.op, str(m.size // 16), spread(m.ticks_per_byte * 16, m.ticks_per_byte * 16 * rel, 3, n),
                      spread(cycles, cycles * rel, 3, n) if cycles else "")
    console.print(table)


def print_cipher_bench(spec: KernelSpec, result, measurements) -> None:
    # A peer refused from some size on (a failed cross-check, a rejected message) keeps its column for the rest.
    peers = [p for p in result.peers
             if not result.peers[p].startswith("n/a") or any(m.impl == p for m in result.measurements)]
    table = Table(title=f"{spec.prefix}: AES-{result.key_bits}, GB/s from median TSC ticks "
                        f"(TSC {result.tsc_hz / 1e9:.2f} GHz), one call per message")
    # A file without AES-NI is held to the AES-NI ceiling of its width; the column says so.
    of_ceiling = "of ceiling" if spec.backend == "aesni" else "of AES-NI ceiling"
    for col in ("op", "bytes", "aesgen GB/s", "ticks/B", "B/cycle", *[f"{p} GB/s" for p in peers],
                *[f"x {p}" for p in peers], of_ceiling):
        table.add_column(col, justify="right")
    for m in measurements:
        others = [result.get(m.op, m.size, p) for p in peers]
        ratios = [(result.ratio(m.op, m.size, p), result.ratio_halfwidth(m.op, m.size, p)) for p in peers]
        frac = result.ceiling_fraction(m.op, m.size)
        per_cycle = result.bytes_per_cycle(m.op, m.size)
        rel, n = m.gbps_halfwidth / m.gbps, m.rounds  # B/cycle and the ceiling fraction scale with GB/s
        table.add_row(m.op, str(m.size), m.gbps_text(),
                      spread(m.ticks_per_byte, m.ticks_per_byte * m.ticks().relative, 3, n),
                      spread(per_cycle, per_cycle * rel, 2, n) if per_cycle else "",
                      *[spread(o.gbps, o.gbps_halfwidth, 2, o.rounds) if o else "n/a" for o in others],
                      *[spread(r, h, 2, n) if r else "n/a" for r, h in ratios],
                      spread(100 * frac, 100 * frac * rel, 0, n) + "%" if frac else "")
    console.print(table)
    if line := two_speeds(result.measurements):
        console.print(line, soft_wrap=True)
    if result.sampling:
        console.print(result.sampling, soft_wrap=True)
    console.print(result.placement(), soft_wrap=True)


def print_round_counts(mode: str, isa: str, configs: list[tuple[int, int]]) -> None:
    """Bitsliced files: the instructions of one round (the loop body), per width and depth."""
    function = MODE_FUNCTIONS[mode][0]
    for width, depth in configs:
        use = isa if width in WIDTHS_BY_ISA[isa] else next(i for i in ISAS if width in WIDTHS_BY_ISA[i])
        counts = round_counts(KernelSpec((mode,), use, width, depth, backend="bitsliced"), function)
        vector = sum(n for op, n in counts.items() if op not in ("add", "sub"))
        detail = ", ".join(f"{n} {op}" for op, n in counts.items())
        console.print(f"{width}-bit x depth {depth} ({use}): {vector} vector instructions per round "
                      f"({vector / depth:.0f} per set of 8 planes): {detail}")


def print_exploration(result) -> None:
    kind = "measured on this CPU" if result.measured else f"MODEL: llvm-mca -mcpu for {result.target}, not measured"
    backend = "" if result.backend == "aesni" else f", {result.backend} backend"
    isas = "".join(f", {w}-bit: {isa}" for w, isa in sorted(result.isa_by_width.items()))
    table = Table(title=f"explore {result.mode}{backend}{isas} ({kind})")
    shorts = result.short_sizes or [result.short_size]
    products = any(p.k for p in result.points)  # GHASH/POLYVAL/GCM: k and the product variant
    variants = any(p.variant for p in result.points)  # those, or XTS's doubling method
    cols = ["width", "depth", *(["k"] if products else []), "status"]
    cols += ["bulk GB/s", *[f"GB/s at {s} B" for s in shorts], *[f"cycles per {s} B" for s in shorts]] \
        if result.measured else ["model cycles/iteration", "model bytes/cycle", "model cycles, 1 iteration alone"]
    for c in cols:
        table.add_column(c, justify="right")
    if variants:
        table.add_column("products" if products else "doubling")
    failed = ("infeasible", "unsupported", "verify-failed")
    reasons = any(p.status in failed for p in result.points)
    if reasons:  # why a config has no figures, in its own column (not under a GB/s heading)
        table.add_column("reason", justify="left")
    best = result.best()
    tied = [p for p in result.ties() if p is not best]
    for p in result.points:
        mark = " *" if best is p else " =" if any(t is p for t in tied) else ""
        mark += " ~" if p.bulk_modes else ""
        if p.status in failed:
            row = [f"[yellow]{p.status}[/]"] + [""] * (len(cols) - (4 if products else 3))
        elif result.measured:
            row = [p.status + mark, spread_range(p.bulk_gbps, p.bulk_gbps_ci, p.rounds),
                   *[spread_range(p.gbps_by_size[str(s)], p.gbps_ci_by_size.get(str(s)), p.rounds)
                     if str(s) in p.gbps_by_size else "" for s in shorts],
                   *[spread_range(p.cycles_by_size.get(str(s), p.short_cycles), p.cycles_ci_by_size.get(str(s)),
                                  p.rounds, 0) for s in shorts]]
        else:
            row = [p.status + mark, f"{p.model_cycles_per_iteration:.1f}", f"{p.model_bytes_per_cycle:.2f}",
                   f"{p.model_single_iteration_cycles:.0f}"]
        table.add_row(str(p.width), str(p.depth), *([str(p.k)] if products else []), *row,
                      *([p.variant] if variants else []),
                      *([p.reason if p.status in failed else ""] if reasons else []))
    console.print(table)
    knees = ", ".join(f"{w}-bit: depth {d}" for w, d in result.predicted_knee.items())
    if knees:
        console.print(f"model's predicted knee (ceil(latency / throughput)): {knees}")
    if result.sampling:
        console.print(result.sampling, soft_wrap=True)
    if tied:
        top = max((p for p in result.points if p.bulk_interval()), key=lambda p: p.bulk_interval().median)
        console.print(f"= ties: {len(tied)} configs besides the best whose bulk interval overlaps that of the top "
                      f"median ({config_name(top)}): {', '.join(config_name(p) for p in tied)}; * marks the best, "
                      "the cheapest of the ties (smallest depth, then smallest code)", soft_wrap=True)
    bimodal = [p for p in result.points if p.bulk_modes]
    if bimodal:
        groups = "; ".join(f"{config_name(p)}: {speeds_text(p.bulk_modes)}" for p in bimodal)
        console.print(f"~ two speeds by process (bulk round medians in two groups apart): {groups}. Its interval "
                      "spans both, so it ties configurations it is not like; where code and buffers land decides "
                      "which one a process gets (docs/tuning.md)", soft_wrap=True)
    if best:
        console.print(best_line(result, best))


def config_name(p) -> str:
    """'512x4 karatsuba'"""
    return f"{p.width}x{p.depth} {p.variant}".rstrip()


def print_doubling_exploration(result) -> None:
    """Every point, then one cell per method and ISA/width: the method's best depth."""
    console.print(f"explore gfdouble: {OP}, {result.blocks} doublings per call, median of 3 passes; "
                  f"core ~{result.core_hz / 1e9:.2f} GHz, TSC {result.tsc_hz / 1e9:.2f} GHz (measured on this CPU)")
    console.print(SEED_NOTE, soft_wrap=True)
    best = {id(b) for w in result.widths() if (b := result.best(w))}
    table = Table(title="every config (* best per width among constant-time methods)")
    for c in ("method", "isa", "width", "depth", "status", "cycles/doubling", "ticks/block"):
        table.add_column(c, justify="right")
    table.add_column("note")
    for p in result.points:
        mark = " *" if id(p) in best else ""
        if p.cycles_per_doubling is None:
            table.add_row(p.method, p.isa, str(p.width), str(p.depth), f"[yellow]{p.status}[/]", "", "", p.reason)
        else:
            table.add_row(p.method, p.isa, str(p.width), str(p.depth), p.status + mark,
                          f"{p.cycles_per_doubling:.2f}", f"{p.ticks_per_block:.2f}",
                          "" if p.constant_time else "not constant-time")
    console.print(table)
    labels = list(dict.fromkeys((p.isa, p.width) for p in result.points))
    methods = list(dict.fromkeys(p.method for p in result.points))
    summary = Table(title="cycles per doubling, each method at its best depth (* best per width)")
    summary.add_column("method")
    for isa, width in labels:
        summary.add_column(f"{isa}/{width}", justify="right")
    for method in methods:
        cells = []
        for isa, width in labels:
            b = result.best_depth(method, isa, width)
            refused = next((p for p in result.points if (p.method, p.isa, p.width) == (method, isa, width)), None)
            cells.append(f"{b.cycles_per_doubling:.2f} (d{b.depth}){' *' if result.best(width) is b else ''}"
                         if b else (refused.status if refused else ""))
        summary.add_row(method + ("" if method != "table" else " (not CT)"), *cells)
    console.print(summary)
    for w in result.widths():
        b = result.best(w)
        if b:
            console.print(f"best at {w} bits: {b.method} on {b.isa}, depth {b.depth}: "
                          f"{b.cycles_per_doubling:.2f} cycles per doubling ({b.ticks_per_block:.2f} ticks/block)")


def best_line(result, best) -> str:
    """'best: 512-bit at depth 4 (k = 16) karatsuba: 9.34 GB/s, 1130 cycles per 256 B'"""
    k = f" (k = {best.k})" if best.k else ""
    where = f"best: {best.width}-bit at depth {best.depth}{k} {best.variant}".rstrip()
    if result.measured:
        cycles = ", ".join(f"{spread_range(c, best.cycles_ci_by_size.get(s), best.rounds, 0)} cycles per {s} B"
                           for s, c in best.cycles_by_size.items())
        return (f"{where}: {spread_range(best.bulk_gbps, best.bulk_gbps_ci, best.rounds)} GB/s at "
                f"{result.bulk_size} B, {cycles}")
    return f"{where}: {best.model_bytes_per_cycle:.2f} model bytes/cycle"


def native_summary() -> str:
    """This CPU as aesgen sees it: its name, the target it is modelled as, any --cpu-mask."""
    t = native()
    name = t.description.removeprefix("this CPU: ").removesuffix(f" (modelled as {t.modelled_as})")
    return f"{name}, modelled as {t.modelled_as}{mask_note()}"


def print_limits() -> None:
    """`aesgen list`: the modes and their functions, the deepest interleave per mode, ISA and width
    (what the register file holds), and what this CPU lacks to run each."""
    console.print(f"modes: {', '.join(MODES)}  "
                  f"({'; '.join(f'{m}: ' + ', '.join(fs) for m, fs in MODE_FUNCTIONS.items())})")
    configs = [(isa, width) for isa in ISAS for width in WIDTHS_BY_ISA[isa]]
    table = Table(title="max depth per mode and ISA x width (limited by the register file); "
                        "[red]-[/] this CPU cannot run it")
    table.add_column("mode", no_wrap=True)
    for isa, width in configs:
        table.add_column(f"{isa}\n{width}", justify="right", no_wrap=True)
    lacking: dict[tuple[str, ...], set[str]] = {}
    console.print(f"this CPU: {native_summary()}")
    depth = max_depths([(isa, width, m) for m in MODES for isa, width in configs])
    for m in MODES:
        cells = []
        for isa, width in configs:
            need = missing_features(required_features(isa, width, (m,)))
            if need:
                lacking.setdefault(need, set()).add(f"{m} on {isa} {width}")
            cells.append(f"[red]-[/] {depth[isa, width, m]}" if need else str(depth[isa, width, m]))
        table.add_row(m, *cells)
    console.print(table)
    for need, where in lacking.items():
        console.print(f"this CPU lacks {' '.join(need)} for: {', '.join(sorted(where))}")
    if not lacking:
        console.print("this CPU runs every mode at every ISA and width")


def print_targets() -> None:
    """`aesgen targets`: each target, what the model picks for it (CTR32), this CPU last."""
    table = Table(title="targets (latency/throughput in cycles; depth = ceil(latency / throughput))")
    for col in ("target", "description", "ISA", "widths", "vaesenc lat/tput", "model: width x depth", "llvm-mca"):
        table.add_column(col)
    for t in [*targets().values(), native()]:
        c = choose(t, "ctr32")
        lat, tput = t.cost("aesenc", c.width)
        table.add_row(t.name, t.description, t.isa, ",".join(map(str, t.widths())), f"{lat:g}/{tput:g}",
                      f"{c.width} x {c.depth}", t.llvm_mca_cpu)
    console.print(table)


def print_tuning(result, description: str) -> None:
    """`aesgen tune`: per mode, the bulk and the short-message pick (description: the CPU's)."""
    table = Table(title=f"tuned for {result.cpu} ({description})")
    for c in ("mode", "bulk (16 KiB): width x depth", "GB/s", "ties", "short (256 B): width x depth", "cycles",
              "ties"):
        table.add_column(c, justify="right")

    def config(pick: dict) -> str:  # hash modes also record their product variant
        variant = f" {pick['variant']}" if pick.get("variant") else ""
        return f"{pick['width']} x {pick['depth']}{variant}"

    for m, mt in result.modes.items():
        table.add_row(m, config(mt.bulk), spread(mt.bulk["gbps"], mt.bulk["gbps_halfwidth"], 2, mt.bulk["rounds"]),
                      str(len(mt.bulk["ties"])), config(mt.short),
                      spread(mt.short["cycles"], mt.short["cycles_halfwidth"], 0, mt.short["rounds"]),
                      str(len(mt.short["ties"])))
    console.print(table)
    console.print("ties: the candidates whose 95% interval overlaps that of the top median (most GB/s, fewest "
                  "cycles); the pick is the cheapest of them (smallest depth, then smallest code)", soft_wrap=True)
    for m, mt in result.modes.items():
        console.print(f"{m}: {mt.sampling}", soft_wrap=True)

def print_circuits(rows, listing: str | None) -> None:
    """`aesgen circuits`: per circuit and register count, the gates and each compiler pass's
    instructions, against Käsper–Schwabe's; with listing, that pass's programs."""
    table = Table(title="S-box circuits: instructions per bitsliced S-box layer")
    for col in ("circuit", "gates", "ANDs", "depth", "regs", "3-operand (AVX)", "2-operand (SSE)", "vs K–S",
                "ternlog (AVX-512)"):
        table.add_column(col)
    for row in rows:
        m = row.metrics
        sse = len(row.two_operand.program.instrs) - KASPER_SCHWABE["total"]
        table.add_row(row.circuit, str(m.gates), str(m.nonlinear), str(m.depth), str(row.registers),
                      three_operand_cell(row.three_operand), two_operand_cell(row.two_operand), f"{sse:+d}",
                      ternlog_cell(row.ternlog))
    console.print(table)
    ks = KASPER_SCHWABE
    console.print(f"Käsper–Schwabe (CHES 2009): {ks['total']} = {ks['xor']} xor + {ks['and/or']} and/or + "
                  f"{ks['mov']} mov (two-operand SSE, 16 registers, NOTs moved into the key schedule). "
                  "not: XNOR's complement (xor with all-ones); spill: stores + reloads (spilled values are "
                  "otherwise read as memory operands). SSE has 16 registers: its 32 row shows the copies alone.")
    if listing:
        for row in rows:
            compiled = {"three-operand": row.three_operand, "two-operand": row.two_operand,
                        "ternlog": row.ternlog}[listing]
            console.print(f"\n# {row.circuit}, {listing}, {row.registers} registers, order: {compiled.order}")
            console.print(compiled.program.listing(), markup=False)
