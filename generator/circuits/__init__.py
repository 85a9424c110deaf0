"""Boolean circuits as data and their compilers.

The netlist format (`netlist`) and the shipped S-box circuits (`data/`, `load`), with the sympy
derivation they are checked against (`algebra`) and the constructor that writes Canright's
(`canright`); the compilers from a circuit to machine-level programs on vector registers —
three-operand (AVX/AVX2/AVX-512), two-operand (SSE) and ternlog-fused (AVX-512).
"""
from __future__ import annotations

from functools import cache
from importlib import resources

from .netlist import Circuit, parse

# name -> data file; each file's header names its published source.
CIRCUIT_FILES = {
    "sbox_bp113": "sbox_bp113.txt",
    "inv_sbox_bp121": "inv_sbox_bp121.txt",
    "sbox_bp128_depth16": "sbox_bp128_depth16.txt",
    "sbox_canright": "sbox_canright.txt",  # these two built by aesgen.circuits.canright
    "inv_sbox_canright": "inv_sbox_canright.txt",
}


@cache
def load(name: str) -> Circuit:
    """A shipped circuit by name (see CIRCUIT_FILES)."""
    if name not in CIRCUIT_FILES:
        raise KeyError(f"no circuit {name!r}; known: {', '.join(CIRCUIT_FILES)}")
    return parse(resources.files(__package__).joinpath("data", CIRCUIT_FILES[name]).read_text())
