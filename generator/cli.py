"""The `aesgen` command line."""
from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from . import __version__
from .config import ConfigError, make_spec, parse_modes
from .cpu import missing_features
from .dsl import BuildError
from .spec import FEATURES_BY_ISA, ISAS, MAX_DEPTH, MODE_FUNCTIONS, MODES, WIDTHS_BY_ISA, KernelSpec

console = Console(highlight=False)
err = Console(stderr=True, highlight=False)


class UsageFailure(click.ClickException):
    """One clear line on stderr and exit code 2."""

    exit_code = 2

    def show(self, file=None) -> None:
        click.echo(f"aesgen: error: {self.message}", err=True)


def config_options(f):
    f = click.option("--prefix", default=None, help="Symbol prefix (a C identifier). "
                     "Default: aesgen_<backend>_<isa>_<width>x<depth>.")(f)
    f = click.option("--backend", default="aesni", show_default=True, help="Kernel family: aesni.")(f)
    f = click.option("--depth", "-d", type=int, default=8, show_default=True,
                     help=f"Independent block groups interleaved (1..{MAX_DEPTH}).")(f)
    f = click.option("--width", "-w", type=int, default=None,
                     help="Vector width in bits: 128, 256 or 512 (default: the ISA's widest).")(f)
    f = click.option("--isa", default="avx512", show_default=True, help=f"One of: {', '.join(ISAS)}.")(f)
    return f


def spec_from_options(modes: str, isa: str, width: int | None, depth: int, backend: str,
                      prefix: str | None) -> KernelSpec:
    try:
        return make_spec(parse_modes(modes), isa, width, depth, backend, prefix)
    except ConfigError as e:
        raise UsageFailure(str(e)) from None


def write_atomically(files: dict[Path, str]) -> None:
    """Write every file to a temporary name first; rename only when all are written."""
    temps: list[tuple[Path, Path]] = []
    try:
        for path, text in files.items():
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            temps.append((Path(tmp), path))
        for tmp, path in temps:
            os.replace(tmp, path)
    finally:
        for tmp, _ in temps:
            if tmp.exists():
                tmp.unlink()


def generate_files(spec: KernelSpec, output: Path) -> tuple[Path, Path]:
    from .pipeline import generate

    if output.suffix != ".S":
        raise UsageFailure(f"output '{output}' must end in .S (the .h is written next to it)")
    if not output.parent.is_dir():
        raise UsageFailure(f"output folder '{output.parent}' does not exist")
    try:
        kernel = generate(spec, output.name)
    except BuildError as e:
        raise UsageFailure(str(e)) from None
    header = output.with_suffix(".h")
    write_atomically({output: kernel.asm, header: kernel.header})
    return output, header


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="aesgen")
def main() -> None:
    """aesgen: generate tuned, verified x86-64 AES kernels as drop-in .S + .h files."""


@main.command()
@click.argument("modes")
@config_options
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="The .S file to write; FILE.h is written next to it.")
def generate(modes: str, isa: str, width: int | None, depth: int, backend: str, prefix: str | None,
             output: Path) -> None:
    """Generate MODES (comma list of ecb,ctr32,cbc) into FILE.S and FILE.h.

    Example: aesgen generate ecb,ctr32,cbc --isa avx512 --width 512 --depth 8 -o out/aes.S
    """
    spec = spec_from_options(modes, isa, width, depth, backend, prefix)
    asm, header = generate_files(spec, output)
    console.print(f"wrote {asm} and {header} ({spec.prefix}, {', '.join(spec.functions)})")


@main.command()
@click.argument("target")
@config_options
@click.option("--quick", is_flag=True, help="Fewer random trials and shorter lengths.")
@click.option("--seed", type=int, default=1, show_default=True, help="Seed of the random tests.")
@click.option("-v", "--verbose", is_flag=True, help="List every check, not only failures.")
def verify(target: str, isa: str, width: int | None, depth: int, backend: str, prefix: str | None,
           quick: bool, seed: int, verbose: bool) -> None:
    """Run the whole verification suite on a kernel.

    TARGET is a generated .S file, or MODES to generate with the config flags
    first (e.g. `aesgen verify ctr32 --isa avx2 --depth 4`). Ends with the line
    `N passed, M failed`; exits 1 on any failure.
    """
    from .verify import verify_kernel

    with tempfile.TemporaryDirectory(prefix="aesgen-verify-") as tmp:
        if target.endswith(".S") or os.path.sep in target:
            path = Path(target)
            if not path.is_file():
                raise UsageFailure(f"no such file '{target}'")
            try:
                spec = KernelSpec.from_asm(path)
            except ValueError as e:
                raise UsageFailure(str(e)) from None
        else:
            spec = spec_from_options(target, isa, width, depth, backend, prefix)
            path, _ = generate_files(spec, Path(tmp) / f"{spec.prefix}.S")
        console.print(f"verifying {spec.prefix}: {', '.join(spec.modes)} on {spec.isa}/{spec.width}, "
                      f"depth {spec.depth}")
        results = verify_kernel(path, spec, quick=quick, seed=seed)
    report(results, verbose)
    failed = sum(r.status == "fail" for r in results)
    sys.exit(1 if failed else 0)


