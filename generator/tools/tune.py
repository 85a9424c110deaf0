"""`aesgen tune`: measure the model's candidates on this CPU and keep the best per mode.

Candidates are every width of the target's ISA and depths around the model's
prediction; each is generated, quick-verified and timed for bulk (16 KiB) and
short (256 B) messages, all of a mode's candidates in turn (explore's sampling).
Per mode and profile the pick is the cheapest of the candidates tied with the
best (smallest depth, then smallest code); it is saved (JSON, keyed by the CPU
signature) and `aesgen generate --target native --tuned` uses it.
"""
from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from ..config import ConfigError
from ..cpu import MASK_ENV, mask_note
from ..model import max_depth, pipe_depth
from ..spec import MAX_DEPTH, WIDTHS_BY_ISA, KernelSpec, default_prefix
from ..target import Target, cpu_signature
from .explore import Point, cheapest, explore, tied
from .files import write_atomically

SCHEMA = "aesgen-tune/2"  # /2: a pick is the cheapest tie and carries its interval and ties
BUDGET = 30.0  # seconds of sampling per mode
PROFILES = ("bulk", "short")


@dataclass
class ModeTuning:
    mode: str
    bulk: dict  # {"width", "depth", "gbps"}
    short: dict  # {"width", "depth", "cycles"}
    candidates: list[dict] = field(default_factory=list)
    sampling: str = ""  # how the sampling ended (Sampling.describe)


@dataclass
class Tuning:
    cpu: str
    signature: list
    isa: str
    cpu_mask: str = ""  # AESGEN_CPU_MASK when tuned: a tuning holds for the view it measured
    modes: dict[str, ModeTuning] = field(default_factory=dict)


def tune_path() -> Path:
    base = os.environ.get("AESGEN_TUNE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "aesgen")
    return Path(base) / "tuned-native.json"


def candidate_depths(target: Target, isa: str, width: int, mode: str) -> list[int]:
    want = pipe_depth(target, width)
    fits = max_depth(isa, width, mode)
    return sorted({d for d in range(max(1, want - 2), want + 5) if d <= min(fits, MAX_DEPTH)} | {1})


def pick(points: list[Point], profile: str) -> dict:
    """The cheapest tie of a profile, with its median, interval and the configs it tied with."""
    p = cheapest(points, profile)
    interval = p.bulk_interval() if profile == "bulk" else p.short_interval()
    figure = "gbps" if profile == "bulk" else "cycles"
    return {"width": p.width, "depth": p.depth, figure: interval.median, f"{figure}_halfwidth": interval.half_width,
            "rounds": interval.n, "variant": p.variant,
            "ties": [{"width": t.width, "depth": t.depth, "variant": t.variant} for t in tied(points, profile)]}


def tune(target: Target, modes: tuple[str, ...], progress: Callable[[str], None] | None = None,
         budget: float = BUDGET) -> Tuning:
    vendor, family, model, name = cpu_signature()
    isa = target.isa_for("aesni")
    if isa is None:
        raise ConfigError(f"tune measures AES-NI kernels and this CPU has no AES-NI{mask_note()}; "
                          "`aesgen explore ctr32 --backend bitsliced` measures what runs here")
    result = Tuning(cpu=name, signature=[vendor, family, model], isa=isa, cpu_mask=os.environ.get(MASK_ENV, ""))
    for mode in modes:
        # every width's candidates in one exploration, so they are sampled in turn with each other
        pairs = {(w, d) for w in WIDTHS_BY_ISA[isa] for d in candidate_depths(target, isa, w, mode)}
        ex = explore(mode, target, list(WIDTHS_BY_ISA[isa]), sorted({d for _, d in pairs}), pairs=pairs,
                     budget=budget, progress=(lambda s, m=mode: progress(f"{m}: {s}")) if progress else None)
        points = [p for p in ex.points if p.status == "measured"]
        if not points:
            raise ConfigError(f"tune: no config of {mode} could be measured on this CPU")
        result.modes[mode] = ModeTuning(mode, pick(points, "bulk"), pick(points, "short"),
                                        [asdict(p) for p in points], ex.sampling)
    return result


def save(t: Tuning, path: Path | None = None) -> Path:
    path = path or tune_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    existing = {}
    if path.exists():
        try:
            old = json.loads(path.read_text())
        except (OSError, ValueError):
            old = {}
        same_view = all(old.get(k) == v for k, v in (("signature", t.signature), ("isa", t.isa),
                                                      ("cpu_mask", t.cpu_mask)))
        existing = old.get("modes", {}) if same_view else {}  # another CPU or view: start afresh
    data = asdict(t)
    data["modes"] = {**existing, **data["modes"]}  # tuning some modes keeps the others
    data["schema"] = SCHEMA
    write_atomically({path: json.dumps(data, indent=1)})
    return path


def load_tuned(target: Target, modes: tuple[str, ...], profile: str, prefix: str | None,
               path: Path | None = None) -> KernelSpec:
    path = path or tune_path()
    if not path.exists():
        raise ConfigError(f"no tuning result at {path}; run `aesgen tune {','.join(modes)} --target native`")
    data = json.loads(path.read_text())
    vendor, family, model, _ = cpu_signature()
    if data.get("signature") != [vendor, family, model]:
        raise ConfigError(f"{path} was tuned on another CPU ({data.get('cpu')}); run `aesgen tune` again")
    if data.get("cpu_mask", "") != os.environ.get(MASK_ENV, ""):
        raise ConfigError(f"{path} was tuned with {MASK_ENV}='{data.get('cpu_mask', '')}', not the current "
                          f"'{os.environ.get(MASK_ENV, '')}'; run `aesgen tune` again")
    missing = [m for m in modes if m not in data["modes"]]
    if missing:
        raise ConfigError(f"{path} has no tuning for {', '.join(missing)}; run `aesgen tune {','.join(missing)} "
                          "--target native`")
    picks = {m: data["modes"][m][profile] for m in modes}
    width = max(p["width"] for p in picks.values())
    depth = max(p["depth"] for p in picks.values())
    overrides = tuple((m, p["width"], p["depth"]) for m, p in picks.items() if (p["width"], p["depth"]) != (width, depth))
    karatsuba = any(p.get("variant") == "karatsuba" for p in picks.values())
    return KernelSpec(modes=modes, isa=data["isa"], width=width, depth=depth,
                      prefix=prefix or default_prefix(f"aesgen_native_{profile}", modes), overrides=overrides, karatsuba=karatsuba)
