"""Validating a requested configuration before anything is generated.

Every refusal is one line naming the problem and the allowed values; the CLI
prints it and exits with code 2.
"""
from __future__ import annotations

from dataclasses import replace

from .doubling import DOUBLING_MODES, default_method, refusal
from .dsl import BuildError
from .model import ModeChoice, bitsliced_depth, choose, max_depth, spec_for
from .spec import (BACKENDS, C_IDENTIFIER, CLMUL_MODES, FEATURES_BY_ISA, GFMUL_DEPTH, GFMULS, ISAS, MAX_DEPTH, MODES,
                   WIDTHS_BY_ISA, KernelSpec, default_gfmul)
from .target import Target


class ConfigError(BuildError):
    pass


def parse_modes(text: str) -> tuple[str, ...]:
    parts = [m.strip() for m in text.split(",")]
    if not any(parts):
        raise ConfigError(f"no mode given; choose from {', '.join(MODES)}")
    if not all(parts):
        raise ConfigError(f"'{text}': an empty mode in the comma list; choose from {', '.join(MODES)}")
    modes = tuple(parts)
    for m in modes:
        if m not in MODES:
            raise ConfigError(f"unknown mode '{m}'; choose from {', '.join(MODES)}")
    return tuple(dict.fromkeys(modes))


def parse_per_mode(items: tuple[str, ...], modes: tuple[str, ...]) -> dict[str, tuple[int, int]]:
    """`cbc=256x4` -> {"cbc": (256, 4)}."""
    out: dict[str, tuple[int, int]] = {}
    for item in items:
        mode, _, cfg = item.partition("=")
        w, _, d = cfg.partition("x")
        if mode not in modes or not w.isdigit() or not d.isdigit():
            raise ConfigError(f"--per-mode '{item}': expected MODE=WIDTHxDEPTH with MODE one of {', '.join(modes)}")
        out[mode] = (int(w), int(d))
    return out


def check_depth(depth: int) -> None:
    if not 1 <= depth <= MAX_DEPTH:
        raise ConfigError(f"depth {depth} out of range; choose 1..{MAX_DEPTH}")


def check_isa(isa: str | None) -> None:
    if isa is not None and isa not in ISAS:
        raise ConfigError(f"unknown ISA '{isa}'; choose from {', '.join(ISAS)}")


def check_prefix(prefix: str | None) -> None:
    if prefix is not None and not C_IDENTIFIER.match(prefix):
        raise ConfigError(f"prefix '{prefix}' is not a C identifier ([A-Za-z_][A-Za-z0-9_]*)")


def make_spec(modes: tuple[str, ...], isa: str, width: int | None, depth: int, backend: str = "aesni",
              prefix: str | None = None, per_mode: dict[str, tuple[int, int]] | None = None) -> KernelSpec:
    if backend not in BACKENDS:
        raise ConfigError(f"unknown backend '{backend}'; choose from {', '.join(BACKENDS)}")
    check_isa(isa)
    widths = WIDTHS_BY_ISA[isa]
    if width is None:
        width = widths[-1]
    if width not in widths:
        raise ConfigError(f"--isa {isa} has no {width}-bit registers; "
                          f"widths for {isa}: {', '.join(map(str, widths))}")
    check_depth(depth)
    check_prefix(prefix)
    overrides = []
    for mode, (w, d) in (per_mode or {}).items():
        if w not in widths:
            raise ConfigError(f"--per-mode {mode}: --isa {isa} has no {w}-bit registers; "
                              f"widths for {isa}: {', '.join(map(str, widths))}")
        if w > width:
            raise ConfigError(f"--per-mode {mode}: width {w} exceeds --width {width} (the file's widest)")
        if not 1 <= d <= MAX_DEPTH:
            raise ConfigError(f"--per-mode {mode}: depth {d} out of range; choose 1..{MAX_DEPTH}")
        if (w, d) != (width, depth):
            overrides.append((mode, w, d))
    return KernelSpec(modes=modes, isa=isa, width=width, depth=depth, backend=backend, prefix=prefix or "",
                      overrides=tuple(overrides))


def default_depths_that_fit(spec: KernelSpec, pinned: dict[str, tuple[int, int]]) -> KernelSpec:
    """No --depth given: depth 8, lowered for a mode whose kernel does not fit the register file
    at 8 (XTS or OTR on 16 registers, Rijndael-256...) to the deepest that does, as a per-mode
    override (the file's header and regenerate command say so). An explicit --depth is never lowered."""
    per_mode = dict(pinned)
    for m in spec.modes:
        if m not in pinned and 0 < (fit := max_depth(spec.isa, spec.width, m, spec.backend)) < spec.depth:
            per_mode[m] = (spec.width, fit)
    if per_mode == pinned:
        return spec
    return make_spec(spec.modes, spec.isa, spec.width, spec.depth, spec.backend, spec.prefix or None, per_mode)


