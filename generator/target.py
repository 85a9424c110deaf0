"""Target microarchitectures: features, register file, instruction costs, preferred widths.

One TOML file per target in `targets/`. `native` detects this CPU from
/proc/cpuinfo (vendor, family, model: the CPUID signature the kernel reports)
and maps it to the nearest target, keeping the real feature set (what CPUID
and XGETBV allow here).
"""
from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, replace
from functools import lru_cache
from importlib import resources
from pathlib import Path

from .cpu import flags as cpu_flags
from .spec import BITSLICED_MODES, FEATURES_BY_ISA, ISAS, WIDTHS_BY_ISA, required_features


class TargetError(ValueError):
    pass


@dataclass(frozen=True)
class Target:
    name: str
    description: str
    vendor: str
    llvm_mca_cpu: str
    features: tuple[str, ...]
    vector_registers: int
    preferred_widths: tuple[int, ...]
    family: int
    models: tuple = ()
    instructions: dict = field(default_factory=dict, hash=False, compare=False)
    ports: dict = field(default_factory=dict, hash=False, compare=False)  # the port model's table (perfmodel)
    # Depths measured on the microarchitecture where the AES pipe rule (model.pipe_depth) falls
    # short: "MODE_WIDTH" or, for one ISA's register file only, "MODE_ISA_WIDTH" -> {depth,
    # source}; "depths_from": a target whose core this one shares (its entries, then these);
    # see docs/costmodel.md.
    depths: dict = field(default_factory=dict, hash=False, compare=False)
    modelled_as: str | None = None  # for native: the target whose costs it borrows
    # Flags that single this microarchitecture out among targets of the same features, when the
    # CPUID model is not one the file lists (virtual machines often report another model).
    marks: tuple[str, ...] = ()
    # Why integer multiplies take data-dependent time on this CPU ("" when none is known):
    # `--gfmul ctmul` is refused for it (docs/gfmul.md lists the facts and their sources).
    variable_time_multiply: str = ""

    @property
    def isa(self) -> str:
        """The richest ISA family every required feature of which the target has."""
        best = "sse"
        for isa in ISAS:
            if all(f in self.features for f in FEATURES_BY_ISA[isa]):
                best = isa
        return best

    def has_isa(self, isa: str) -> bool:
        return all(f in self.features for f in FEATURES_BY_ISA[isa])

    def runs(self, isa: str, backend: str = "aesni") -> bool:
        """The target has what a file of this ISA family and backend needs (hashing aside)."""
        return all(f in self.features for f in required_features(isa, WIDTHS_BY_ISA[isa][-1], (), backend=backend))

    def isa_for(self, backend: str) -> str | None:
        """The richest ISA family the backend runs on here (None: not even SSE)."""
        fits = [isa for isa in ISAS if self.runs(isa, backend)]
        return fits[-1] if fits else None

    def isa_for_width(self, width: int, backend: str = "aesni") -> str | None:
        """The richest ISA family with `width`-bit registers the backend runs on here (an AVX2
        CPU explores 128 bits as avx)."""
        fits = [isa for isa in ISAS if width in WIDTHS_BY_ISA[isa] and self.runs(isa, backend)]
        return fits[-1] if fits else None

    def backend_for(self, modes: tuple[str, ...]) -> str:
        """What `--target` picks when no --backend is named: AES-NI where the target has it; else
        the GFNI S-box; else bitsliced (which covers only BITSLICED_MODES)."""
        if self.isa_for("aesni"):
            return "aesni"
        if self.isa_for("gfni"):
            return "gfni"
        # bitsliced where it covers the modes; else aesni, which the caller refuses to run here
        return "bitsliced" if all(m in BITSLICED_MODES for m in modes) else "aesni"

    def widths(self, isa: str | None = None) -> list[int]:
        """The ISA's widths in the target's order of preference."""
        allowed = WIDTHS_BY_ISA[isa or self.isa]
        ordered = [w for w in self.preferred_widths if w in allowed]
        return ordered + [w for w in allowed if w not in ordered]

    def cost(self, instruction: str, width: int) -> tuple[float, float]:
        """(latency, reciprocal throughput) in cycles; vaesenc at 128 is aesenc."""
        keys = [f"{instruction}_{width}", f"v{instruction}_{width}", f"{instruction.lstrip('v')}_{width}"]
        for k in keys:
            if k in self.instructions:
                lat, tput = self.instructions[k]
                return float(lat), float(tput)
        raise TargetError(f"target {self.name} has no cost for {instruction} at {width} bits")

    def measured_depth(self, mode: str, width: int, isa: str | None = None) -> tuple[int, str] | None:
        """(depth, where the figure comes from) when the target file records one for the mode at
        this width (for `isa`'s register file, or for any)."""
        isa = isa or self.isa_for_width(width)
        if isa is None:  # a width this target has no ISA for
            return None
        records = self.depth_records()
        entry = records.get((mode, isa, width)) or records.get((mode, None, width))
        if entry:
            return int(entry["depth"]), entry["source"]
        shared = self.depths.get("depths_from")
        return targets()[shared].measured_depth(mode, width, isa) if shared else None

    def depth_records(self) -> dict[tuple[str, str | None, int], dict]:
        """This file's own records, keyed as the file spells them (MODE_WIDTH, MODE_ISA_WIDTH):
        (mode, isa or None, width) -> {depth, source}."""
        out = {}
        for key, entry in self.depths.items():
            if key == "depths_from":
                continue
            parts = key.split("_")
            width, isa = int(parts[-1]), parts[-2] if parts[-2] in ISAS else None
            mode = "_".join(parts[:-2] if isa else parts[:-1])
            out[mode, isa, width] = entry
        return out

    def matches(self, vendor: str, family: int, model: int) -> bool:
        if vendor != self.vendor or family != self.family:
            return False
        if not self.models:
            return True
        for m in self.models:
            if isinstance(m, list) and m[0] <= model <= m[1] or m == model:
                return True
        return False


