"""The GF(2^128) doubling methods a kernel can be generated with, and which configs allow them.

The methods themselves are DSL (kernels/gfdouble.py); this is what the spec, the CLI and the
config check need to know about them."""
from __future__ import annotations

METHODS = ("krovetz", "ternlog", "table", "lanewise", "batch")
SERIAL = ("krovetz", "ternlog", "table")  # one doubling at a time
CLMUL_METHODS = ("lanewise", "batch")  # powers of x with a carry-less multiply
TABLE_METHODS = ("table",)  # data-dependent loads: only with --allow-table-lookups
# Modes whose tweaks or masks advance by doubling (the spec's `gfdouble` applies to them).
DOUBLING_MODES = ("gfdouble", "xts", "otr")


def default_method(isa: str, width: int) -> str:
    """What a kernel uses unless told: measured with `aesgen explore gfdouble` (docs/tuning.md)."""
    if width == 128:
        return "ternlog" if isa == "avx512" else "krovetz"
    return "batch"


def refusal(method: str, isa: str, width: int, table_lookups: bool) -> str | None:
    """Why `method` cannot be generated for this ISA and width (None: it can)."""
    if method not in METHODS:
        return f"unknown doubling method '{method}'; choose from {', '.join(METHODS)}"
    if method == "ternlog" and isa != "avx512":
        return "doubling method ternlog needs AVX-512 (vpternlogd): use --isa avx512"
    if method in TABLE_METHODS:
        if not table_lookups:
            return (f"doubling method {method} loads from a data-dependent address (not constant-time): "
                    "pass --allow-table-lookups to generate it")
        if width != 128 or isa not in ("sse", "avx"):
            return f"doubling method {method} works one xmm block at a time: use --isa sse or avx (width 128)"
    if method in CLMUL_METHODS and isa == "sse":
        return f"doubling method {method} needs VEX carry-less multiplies: use --isa avx or wider"
    return None


def needs_clmul(method: str, width: int) -> bool:
    """Wide registers start their lanes with the clmul ladder whatever the method."""
    return method in CLMUL_METHODS or width > 128
