"""`aesgen export`: a drop-in folder of kernels for one target.

One `.S` + `.h` per kernel family (a mode of spec.MODES: the registry, so a new mode is
exported as soon as the generator knows it), with the target's configuration for it:
the `aesgen tune` result on this CPU where one exists (native), else the model's choice.
Next to them: a Makefile (`make` builds libaesgen.a with $(CC), `make check` builds and
runs smoke_test.c, known answers through the headers alone; win64 exports add `make
coff`, the COFF objects from the MinGW assembler) and a README.md saying what is in the
folder and where it came from.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
from dataclasses import dataclass, field, replace
from pathlib import Path

from .. import __version__, model, target as targets
from ..config import ConfigError, parse_modes
from ..cpu import MASK_ENV
from ..dsl import BuildError
from ..pipeline import GeneratedKernel, MODE_TITLES, generate, template_environment
from ..spec import BITSLICED_MODES, MODE_FUNCTIONS, MODES, KernelSpec
from ..target import cpu_signature
from .tune import load_tuned, tune_path
from ..verify import smoke

LIBRARY = "libaesgen.a"
SMOKE_TEST = "smoke_test.c"
COFF_ASSEMBLER = "x86_64-w64-mingw32-as"


@dataclass
class Family:
    """One exported file: a mode, its configuration and why it was chosen."""

    mode: str
    spec: KernelSpec
    chosen_by: str
    measured: str = "not measured"
    kernel: GeneratedKernel | None = None
    verified: str = ""
    smoke_cases: list = field(default_factory=list)

    @property
    def stem(self) -> str:
        return self.spec.prefix


def family_prefix(target: str, mode: str) -> str:
    return f"aesgen_{target}_{re.sub(r'[^A-Za-z0-9_]', '', mode)}"


def choose(target_name: str, modes: tuple[str, ...], abi: str, dropin: dict | None = None) -> list[Family]:
    """Each mode's configuration for the target (tuned result, else the model's choice);
    dropin: KernelSpec fields every file gets (object_format, hidden, no_red_zone)."""
    dropin = dropin or {}
    t = targets.load(target_name)
    tuned = _tuned_modes() if target_name == "native" else {}
    out = []
    for mode in modes:
        prefix = family_prefix(t.name, mode)
        backend = t.backend_for((mode,))
        if backend != "aesni":  # a target without AES-NI: what runs there, or a refusal
            try:
                choice = model.backend_choice(t, mode, backend)
            except BuildError:
                raise ConfigError(f"target {t.name} has no AES-NI and no GFNI, and {mode} has no bitsliced "
                                  f"kernel; export --modes {','.join(BITSLICED_MODES)}") from None
            spec = KernelSpec((mode,), choice.isa, choice.width, choice.depth, backend=backend, prefix=prefix,
                              abi=abi)
            out.append(Family(mode, spec, f"no AES-NI on {t.name}: {backend} {choice.isa} {choice.width}-bit "
                                          f"x depth {choice.depth} ({choice.reason})"))
            continue
        if mode in tuned:
            spec = load_tuned(t, (mode,), "bulk", prefix)
            pick = tuned[mode]
            chosen = f"`aesgen tune` on this CPU (bulk profile): {pick['width']}-bit x depth {pick['depth']}"
            measured = f"{pick['gbps']:.2f} GB/s at 16 KiB when tuned" if pick.get("gbps") else "not measured"
        else:
            choice = model.choose(t, mode)
            if choice.depth < 1:
                raise ConfigError(f"target {t.name} cannot hold any {mode} kernel in its "
                                  f"{t.vector_registers} vector registers")
            spec, kernel, lowered = _model_spec(t, mode, prefix, choice, abi, dropin)
            chosen = (f"the model for {t.name}: {choice.isa} {choice.width}-bit x depth {spec.depth} "
                      f"({choice.reason}{lowered})")
            out.append(Family(mode, spec, chosen, "not measured", kernel))
            continue
        out.append(Family(mode, replace(spec, abi=abi, **dropin), chosen, measured))
    return out


def _model_spec(t, mode: str, prefix: str, choice, abi: str, dropin: dict) -> tuple[KernelSpec, GeneratedKernel, str]:
    """The model's choice, or the deepest smaller depth the mode accepts when it refuses
    that one (e.g. OCB takes power-of-two batches only); the refusal is kept as the reason."""
    first: BuildError | None = None
    for depth in range(choice.depth, 0, -1):
        spec = replace(model.spec_for(t, (mode,), prefix, {mode: replace(choice, depth=depth)}), abi=abi, **dropin)
        try:
            kernel = generate(spec, f"{prefix}.S")
        except BuildError as e:
            first = first or e
            continue
        return spec, kernel, f"; depth {choice.depth} refused: {first}" if first else ""
    raise first  # type: ignore[misc]  # depth 1 refused too: the export says why


def _tuned_modes() -> dict[str, dict]:
    """Bulk picks of this CPU's tuning file, if there is one for this CPU."""
    path = tune_path()
    if not path.exists():
        return {}
    data = json.loads(path.read_text())
    if data.get("signature") != list(cpu_signature()[:3]) or data.get("cpu_mask", "") != os.environ.get(MASK_ENV, ""):
        return {}  # tuned on another CPU, or under another view of this one
    return {m: v["bulk"] for m, v in data.get("modes", {}).items() if "bulk" in v}


