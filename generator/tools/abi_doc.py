"""docs/abi.md's generated parts: the table of modes and functions (from the function
registry) and what each function makes public by design (from the records and the
declassify reasons).

`python -m aesgen.tools.abi_doc docs/abi.md` (`make regen-docs`) rewrites each part between its
two markers; `make regen-check` runs it and fails if the committed file differs, as for the
golden kernels. The rest of abi.md is prose, written by hand.
"""
from __future__ import annotations

import sys
from pathlib import Path

from ..declassify import ALWAYS, REASONS, stem
from ..functions import COMMON_FUNCTIONS, FUNCTIONS, MODE_FUNCTIONS, MODE_TITLES, MODES

BEGIN = "<!-- generated from aesgen.functions by `make regen-docs`: edit the records, not this table -->"
END = "<!-- end of the generated table -->"
PUBLIC_BEGIN = ("<!-- generated from aesgen.functions (public_by_design) and aesgen.declassify by "
                "`make regen-docs` -->")
PUBLIC_END = "<!-- end of the generated list -->"


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


def public_by_design() -> str:
    """The generated list of declassify reasons and the functions that give each, markers included."""
    lines = [PUBLIC_BEGIN, "| public by design | mark | functions |", "|---|---|---|"]
    for reason, what in REASONS.items():
        users = [name for name, fn in FUNCTIONS.items() if reason in fn.public_by_design]
        where = "every function of a win64 file" if reason in ALWAYS else ", ".join(f"`P_{u}`" for u in users)
        lines.append(f"| {what} | `_{stem(reason)}` | {where} |")  # what follows the function's name
    return "\n".join([*lines, PUBLIC_END])


# The generated parts: (first marker, last marker, what goes between them, inclusive).
PARTS = ((BEGIN, END, function_table), (PUBLIC_BEGIN, PUBLIC_END, public_by_design))


def rewrite(text: str) -> str:
    """`text` with each generated part replaced by the registry's."""
    for begin, end_marker, make in PARTS:
        start, end = text.find(begin), text.find(end_marker)
        if start < 0 or end < start:
            raise ValueError(f"no generated part ({begin}) between its two marker lines in the file")
        text = text[:start] + make() + text[end + len(end_marker):]
    return text


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m aesgen.tools.abi_doc docs/abi.md", file=sys.stderr)
        return 2
    path = Path(argv[0])
    old = path.read_text()
    new = rewrite(old)
    if new != old:
        path.write_text(new)
        print(f"rewrote the generated parts of {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
