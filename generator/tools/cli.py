"""The `aesgen` command line."""
from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

import click
from rich.console import Console
from rich.progress import Progress

from .. import __version__
from ..bench import ceiling as ceiling_mod
from ..bench import timing
from ..bench.timing import OPS_BY_MODE, PEERS, bench as run_bench
from ..circuits.compile import DEFAULT_TRIES
from ..circuits.report import report_rows
from ..config import ConfigError, parse_modes
from ..cpu import MASK_ENV, PORTABILITY_MASKS, MaskError, mask_note, missing_features, parse_mask
from ..cpu import view as cpu_view
from ..doubling import METHODS as DOUBLING_METHODS
from ..dsl import BuildError
from ..garbling.bench import run_bench as bench_halfgates
from ..kernels import build_function
from ..pipeline import generate as generate_kernel
from ..simulate import Machine, call
from ..spec import ABIS, BACKENDS, GFMULS, MODES, WIDTHS_BY_ISA, KernelSpec, mode_of
from ..target import TargetError, load
from ..verify import signatures, verify_kernel
from ..verify.results import NOT_RUN_EXIT, not_run
from . import explore as exploration, explore_gfdouble, explore_hdl, explore_model, tune as tuning
from .export import choose, parse_export_modes, render
from .report import (console, print_bench, print_ceiling, print_circuits, print_doubling_exploration,
                     print_exploration, print_limits, print_round_counts, print_targets,
                     print_tuning, print_verification)
from .files import UsageFailure, require_writable, write_atomically
from . import ledger
from . import probe as probing
from .hdl import hdl as hdl_command
from .options import check_format, config_options, dropin_options, generate_files, note, spec_from_options

err = Console(stderr=True, highlight=False)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="aesgen")
@click.option("--cpu-mask", metavar="FEATURES", default=None,
              help=f"Behave as on a CPU without these features (comma list as /proc/cpuinfo spells them, "
                   f"e.g. avx512f,gfni; features that depend on them go too). Sets {MASK_ENV} for aesgen's "
                   "view of the CPU: native detection, list, verify's can-run decisions, tune, bench, explore. "
                   "Generated cpu_supported() still reads CPUID.")
def main(cpu_mask: str | None) -> None:
    """aesgen: generate tuned, verified x86-64 AES kernels as drop-in .S + .h files."""
    if cpu_mask is not None:
        os.environ[MASK_ENV] = cpu_mask
    try:
        parse_mask(os.environ.get(MASK_ENV, ""))
    except MaskError as e:
        raise UsageFailure(str(e)) from None


@main.command(help=f"""Generate MODES (a comma list of: {', '.join(MODES)}) into FILE.S and FILE.h.

    With neither --isa nor --target the file is for this CPU (--target native; one line on
    stderr says what was chosen), and a warning follows if the file cannot run here.

    Examples: aesgen generate ecb,ctr32,cbc --isa avx512 --width 512 --depth 8 -o out/aes.S;
    aesgen generate ctr32 --target skylake -o skl.S
    """)
@click.argument("modes")
@config_options
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="The .S file to write; FILE.h is written next to it.")
def generate(modes: str, output: Path, **config) -> None:
    spec = spec_from_options(modes, **config)
    asm, header = generate_files(spec, output)
    console.print(f"wrote {asm} and {header} ({spec.prefix}, {', '.join(spec.functions)})")
    lacking = missing_features(spec.features)
    if lacking:
        note(f"warning: {asm} cannot run on this CPU (it lacks {' '.join(lacking)}{mask_note()}); "
             "`aesgen verify` cannot execute it here")


@main.command()
@click.argument("what", metavar="FILE.S|MODES")
@config_options
@click.option("--quick", is_flag=True, help="Fewer random trials and shorter lengths.")
@click.option("--seed", type=int, default=1, show_default=True, help="Seed of the random tests.")
@click.option("-v", "--verbose", is_flag=True, help="List every check, not only failures.")
@click.option("--allow-skips", is_flag=True,
              help=f"Exit 0 even if checks could not run because this CPU lacks a feature (default: exit "
                   f"{NOT_RUN_EXIT}).")
