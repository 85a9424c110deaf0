"""Synthesizable Verilog of AES cores from the project's AES definitions and S-box circuits.

`spec` (what to build and what is refused), `structure` (the AES facts a round needs, derived
from aesref and kernels.aes), `sbox`, `datapath` and `core` (the modules), `testbench` (the
smoke testbench), `verilog` (text), `emit` (one core's files) and `synth` (Yosys and nextpnr).
"""
from __future__ import annotations

from .emit import generate
from .spec import HdlConfigError, HdlSpec

__all__ = ["HdlConfigError", "HdlSpec", "generate"]
