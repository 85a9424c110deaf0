"""`aesgen hdl`: write a core's Verilog files, and with --report its Yosys area figures."""
from __future__ import annotations

from pathlib import Path

import click
from rich.table import Table

from ..hdl import HdlConfigError, HdlSpec, generate
from ..hdl.spec import KEY_SCHEDULES, SBOX_CHOICES
from .explore_hdl import show
from ..verify.vectors import FIPS197_APPENDIX_C
from ..hdl.synth import Synthesis, synthesize
from .files import UsageFailure, write_atomically
from .report import console


def spec_from_options(bits: str, arch: str, sbox: str, stages_per_round: int, decrypt: bool,
                      key_schedule: str, ctr: bool, prefix: str) -> HdlSpec:
    try:
        return HdlSpec(int(bits), arch, sbox, prefix, stages_per_round=stages_per_round, decrypt=decrypt,
                       key_schedule=key_schedule, ctr=ctr)
    except HdlConfigError as e:
        raise UsageFailure(str(e)) from None


def core_files(spec: HdlSpec, output: Path) -> dict[Path, str]:
    """The core's files under `output`, the smoke testbench checking FIPS-197 Appendix C."""
    return {output / name: text for name, text in generate(spec, FIPS197_APPENDIX_C[spec.bits], str(output)).items()}


@click.command(name="hdl", help="""Write synthesizable Verilog-2005 of an AES core: DIR/P_core.v (the
    fixed interface), its submodules in DIR/P_*.v and a smoke testbench DIR/tb_P.v, from aesref's
    definitions and a circuit of the circuits library (or the S-box table).

    Example: aesgen hdl --bits 128 --arch iterative --sbox table --prefix aes -o rtl
    """)
@click.option("--bits", type=click.Choice(["128", "192", "256"]), default="128", show_default=True)
@click.option("--arch", default="iterative", show_default=True,
              help="iterative (a round a clock), pipelined (a block a clock) or unrolled-K (K rounds a clock).")
@click.option("--sbox", default="table", show_default=True, help=f"One of: {', '.join(SBOX_CHOICES)}.")
@click.option("--stages-per-round", type=int, default=1, show_default=True,
              help="Pipelined: 2 adds a register after SubBytes.")
@click.option("--decrypt", is_flag=True, help="A decryption core (the inverse cipher).")
@click.option("--key-schedule", type=click.Choice(KEY_SCHEDULES), default="on-the-fly", show_default=True,
              help="on-the-fly: a key step beside each round; loaded: round keys expanded once per key_load.")
@click.option("--ctr", is_flag=True, help="Also write a CTR wrapper.")
@click.option("--prefix", default="aes", show_default=True, help="Module and file name prefix P.")
@click.option("-o", "--output", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="The folder to write (created if missing).")
@click.option("--report", is_flag=True, help="Also synthesize with Yosys and print LUTs, FFs and logic depth.")
def hdl(bits: str, arch: str, sbox: str, stages_per_round: int, decrypt: bool, key_schedule: str, ctr: bool,
        prefix: str, output: Path, report: bool) -> None:
    spec = spec_from_options(bits, arch, sbox, stages_per_round, decrypt, key_schedule, ctr, prefix)
    if output.exists() and not output.is_dir():
        raise UsageFailure(f"cannot write '{output}': it is not a folder")
    output.mkdir(parents=True, exist_ok=True)
    files = core_files(spec, output)
    write_atomically(files)
    click.echo(f"wrote {len(files)} files to {output}: {', '.join(p.name for p in files)}")
    if report:
        print_report(spec, synthesize(spec, {p.name: t for p, t in files.items()}))


def print_report(spec: HdlSpec, runs: list[Synthesis]) -> None:
    table = Table(title=f"{spec.prefix}_core: AES-{spec.bits} {'decryption' if spec.decrypt else 'encryption'}, "
                        f"{spec.arch}, S-box {spec.sbox}, keys {spec.key_schedule}: latency {spec.latency()} "
                        f"clocks, {spec.clocks_per_block():g} clock(s) a block")
    for col in ("flow", "LUTs", "FFs", "BRAM", "LUT levels", "fmax MHz", "note"):
        table.add_column(col, justify="left" if col in ("flow", "note") else "right")
    names = {"lut6": "yosys synth -lut 6", "lut4": "yosys synth -lut 4", "ice40": "yosys synth_ice40 (LUT4)",
             "ecp5": "yosys synth_ecp5 -nowidelut (LUT4)"}
    for r in runs:
        table.add_row(names[r.flow], show(r.luts), show(r.ffs), str(r.brams), show(r.depth),
                      show(r.fmax_mhz, "{:.1f}"), r.note)
    console.print(table)