def verify(what: str, quick: bool, seed: int, verbose: bool, allow_skips: bool, **config) -> None:
    """Run the whole verification suite on a kernel.

    The argument is a generated .S file, or MODES to generate with the config flags
    first (e.g. `aesgen verify ctr32 --isa avx2 --depth 4`). Ends with the line
    `N passed, M failed`, then, if this CPU could not run some checks, `N checks NOT RUN: CPU
    lacks ...`. Exit codes: 0 every check ran and passed; 1 a check failed; 2 usage error;
    3 no failure but checks NOT RUN (0 with --allow-skips).
    """
    with tempfile.TemporaryDirectory(prefix="aesgen-verify-") as tmp:
        if looks_like_file(what):
            path = Path(what)
            if not path.is_file():
                raise UsageFailure(f"no such file '{what}'")
            try:
                spec = KernelSpec.from_asm(path)
            except (ValueError, UnicodeDecodeError) as e:
                raise UsageFailure(f"{what}: not a file aesgen generated ({e})" if isinstance(e, UnicodeDecodeError)
                                   else str(e)) from None
        else:
            spec = spec_from_options(what, **config)
            path, _ = generate_files(spec, Path(tmp) / f"{spec.prefix}.S")
        console.print(f"verifying {spec.prefix}: {', '.join(spec.modes)} on {spec.isa}/{spec.width}, "
                      f"depth {spec.depth}" + ("".join(f"; {m} {w}-bit x depth {d}" for m, w, d in spec.overrides)))
        results = verify_kernel(path, spec, quick=quick, seed=seed)
    print_verification(results, verbose)
    failed = sum(r.status == "fail" for r in results)
    skipped, lacking = not_run(results)
    sys.exit(1 if failed else NOT_RUN_EXIT if skipped and not allow_skips else 0)


def looks_like_file(what: str) -> bool:
    """A path (FILE.S, or anything with a folder or a dot in it: no mode name has one) rather
    than a MODES list."""
    return what.endswith(".S") or os.path.sep in what or "." in what


@main.command()
@click.option("--target", "-t", default="native", show_default=True,
              help="native (this CPU, tuned results where `aesgen tune` saved some) or a target name.")
@click.option("-o", "--output", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="The folder to write (created if missing).")
@click.option("--abi", type=click.Choice(ABIS), default="sysv", show_default=True,
              help="Calling convention of every file: sysv, or win64 (Microsoft x64).")
@click.option("--modes", default=None, metavar="MODES",
              help=f"Comma list of families to export (default: all: {','.join(MODES)}).")
@click.option("--verify", "run_verify", is_flag=True,
              help="Run `aesgen verify --quick` on every file first and record the results in README.md.")
@dropin_options
def export(target: str, output: Path, abi: str, modes: str | None, run_verify: bool, **dropin) -> None:
    """Write one .S + .h per kernel family for a target, a Makefile, a C smoke test and README.md.

    `make -C DIR` builds libaesgen.a; `make -C DIR check` runs known answers through the headers.
    Example: aesgen export --target native -o vendor/aes --abi win64
    """
    check_format(abi, dropin["object_format"])
    try:
        mode_list = parse_export_modes(modes)
        families = choose(target, mode_list, abi, dropin)
    except (ConfigError, TargetError, BuildError) as e:
        raise UsageFailure(str(e)) from None
    if output.exists() and not output.is_dir():
        raise UsageFailure(f"'{output}' exists and is not a folder")
    try:
        files = render(families, target, abi, mode_list, run_verify, dropin)
    except BuildError as e:
        raise UsageFailure(str(e)) from None
    if run_verify:
        failed = []
        with tempfile.TemporaryDirectory(prefix="aesgen-export-") as tmp:
            for f in families:
                path = Path(tmp) / f"{f.stem}.S"
                path.write_text(files[path.name], encoding="utf-8")
                results = verify_kernel(path, f.spec, quick=True)
                counts = {s: sum(r.status == s for r in results) for s in ("pass", "fail", "skip")}
                f.verified = f"{counts['pass']} passed, {counts['fail']} failed, {counts['skip']} skipped"
                console.print(f"verified {f.stem}: {f.verified}")
                failed += [f.stem] if counts["fail"] else []
        if failed:
            raise click.ClickException(f"verification failed for {', '.join(failed)}; nothing written")
        files = render(families, target, abi, mode_list, run_verify, dropin)
    created = [p for p in (output, *output.parents) if not p.exists()]  # deepest first (made once verified)
    try:
        output.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageFailure(f"cannot create folder '{output}': {e.strerror or e}") from None
    try:
        write_atomically({output / name: text for name, text in sorted(files.items())})
    except UsageFailure:
        for folder in created:  # the folders this run made, if still empty
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise
    console.print(f"wrote {len(files)} files to {output}: {', '.join(f.stem for f in families)}; "
                  f"run `make -C {output} check`")


