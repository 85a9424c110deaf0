"""The DSL: a small explicit builder that kernels use to describe what to compute.

A kernel writes the work of one block group (`groups(d, block)` replicates it
d times for the scheduler to interleave), scalar bookkeeping on fixed ABI
registers, labels and branches. No global state: everything hangs off the
builder, which produces one `ir.Function`.
"""
from __future__ import annotations

import re
from contextlib import contextmanager
from typing import Callable, Iterator

from .ir import (SYSV_ARGS, BuildError, Branch, Const, Function, GroupBlock, Insn, KeyRef, Label, Mark, MarkKind, Mem,
                 Operand, Path, Schedule, VReg)
from .aesref import ROUNDS_BY_BITS
from .declassify import stem as declassify_stem
from .ops import info
from .functions import mode_of
from .spec import KernelSpec

# Caller-saved scratch GPRs the kernels may use freely (r9 only when not an argument).
SCRATCH = ("rax", "r10", "r11", "r9")
# A dispatch on the round count starts each key size's section at a label named
# <stem><key bits>_<n>, one stem per dispatch: "aes" for key_paths, and the second dispatches
# of OCB's text pass and tag and GCM-SIV's CTR pass and tag check. mainloop reads a key size's
# path as every section of that size. (Key setup's dispatch on the user key's size, `bits`,
# is not one: the code after its last section is every size's.)
KEY_SECTION_STEMS = ("aes", "text", "tag", "ctr", "check")
KEY_SECTION = re.compile(rf"^\.L\w*_({'|'.join(KEY_SECTION_STEMS)})(?P<bits>128|192|256)_\d+:$", re.M)


def key_bits(nr: int) -> int:
    """The key size of an AES path with `nr` rounds."""
    return next(bits for bits, rounds in ROUNDS_BY_BITS.items() if rounds == nr)