def target_spec(target: Target, modes: tuple[str, ...], isa: str | None, width: int | None, depth: int | None,
                backend: str, prefix: str | None) -> KernelSpec:
    """The file the target's model chooses for the modes, within the --isa, --width and --depth given."""
    check_isa(isa)
    if isa is not None and not target.has_isa(isa):
        missing = [f for f in FEATURES_BY_ISA.get(isa, ()) if f not in target.features]
        raise ConfigError(f"target {target.name} cannot run --isa {isa} (it lacks {' '.join(missing) or isa}); "
                          f"it supports up to {target.isa}")
    if width is not None and width not in WIDTHS_BY_ISA[isa or target.isa]:
        raise ConfigError(f"--isa {isa or target.isa} on target {target.name} has no {width}-bit registers; "
                          f"widths: {', '.join(map(str, target.widths(isa)))}")
    check_prefix(prefix)
    choices = {m: choose(target, m, isa, width) for m in modes}
    if depth is not None:
        check_depth(depth)
        choices = {m: ModeChoice(m, c.isa, c.width, depth, "--depth") for m, c in choices.items()}
    return spec_for(target, modes, prefix, choices, backend)


BITSLICED_CLMUL = "--backend bitsliced uses logic instructions only: --gfmul ctmul or bitsliced, not clmul"
GFNI_GFMUL = ("--gfmul gfni applies its matrices to 512-bit byte planes: it needs --isa avx512 --width 512 "
              "(and a backend with GFNI instructions allowed: aesni or gfni, not bitsliced)")


def gfmul_depth(modes: str, backend: str, gfmul: str, isa: str | None) -> int | None:
    """No --depth: GFMUL_DEPTH for a file whose GF(2^128) products are lowered (no clmul), else None."""
    if (gfmul or default_gfmul(backend)) == "clmul" or not any(m in CLMUL_MODES for m in parse_modes(modes)):
        return None
    return GFMUL_DEPTH if backend != "bitsliced" else min(GFMUL_DEPTH, bitsliced_depth(isa or "avx512"))


def parse_gfmuls(text: str, mode: str, backend: str, product_modes: tuple[str, ...]) -> tuple[str, ...]:
    """explore's --gfmul LIST: methods for a mode with GF(2^128) products."""
    methods = tuple(g for g in text.split(",") if g)
    if methods and (mode not in product_modes or any(g not in GFMULS for g in methods)):
        raise ConfigError(f"--gfmul '{text}': for {', '.join(product_modes)}, methods from {', '.join(GFMULS)}")
    if backend == "bitsliced" and "clmul" in methods:
        raise ConfigError(BITSLICED_CLMUL)
    return methods


def gfmul_refusal(spec: KernelSpec) -> str:
    """Why the spec's GF(2^128) method cannot build its hashing modes ("" if it can): the
    matrices of --gfmul gfni are for 512-bit AVX-512 code with GFNI instructions allowed."""
    if spec.gfmul == "gfni" and (spec.backend == "bitsliced" or spec.isa != "avx512" or
                                 any(spec.width_for(m) != 512 for m in spec.modes if m in CLMUL_MODES)):
        return GFNI_GFMUL
    return ""


def with_gfmul(spec: KernelSpec, method: str, target: Target | None = None) -> KernelSpec:
    """The spec with GHASH/POLYVAL's GF(2^128) multiply method (GFMULS); "" keeps the backend's
    default. Refused: a method for a file that does not hash, the carry-less multiply in a
    bitsliced file (logic only), and ctmul for a target whose multiplier is known to take
    data-dependent time."""
    if method and method not in GFMULS:
        raise ConfigError(f"unknown --gfmul '{method}'; choose from {', '.join(GFMULS)}")
    if method and not any(m in CLMUL_MODES for m in spec.modes):
        raise ConfigError(f"--gfmul applies to the modes {', '.join(CLMUL_MODES)} only")
    if method == "clmul" and spec.backend == "bitsliced":
        raise ConfigError(BITSLICED_CLMUL)
    if method:
        spec = replace(spec, gfmul=method, features=())
    if gfmul_refusal(spec):
        raise ConfigError(gfmul_refusal(spec))
    if (spec.product_method == "ctmul" and target is not None and target.variable_time_multiply
            and any(m in CLMUL_MODES for m in spec.modes)):
        raise ConfigError(f"--gfmul {spec.gfmul} (products by integer multiplication) is not constant-time on target {target.name}: "
                          f"{target.variable_time_multiply}; use --gfmul bitsliced")
    return spec


def with_doubling(spec: KernelSpec, method: str, table_lookups: bool) -> KernelSpec:
    """The spec with its doubling method (checked against its ISA and widths) and the
    table-lookup permission; the method matters only to files with a doubling mode."""
    if table_lookups:
        spec = replace(spec, table_lookups=True)
    if not any(m in DOUBLING_MODES for m in spec.modes):
        if method:
            raise ConfigError(f"--gfdouble applies to the modes {', '.join(DOUBLING_MODES)} only")
        return spec
    for mode in (m for m in spec.modes if m in DOUBLING_MODES):
        width = spec.width_for(mode)
        why = refusal(method or default_method(spec.isa, width), spec.isa, width, table_lookups)
        if why:
            raise ConfigError(why)
    if method:
        spec = replace(spec, gfdouble=method, features=())
    return spec