def parse_export_modes(text: str | None) -> tuple[str, ...]:
    return MODES if not text else parse_modes(text)


def provenance() -> str:
    """aesgen's version and, in a git checkout, its commit."""
    here = Path(__file__).resolve().parent
    try:
        commit = subprocess.run(["git", "-C", str(here), "rev-parse", "--short=12", "HEAD"],
                                capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(here), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return f"aesgen {__version__} (not a git checkout)"
    return f"aesgen {__version__}, commit {commit}{' with uncommitted changes' if dirty else ''}"


def export_command(target: str, abi: str, modes: tuple[str, ...], verify: bool, dropin: dict) -> str:
    options = "" if modes == MODES else f" --modes {','.join(modes)}"
    options += f" --format {dropin['object_format']}" if dropin.get("object_format", "elf") != "elf" else ""
    options += " --hidden" if dropin.get("hidden") else ""
    options += " --no-red-zone" if dropin.get("no_red_zone") else ""
    return f"aesgen export --target {target} --abi {abi}{options}{' --verify' if verify else ''} -o DIR"


def render(families: list[Family], target: str, abi: str, modes: tuple[str, ...], verify: bool,
           dropin: dict | None = None) -> dict[str, str]:
    """Every file of the export folder: name -> text."""
    files: dict[str, str] = {}
    for f in families:
        f.kernel = f.kernel or generate(f.spec, f"{f.stem}.S")
        files[f"{f.stem}.S"] = f.kernel.asm
        files[f"{f.stem}.h"] = f.kernel.header
        f.smoke_cases = smoke.cases_for(f.spec.modes, f.spec.functions)
    env = template_environment()
    context = {
        "version": __version__, "provenance": provenance(),
        "command": export_command(target, abi, modes, verify, dropin or {}), "dropin": families[0].spec,
        "target": target, "abi": abi, "families": families, "library": LIBRARY, "smoke_test": SMOKE_TEST,
        "coff_assembler": COFF_ASSEMBLER, "titles": MODE_TITLES, "mode_functions": MODE_FUNCTIONS,
        "checks": {f.stem: [line for case in f.smoke_cases for line in smoke.case_c(f.stem, case)] for f in families},
        "prototypes": {f.stem: _prototypes(f.kernel.header) for f in families},
    }
    for name, template in (("Makefile", "export_Makefile.j2"), (SMOKE_TEST, "export_smoke_test.c.j2"),
                           ("README.md", "export_README.md.j2")):
        files[name] = env.get_template(template).render(context)
    return files


def _prototypes(header: str) -> list[str]:
    return [line for line in header.splitlines() if line.endswith(");") and "(" in line]
