"""Area and speed of a core: Yosys' generic LUT6/LUT4 flows, synth_ice40 and synth_ecp5, and
nextpnr-ice40's fmax on a small harness (a shift register feeds the core's inputs from one pin and the XOR of its
outputs leaves on one pin, so the core's 400-odd ports need no package pins).

Each run gets its own temporary folder; tools that are missing give a result with a note
instead of numbers, never an exception.
"""
from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .spec import HdlSpec

LUT_CELLS = re.compile(r"^(\$lut|SB_LUT4|LUT4)$")
FF_CELLS = re.compile(r"^(\$_.*DFF.*|SB_DFF.*|TRELLIS_FF)$")
BRAM_CELLS = ("SB_RAM", "DP16KD")  # iCE40 4 kbit, ECP5 18 kbit block RAMs
FLOWS = ("lut6", "lut4", "ice40", "ecp5")
ICE40_DEVICE = ("--hx8k", "ct256")  # the largest iCE40 HX: 7,680 LUT4s, 32 block RAMs
ICE40_LUTS, ICE40_BRAMS = 7680, 32
YOSYS_TIMEOUT = 1800


@dataclass(frozen=True)
class Synthesis:
    flow: str
    luts: int | None = None
    ffs: int | None = None
    depth: int | None = None          # LUT levels between registers (Yosys ltp -noff)
    fmax_mhz: float | None = None     # nextpnr-ice40, ice40 flow only
    brams: int = 0                    # block RAMs (Yosys may map a table S-box to ROM)
    note: str = ""


def tools_missing(flow: str) -> str | None:
    need = ["yosys"] + (["nextpnr-ice40"] if flow == "ice40-pnr" else [])
    absent = [t for t in need if shutil.which(t) is None]
    return f"not installed: {', '.join(absent)}" if absent else None


def cell_counts(stat_text: str) -> dict[str, int]:
    """Cell type -> count, from the last `stat` listing of a flattened design."""
    block = stat_text.rsplit("Number of cells:", 1)[-1]
    counts = {}
    for line in block.splitlines()[1:]:
        m = re.match(r"^\s+(\S+)\s+(\d+)\s*$", line)
        if not m:
            break
        counts[m.group(1)] = int(m.group(2))
    return counts


def totals(counts: dict[str, int]) -> tuple[int, int]:
    return (sum(n for c, n in counts.items() if LUT_CELLS.match(c)),
            sum(n for c, n in counts.items() if FF_CELLS.match(c)))


def brams(counts: dict[str, int]) -> int:
    return sum(n for c, n in counts.items() if c.startswith(BRAM_CELLS))


def run_yosys(script: str, cwd: Path) -> str:
    r = subprocess.run(["yosys", "-q", "-p", script, "-l", "yosys.log"], cwd=cwd, capture_output=True,
                       text=True, timeout=YOSYS_TIMEOUT)
    log = (cwd / "yosys.log").read_text() if (cwd / "yosys.log").exists() else r.stdout
    if r.returncode:
        raise RuntimeError(f"yosys failed: {(r.stderr or log).strip().splitlines()[-1:]}")
    return log


def depth_of(log: str) -> int | None:
    m = re.findall(r"Longest topological path in \S+ \(length=(\d+)\)", log)
    return int(m[-1]) if m else None


def generic(sources: list[Path], top: str, lut: int, cwd: Path) -> Synthesis:
    reads = " ".join(p.name for p in sources)
    log = run_yosys(f"read_verilog {reads}; synth -top {top} -lut {lut}; flatten; stat; ltp -noff", cwd)
    luts, ffs = totals(cell_counts(log))
    return Synthesis(f"lut{lut}", luts, ffs, depth_of(log))


def harness(spec: HdlSpec) -> str:
    """The fmax harness: every core input from a shift register on one pin, the outputs XORed."""
    kb = spec.bits
    width = kb + 128 + 4
    return f"""module fmax_top (input wire clk, input wire din, output reg dout);
  reg [{width - 1}:0] sh;
  wire in_ready, out_valid;
  wire [127:0] out_block;
  always @(posedge clk) sh <= {{sh[{width - 2}:0], din}};
  {spec.prefix}_core u (.clk(clk), .rst_n(sh[0]), .key_load(sh[1]), .in_valid(sh[2]), .out_ready(sh[3]),
    .key(sh[{kb + 3}:4]), .in_block(sh[{kb + 131}:{kb + 4}]), .in_ready(in_ready), .out_valid(out_valid),
    .out_block(out_block));
  always @(posedge clk) dout <= ^{{out_block, out_valid, in_ready}};
endmodule
"""


