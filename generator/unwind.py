"""DWARF unwind rules (CFI directives) for a function's body, derived from the instructions that
move rsp: one home for what a debugger, a profiler or a C++ exception needs to walk out of a
kernel from any of its instructions.

The canonical frame address (CFA: the caller's rsp before its call) is rsp + offset: 8 at
entry (the return address), 8 more per push, n more per `sub rsp, n` (frame.open_frame, the
win64 wrapper, a tail's scratch without a red zone), less again for pops, adds and
`lea rsp, [rsp + n]`.
frame.align32 drops rsp by a register's 0 or 16, which no constant offset describes: the CFA
is then a DWARF expression, rsp + offset + that register, until unalign32 adds it back.

Directives describe addresses in text order, while rsp follows control flow. So the rule at
each label is the one at the branches that reach it (they must agree, else generation fails),
and after an instruction that does not fall through (ret, jmp) the next label's rule is set
explicitly: an exit path placed after another exit's `ret` unwinds like the body it left.
"""
from __future__ import annotations

from dataclasses import dataclass

from .dsl import BuildError
from .ir import Branch, Insn, Label

# DWARF register numbers of the x86-64 GPRs (System V psABI, "DWARF Register Number Mapping").
DWARF_GPR = {"rax": 0, "rdx": 1, "rcx": 2, "rbx": 3, "rsi": 4, "rdi": 5, "rbp": 6, "rsp": 7,
             **{f"r{n}": n for n in range(8, 16)}}
DW_CFA_DEF_CFA_EXPRESSION = 0x0F
DW_OP_BREG0 = 0x70  # DW_OP_breg<n>: register n plus a signed LEB128 offset
DW_OP_PLUS = 0x22
_KEEP_RSP = ("bt.", "cmp.", "test.")  # read rsp, leave it


def _sleb128(value: int) -> list[int]:
    out = []
    while True:
        byte = value & 0x7F
        value >>= 7
        done = (value == 0 and not byte & 0x40) or (value == -1 and byte & 0x40)
        out.append(byte if done else byte | 0x80)
        if done:
            return out


@dataclass(frozen=True)
class Rule:
    """CFA = rsp + offset (+ the register `plus`, while align32 has rsp dropped by it)."""
    offset: int = 8
    plus: str | None = None

    def directive(self) -> str:
        if self.plus is None:
            return f".cfi_def_cfa %rsp, {self.offset}"
        expr = [DW_OP_BREG0 + DWARF_GPR["rsp"], *_sleb128(self.offset), DW_OP_BREG0 + DWARF_GPR[self.plus], 0,
                DW_OP_PLUS]
        return ".cfi_escape " + ", ".join(f"{b:#04x}" for b in [DW_CFA_DEF_CFA_EXPRESSION, len(expr), *expr])


@dataclass(frozen=True)
class State:
    rule: Rule = Rule()
    saved: frozenset[tuple[str, int]] = frozenset()  # (register, its slot's offset from the CFA)


class Unwind:
    """Feed the body's items in text order (`item`); each call returns the directive lines to
    place right after that item."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.state = State()  # rsp and the saved registers as the instruction stream leaves them
        self.described = State()  # what the directives so far say (.cfi_startproc: rsp + 8)
        self.falls_through = True
        self.at_label: dict[str, State] = {}

    def _describe(self) -> list[str]:
        new, old = self.state, self.described
        self.described = new
        out = []
        if new.rule != old.rule:
            plain = new.rule.plus is None and old.rule.plus is None
            out.append(f".cfi_def_cfa_offset {new.rule.offset}" if plain else new.rule.directive())
        out += [f".cfi_restore %{r}" for r, _ in sorted(old.saved - new.saved)]
        out += [f".cfi_offset %{r}, {at}" for r, at in sorted(new.saved - old.saved)]
        return out

    def _reach(self, label: str) -> None:
        known = self.at_label.setdefault(label, self.state)
        if known != self.state:
            raise BuildError(f"internal: {self.what}: the stack differs on the ways into {label} "
                             f"({known} vs {self.state})")

    def item(self, it) -> list[str]:
        if isinstance(it, Label):
            if not self.falls_through:  # reached by branches only: their state (or a later loop's)
                self.state = self.at_label.get(it.name, self.state)
            self._reach(it.name)
            self.falls_through = True
            return self._describe()
        if isinstance(it, Branch):
            self._reach(it.target)
            self.falls_through = it.cond != "jmp"
            return []
        if not isinstance(it, Insn):
            return []
        self._step(it)
        self.falls_through = it.op != "ret"
        return self._describe()

    def _step(self, it: Insn) -> None:
        op, dst = it.op, it.dst
        rule, saved = self.state.rule, self.state.saved
        if op == "push.r64":
            if rule.plus is not None:
                raise BuildError(f"internal: {self.what}: a push below align32's variable drop")
            rule = Rule(rule.offset + 8)
            saved = saved | {(dst, -rule.offset)}
        elif op == "pop.r64":
            saved = frozenset(x for x in saved if x[0] != dst)
            rule = Rule(rule.offset - 8, rule.plus)
        elif dst != "rsp" or op.startswith(_KEEP_RSP):
            return
        elif op in ("sub.r64.imm", "add.r64.imm"):
            rule = Rule(rule.offset + (it.imm if op == "sub.r64.imm" else -it.imm), rule.plus)
        elif op == "lea.r64.m" and it.srcs[0].base == "rsp" and it.srcs[0].index is None:  # moves, flags kept
            rule = Rule(rule.offset - it.srcs[0].disp, rule.plus)
        elif op == "sub.r64.r64" and rule.plus is None:
            rule = Rule(rule.offset, it.srcs[0])
        elif op == "add.r64.r64" and it.srcs[0] == rule.plus:
            rule = Rule(rule.offset)
        else:
            raise BuildError(f"internal: {self.what}: no unwind rule for {op} on rsp")
        self.state = State(rule, saved)