@main.command(name="list")
def list_() -> None:
    """Print modes, ISAs, widths and depths, and which of them this CPU can run."""
    print_limits()


@main.command(name="targets")
def targets_() -> None:
    """List the target microarchitectures, what the model picks for each, and this CPU's match."""
    print_targets()


@main.command()
@click.argument("function")
@click.option("--key", "key_hex", required=True, help="AES key, hex (16, 24 or 32 bytes).")
@click.option("--in", "in_hex", default="", help="Input, hex (whole blocks, but for ctr32).")
@click.option("--iv", "iv_hex", default=None, help="The iv or counter block, hex (16 bytes).")
@config_options
def simulate(function: str, key_hex: str, in_hex: str, iv_hex: str | None, **config) -> None:
    """Run a kernel description in the DSL's reference semantics (no CPU needed).

    FUNCTION is a block-cipher function (ecb_encrypt, ctr32_encrypt, cbc_decrypt...: the
    `block` family of the function registry). Example:
    aesgen simulate ctr32_encrypt --key 2b7e1516...  --iv f0f1...ff --in 6bc1bee2...
    """
    sig = signatures.lookup(function)
    if sig is None or sig.family != signatures.BLOCK:
        raise UsageFailure(f"simulate cannot run '{function}'; it runs the block-cipher functions: "
                           f"{', '.join(signatures.in_family(signatures.SIGNATURES, signatures.BLOCK))}")
    spec = spec_from_options(mode_of(function), **config, default_native=False)
    if spec.abi != "sysv":
        raise UsageFailure("simulate runs the SysV kernel description; --abi changes only the wrapper")
    try:
        key, data = bytes.fromhex(key_hex), bytes.fromhex(in_hex)
        chain = bytes.fromhex(iv_hex) if iv_hex is not None else bytes(16)
    except ValueError:
        raise UsageFailure("--key, --in and --iv take hex strings") from None
    if len(key) not in (16, 24, 32):
        raise UsageFailure(f"key is {len(key)} bytes; AES takes 16, 24 or 32")
    if len(chain) != 16:
        raise UsageFailure("--iv must be 16 bytes")
    if not sig.bytewise and len(data) % 16:
        raise UsageFailure(f"{function} takes whole 16-byte blocks")
    m = Machine(spec)
    ka, sched = m.alloc(key), m.alloc(spec.key_bytes)
    call(m, build_function(spec, sig.key_setup), ka, len(key) * 8, sched)
    ia, oa, ca = m.alloc(data), m.alloc(max(len(data), 1)), m.alloc(chain)
    count = len(data) if sig.bytewise else len(data) // 16
    call(m, build_function(spec, function), sched, ia, oa, count, *([ca] if sig.chain else []))
    click.echo(f"out: {m.read(oa, len(data)).hex()}")  # plain echo: one line, never wrapped
    if sig.chain:
        click.echo(f"{sig.chain}: {m.read(ca, 16).hex()}")


def parse_sizes(text: str) -> list[int]:
    try:
        sizes = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UsageFailure(f"--sizes '{text}': expected a comma list of byte counts") from None
    if not sizes or any(s <= 0 or s % 16 for s in sizes):
        raise UsageFailure("--sizes: positive multiples of 16 (ECB and CBC take whole blocks)")
    return sizes


@main.command()
@click.argument("modes", required=False)
@config_options
@click.option("--sizes", default="16,64,256,1024,4096,16384", show_default=True, help="Message sizes in bytes.")
@click.option("--compare", default="openssl,ipsec-mb", show_default=True,
              help="Peers, sampled in turn with aesgen: openssl, ipsec-mb, openssl-noaesni (OpenSSL with "
                   "AES-NI masked off, in a process of its own; the peer for --backend gfni), boringssl, awslc "
                   "(BoringSSL, AWS-LC: built by `make peers`, else n/a; output checked against aesgen's "
                   "before timing) (empty for none).")
@click.option("--key-bits", type=click.Choice(["128", "192", "256"]), default="128", show_default=True)
@click.option("--trials", type=int, default=31, show_default=True,
              help="Samples per size and implementation in each round (rounds go on until every median is known "
                   "to ±2%, or --budget).")
@click.option("--budget", type=float, default=timing.BUDGET, show_default=True,
              help="Seconds of sampling for all functions (0: one round).")