class FunctionBuilder:
    def __init__(self, spec: KernelSpec, name: str, args: tuple[str, ...], comment: str = "",
                 compact: bool = False) -> None:
        self.spec = spec
        self.compact = compact  # riders before the rounds, not spread: for small register files
        mode = mode_of(name)
        # Mode functions run at their (possibly tuned) width and depth; key setup at the file's.
        self.width = spec.width_for(mode) if mode else spec.width
        self.depth = spec.depth_for(mode) if mode else spec.depth
        self.fn = Function(name=name, args=args, comment=comment, width=self.width)
        self.reg = dict(zip(args, SYSV_ARGS))  # arguments 7.. are on the stack: stack_arg()
        self.fn.key_base = self.reg.get("key")
        self._items: list = self.fn.entry
        self._ids = 0
        self._labels = 0
        self.path: Path | None = None
        self._lockstep: list = []  # inside groups(): the current group's lockstep ops
        self._final: list | None = None  # ... and its closing ops, once final() was called

    @property
    def lanes(self) -> int:
        """AES blocks per register at this function's width."""
        return self.fn.width // 128

    def stack_arg(self, name: str, pushed: int = 0) -> Mem:
        """Argument 7 or later, as a memory operand at entry after `pushed` 8-byte pushes."""
        k = self.fn.args.index(name) - len(SYSV_ARGS)
        if k < 0:
            raise BuildError(f"internal: {name} is a register argument")
        return Mem("rsp", 8 + 8 * pushed + 8 * k, bits=64)

    # -- naming ------------------------------------------------------------
    def label_name(self, stem: str) -> str:
        self._labels += 1
        return f"{self.spec.local_label_prefix}{self.spec.prefix}_{self.fn.name}_{stem}{self._labels}"

    def key_section_label(self, stem: str, nr: int) -> str:
        """The label of the section for `nr` rounds in a dispatch on the round count (KEY_SECTION)."""
        if stem not in KEY_SECTION_STEMS:
            raise BuildError(f"{stem!r} is not a key-size section stem (dsl.KEY_SECTION_STEMS)")
        return self.label_name(f"{stem}{key_bits(nr)}_")

    def _vreg(self, role: str, pinned: bool = False) -> VReg:
        self._ids += 1
        return VReg(self._ids, role, pinned)

    # -- control flow -------------------------------------------------------
    def label(self, name: str) -> None:
        self._items.append(Label(name))

    def declassify_mark(self, reason: str, values_live_across: bool = False) -> None:
        """Mark the next instruction's result public by design for the static constant-time
        check, for `reason` (a key of declassify.REASONS, which the function's record must
        name): an `ir.Mark`, emitted as a local symbol `*_ct_declassify_<reason>_<n>`.
        values_live_across: register allocation passes the mark through (no branch goes
        there), instead of ending a region at it as at any label."""
        symbol = self.label_name(declassify_stem(reason)).lstrip(".")
        self._items.append(Mark(MarkKind.DECLASSIFY, symbol, values_live_across))

    def branch(self, cond: str, target: str) -> None:
        self._items.append(Branch(cond, target))

    def s(self, op: str, dst: Operand | None = None, *srcs: Operand, imm: int | None = None,
          comment: str = "") -> None:
        """A scalar (GPR, flags, mask or system) instruction, `op` named as in ops.py
        (`add.r64.imm`, `mov.r32.m32`, ...)."""
        info(op)  # an unknown name fails here, where the kernel wrote it
        self._items.append(Insn(op, dst, tuple(srcs), imm=imm, comment=comment))

    # -- vector values ------------------------------------------------------
    def pinned(self, role: str) -> VReg:
        """A register that lives for the whole path (loop-carried state, constants)."""
        return self._vreg(role, pinned=True)

    def v(self, op: str, *srcs: Operand, imm: int | None = None, width: int | None = None,
          dst: VReg | None = None, role: str = "t", mask: str | None = None, mask_elem: str = "q",
          comment: str = "") -> VReg:
        """Emit a vector op producing a new temporary (or writing `dst`)."""
        out = dst if dst is not None else self._vreg(role)
        self._items.append(Insn(op, out, tuple(srcs), imm=imm, width=width or self.width,
                                mask=mask, mask_elem=mask_elem, comment=comment))
        return out

    def store(self, mem: Mem, src: VReg, *, width: int | None = None, mask: str | None = None,
              mask_elem: str = "q", op: str = "vstore", imm: int | None = None, comment: str = "") -> None:
        self._items.append(Insn(op, mem, (src,), imm=imm, width=width or self.width, mask=mask,
                                mask_elem=mask_elem, comment=comment))

    def emit(self, insn: Insn) -> None:
        """Append a ready-made instruction (code written on physical registers: bitsliced)."""
        self._items.append(insn)

    @contextmanager
    def collect(self) -> Iterator[list]:
        """What is emitted inside goes to the yielded list instead (for the caller to merge)."""
        saved, self._items = self._items, []
        try:
            yield self._items
        finally:
            self._items = saved

    def assign(self, dst: VReg, src: VReg, width: int | None = None, comment: str = "") -> None:
        self.v("vmov", src, dst=dst, width=width, comment=comment)

    # -- structure ----------------------------------------------------------
    def groups(self, d: int, block: Callable[[int], None], comment: str = "",
               final_order: str = "ascending", riders: Callable[[], None] | None = None) -> None:
        """Describe one block group; replicate it for j = 0..d-1 as independent streams.

        Inside `block`, ops emitted after `b.final()` are the group's closing ops;
        `riders` emits independent work spread over the rounds (see `ir.GroupBlock`).
        """
        outer = self._items
        streams, finals = [], []
        for j in range(d):
            self._items = self._lockstep = []
            self._final = None
            block(j)
            streams.append(self._lockstep)
            finals.append(self._final or [])
        ridden: list = []
        if riders is not None:
            self._items = ridden
            riders()
        self._items = outer
        self._items.append(GroupBlock(streams, finals, final_order, comment, ridden, self.compact))

    def final(self) -> None:
        """From here on, the current group's ops are its closing ops."""
        self._final = []
        self._items = self._final

    def key_paths(self, key_arg: str, body: Callable[[int], None], scratch: str = "eax",
                  rounds: tuple[int, ...] = (10, 12, 14), count_at: int | None = None) -> None:
        """Dispatch on the round count stored in the schedule; build one path per key size
        (`rounds`: the counts the schedule can hold; the last one is taken otherwise).

        `key_arg` names an argument, or the register the entry code loaded the schedule's
        address into. `scratch` (a 32-bit name) must hold nothing data-derived anywhere in
        the function: the static constant-time check tracks registers, not program points.
        `count_at`: where the schedule keeps its round count (default spec.rounds_offset)."""
        key = self.reg.get(key_arg, key_arg)
        self.fn.key_base = key
        labels = {nr: self.key_section_label("aes", nr) for nr in rounds}
        at = self.spec.rounds_offset if count_at is None else count_at
        self.s("mov.r32.m32", scratch, Mem(key, at, bits=32), comment="round count")
        for nr in rounds[:-1]:
            self.s("cmp.r32.imm", scratch, imm=nr)
            self.branch("e", labels[nr])
        self.branch("jmp", labels[rounds[-1]])
        for nr in rounds:
            self.single_path(nr, lambda nr=nr: body(nr), labels[nr])

    def single_path(self, nr: int | None, body: Callable[[], None], label: str | None = None,
                    schedule: Schedule | None = None) -> None:
        """A path; `schedule`: where its round keys are, if not in the `key` argument."""
        path = Path(nr, schedule=schedule)
        self.fn.paths.append(path)
        saved, self._items, self.path = self._items, path.items, path
        if label:
            self.label(label)
        body()
        self._items, self.path = saved, None

    @contextmanager
    def at_width(self, width: int) -> Iterator[None]:
        """Temporarily describe ops at another vector width (e.g. xmm tails)."""
        saved, self.width = self.width, width
        try:
            yield
        finally:
            self.width = saved


def key(i: int) -> KeyRef:
    return KeyRef(i)


__all__ = ["FunctionBuilder", "BuildError", "key", "Const", "Mem", "KeyRef", "VReg", "SCRATCH"]
