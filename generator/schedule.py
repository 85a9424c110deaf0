"""Interleave the D block groups of every GroupBlock into one instruction list.

Round by round: op k of every group, then op k+1 (the streams are
independent, so the AES unit always has D chains in flight), with a share of
the block's riders after each round; then each group's closing ops, one group
at a time. The result is checked: every value
defined before use, and no load of the input after a store that may overlap
it when in == out.
"""
from __future__ import annotations

from typing import Callable

from .ir import BuildError, GroupBlock, Insn, Mem, VReg
from .ops import info


def interleave(block: GroupBlock) -> list[Insn]:
    out: list[Insn] = []
    longest = max((len(s) for s in block.streams), default=0)
    riders, placed = block.riders, 0
    if block.riders_first:
        out.extend(riders)
        placed = len(riders)
    for k in range(longest):
        for stream in block.streams:
            if k < len(stream):
                out.append(stream[k])
        due = max(placed, -(-(k + 1) * len(riders) // longest))  # ceil: spread evenly over the rounds
        out.extend(riders[placed:due])
        placed = due
    out.extend(riders[placed:])
    order = range(len(block.finals))
    if block.final_order == "descending":
        order = reversed(order)
    for j in order:
        out.extend(block.finals[j])
    check_order(out, block.comment)
    return out


def flatten(items: list, order: Callable[[GroupBlock], list[Insn]] = interleave) -> list:
    """Replace every GroupBlock in a list of items by its instructions in `order` (lockstep by
    default; list_schedule.list_schedule for a target's ports)."""
    out: list = []
    for item in items:
        if isinstance(item, GroupBlock):
            out.extend(order(item))
        else:
            out.append(item)
    return out


def _span(insn: Insn, m: Mem) -> tuple[str | None, int, int]:
    bits = m.bits or insn.width
    return m.index, m.disp, m.disp + bits // 8


def check_order(insns: list[Insn], where: str) -> None:
    """Defined before used; loads never follow a store to the same span (in == out)."""
    defined: set[int] = set()
    local = {i.dst.id for i in insns if isinstance(i.dst, VReg) and not i.dst.pinned}
    stores: list[tuple[str | None, int, int]] = []
    for insn in insns:
        for src in insn.srcs:
            if isinstance(src, VReg) and src.id in local and src.id not in defined:
                raise BuildError(f"schedule: {src} used before defined in {where}")
            if isinstance(src, Mem) and src.base != "rsp":  # loads and memory operands alike
                idx, lo, hi = _span(insn, src)
                for s_idx, s_lo, s_hi in stores:
                    if s_idx == idx and lo < s_hi and s_lo < hi:
                        raise BuildError(f"schedule: load after an overlapping store in {where}")
        if isinstance(insn.dst, VReg):
            defined.add(insn.dst.id)
        if isinstance(insn.dst, Mem) and info(insn.op).memory == "write" and insn.dst.base != "rsp":
            stores.append(_span(insn, insn.dst))
