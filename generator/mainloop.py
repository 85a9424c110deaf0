"""The main loop of a generated function, found in its assembly text.

A loop is a label and the first jump back to it (the hot path when there are two). The main loop of a function is
its longest loop (most instructions) on the AES-128 path (or the path of another
key size): the code between each of the function's AES-128 section labels (`aes128`,
and the second dispatch's, such as OCB's `text128`) and the next key-size label;
a function without a key-size dispatch (ghash, polyval) is searched whole. No loop name is assumed,
so the same rule finds the CTR/ECB/CBC `loop{D}x_` loops, the GHASH/POLYVAL
`hash_loop` and GCM's stitched CTR+GHASH loop (which shares gcm_encrypt with the
shorter IV, AAD and remainder hash loops). The llvm-mca model and the
instruction ceiling of `aesgen bench` read the loop found here.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from .dsl import KEY_SECTION, BuildError

# Instruction families the ceiling measures, by mnemonic: every AES round form runs on the
# AES unit as vaesenc does; every carry-less multiply (the vpclmul{l,h}q{l,h}qdq aliases
# included) as vpclmulqdq does.
UNITS = {"vaesenc": re.compile(r"v?aes(enc|dec)(last)?\Z"), "vpclmulqdq": re.compile(r"v?pclmul\w*dq\Z")}
_REGISTER_WIDTH = {"%xmm": 128, "%ymm": 256, "%zmm": 512}
_LABEL = re.compile(r"^([.\w]+):$")
_JUMP = re.compile(r"^j[a-z]+\s+([.\w]+)$")


@dataclass(frozen=True)
class Loop:
    label: str
    lines: tuple[str, ...]  # the label line to the jump back, comments stripped

    @property
    def instructions(self) -> list[str]:
        stripped = (ln.strip() for ln in self.lines)
        return [ln for ln in stripped if ln and not ln.endswith(":") and not ln.startswith(".")]

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"

    def unit_counts(self) -> Counter[tuple[str, int]]:
        """(unit instruction, width in bits) -> how many of the loop's instructions use it."""
        counts: Counter[tuple[str, int]] = Counter()
        for ins in self.instructions:
            mnemonic, _, operands = ins.partition(" ")
            unit = next((u for u, pattern in UNITS.items() if pattern.match(mnemonic)), None)
            if unit is not None:
                dest = operands.rsplit(",", 1)[-1].strip()
                counts[(unit, _REGISTER_WIDTH.get(dest[:4], 128))] += 1
        return counts


def function_text(asm: str, function: str) -> str:
    """The body of the exported `<prefix>_<function>`, up to its `.size` directive."""
    m = re.search(rf"^(\w+_{function}):$", asm, re.M)
    if not m:
        raise BuildError(f"no function {function} in the assembly")
    end = asm.find(f".size {m.group(1)},", m.end())
    return asm[m.start():end if end >= 0 else len(asm)]


def key_path(text: str, key_bits: int = 128) -> str:
    """The sections of a function's dispatches on the key size for `key_bits` (each from its
    label to the next key-size label: OCB's text pass and GCM-SIV's CTR pass come after a second
    dispatch), or the whole text if it has none."""
    marks = list(KEY_SECTION.finditer(text))
    if not marks:
        return text
    ends = [m.start() for m in marks[1:]] + [len(text)]
    return "".join(text[m.start():end] for m, end in zip(marks, ends) if int(m.group("bits")) == key_bits)


def loops(text: str) -> list[Loop]:
    """Every label with a later jump back to it, with the lines in between (comments stripped)."""
    lines = [ln.split("#", 1)[0].rstrip() for ln in text.splitlines()]
    found = []
    for i, line in enumerate(lines):
        m = _LABEL.match(line)
        if not m:
            continue
        back = [j for j in range(i + 1, len(lines))
                if (jm := _JUMP.match(lines[j].strip())) and jm.group(1) == m.group(1)]
        if back:  # the first jump back closes the hot path (GCM's shuffle-free batches; a
            # batch that may carry takes a second body, then jumps back too)
            found.append(Loop(m.group(1), tuple(lines[i:back[0] + 1])))
    return found


def main_loop(asm: str, function: str, key_bits: int = 128) -> Loop:
    """The longest loop on `function`'s path for `key_bits` (AES-128 by default)."""
    candidates = loops(key_path(function_text(asm, function), key_bits))
    if not candidates:
        raise BuildError(f"no main loop in {function}")
    return max(candidates, key=lambda lp: len(lp.instructions))