@click.option("--ceiling", "show_ceiling", is_flag=True, help="Measure and print the instruction ceiling.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the results as JSON (schema aesgen-bench/1).")
@click.option("--no-verify", is_flag=True, help="Skip the quick verification before timing.")
@click.option("--all", "all_modes", is_flag=True,
              help="Every mode this CPU runs (--target native) at 256 B, 1 KiB and 16 KiB against every peer "
                   "(unless --sizes / --compare say otherwise); on an AVX-512 CPU also the 16-register kernels "
                   "(--isa avx2 --width 256, --isa avx --width 128).")
@click.option("--out-offset", type=click.IntRange(0, 4095), default=timing.OUT_OFFSET, show_default=True,
              help="Where the output buffer sits: this many bytes past the input's offset within a 4 KiB page, "
                   "for every implementation (0: the same offset within a page). A small offset makes a loop's "
                   "next loads share their low 12 address bits with its latest stores (4 KiB aliasing): try "
                   "192 to see which kernels feel it.")
@click.option("--record", "record_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="With --all: write the ledger DIR/<cpu-signature>.md (figures, peers, ceilings, goals, the "
                   "command, the date, the CPU).")
def bench(modes: str | None, sizes: str, compare: str, key_bits: str, trials: int, budget: float,
          show_ceiling: bool, json_path: Path | None, no_verify: bool, all_modes: bool, out_offset: int,
          record_dir: Path | None, **config) -> None:
    """Time kernels against OpenSSL, intel-ipsec-mb, BoringSSL and AWS-LC, one call per message.

    Examples: aesgen bench --ceiling; aesgen bench ctr32 --target native --compare openssl,ipsec-mb;
    aesgen bench ocb,otr --isa avx512 --width 512 --depth 4;
    aesgen bench ctr32 --backend gfni --isa avx512 --width 512 --depth 4 --compare openssl-noaesni;
    aesgen bench --all --record docs/perf/
    """
    if all_modes and modes is not None:
        raise UsageFailure("--all benchmarks every mode: give MODES or --all, not both")
    if record_dir is not None and not all_modes:
        raise UsageFailure("--record writes the ledger of a --all run: add --all")
    if modes is None and not show_ceiling and not all_modes:
        raise UsageFailure("give MODES to benchmark, --all, or --ceiling")
    explicit = {k for k in ("sizes", "compare") if click.get_current_context().get_parameter_source(k).name
                != "DEFAULT"}
    if all_modes:
        sizes = sizes if "sizes" in explicit else ",".join(map(str, ledger.SIZES))
        compare = compare if "compare" in explicit else ",".join(ledger.LEDGER_PEERS)
    require_writable(json_path)
    if record_dir is not None:
        require_writable(record_dir / "ledger.md", create_folder=True)
    peers = tuple(p for p in compare.split(",") if p)
    for p in peers:
        if p not in PEERS:
            raise UsageFailure(f"unknown peer '{p}'; choose from {', '.join(PEERS)}")
    size_list = parse_sizes(sizes)
    ceiling = ceiling_mod.measure()
    if show_ceiling:
        print_ceiling(ceiling)
    if modes is None and not all_modes:
        if json_path:
            write_atomically({json_path: json.dumps({"schema": "aesgen-ceiling/1", **ceiling.to_dict()}, indent=1)})
        return

    if modes == "halfgates":  # gates, not bytes: its own rows (aesgen.garbling.bench)
        spec = spec_from_options(modes, **config)
        verified_here(spec, no_verify)
        bench_halfgates(spec, ceiling, trials, console, json_path)
        return

    def timed(spec: KernelSpec, bits: int | None = None, sizes: tuple[int, ...] | None = None) -> timing.BenchResult:
        result = bench_spec(spec, list(sizes or size_list), peers, bits or int(key_bits), trials, budget, ceiling,
                            no_verify, out_offset)
        print_bench(spec, result)
        return result

    if not all_modes:
        result = timed(spec_from_options(modes, **config))
        if json_path:
            write_atomically({json_path: json.dumps(result.to_json(), indent=1)})
            console.print(f"wrote {json_path}")
        return
    sections = []
    for plan in ledger_plans(config):
        console.print(f"[bold]{plan.title}[/bold]: {plan.command}")
        with cpu_view(plan.cpu_mask):
            sections.append(ledger.Section(plan, timed(plan.spec, plan.key_bits, plan.sizes)))
    if json_path:
        write_atomically({json_path: json.dumps([s.result.to_json() for s in sections], indent=1)})
        console.print(f"wrote {json_path}")
    if record_dir is not None:
        machine = ledger.this_machine()
        mca = ledger.mca_rows() if sections[0].plan.spec.isa == "avx512" else []  # no AVX2-only peer path here
        path = ledger.record(record_dir, machine, sections, "aesgen " + " ".join(sys.argv[1:]), mca)
        console.print(f"wrote {path}")


def ledger_plans(config: dict) -> list[ledger.Plan]:
    """The sections of a --all run: every mode native builds, AES-256 GCM and XTS against the
    peers, then on an AVX-512 CPU the 16-register kernels and GCM under the AVX2 view."""
    config = {k: v for k, v in config.items() if k not in ("isa", "width", "depth", "target")}
    runnable = tuple(m for m, ops in OPS_BY_MODE.items() if ops and buildable(m))
    native = spec_from_options(",".join(runnable), target="native", **config)
    aes256 = spec_from_options(",".join(ledger.AES256_MODES), target="native", **config)
    out = ledger.plans(native, runnable, aes256)
    for title, isa, width in ledger.register16_specs(native.isa):
        modes = ",".join(ledger.REGISTER16_MODES)
        # this core's model at 16 registers: its depths, the ones measured here included
        spec = spec_from_options(modes, target="native", isa=isa, width=width, **config)
        out.append(ledger.Plan(title, f"aesgen bench {modes} --target native --isa {isa} --width {width}", spec,
                               ledger.REGISTER16_GOALS))
    if native.isa == "avx512":
        mask = PORTABILITY_MASKS["avx2-vaes"]
        with cpu_view(mask):
            out += ledger.avx2_view_plans(spec_from_options("gcm", target="native", **config), mask)
    return out


def buildable(mode: str) -> bool:
    """The mode builds for this CPU (--target native) and the CPU can run it."""
    try:
        spec = spec_from_options(mode, target="native", default_native=False)
        generate_kernel(spec)
    except (UsageFailure, BuildError):
        return False
    return not missing_features(spec.features)


def verified_here(spec: KernelSpec, no_verify: bool) -> None:
    """Refuse a file this CPU cannot run; quick-verify it (unless no_verify) before it is timed."""
    if spec.abi != "sysv":
        raise UsageFailure(f"bench times SysV kernels; --abi {spec.abi} files are verified, not benchmarked")
    lacking = missing_features(spec.features)
    if lacking:
        raise UsageFailure(f"this CPU cannot run {spec.prefix} (it lacks {' '.join(lacking)}{mask_note()})")
    if no_verify:
        return
    with tempfile.TemporaryDirectory(prefix="aesgen-bench-") as tmp:
        path, _ = generate_files(spec, Path(tmp) / f"{spec.prefix}.S")
        failed = [r for r in verify_kernel(path, spec, quick=True) if r.status == "fail"]
    if failed:
        raise click.ClickException(f"{len(failed)} verification checks failed ({failed[0].name}); "
                                   "not benchmarking a wrong kernel")


def bench_spec(spec: KernelSpec, sizes: list[int], peers: tuple[str, ...], key_bits: int, trials: int,
               budget: float, ceiling, no_verify: bool, out_offset: int = timing.OUT_OFFSET) -> timing.BenchResult:
    """Generate, quick-verify and time one file's functions."""
    if spec.abi != "sysv":
        raise UsageFailure(f"bench times SysV kernels; --abi {spec.abi} files are verified, not benchmarked")
    lacking = missing_features(spec.features)
    if lacking:
        raise UsageFailure(f"this CPU cannot run {spec.prefix} (it lacks {' '.join(lacking)}{mask_note()}); "
                           "bench measures, so choose what runs here (--target native)")
    if spec.hidden or spec.object_format != "elf":  # what the harness can load: the same instructions
        spec = replace(spec, hidden=False, object_format="elf")
        console.print("timing the ELF build with exported symbols (--hidden and --format change symbols and "
                      "directives, not instructions)")
    ops = [op for m in spec.modes for op in OPS_BY_MODE[m]]
    if not ops:
        raise UsageFailure(f"bench times none of {', '.join(spec.modes)}; it times "
                           f"{', '.join(m for m, timed in OPS_BY_MODE.items() if timed)}")
    with tempfile.TemporaryDirectory(prefix="aesgen-bench-") as tmp:
        path, _ = generate_files(spec, Path(tmp) / f"{spec.prefix}.S")
        if not no_verify:
            failed = [r for r in verify_kernel(path, spec, quick=True) if r.status == "fail"]
            if failed:
                raise click.ClickException(f"{len(failed)} verification checks failed ({failed[0].name}); "
                                           "not benchmarking a wrong kernel")
        return run_bench(spec, path, ops=ops, sizes=sizes, peers=peers, key_bits=key_bits,
                         trials=trials, ceiling=ceiling, budget=budget, out_offset=out_offset)


def parse_range(text: str) -> list[int]:
    out: list[int] = []
    try:
        for part in text.split(","):
            lo, _, hi = part.partition("-")
            out.extend(range(int(lo), int(hi or lo) + 1))
    except ValueError:
        raise UsageFailure(f"'{text}': expected numbers and ranges like 1-16 or 1,2,4,8") from None
    return sorted(set(out))


@main.command()
@click.argument("mode")
@click.option("--widths", default="128,256,512", show_default=True, help="Widths to explore (comma list).")
@click.option("--depths", default=None, help="Depths to explore (ranges allowed) [default: 1-16; gfdouble: 1,2,4,8].")
@click.option("--target", "-t", default="native", show_default=True,
              help="native measures on this CPU; another target is predicted with llvm-mca (a model).")
@click.option("--sizes", default=None,
              help="SHORT[,SHORT...],BULK message sizes: short-message cycles and bulk throughput "
                   "[default: 256,16384; gcm: 256,1024,16384].")
@click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path), default=None)
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False, path_type=Path), default=None)
@click.option("--methods", default=",".join(DOUBLING_METHODS), show_default=True,
              help="xts and gfdouble: the doubling methods to explore (comma list).")
