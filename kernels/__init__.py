"""Kernel descriptions written in the DSL, one per C function of aesgen.functions; `build_functions`
builds a file's functions."""
from __future__ import annotations

from aesgen.dsl import FunctionBuilder
from aesgen.functions import FUNCTIONS as C_FUNCTIONS
from aesgen.ir import Function
from aesgen.spec import KernelSpec

from . import aes, cpu, gcm, gcm_stream, gcmsiv, ghash, halfgates, modes, mpc, ocb, otr, wideblock, xts
from .bitsliced import FUNCTIONS as BITSLICED_MODES_FUNCTIONS, check_config
from .bitsliced_gcm import FUNCTIONS as BITSLICED_GCM
from .bitsliced_gcmsiv import FUNCTIONS as BITSLICED_GCMSIV
from .registry import Describe, described_in

# C function -> its description (what it computes, through the builder). Its C contract (argument
# names, types, summary, modes) is its record in aesgen.functions; tests/test_functions.py checks
# that every record has a description here and every description a record. Every description
# marks itself (`@describes`, kernels/registry.py); a new kernel module joins the list below.
FUNCTIONS: dict[str, Describe] = described_in(aes, cpu, modes, gcm, gcm_stream, gcmsiv, ghash, xts, ocb, otr,
                                               wideblock, mpc, halfgates)
# The bitsliced backend's own descriptions (spec.BITSLICED_MODES), by C function.
BITSLICED: dict[str, Describe] = {**BITSLICED_MODES_FUNCTIONS, **BITSLICED_GCM, **BITSLICED_GCMSIV}


def build_function(spec: KernelSpec, name: str, compact: bool = False) -> Function:
    """`compact`: the variant for when the default's schedule needs too many registers."""
    record, describe = C_FUNCTIONS[name], FUNCTIONS[name]
    if spec.backend == "bitsliced" and name != "cpu_supported":
        check_config(spec)
        describe = BITSLICED[name]
    b = FunctionBuilder(spec, name, record.kernel_args, comment=record.summary, compact=compact)
    describe(b)
    return b.fn


def build_functions(spec: KernelSpec) -> list[Function]:
    return [build_function(spec, name) for name in spec.functions]
