"""`aesgen hdl`: write a core's Verilog files, and with --report its Yosys area figures."""
from __future__ import annotations

from pathlib import Path

import click

from ..hdl import HdlConfigError, HdlSpec, generate
from ..hdl.spec import KEY_SCHEDULES, SBOX_CHOICES
from ..verify.vectors import FIPS197_APPENDIX_C
from .files import UsageFailure, write_atomically


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