@click.option("--blocks", type=int, default=None,
              help="gfdouble: doublings (16-byte blocks) per timed call [default: 4096].")
@click.option("--backend", default=None,
              help="Kernel family every config is generated with (as for generate), e.g. gfni "
                   "[default: aesni; on a CPU without AES-NI, what runs there].")
@click.option("--model", "port_model", is_flag=True,
              help="Also predict every point with the port model (docs/costmodel.md) and print it next to the "
                   "measurement (or llvm-mca), the knees and their rank correlation.")
@click.option("--budget", type=float, default=exploration.BUDGET, show_default=True,
              help="Seconds of sampling: rounds over every config until each median is known to ±2% (0: one round).")
@click.option("--gfmul", "gfmuls", default="", metavar="LIST", help=f"ghash, polyval, gcm: compare GF(2^128) "
              f"multiply methods ({', '.join(GFMULS)}; comma list) instead of the two product forms.")
@click.option("--isa", default=None, help=f"Build every width for this ISA ({', '.join(WIDTHS_BY_ISA)}), e.g. avx2 "
              "for the 16-register kernels on an AVX-512 CPU [default: the target's widest ISA for each width].")
@click.option("--ecp5", is_flag=True, help="hdl: also synthesize every core with Yosys synth_ecp5 (ECP5 LUT4s; slower).")
def explore(mode: str, widths: str, depths: str | None, target: str, sizes: str | None, json_path: Path | None,
            plot_path: Path | None, methods: str, blocks: int | None, backend: str, port_model: bool,
            budget: float, gfmuls: str, isa: str | None, ecp5: bool) -> None:
    """Interleave depth vs throughput and latency, per width, for MODE.

    MODE is ecb, ctr32, cbc, or ghash/polyval/gcm (both product variants; aggregation
    k = lanes x depth), or xts (xts_encrypt, one variant per doubling method). gcm times
    gcm_encrypt: AES-128, 12-byte IV, no AAD. gfdouble measures cycles per GF(2^128)
    doubling for every method x ISA width x depth this CPU runs (measured only). hdl
    synthesizes the Verilog cores of `aesgen hdl` (AES-128, architecture x S-box) with Yosys
    and nextpnr-ice40 and tabulates area x throughput.

    Example: aesgen explore ctr32 --widths 128,256,512 --depths 1-16 --plot out/ctr.png --json out/ctr.json;
    aesgen explore ctr32 --backend gfni --widths 256,512 --depths 1-8
    """
    if mode == "hdl":
        require_writable(json_path, plot_path)
        explore_cores(json_path, plot_path, ecp5)
        return
    try:
        parse_modes(mode)
        t = load(target)
    except (ConfigError, TargetError) as e:
        raise UsageFailure(str(e)) from None
    method_list = tuple(m for m in methods.split(",") if m)
    unknown = [m for m in method_list if m not in DOUBLING_METHODS]
    if unknown or not method_list:
        raise UsageFailure(f"--methods '{methods}': choose from {', '.join(DOUBLING_METHODS)}")
    require_writable(json_path, plot_path)
    if backend is None:
        backend = t.backend_for((mode,)) if target == "native" and mode in MODES else "aesni"
    if backend not in BACKENDS:
        raise UsageFailure(f"unknown backend '{backend}'; choose from {', '.join(BACKENDS)}")
    if mode == "gfdouble":
        if target != "native" or sizes is not None or backend != "aesni":
            raise UsageFailure("explore gfdouble measures this CPU's doublings: no --target other than native, "
                               "no --sizes (use --blocks), no --backend (it runs no AES)")
        explore_doubling(parse_range(widths), parse_range(depths or "1,2,4,8"), method_list, blocks or 4096,
                         json_path, plot_path)
        return
    if blocks is not None:
        raise UsageFailure("--blocks applies to explore gfdouble only")
    if isa is not None and isa not in WIDTHS_BY_ISA:
        raise UsageFailure(f"unknown --isa '{isa}'; choose from {', '.join(WIDTHS_BY_ISA)}")
    if mode not in exploration.OP_FOR_MODE:
        raise UsageFailure(f"explore takes one mode: {', '.join([*exploration.OP_FOR_MODE, 'gfdouble'])}")
    size_list = sorted(set(parse_sizes(sizes) if sizes else exploration.DEFAULT_SIZES.get(mode, exploration.FALLBACK_SIZES)))
    shorts, bulk = tuple(size_list[:-1] or size_list), size_list[-1]
    width_list, depth_list = parse_range(widths), parse_range(depths or "1-16")
    measure = target == "native"
    if not measure and mode not in exploration.MODELLED_MODES:
        raise UsageFailure(f"explore {mode} has no model for --target {target} (its main loop is not one batch); "
                           f"it measures this CPU: --target native")
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task(f"explore {mode} on {t.name}", total=None)
        result = exploration.explore(mode, t, width_list, depth_list, bulk=bulk, short=shorts, measure=measure,
                            progress=lambda s: progress.update(task, description=s), methods=method_list,
                            backend=backend, budget=budget, gfmuls=exploration.gfmul_methods(gfmuls, mode, backend),
                            isa=isa)
    print_exploration(result)
    if port_model:
        try:
            explore_model.print_comparison(result, explore_model.annotate(result, t), console)
        except BuildError as e:
            raise UsageFailure(f"--model: {e}") from None
    if backend == "bitsliced":
        print_round_counts(mode, t.isa, sorted({(p.width, p.depth) for p in result.points
                                                if p.status not in ("infeasible", "unsupported")}))
    write_exploration(exploration, result, json_path, plot_path)