def _parse(text: str, origin: str) -> Target:
    d = tomllib.loads(text)
    try:
        return Target(name=d["name"], description=d["description"], vendor=d["vendor"],
                      llvm_mca_cpu=d["llvm_mca_cpu"], features=tuple(d["features"]),
                      vector_registers=int(d["vector_registers"]),
                      preferred_widths=tuple(d["preferred_widths"]), family=d["match"]["family"],
                      models=tuple(d["match"].get("models", ())), instructions=dict(d["instructions"]),
                      ports=dict(d.get("ports", {})), depths=dict(d.get("depths", {})),
                      marks=tuple(d["match"].get("marks", ())),
                      variable_time_multiply=str(d.get("variable_time_multiply", "")))
    except KeyError as e:
        raise TargetError(f"{origin}: missing field {e}") from None


@lru_cache(maxsize=1)
def targets() -> dict[str, Target]:
    out = {}
    for entry in sorted(resources.files("aesgen").joinpath("targets").iterdir(), key=lambda p: p.name):
        if entry.name.endswith(".toml"):
            t = _parse(entry.read_text(encoding="utf-8"), entry.name)
            out[t.name] = t
    return out


def cpu_signature(cpuinfo: str | None = None) -> tuple[str, int, int, str]:
    """(vendor_id, family, model, model name) of the first CPU."""
    text = cpuinfo if cpuinfo is not None else Path("/proc/cpuinfo").read_text(encoding="utf-8")
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if ":" in line:
            k, v = line.split(":", 1)
            fields.setdefault(k.strip(), v.strip())
        elif fields:
            break
    return (fields.get("vendor_id", ""), int(fields.get("cpu family", "0")), int(fields.get("model", "0")),
            fields.get("model name", "unknown CPU"))


def nearest(vendor: str, family: int, model: int, flags: frozenset[str]) -> Target:
    """The matching target; else the one sharing the most features (same vendor first)."""
    all_targets = list(targets().values())
    for t in all_targets:
        if t.matches(vendor, family, model):
            return t

    def score(t: Target) -> tuple[int, int, int, int]:
        covered = all(f in flags for f in t.features)
        marked = bool(t.marks) and all(f in flags for f in t.marks)
        return (covered, sum(f in flags for f in t.features), marked, t.vendor == vendor)

    return max(all_targets, key=score)


def native(cpuinfo: str | None = None, flags: frozenset[str] | None = None) -> Target:
    vendor, family, model, name = cpu_signature(cpuinfo)
    flags = cpu_flags() if flags is None else flags
    base = nearest(vendor, family, model, flags)
    known = {f for t in targets().values() for f in t.features}
    real = tuple(f for f in sorted(known) if f in flags)
    return replace(base, name="native", description=f"this CPU: {name} (modelled as {base.name})",
                   features=real, vector_registers=32 if "avx512f" in real else 16, modelled_as=base.name)


def load(name: str) -> Target:
    if name == "native":
        return native()
    try:
        return targets()[name]
    except KeyError:
        raise TargetError(f"unknown target '{name}'; choose from native, {', '.join(targets())}") from None
