"""docs/abi.md's table of modes and functions, written from the function registry.

`python -m aesgen.tools.abi_doc docs/abi.md` (`make regen-docs`) rewrites the part of the file
between the two markers; `make regen-check` runs it and fails if the committed file differs, as
for the golden kernels. The rest of abi.md is prose, written by hand.
"""
from __future__ import annotations

import sys
from pathlib import Path

from ..functions import COMMON_FUNCTIONS, FUNCTIONS, MODE_FUNCTIONS, MODE_TITLES, MODES

BEGIN = "<!-- generated from aesgen.functions by `make regen-docs`: edit the records, not this table -->"
END = "<!-- end of the generated table -->"


def _names(functions: tuple[str, ...]) -> str:
    quoted = [f"`P_{f}`" for f in functions]
    return ", ".join(quoted[:-1]) + f" and {quoted[-1]}" if len(quoted) > 1 else quoted[0]


def function_table() -> str:
    """The generated block, markers included."""
    lines = [BEGIN, f"A file always contains {_names(COMMON_FUNCTIONS)}, followed by the functions of the",
             "modes you asked for, in the order you gave them (a function two of them share comes once):", "",
             "| mode | function | what it does |", "|---|---|---|"]
    rows = [("every file", COMMON_FUNCTIONS)] + [(m, MODE_FUNCTIONS[m]) for m in MODES]
    for mode, functions in rows:
        for i, fn in enumerate(functions):
            first = "" if i else (f"`{mode}` ({MODE_TITLES[mode]})" if mode in MODE_TITLES else mode)
            lines.append(f"| {first} | `P_{fn}` | {FUNCTIONS[fn].summary} |")
    return "\n".join([*lines, END])


def rewrite(text: str) -> str:
    """`text` with its generated block replaced by the registry's."""
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        raise ValueError("no generated function table (its two marker lines) in the file")
    return text[:start] + function_table() + text[end + len(END):]


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m aesgen.tools.abi_doc docs/abi.md", file=sys.stderr)
        return 2
    path = Path(argv[0])
    old = path.read_text()
    new = rewrite(old)
    if new != old:
        path.write_text(new)
        print(f"rewrote the function table of {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