def explore_cores(json_path: Path | None, plot_path: Path | None, ecp5: bool = False) -> None:
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("explore hdl", total=None)
        result = explore_hdl.explore(progress=lambda s: progress.update(task, description=s), ecp5=ecp5)
    for table in explore_hdl.tables(*result, bits=128):
        console.print(table)
    write_exploration(explore_hdl, result, json_path, plot_path)


def write_exploration(module, result, json_path: Path | None, plot_path: Path | None) -> None:
    """The JSON and the plot, each by the exploring module's own writer into a private folder,
    then written in place atomically."""
    wanted = {path: writer for path, writer in ((json_path, module.write_json), (plot_path, module.plot)) if path}
    with tempfile.TemporaryDirectory(prefix="aesgen-") as tmp:
        staged = {path: Path(tmp) / f"{i}{path.suffix}" for i, path in enumerate(wanted)}
        for path, writer in wanted.items():
            writer(result, staged[path])
        write_atomically({path: staged[path].read_bytes() for path in wanted})
    for path in wanted:
        console.print(f"wrote {path}")


def explore_doubling(widths: list[int], depths: list[int], methods: tuple[str, ...], blocks: int,
                     json_path: Path | None, plot_path: Path | None) -> None:
    if blocks < 1:
        raise UsageFailure("--blocks must be positive")
    if not explore_gfdouble.configs(widths, methods):
        raise UsageFailure(f"--widths: explore gfdouble runs at {', '.join(map(str, sorted({w for _, w in explore_gfdouble.ISA_WIDTHS})))}")
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("explore gfdouble", total=None)
        result = explore_gfdouble.explore_doubling(widths, depths, methods=methods, blocks=blocks,
                                     progress=lambda s: progress.update(task, description=s))
    print_doubling_exploration(result)
    write_exploration(explore_gfdouble, result, json_path, plot_path)


