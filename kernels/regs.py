"""General-purpose register names for kernels that name their GPRs by role.

Scalar kernel code names each GPR it uses by what it holds (`PARTIAL = "r9"`, `COUNT63 =
"r11"`, ...), once per module or function with a short comment, as the Linux kernel's AES
sources do; r32 and r8 give the 32- and 8-bit names of such a 64-bit role, and `arg` the
register a C argument arrives in (from the function registry, never restated).
"""
from __future__ import annotations

from aesgen.ir import SYSV_ARGS
from aesgen.functions import FUNCTIONS

RESULT = "rax"  # the return value (SysV and win64)


def arg(function: str, name: str) -> str:
    """The GPR `function`'s register argument `name` arrives in: its place among the registry's
    parameters (generator/functions.py), in SysV order (win64 files move their arguments there)."""
    k = FUNCTIONS[function].kernel_args.index(name)
    if k >= len(SYSV_ARGS):
        raise ValueError(f"{function}: {name} is a stack argument (FunctionBuilder.stack_arg)")
    return SYSV_ARGS[k]


def r32(reg: str) -> str:
    """The 32-bit name of a 64-bit GPR (r10 -> r10d, rax -> eax)."""
    if reg.startswith("r") and reg[1:].isdigit():
        return reg + "d"
    return "e" + reg[1:]


def r8(reg: str) -> str:
    """The low-byte name of a 64-bit GPR (r11 -> r11b, rax -> al, rsi -> sil)."""
    if reg.startswith("r") and reg[1:].isdigit():
        return reg + "b"
    if reg in ("rax", "rbx", "rcx", "rdx"):
        return reg[1] + "l"
    return reg[1:] + "l"
