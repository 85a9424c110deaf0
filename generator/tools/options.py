"""What the command line's options mean: the option groups the commands share, and the
KernelSpec a set of options describes (with --target, the model's or the tuning's choice)."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import click

from ..config import (ConfigError, default_depths_that_fit, gfmul_depth, make_spec, parse_modes, parse_per_mode,
                      target_spec, with_doubling, with_gfmul)
from ..doubling import METHODS as DOUBLING_METHODS
from ..dsl import BuildError
from ..model import backend_isa_width, bitsliced_depth
from ..perfmodel import port_table
from ..pipeline import generate as generate_kernel
from ..spec import ABIS, BITSLICED_MODES, GFMULS, ISAS, MAX_DEPTH, OBJECT_FORMATS, KernelSpec
from ..target import TargetError, load
from .files import UsageFailure, require_folder, write_atomically
from .report import native_summary
from .tune import load_tuned


def dropin_options(f):
    """How the file drops into a project (generate, verify, export...): its object format,
    its symbols' visibility, its use of the red zone."""
    f = click.option("--no-red-zone", "no_red_zone", is_flag=True,
                     help="SysV: no function touches memory below rsp (the red zone), for code that runs where "
                          "it is not kept (an OS kernel built with -mno-red-zone); the CTR tails move rsp instead.")(f)
    f = click.option("--format", "object_format", type=click.Choice(OBJECT_FORMATS), default="elf", show_default=True,
                     help="Object format the .S is written for: elf (Linux, the BSDs...) or macho (macOS: symbols "
                          "with a leading underscore, no ELF directives); SysV only.")(f)
    f = click.option("--hidden", is_flag=True,
                     help="Hidden symbols (ELF .hidden, Mach-O .private_extern): a shared library that links the "
                          "file does not export the kernels. COFF has no visibility: a DLL exports what a .def file "
                          "or dllexport names (MinGW ld: every global unless told --exclude-all-symbols).")(f)
    return f


def check_format(abi: str, object_format: str) -> None:
    """Mach-O is a SysV format (macOS); a win64 file is COFF (and ELF for testing)."""
    if object_format != "elf" and abi != "sysv":
        raise UsageFailure(f"--format {object_format} needs --abi sysv (macOS uses the SysV convention); "
                           f"--abi {abi} files are COFF for Windows (and ELF for testing)")


def config_options(f):
    f = click.option("--prefix", default=None, help="Symbol prefix (a C identifier). "
                     "Default: aesgen_<backend>_<isa>_<width>x<depth>, or aesgen_<target>.")(f)
    f = click.option("--backend", default=None,
                     help="Kernel family [default: aesni; on a target without AES-NI, gfni or bitsliced]: "
                          "aesni (AES-NI/VAES), gfni (AES from GF2P8AFFINEINVQB, no AES-NI) or "
                          f"bitsliced (logic ops and byte shuffles only; {', '.join(BITSLICED_MODES)}; depth = sets of 8 "
                          "bit-planes: 1, or 2 on avx512, the default there).")(f)
    f = click.option("--depth", "-d", type=int, default=None,
                     help=f"Independent block groups interleaved (1..{MAX_DEPTH}; default 8, lowered per mode to what "
                          "fits the register file, or the target model's choice).")(f)
    f = click.option("--width", "-w", type=int, default=None,
                     help="Vector width in bits: 128, 256 or 512 (default: the ISA's widest, "
                          "or the target's preferred).")(f)
    f = click.option("--isa", default=None, help=f"One of: {', '.join(ISAS)} (default: the target's).")(f)
    f = click.option("--target", "-t", default=None,
                     help="Choose ISA, width and depth per mode for a CPU: native or a target name "
                          "(see `aesgen targets`) [default: native when --isa is not given].")(f)
    f = click.option("--per-mode", "per_mode", multiple=True, metavar="MODE=WIDTHxDEPTH",
                     help="A mode's own width and depth, e.g. cbc=256x4 (repeatable; what tuned files record).")(f)
    f = click.option("--karatsuba", is_flag=True,
                     help="GHASH/POLYVAL: Karatsuba products (3 carry-less multiplies) instead of schoolbook (4).")(f)
    f = click.option("--gfmul", default="", metavar="METHOD", help=f"GHASH/POLYVAL's GF(2^128) products: "
                     f"{', '.join(GFMULS)} (default: clmul with AES-NI, gfni on the GFNI backend at avx512/512, else ctmul; docs/gfmul.md).")(f)
    f = click.option("--gfdouble", default="", metavar="METHOD",
                     help=f"XTS tweaks / GF(2^128) doubling: {', '.join(DOUBLING_METHODS)} "
                          "(default: the ISA's best, see `aesgen explore gfdouble`).")(f)
    f = click.option("--allow-table-lookups", "table_lookups", is_flag=True,
                     help="Allow methods that load from data-dependent addresses (NOT constant-time; "
                          "the static check reports them as warnings).")(f)
    f = click.option("--schedule", "schedule", default="lockstep", show_default=True, metavar="lockstep|list[:TARGET]",
                     help="Order within the interleaved blocks: lockstep (round by round, riders spread) or list "
                          "(a list scheduler simulating the ports of --target's microarchitecture, or of TARGET).")(f)
    f = click.option("--no-ternlog", "no_ternlog", is_flag=True,
                     help="--backend bitsliced on avx512: no VPTERNLOGD (three-operand S-box and XOR linear "
                          "layers), to measure what ternary logic buys.")(f)
    f = dropin_options(f)
    f = click.option("--tuned", is_flag=True, help="With --target native: use the `aesgen tune` result.")(f)
    f = click.option("--abi", type=click.Choice(ABIS), default="sysv", show_default=True,
                     help="Calling convention: sysv (Linux, the BSDs; macOS with --format macho) or win64 "
                          "(Microsoft x64: rcx/rdx/r8/r9, xmm6-15 and rdi/rsi callee-saved, SEH unwind info for "
                          "COFF).")(f)
    f = click.option("--profile", type=click.Choice(["bulk", "short"]), default=None,
                     help="With --tuned: the configs tuned for bulk (16 KiB, the default) or short (256 B) "
                          "messages.")(f)
    return f


