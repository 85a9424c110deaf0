"""`make demo`: generate and verify the core kernels for every ISA/width this CPU runs."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

from .cli import write_atomically
from .cpu import missing_features
from .pipeline import generate
from .spec import FEATURES_BY_ISA, ISAS, MODES, WIDTHS_BY_ISA, KernelSpec

DEMO_DEPTH = 8


def main(argv: list[str] | None = None) -> int:
    from .verify import verify_kernel

    ap = argparse.ArgumentParser(prog="aesgen.demo", description=__doc__)
    ap.add_argument("--out", default="out", type=Path)
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    console = Console(highlight=False)
    table = Table(title=f"ECB, CTR32, CBC kernels at depth {DEMO_DEPTH}, verified on this CPU")
    for col in ("isa", "width", "file", "checks passed", "failed"):
        table.add_column(col)
    total_failed = 0
    for isa in ISAS:
        for width in WIDTHS_BY_ISA[isa]:
            spec = KernelSpec(MODES, isa, width, DEMO_DEPTH)
            missing = missing_features(FEATURES_BY_ISA[isa])
            path = args.out / f"{spec.prefix}.S"
            kernel = generate(spec, path.name)
            write_atomically({path: kernel.asm, path.with_suffix(".h"): kernel.header})
            if missing:
                table.add_row(isa, str(width), str(path), f"skipped (CPU lacks {' '.join(missing)})", "")
                continue
            results = verify_kernel(path, spec, quick=True)
            failed = sum(r.status == "fail" for r in results)
            total_failed += failed
            table.add_row(isa, str(width), str(path), str(sum(r.status == "pass" for r in results)),
                          f"[red]{failed}[/]" if failed else "0")
    console.print(table)
    return 1 if total_failed else 0


if __name__ == "__main__":
    sys.exit(main())