@main.command()
@click.argument("modes")
@config_options
@click.option("--key-bits", type=click.Choice(["128", "192", "256"]), default="128", show_default=True,
              help="The key size whose path through the loop is timed.")
def probe(modes: str, key_bits: str, **config) -> None:
    """Time the main loop of each of MODES' functions by itself on this CPU.

    The loop body runs with its pointers held still and zero data, as generated and with each
    port class of instructions left out, beside the AES+CLMUL bound and llvm-mca's model of the
    same text: where a loop loses against the bound, and which instructions cost it. Example:
    aesgen probe xts --isa avx2 --width 256
    """
    spec = spec_from_options(modes, **config)
    lacking = missing_features(spec.features)
    if lacking:
        raise UsageFailure(f"this CPU cannot run the {spec.isa} file: it lacks {' '.join(lacking)}{mask_note()}")
    try:
        probing.run(spec, int(key_bits))
    except BuildError as e:
        raise UsageFailure(str(e)) from None


@main.command()
@click.argument("modes")
@click.option("--target", "-t", default="native", show_default=True, help="Only native: tuning measures.")
@click.option("--budget", type=float, default=tuning.BUDGET, show_default=True,
              help="Seconds of sampling per mode (0: one round).")
def tune(modes: str, target: str, budget: float) -> None:
    """Measure the model's candidates on this CPU; save the best per mode for bulk and short messages.

    `aesgen generate MODES --target native --tuned [--profile short]` then uses the result.
    """
    if target != "native":
        raise UsageFailure("tune measures, so it needs --target native (explore --target T models others)")
    try:
        mode_list = parse_modes(modes)
        t = load(target)
    except (ConfigError, TargetError) as e:
        raise UsageFailure(str(e)) from None
    require_writable(tuning.tune_path(), create_folder=True)
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("tune", total=None)
        try:
            result = tuning.tune(t, mode_list, progress=lambda s: progress.update(task, description=s), budget=budget)
        except ConfigError as e:
            raise UsageFailure(str(e)) from None
    try:
        path = tuning.save(result)
    except OSError as e:
        raise UsageFailure(f"cannot save the tuning result to '{e.filename}': {e.strerror or e}") from None
    print_tuning(result, t.description)
    console.print(f"saved {path}")