def spec_from_options(modes: str, isa: str | None = None, width: int | None = None, depth: int | None = None,
                      backend: str | None = None, prefix: str | None = None, target: str | None = None,
                      tuned: bool = False, profile: str | None = None, per_mode: tuple[str, ...] = (),
                      karatsuba: bool = False, gfdouble: str = "", table_lookups: bool = False,
                      no_ternlog: bool = False, gfmul: str = "", abi: str = "sysv", no_red_zone: bool = False,
                      hidden: bool = False, object_format: str = "elf", schedule: str = "lockstep",
                      default_native: bool = True) -> KernelSpec:
    """The KernelSpec the options describe. With neither --isa nor --target the file is for this
    CPU (`--target native`, said in one line on stderr) unless default_native is False (simulate:
    the DSL runs anywhere, so its default stays the fixed avx512)."""
    if profile is not None and not tuned:
        raise UsageFailure("--profile applies with --tuned only (it picks the bulk or short tuning)")
    named_target = target  # the CPU the file is for, if one is named (--gfmul ctmul's refusal)
    if isa is None and target is None and default_native:
        target = "native"
        say_native = True
    else:
        say_native = False
    if target is not None and backend is None:
        backend = _target_backend(target, modes)
    backend = backend or "aesni"
    if target is not None and not tuned and (backend != "aesni" or (say_native and per_mode)):
        # the other backends have no performance model yet (and --per-mode sets widths and depths
        # itself): the target picks the ISA and its preferred width, the usual defaults the rest
        isa, width = _target_isa_width(target, backend, isa, width)
        target = None
    if depth is None and backend == "bitsliced" and target is None:
        depth = bitsliced_depth(isa or "avx512")
    depth = gfmul_depth(modes, backend, gfmul, isa) if depth is None else depth
    spec = _spec_from_options(modes, isa, width, depth, backend, prefix, target, tuned, profile or "bulk", per_mode)
    if karatsuba:
        spec = replace(spec, karatsuba=True)
    if no_ternlog:
        if backend != "bitsliced" or spec.isa != "avx512":
            raise UsageFailure("--no-ternlog applies to --backend bitsliced --isa avx512 only")
        spec = replace(spec, no_ternlog=True)
    if abi != spec.abi:
        spec = replace(spec, abi=abi)
    if no_red_zone:
        spec = replace(spec, no_red_zone=True)
    if hidden:
        spec = replace(spec, hidden=True)
    if schedule != "lockstep":
        spec = replace(spec, schedule=schedule_target(schedule, target))
    if object_format != spec.object_format:
        check_format(spec.abi, object_format)
        spec = replace(spec, object_format=object_format)
    try:
        spec = with_doubling(spec, gfdouble, table_lookups)
        spec = with_gfmul(spec, gfmul, load(named_target) if named_target else None)
    except (ConfigError, TargetError) as e:
        raise UsageFailure(str(e)) from None
    if say_native:  # said once the file is written (a refusal stays one line)
        _pending_notes.append(f"no --isa or --target: --target native ({native_summary()}): {describe_choice(spec)}")
    return spec


