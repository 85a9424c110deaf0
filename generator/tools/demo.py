"""`make demo`, the main job: tune, generate, verify and benchmark for this CPU.

1. tune ECB, CTR32 and CBC on this CPU (the model's candidates, measured);
2. generate the tuned files for bulk and for short messages into out/;
3. run the whole verifier on both;
4. benchmark the bulk file against OpenSSL and intel-ipsec-mb in one process,
   with the measured instruction ceiling, in one table;
5. explore CTR32 over width and depth and plot it (out/ctr32_explore.png).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rich.console import Console
from rich.progress import Progress

from ..bench.ceiling import measure
from ..bench.timing import OPS_BY_MODE, bench
from ..cpu import mask_note
from ..model import backend_choice
from ..pipeline import generate
from ..spec import CIPHER_MODES as MODES, KernelSpec, default_prefix
from ..target import native
from ..verify import verify_kernel
from . import explore, tune
from .files import write_atomically
from .report import console as report_console, print_bench, print_ceiling, print_exploration, spread

SIZES = [64, 256, 1024, 4096, 16384]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="aesgen.tools.demo", description=__doc__)
    ap.add_argument("--out", default="out", type=Path)
    args = ap.parse_args(argv)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    console = Console(highlight=False, width=150)
    report_console.width = 150  # the tables printed through aesgen.tools.report too
    target = native()
    aesni = target.isa_for("aesni")
    backend = target.backend_for(MODES)
    console.print(f"[bold]aesgen demo[/] on {target.description}{mask_note()}; "
                  f"ISA {aesni or target.isa_for(backend)}, backend {backend}")

    ceiling = measure()
    print_ceiling(ceiling)

    if aesni:
        with Progress(console=console, transient=True) as progress:
            task = progress.add_task("tune", total=None)
            tuning = tune.tune(target, MODES, progress=lambda s: progress.update(task, description=f"tune {s}"))
        tune.save(tuning)
        for mode, mt in tuning.modes.items():
            console.print(f"tuned {mode}: bulk {mt.bulk['width']}-bit x depth {mt.bulk['depth']} "
                          f"({spread(mt.bulk['gbps'], mt.bulk['gbps_halfwidth'], 1, mt.bulk['rounds'])} GB/s at "
                          f"16 KiB), short {mt.short['width']}-bit x depth {mt.short['depth']} "
                          f"({spread(mt.short['cycles'], mt.short['cycles_halfwidth'], 0, mt.short['rounds'])} "
                          "cycles per 256 B); each the cheapest of its ties")
        specs = {profile: tune.load_tuned(target, MODES, profile, None) for profile in tune.PROFILES}
        peers: tuple[str, ...] = ("openssl", "ipsec-mb")
    else:  # no AES-NI here: nothing to tune; the table-free backend that runs, against OpenSSL without AES-NI
        console.print(f"this CPU has no AES-NI: the demo generates, verifies and times the {backend} backend "
                      "(constant-time, no tables) instead of tuned AES-NI kernels")
        c = backend_choice(target, MODES[0], backend)
        specs = {"bulk": KernelSpec(MODES, c.isa, c.width, c.depth, backend=backend,
                                    prefix=default_prefix(f"aesgen_native_{backend}", MODES))}
        peers = ("openssl-noaesni",)

    failed = 0
    files = {}
    for profile, spec in specs.items():
        path = out / f"{spec.prefix}.S"
        kernel = generate(spec, path.name)
        write_atomically({path: kernel.asm, path.with_suffix(".h"): kernel.header})
        results = verify_kernel(path, spec)
        bad = [r for r in results if r.status == "fail"]
        failed += len(bad)
        console.print(f"{path}: {sum(r.status == 'pass' for r in results)} passed, {len(bad)} failed")
        for r in bad:
            console.print(f"  [red]FAIL[/] {r.name}: {r.detail}")
        files[profile] = (spec, path)
    if failed:
        return 1

    spec, path = files["bulk"]
    ops = [op for m in MODES for op in OPS_BY_MODE[m]]
    result = bench(spec, path, ops=ops, sizes=SIZES, peers=peers, ceiling=ceiling)
    print_bench(spec, result)
    (out / "bench.json").write_text(json.dumps(result.to_json(), indent=1))

    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("explore", total=None)
        ex = explore.explore("ctr32", target, [128, 256, 512], list(range(1, 17 if aesni else 3)),
                             progress=lambda s: progress.update(task, description=f"explore ctr32: {s}"),
                             backend=spec.backend)
    print_exploration(ex)
    explore.write_json(ex, out / "ctr32_explore.json")
    explore.plot(ex, out / "ctr32_explore.png")
    console.print(f"wrote {', '.join(str(p) for _, p in files.values())} (+ .h), {out}/bench.json, "
                  f"{out}/ctr32_explore.png, {out}/ctr32_explore.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
