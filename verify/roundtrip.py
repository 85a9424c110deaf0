"""Round trip: the object file's disassembly equals the instructions the generator meant.

Comparison rules, per instruction pair (after dropping NOP/int3 padding from the decoded side):
* direct branches and calls: same mnemonic (the assembler picks rel8 or rel32 itself); when both
  sides' targets resolve to an instruction of their own list, the targets must match too;
* RIP-relative memory operands: everything but the displacement (relocations patch it);
* everything else: the same iced `Code` (so VEX vs EVEX and operand forms count) and GAS text.
"""
from __future__ import annotations

import bisect
import difflib
from collections import Counter
from functools import lru_cache
from pathlib import Path
from typing import Sequence

from iced_x86 import Code, FlowControl, Instruction

from aesgen.pipeline import generate

from .disasm import AssembleError, ElfError, gas_text, is_padding, load
from .results import CheckResult

MAX_MISMATCHES = 20
DIRECT_FLOW = frozenset({FlowControl.CONDITIONAL_BRANCH, FlowControl.UNCONDITIONAL_BRANCH,
                         FlowControl.CALL})


def _is_branch(ins: Instruction) -> bool:
    return ins.flow_control in DIRECT_FLOW


def _key(ins: Instruction) -> tuple:
    """What must be equal between an intended and a decoded instruction."""
    if _is_branch(ins):
        return ("branch", ins.mnemonic)
    if ins.is_ip_rel_memory_operand:
        norm = ins.copy()
        norm.ip = 0
        norm.memory_displacement = norm.next_ip  # prints as `(%rip)` whatever the length
        return (ins.code, gas_text(norm))
    return (ins.code, gas_text(ins))


def _describe(ins: Instruction) -> str:
    if ins.code == Code.INVALID:
        return "(bad)"
    if _is_branch(ins):
        return gas_text(ins).split()[0] + " <target>"
    return f"{gas_text(ins)}  [{_code_name(ins.code)}]"


@lru_cache(maxsize=1)
def _code_names() -> dict[int, str]:
    return {getattr(Code, n): n for n in dir(Code) if not n.startswith("_") and n.isupper()}


def _code_name(code: int) -> str:
    return _code_names().get(code, f"Code#{code}")


def _label_indexes(insns: Sequence[Instruction]) -> dict[int, int]:
    """Intended side: ips that occur exactly once are labels a branch may target."""
    counts = Counter(ins.ip for ins in insns)
    return {ins.ip: i for i, ins in enumerate(insns) if counts[ins.ip] == 1}


def _resolve_decoded(target: int, ips: list[int]) -> int | None:
    """Decoded side: a target may land on alignment padding; take the next kept instruction."""
    i = bisect.bisect_left(ips, target)
    return i if i < len(ips) else None


def compare(intended: Sequence[Instruction], decoded: Sequence[Instruction]) -> list[str]:
    """Mismatch descriptions (at most MAX_MISMATCHES, then a count); empty means equal."""
    kept = [ins for ins in decoded if not is_padding(ins)]
    out: list[str] = []
    if len(intended) != len(kept):
        out.append(f"length: intended {len(intended)} instructions, decoded {len(kept)} "
                   f"(after dropping padding)")
        out.extend(_diff(intended, kept))
        return _cap(out)

    intended_targets = _label_indexes(intended)
    decoded_ips = [ins.ip for ins in kept]
    for i, (a, b) in enumerate(zip(intended, kept)):
        ka, kb = _key(a), _key(b)
        if ka != kb:
            out.append(f"#{i} @{b.ip:#x}: intended {_describe(a)}, decoded {_describe(b)}")
            continue
        if ka[0] == "branch":
            ta = intended_targets.get(a.near_branch_target)
            tb = _resolve_decoded(b.near_branch_target, decoded_ips)
            if ta is not None and tb is not None and ta != tb:
                out.append(f"#{i} @{b.ip:#x}: {gas_text(b).split()[0]} targets instruction "
                           f"#{tb}, intended #{ta}")
    return _cap(out)


def _diff(intended: Sequence[Instruction], kept: Sequence[Instruction]) -> list[str]:
    """Describe a length mismatch as inserted/missing/replaced runs."""
    sm = difflib.SequenceMatcher(a=[_key(i) for i in intended], b=[_key(i) for i in kept],
                                 autojunk=False)
    out: list[str] = []
    for op, a0, a1, b0, b1 in sm.get_opcodes():
        if op == "equal":
            continue
        if op in ("delete", "replace"):
            for i in range(a0, a1):
                out.append(f"intended #{i} {'missing' if op == 'delete' else 'replaced'}: "
                           f"{_describe(intended[i])}")
        if op in ("insert", "replace"):
            for j in range(b0, b1):
                out.append(f"decoded @{kept[j].ip:#x} {'extra' if op == 'insert' else 'instead'}: "
                           f"{_describe(kept[j])}")
    return out


def _cap(lines: list[str]) -> list[str]:
    if len(lines) <= MAX_MISMATCHES:
        return lines
    return lines[:MAX_MISMATCHES] + [f"... and {len(lines) - MAX_MISMATCHES} more"]


def check(spec, asm_path: Path | str) -> list[CheckResult]:
    """One `roundtrip` result: regenerate `spec` and compare with the assembled `.text`."""
    try:
        decoded = load(asm_path).text
    except (AssembleError, ElfError, OSError) as e:
        return [CheckResult("roundtrip", "fail", str(e))]
    intended = list(generate(spec).instructions)
    mismatches = compare(intended, decoded)
    if mismatches:
        return [CheckResult("roundtrip", "fail", "\n".join(mismatches))]
    return [CheckResult("roundtrip", "pass", f"{len(intended)} instructions match")]