def ice40(sources: list[Path], spec: HdlSpec, cwd: Path, place: bool) -> Synthesis:
    reads = " ".join(p.name for p in sources)
    log = run_yosys(f"read_verilog {reads}; synth_ice40 -top {spec.prefix}_core; stat", cwd)
    counts = cell_counts(log)
    luts, ffs = totals(counts)
    rams = brams(counts)
    if not place:
        return Synthesis("ice40", luts, ffs, brams=rams, note="nextpnr not run")
    missing = tools_missing("ice40-pnr")
    if missing:
        return Synthesis("ice40", luts, ffs, brams=rams, note=f"fmax: {missing}")
    if luts > ICE40_LUTS - 400 or rams > ICE40_BRAMS:
        return Synthesis("ice40", luts, ffs, brams=rams, note="fmax: larger than an iCE40 HX8K")
    (cwd / "fmax_top.v").write_text(harness(spec))
    run_yosys(f"read_verilog {reads} fmax_top.v; synth_ice40 -top fmax_top -json fmax.json", cwd)
    r = subprocess.run(["nextpnr-ice40", ICE40_DEVICE[0], "--package", ICE40_DEVICE[1], "--json", "fmax.json",
                        "--freq", "50", "--seed", "1", "--pcf-allow-unconstrained", "--timing-allow-fail"],
                       cwd=cwd, capture_output=True, text=True, timeout=YOSYS_TIMEOUT)
    found = re.findall(r"Max frequency for clock\s+'[^']*':\s+([\d.]+) MHz", r.stderr)
    if r.returncode or not found:
        return Synthesis("ice40", luts, ffs, brams=rams, note="fmax: nextpnr-ice40 failed")
    return Synthesis("ice40", luts, ffs, fmax_mhz=float(found[-1]), brams=rams)


def ecp5(sources: list[Path], spec: HdlSpec, cwd: Path) -> Synthesis:
    """Lattice ECP5 LUT4s, flip-flops and block RAMs; no fmax: Debian 12 packages no nextpnr-ecp5.
    -nowidelut: ABC's default ECP5 mapping builds LUT5-7s from LUT4s and muxes for speed, which
    triples the LUT4s of an XOR-heavy core; an area figure wants plain LUT4s."""
    reads = " ".join(p.name for p in sources)
    counts = cell_counts(run_yosys(f"read_verilog {reads}; synth_ecp5 -nowidelut -top {spec.prefix}_core; stat",
                                   cwd))
    luts, ffs = totals(counts)
    return Synthesis("ecp5", luts, ffs, brams=brams(counts), note="fmax: no nextpnr-ecp5 flow")


def synthesize(spec: HdlSpec, files: dict[str, str], flows: tuple[str, ...] = FLOWS,
               place: bool = True) -> list[Synthesis]:
    """The core (`files` as `generate` returns them; testbenches left out) through each flow."""
    missing = tools_missing("yosys")
    if missing:
        return [Synthesis(flow, note=missing) for flow in flows]
    with tempfile.TemporaryDirectory(prefix="aesgen-hdl-") as tmp:
        cwd = Path(tmp)
        sources = []
        for name, text in files.items():
            if not name.startswith("tb_"):
                (cwd / name).write_text(text)
                sources.append(cwd / name)
        results = []
        for flow in flows:
            if flow == "ice40":
                results.append(ice40(sources, spec, cwd, place))
            elif flow == "ecp5":
                results.append(ecp5(sources, spec, cwd))
            else:
                results.append(generic(sources, f"{spec.prefix}_core", int(flow.removeprefix("lut")), cwd))
        return results


def sbox_area(name: str, text: str) -> tuple[Synthesis, Synthesis]:
    """One S-box module alone through the generic LUT6 and LUT4 flows."""
    missing = tools_missing("yosys")
    if missing:
        return Synthesis("lut6", note=missing), Synthesis("lut4", note=missing)
    with tempfile.TemporaryDirectory(prefix="aesgen-hdl-") as tmp:
        path = Path(tmp) / f"{name}.v"
        path.write_text(text)
        return generic([path], name, 6, Path(tmp)), generic([path], name, 4, Path(tmp))