def report(results, verbose: bool) -> None:
    shown = [r for r in results if verbose or r.status != "pass"]
    if shown:
        table = Table(show_header=True, header_style="bold")
        table.add_column("check")
        table.add_column("result")
        table.add_column("detail", overflow="fold")
        style = {"pass": "green", "fail": "bold red", "skip": "yellow"}
        for r in shown:
            table.add_row(r.name, f"[{style[r.status]}]{r.status}[/]", r.detail)
        console.print(table)
    skipped = sum(r.status == "skip" for r in results)
    if skipped:
        console.print(f"{skipped} skipped")
    passed = sum(r.status == "pass" for r in results)
    failed = sum(r.status == "fail" for r in results)
    console.print(f"{passed} passed, {failed} failed")


def max_feasible_depth(isa: str, width: int, mode: str) -> int:
    from .pipeline import generate

    for depth in range(MAX_DEPTH, 0, -1):
        try:
            generate(KernelSpec((mode,), isa, width, depth))
            return depth
        except BuildError:
            continue
    return 0


@main.command(name="list")
def list_() -> None:
    """Print modes, ISAs, widths and depths, and which of them this CPU can run."""
    console.print(f"modes: {', '.join(MODES)}  "
                  f"({'; '.join(f'{m}: ' + ', '.join(fs) for m, fs in MODE_FUNCTIONS.items())})")
    table = Table(title="ISA x width (depth 1..max; max limited by the register file)")
    table.add_column("isa")
    table.add_column("width")
    for m in MODES:
        table.add_column(f"max depth {m}")
    table.add_column("this CPU")
    for isa in ISAS:
        for width in WIDTHS_BY_ISA[isa]:
            missing = missing_features(FEATURES_BY_ISA[isa])
            runs = "[green]yes[/]" if not missing else f"[red]no (missing {' '.join(missing)})[/]"
            depths = [str(max_feasible_depth(isa, width, m)) for m in MODES]
            table.add_row(isa, str(width), *depths, runs)
    console.print(table)


@main.command()
@click.argument("function")
@click.option("--key", "key_hex", required=True, help="AES key, hex (16, 24 or 32 bytes).")
@click.option("--in", "in_hex", default="", help="Input, hex (whole blocks for ecb/cbc).")
@click.option("--iv", "iv_hex", default=None, help="CBC iv or CTR counter block, hex (16 bytes).")
@config_options
def simulate(function: str, key_hex: str, in_hex: str, iv_hex: str | None, isa: str, width: int | None,
             depth: int, backend: str, prefix: str | None) -> None:
    """Run a kernel description in the DSL's reference semantics (no CPU needed).

    FUNCTION is one of ecb_encrypt, ecb_decrypt, ctr32_encrypt, cbc_encrypt,
    cbc_decrypt. Example:
    aesgen simulate ctr32_encrypt --key 2b7e1516...  --iv f0f1...ff --in 6bc1bee2...
    """
    from .kernels import build_function
    from .simulate import Machine, call

    mode = next((m for m, fs in MODE_FUNCTIONS.items() if function in fs), None)
    if mode is None:
        raise UsageFailure(f"unknown function '{function}'; choose from "
                           f"{', '.join(f for fs in MODE_FUNCTIONS.values() for f in fs)}")
    spec = spec_from_options(mode, isa, width, depth, backend, prefix)
    try:
        key, data = bytes.fromhex(key_hex), bytes.fromhex(in_hex)
        chain = bytes.fromhex(iv_hex) if iv_hex is not None else bytes(16)
    except ValueError:
        raise UsageFailure("--key, --in and --iv take hex strings") from None
    if len(key) not in (16, 24, 32):
        raise UsageFailure(f"key is {len(key)} bytes; AES takes 16, 24 or 32")
    if len(chain) != 16:
        raise UsageFailure("--iv must be 16 bytes")
    if mode != "ctr32" and len(data) % 16:
        raise UsageFailure(f"{function} takes whole 16-byte blocks")
    m = Machine(spec)
    ka, sched = m.alloc(key), m.alloc(spec.key_bytes)
    setter = "set_decrypt_key" if function.endswith("decrypt") else "set_encrypt_key"
    call(m, build_function(spec, setter), ka, len(key) * 8, sched)
    ia, oa, ca = m.alloc(data), m.alloc(max(len(data), 1)), m.alloc(chain)
    count = len(data) if mode == "ctr32" else len(data) // 16
    call(m, build_function(spec, function), sched, ia, oa, count, ca)
    console.print(f"out: {m.read(oa, len(data)).hex()}")
    if mode != "ecb":
        console.print(f"{'ctr' if mode == 'ctr32' else 'iv'}: {m.read(ca, 16).hex()}")


if __name__ == "__main__":
    main()