def schedule_target(schedule: str, target: str | None) -> str:
    """The target whose ports `--schedule list[:TARGET]` simulates (native: the one it is modelled as)."""
    kind, _, named = schedule.partition(":")
    if kind != "list":
        raise UsageFailure(f"--schedule {schedule}: choose lockstep, list (with --target) or list:TARGET")
    name = named or target
    if not name:
        raise UsageFailure("--schedule list simulates a microarchitecture's ports: give --target, or list:TARGET")
    try:
        t = load(name)
        port_table(t)
    except (TargetError, BuildError) as e:
        raise UsageFailure(f"--schedule {schedule}: {e}") from None
    return t.modelled_as or t.name


_pending_notes: list[str] = []


def note(text: str) -> None:
    """One line on stderr, never wrapped."""
    click.echo(f"aesgen: {text}", err=True)


def describe_choice(spec: KernelSpec) -> str:
    """'avx2 256-bit x depth 8, backend aesni (xts 256 x 5)'"""
    per = "".join(f", {m} {w} x {d}" for m, w, d in spec.overrides)
    return f"{spec.isa} {spec.width}-bit x depth {spec.depth}, backend {spec.backend}{per}"


def _target_backend(target: str, modes: str) -> str:
    """No --backend: AES-NI where the target has it, else what runs there without it."""
    try:
        t = load(target)
        mode_list = parse_modes(modes)
    except (ConfigError, TargetError) as e:
        raise UsageFailure(str(e)) from None
    backend = t.backend_for(mode_list)
    if not t.isa_for(backend):
        raise UsageFailure(f"target {t.name} has no AES-NI and no GFNI, and {', '.join(mode_list)} has no "
                           f"bitsliced kernel (it covers {', '.join(BITSLICED_MODES)}); name --isa to "
                           "cross-generate")
    return backend


def _target_isa_width(target: str, backend: str, isa: str | None, width: int | None) -> tuple[str, int]:
    try:
        return backend_isa_width(load(target), backend, isa, width)
    except BuildError as e:
        raise UsageFailure(str(e)) from None


def _spec_from_options(modes: str, isa: str | None, width: int | None, depth: int | None, backend: str,
                       prefix: str | None, target: str | None, tuned: bool, profile: str,
                       per_mode: tuple[str, ...]) -> KernelSpec:
    try:
        mode_list = parse_modes(modes)
        if target is None:
            if tuned:
                raise ConfigError("--tuned needs --target native")
            pinned = parse_per_mode(per_mode, mode_list)
            spec = make_spec(mode_list, isa or "avx512", width, 8 if depth is None else depth, backend, prefix,
                             pinned)
            return spec if depth is not None else default_depths_that_fit(spec, pinned)
        t = load(target)
        if per_mode:
            raise ConfigError("--per-mode and --target exclude each other (the target chooses per mode)")
        if tuned:
            if target != "native":
                raise ConfigError("--tuned works with --target native (tuning measures this CPU)")
            return load_tuned(t, mode_list, profile, prefix)
        return target_spec(t, mode_list, isa, width, depth, backend, prefix)
    except (ConfigError, TargetError) as e:
        raise UsageFailure(str(e)) from None


def generate_files(spec: KernelSpec, output: Path) -> tuple[Path, Path]:
    if output.suffix != ".S":
        raise UsageFailure(f"output '{output}' must end in .S (the .h is written next to it)")
    require_folder(output)
    try:
        kernel = generate_kernel(spec, output.name)
    except BuildError as e:
        raise UsageFailure(str(e)) from None
    header = output.with_suffix(".h")
    write_atomically({output: kernel.asm, header: kernel.header})
    while _pending_notes:
        note(_pending_notes.pop(0))
    return output, header
