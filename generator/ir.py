"""The IR: typed virtual vector registers, fixed-role GPRs, instructions, control flow.

A kernel function is a list of items: `Insn`, `Label`, `Branch` and `GroupBlock`
(D independent streams of vector work that the scheduler interleaves). Vector
values live in `VReg`s (virtual; regalloc maps them to xmm/ymm/zmm numbers).
General-purpose registers are named physically ("rdi", "rax"): the ABI fixes
them, so they need no allocation. Functions that depend on the AES key size
split into one `Path` per round count, each allocated on its own. What an op
means, reads and writes, and how it is encoded is in the op table (`ops.py`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Union

# The SysV x86-64 integer argument registers, in order (arguments 7.. are on the stack): what
# every kernel body is written against; the win64 wrapper, the DSL and the simulator read it.
SYSV_ARGS = ("rdi", "rsi", "rdx", "rcx", "r8", "r9")
# The registers a SysV function must give back as it found them (besides rsp), in the order kernels push them.
SYSV_CALLEE_SAVED = ("rbx", "rbp", "r12", "r13", "r14", "r15")
# The 64-bit general-purpose registers.
GPR64 = ("rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rbp", "rsp", "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15")


class BuildError(Exception):
    """A configuration the kernel cannot be built for (reported as one line, exit 2)."""


@dataclass(frozen=True)
class Phys:
    """A physical vector register number, with the role it plays (for comments): what
    allocation turns a VReg into, and what register-level code (bitsliced) writes directly."""

    num: int
    role: str = ""


@dataclass(eq=False)
class VReg:
    """A virtual vector register. `pinned` ones live for a whole path."""

    id: int
    role: str
    pinned: bool = False

    def __repr__(self) -> str:
        return f"%{self.role}{self.id}"


@dataclass(frozen=True)
class KeyRef:
    """Round key `index` of the current schedule; regalloc decides register or memory."""

    index: int


@dataclass(frozen=True)
class Const:
    """A named read-only constant, emitted in .rodata and addressed rip-relative."""

    name: str
    data: bytes


@dataclass(frozen=True)
class Mem:
    """A memory operand [base + index*scale + disp] of `bits` bits."""

    base: str
    disp: int = 0
    index: str | None = None
    scale: int = 1
    bits: int | None = None  # None: the instruction's vector width

    def sized(self, bits: int) -> "Mem":
        return Mem(self.base, self.disp, self.index, self.scale, bits)


Operand = Union[VReg, KeyRef, Const, Mem, str, int]


@dataclass(eq=False)
class Insn:
    """One operation. Vector ops work lane-wise on `width`-bit registers."""

    op: str
    dst: Operand | None = None
    srcs: tuple = ()
    imm: int | None = None
    width: int = 128
    mask: str | None = None  # opmask register name ("k1") for masked loads/stores
    mask_elem: str = "q"  # masked element size: "b" bytes, "q" qwords
    comment: str = ""

    def vregs_read(self) -> list[VReg]:
        out = [s for s in self.srcs if isinstance(s, VReg)]
        return out

    def vreg_written(self) -> VReg | None:
        return self.dst if isinstance(self.dst, VReg) else None


@dataclass(frozen=True)
class Label:
    name: str


@dataclass(frozen=True)
class Branch:
    cond: str  # "jmp", or a condition code: "b", "ae", "e", "ne", "a", "be"
    target: str


class MarkKind(Enum):
    DECLASSIFY = "declassify"  # the next instruction's result is public by design (static CT check)


@dataclass(frozen=True)
class Mark:
    """A point in the code that a later stage finds by its type; no branch goes there.

    DECLASSIFY is emitted as the local symbol `symbol`, which the verifier's static
    constant-time check reads from the object (`*_ct_declassify*`). Register allocation
    ends a straight-line region at a mark as at a label, unless `values_live_across`.
    """

    kind: MarkKind
    symbol: str = ""
    values_live_across: bool = False


@dataclass
class GroupBlock:
    """D streams of work, one per block group, that the scheduler interleaves.

    `streams` advance in lockstep (op k of every group before op k+1 of any):
    that is the round-by-round interleave that keeps the AES pipe full.
    `finals` are each group's closing ops (load the input, last round, store),
    emitted one group at a time in `final_order` so that only a couple of
    registers are needed for them; descending order lets a group reload the
    input block just before its own range, which a later group has not
    overwritten yet (in == out).

    `riders` is independent work (GCM: hashing a batch of blocks) spread evenly over
    the lockstep rounds, so that another unit (the carry-less multiplier) issues while
    the AES rounds run; it must not depend on the streams or finals. When the register
    file cannot hold both at once, `riders_first` runs them all before the rounds.
    """

    streams: list[list[Insn]]
    finals: list[list[Insn]] = field(default_factory=list)
    final_order: str = "ascending"
    comment: str = ""
    riders: list[Insn] = field(default_factory=list)
    riders_first: bool = False  # all riders before the rounds (fewer live registers), not spread


Item = Union[Insn, Label, Branch, Mark, GroupBlock]


def pinned_vregs(items: list) -> dict[int, VReg]:
    """The pinned values (loop-carried: one register for the whole path) that `items` name, by
    id: Insns, and a GroupBlock's streams, finals and riders. Register allocation reserves
    them; the list scheduler leaves the rest of the register file to temporaries."""
    out: dict[int, VReg] = {}
    for it in items:
        if isinstance(it, GroupBlock):
            insns = [*it.riders, *(i for s in it.streams + it.finals for i in s)]
        else:
            insns = [it] if isinstance(it, Insn) else []
        for i in insns:
            for o in (i.dst, *i.srcs):
                if isinstance(o, VReg) and o.pinned:
                    out[o.id] = o
    return out


@dataclass(frozen=True)
class Schedule:
    """Where a path's round keys (`KeyRef`) live when not in the `key` argument's schedule:
    key i at [base + disp + i * stride]; `aligned` when every key is aligned to its width."""

    base: str
    disp: int
    stride: int
    aligned: bool = False


@dataclass
class Path:
    """Straight-line and looping code for one AES round count (or the only path)."""

    nr: int | None
    items: list[Item] = field(default_factory=list)
    uses_keys: bool = False
    schedule: Schedule | None = None  # None: the `key` argument's (spec.key_stride apart)


@dataclass
class Function:
    """One exported C function: entry code, then its paths."""

    name: str
    args: tuple[str, ...]
    entry: list[Item] = field(default_factory=list)
    paths: list[Path] = field(default_factory=list)
    comment: str = ""
    width: int = 128  # the vector width of the function's main work
    key_base: str | None = None  # the GPR holding the AES schedule's address in its paths


XOR3 = 0x96  # ternlog's truth table for a ^ b ^ c (symmetric: any source order)
