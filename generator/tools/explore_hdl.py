"""`aesgen explore hdl`: area x throughput of the cores over architecture x S-box, and the S-box
circuits' gate counts beside their LUT counts. Blocks per clock come from the architecture (the
test suite checks them cycle by cycle); fmax from nextpnr-ice40 where the core fits an HX8K."""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from rich.table import Table

from ..circuits import load
from ..hdl import HdlSpec, generate
from ..hdl.sbox import circuit_module, table_module
from ..hdl.spec import SBOX_CHOICES, SBOX_CIRCUITS
from ..hdl.synth import Synthesis, sbox_area, synthesize
from ..verify.vectors import FIPS197_APPENDIX_C

ARCHS = ("iterative", "unrolled-2", "pipelined-1", "pipelined-2")
# The FPGA study aesgen grows from (docs/hdl.md): AES-128, 12 clocks a round, 120 a block.
SEED = {"luts": 9859, "ffs": 2857, "clocks_per_block": 120}


@dataclass(frozen=True)
class Point:
    arch: str
    sbox: str
    luts6: int | None
    ffs: int | None
    depth6: int | None
    ice40_luts: int | None
    ice40_brams: int
    fmax_mhz: float | None
    blocks_per_clock: float
    note: str
    ecp5_luts: int | None = None  # synth_ecp5, with --ecp5

    @property
    def mblocks_per_s(self) -> float | None:
        return None if self.fmax_mhz is None else self.blocks_per_clock * self.fmax_mhz


@dataclass(frozen=True)
class SboxRow:
    sbox: str
    gates: int | None
    nonlinear: int | None
    depth: int | None
    luts6: int | None
    depth6: int | None
    luts4: int | None
    depth4: int | None


def spec_for(bits: int, arch: str, sbox: str) -> HdlSpec:
    stages = 1
    if arch.startswith("pipelined-"):
        arch, stages = "pipelined", int(arch.rsplit("-", 1)[1])
    return HdlSpec(bits, arch, sbox, "aes", stages_per_round=stages)


def point(bits: int, arch: str, sbox: str, place: bool, ecp5: bool = False) -> Point:
    spec = spec_for(bits, arch, sbox)
    flows = ("lut6", "ice40", "ecp5") if ecp5 else ("lut6", "ice40")
    runs = {r.flow: r for r in synthesize(spec, generate(spec, FIPS197_APPENDIX_C[bits]), flows, place)}
    six, ice = runs["lut6"], runs["ice40"]
    return Point(arch, sbox, six.luts, six.ffs, six.depth, ice.luts, ice.brams, ice.fmax_mhz,
                 1 / spec.clocks_per_block(), "; ".join(n for n in (six.note, ice.note) if n),
                 runs["ecp5"].luts if ecp5 else None)


def sbox_rows() -> list[SboxRow]:
    rows = []
    for choice in SBOX_CHOICES:
        circuit = SBOX_CIRCUITS.get(choice, (None,))[0]
        text = circuit_module("sbox", circuit) if circuit else table_module("sbox", False)
        six, four = sbox_area("sbox", text)
        m = load(circuit).metrics() if circuit else None
        rows.append(SboxRow(choice, m.gates if m else None, m.nonlinear if m else None, m.depth if m else None,
                            six.luts, six.depth, four.luts, four.depth))
    return rows


def explore(bits: int = 128, archs: tuple[str, ...] = ARCHS, sboxes: tuple[str, ...] = SBOX_CHOICES,
            place: bool = True, progress: Callable[[str], None] = lambda s: None,
            ecp5: bool = False) -> tuple[list[Point], list[SboxRow]]:
    points = []
    for arch in archs:
        for sbox in sboxes:
            progress(f"synthesizing AES-{bits} {arch} {sbox}")
            points.append(point(bits, arch, sbox, place, ecp5))
    progress("synthesizing the S-boxes alone")
    return points, sbox_rows()


def show(value: float | int | None, fmt: str = "{:,}") -> str:
    return "n/a" if value is None else fmt.format(value)


def tables(points: list[Point], rows: list[SboxRow], bits: int) -> tuple[Table, Table]:
    t = Table(title=f"AES-{bits} encryption cores: area x throughput (Yosys 'synth -lut 6'; iCE40: synth_ice40 "
                    "+ nextpnr-ice40 --hx8k)")
    ecp5 = any(p.ecp5_luts is not None for p in points)
    for col in ("arch", "S-box", "LUT6", "FFs", "LUT6 levels", "iCE40 LUT4", "BRAM", "fmax MHz",
                *(("ECP5 LUT4",) if ecp5 else ()), "blocks/clock", "Mblocks/s", "LUT6 per block/clock"):
        t.add_column(col, justify="left" if col in ("arch", "S-box") else "right")
    for p in points:
        per = None if p.luts6 is None else round(p.luts6 / p.blocks_per_clock)
        t.add_row(p.arch, p.sbox, show(p.luts6), show(p.ffs), show(p.depth6), show(p.ice40_luts),
                  str(p.ice40_brams), show(p.fmax_mhz, "{:.1f}"), *((show(p.ecp5_luts),) if ecp5 else ()),
                  f"{p.blocks_per_clock:.4g}", show(p.mblocks_per_s, "{:.2f}"), show(per))
    seed_bpc = 1 / SEED["clocks_per_block"]
    t.add_row("seed study", "(its own)", f"{SEED['luts']:,}", f"{SEED['ffs']:,}", "", "", "", "",
              *(("",) if ecp5 else ()), f"{seed_bpc:.4g}", "", f"{round(SEED['luts'] / seed_bpc):,}")
    s = Table(title="S-box circuits: gates vs LUTs (the S-box module alone, Yosys 'synth -lut 6' / '-lut 4')")
    for col in ("S-box", "gates", "nonlinear", "gate depth", "LUT6", "LUT6 levels", "LUT4", "LUT4 levels"):
        s.add_column(col, justify="left" if col == "S-box" else "right")
    for r in rows:
        s.add_row(r.sbox, show(r.gates), show(r.nonlinear), show(r.depth), show(r.luts6), show(r.depth6),
                  show(r.luts4), show(r.depth4))
    return t, s


def write_json(result: tuple[list[Point], list[SboxRow]], path: Path) -> None:
    points, rows = result
    data = {"cores": [{**asdict(p), "mblocks_per_s": p.mblocks_per_s} for p in points],
            "sboxes": [asdict(r) for r in rows], "seed": SEED}
    path.write_text(json.dumps(data, indent=2) + "\n")


def plot(result: tuple[list[Point], list[SboxRow]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points, _ = result
    fig, ax = plt.subplots(figsize=(7.5, 5))
    for sbox in dict.fromkeys(p.sbox for p in points):
        mine = [p for p in points if p.sbox == sbox and p.luts6 is not None]
        ax.scatter([p.luts6 for p in mine], [p.blocks_per_clock for p in mine], label=f"S-box {sbox}")
        for p in mine:
            ax.annotate(p.arch, (p.luts6, p.blocks_per_clock), fontsize=7, xytext=(4, 2), textcoords="offset points")
    ax.scatter([SEED["luts"]], [1 / SEED["clocks_per_block"]], marker="x", color="black", label="seed study")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("LUT6 (Yosys synth -lut 6)")
    ax.set_ylabel("blocks per clock")
    ax.set_title("aesgen hdl: area x throughput")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
