"""What a kernel may make public by design, and how its mark in the object says which.

The static constant-time check (verify/static_ct.py) follows secrets through registers and
fails a branch or an address that depends on one. A few instructions' results are public by
design (a tag check's verdict, a caller's pointer read from an array): the kernel marks each
with `FunctionBuilder.declassify_mark(reason)`, emitted as a local symbol
`<prefix>_<function>_ct_declassify_<reason>_<n>` just before it. The check reads the reason
back from the symbol and fails the function unless its record in generator/functions.py
names that reason (`CFunction.public_by_design`), so each declassified value, not only each
function, is part of the contract docs/abi.md states (its list is written from REASONS).
"""
from __future__ import annotations

import re

# The reasons, one line each (docs/abi.md "Constant time" lists them from here).
REASONS = {
    "verdict": "the tag check's verdict (-1 or 0: whether the tag matched is what the caller learns)",
    "nonce_bits": "OCB's nonce's last 6 bits, a shift count (the nonce is public)",
    "byte_counts": "the streaming GCM context's byte counts and counter position (they count bytes)",
    "first_counter": "the streaming GCM context's first text counter (2 for a 12-byte IV, whose counters are then a function of lengths; else 0)",
    "key_pointer": "the streaming GCM context's pointer to its key (a pointer, as the arguments are)",
    "data_pointer": "the data pointer of `--gfmul ctmul-gpr`, moved out of the register its multiplier fills",
    "caller_pointer": "the caller's pointers read from arrays (keys, in, out, ivs)",
    "wire_place": "where a wire's labels are (the circuit's structure, not a secret)",
    "win64_argument": "a win64 wrapper's copy of an argument (a pointer or a length)",
}
# Reasons every function may give: the win64 wrappers add them around any body.
ALWAYS = ("win64_argument",)

MARK = "_ct_declassify"  # what every mark's symbol contains
_REASON = re.compile(rf"{MARK}_([a-z][a-z0-9]*(?:_[a-z][a-z0-9]*)*)_\d+$")


def stem(reason: str) -> str:
    """The symbol stem before the mark's number (`label_name` or the win64 wrapper adds it)."""
    if reason not in REASONS:
        raise ValueError(f"declassify reason {reason!r} is not one of {', '.join(REASONS)}")
    return f"{MARK.lstrip('_')}_{reason}_"


def reason_of(symbol: str) -> str | None:
    """The reason a mark's symbol names, or None (a mark without one)."""
    m = _REASON.search(symbol)
    return m.group(1) if m and m.group(1) in REASONS else None