@main.command()
@click.option("--registers", default="32,16", show_default=True,
              help="Vector register counts to compile for (comma list; each at least the circuit's 8 inputs).")
@click.option("--tries", type=int, default=None,
              help="Seeded greedy gate orders each pass tries besides the listed and the plain greedy one "
                   "[default: 128].")
@click.option("--listing", type=click.Choice(["three-operand", "two-operand", "ternlog"]), default=None,
              help="Also print that pass's programs.")
def circuits(registers: str, tries: int | None, listing: str | None) -> None:
    """S-box circuits: gates, ANDs and depth, and each compiler pass's instruction count.

    Passes: three-operand (AVX/AVX2; AVX-512 without ternlog), two-operand (SSE, against
    Käsper–Schwabe's 163 per S-box layer) and ternlog-fused (AVX-512 VPTERNLOGD). Every program
    is checked against its circuit on all 256 inputs before it is counted.
    """
    counts = parse_range(registers)
    if any(n < 8 for n in counts):
        raise UsageFailure("--registers: the S-box circuits need at least 8 registers (their inputs)")
    if tries is not None and tries < 0:
        raise UsageFailure("--tries: a count, 0 or more")
    rows = report_rows(tuple(sorted(counts, reverse=True)), DEFAULT_TRIES if tries is None else tries)
    print_circuits(rows, listing)

main.add_command(hdl_command)


def run() -> None:
    """Console entry point: usage errors are one line on stderr and exit code 2."""
    if len(sys.argv) < 2:
        sys.argv.append("--help")
    try:
        code = main(standalone_mode=False)
    except click.UsageError as e:
        # one line, with the refusing command's usage in it
        usage = f" ({e.ctx.get_usage().removeprefix('Usage: ')}; see --help)" if e.ctx is not None else ""
        click.echo(f"aesgen: error: {e.format_message()}{usage}", err=True)
        sys.exit(2)
    except click.ClickException as e:
        e.show()
        sys.exit(e.exit_code)
    except click.Abort:
        click.echo("aborted", err=True)
        sys.exit(1)
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    run()
