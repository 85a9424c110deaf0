"""Constant-time scan of an assembled kernel: no secret-dependent branch, address or divide.

The model is deliberately conservative and flow-insensitive per function:

* Secrets: every vector and mask register (xmm/ymm/zmm/k), and every value a GPR gets from
  memory, except *public loads*: a 4-byte load at one of `public_load_disps` (the round count
  in the key schedule), and rsp-relative reloads of stack bytes that no instruction of the
  function ever stored a secret into (pushes/pops share one "pushed" pool).
* A GPR is tainted (for the whole function) once any instruction writes it from a tainted
  register, a secret load or tainted flags; passes repeat until nothing new is tainted.
* Flags are tracked per bit in linear order: a flag is tainted when its last writer had a
  tainted input; flags an instruction sets to constants (e.g. `xor %eax,%eax`) are clean.

Violations: (a) secret-address: a memory operand whose base or index is tainted (a warning
when table lookups are allowed); (b) secret-branch: jcc/loop/jrcxz, cmovcc or setcc reading a
tainted flag or register; (c) secret-indirect: jmp/call through a tainted target;
(d) variable-time: div/idiv with a tainted operand.

Known limits of the stack model: slots are keyed by their rsp displacement (rsp is assumed
not to move inside the body), and when rsp is copied into another register, any secret
store through a non-rsp base makes every stack reload secret.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from iced_x86 import (
    ConditionCode, FlowControl, Instruction, InstructionInfoFactory, Mnemonic, MemorySizeExt,
    OpAccess, OpKind, Register, RegisterExt,
)

from aesgen.declassify import ALWAYS, MARK as DECLASSIFY_MARK, reason_of
from aesgen.functions import FUNCTIONS

from .disasm import AssembleError, ElfError, Function, assemble, gas_register, gas_text, is_padding, load, read_elf
from .results import CheckResult

READS = frozenset({OpAccess.READ, OpAccess.COND_READ, OpAccess.READ_WRITE,
                   OpAccess.READ_COND_WRITE})
WRITES = frozenset({OpAccess.WRITE, OpAccess.COND_WRITE, OpAccess.READ_WRITE,
                    OpAccess.READ_COND_WRITE})
VARIABLE_TIME = frozenset({Mnemonic.DIV, Mnemonic.IDIV})
INDIRECT = frozenset({FlowControl.INDIRECT_BRANCH, FlowControl.INDIRECT_CALL})

RULE_ADDRESS = "secret-address"
RULE_BRANCH = "secret-branch"
RULE_INDIRECT = "secret-indirect"
RULE_VARTIME = "variable-time"


@dataclass(frozen=True)
class Violation:
    function: str
    offset: int  # byte offset of the instruction in its section
    text: str  # GAS text
    rule: str  # one of the RULE_* names
    reason: str
    severity: str = "error"  # "error" | "warning"

    def __str__(self) -> str:
        tag = "" if self.severity == "error" else " (warning)"
        return f"{self.function}+{self.offset:#x}: {self.text}: {self.rule}{tag}: {self.reason}"


def _signed64(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


class _FunctionTaint:
    """Taint facts that only grow while the passes over one function run."""

    def __init__(self, public_load_disps: frozenset[int]) -> None:
        self.public_disps = public_load_disps
        self.gprs: set[Register] = set()  # full 64-bit registers
        self.stack: set[tuple[int, int]] = set()  # secret rsp-relative byte ranges [lo, hi)
        self.stack_wild = False  # a secret may be anywhere on the stack
        self.pushed_secret = False  # some push (or call-like store) stored a secret
        self.rsp_escaped = False  # rsp was copied into another register
        self.rsp_delta = 0  # rsp relative to function entry at the current instruction
        self.declassify: frozenset[int] = frozenset()  # ips whose results are public by design
        self.restores: frozenset[int] = frozenset()  # ips of pops that restore the caller's registers

    def snapshot(self) -> tuple:
        return (len(self.gprs), len(self.stack), self.stack_wild, self.pushed_secret,
                self.rsp_escaped)

    def reg_secret(self, reg: Register) -> bool:
        if reg == Register.NONE:
            return False
        if RegisterExt.is_vector_register(reg) or RegisterExt.is_k(reg):
            return True
        if RegisterExt.is_gpr(reg):
            return RegisterExt.full_register(reg) in self.gprs
        return False  # rip, segment registers: public

    def rsp_slot(self, mem) -> tuple[int, int] | None:
        """The byte range relative to rsp at function entry (pushes and frames tracked)."""
        if mem.base == Register.RSP and mem.index == Register.NONE:
            lo = _signed64(mem.displacement) + self.rsp_delta
            return lo, lo + max(1, MemorySizeExt.size(mem.memory_size))
        return None

    def stack_secret(self, lo: int, hi: int) -> bool:
        return self.stack_wild or any(a < hi and lo < b for a, b in self.stack)


class _Scanner:
    def __init__(self, public_load_disps: Iterable[int], allow_table_lookups: bool) -> None:
        self.public_disps = frozenset(d & 0xFFFFFFFFFFFFFFFF for d in public_load_disps)
        self.allow_table_lookups = allow_table_lookups
        self.factory = InstructionInfoFactory()

    def scan(self, fn: Function, declassify: frozenset[int] = frozenset()) -> list[Violation]:
        """`declassify`: ips of instructions whose outputs are public by design (a tag
        verification's verdict): their results and flags are not tainted."""
        t = _FunctionTaint(self.public_disps)
        t.declassify = declassify
        infos = [(ins, self.factory.info(ins)) for ins in fn.instructions if not is_padding(ins)]
        t.restores = _epilogue_pops(infos)
        while True:  # grow taint to a fixpoint, then report in one last pass
            before = t.snapshot()
            self._pass(fn, infos, t, None)
            if t.snapshot() == before:
                break
        found: list[Violation] = []
        self._pass(fn, infos, t, found)
        return found

    def _load_public(self, t: _FunctionTaint, ins: Instruction, mem) -> bool:
        if any(t.reg_secret(r) for r in (mem.base, mem.index)):
            return False
        slot = t.rsp_slot(mem)  # push/pop too: their slots are tracked like any other
        if slot is not None:
            return not t.stack_secret(*slot)
        return (MemorySizeExt.size(mem.memory_size) == 4
                and mem.displacement in self.public_disps
                and mem.index == Register.NONE)

    def _pass(self, fn: Function, infos, t: _FunctionTaint, out: list[Violation] | None) -> None:
        tainted_flags = 0  # rflags bits whose last writer had a secret input

        def report(ins: Instruction, rule: str, reason: str, severity: str = "error") -> None:
            if out is not None:
                text = gas_text(ins, fn.relocations.get(ins.ip))
                out.append(Violation(fn.name, ins.ip, text, rule, reason, severity))

        t.rsp_delta = 0
        epilogue_delta: int | None = None  # rsp before an epilogue, restored after its ret
        for ins, info in infos:
            # rsp bookkeeping, in linear order: push/pop and add/sub of a constant. The code
            # after a ret (another exit path) runs with the frame the epilogue undid.
            pre_delta = t.rsp_delta
            if ins.mnemonic in (Mnemonic.POP, Mnemonic.ADD) and epilogue_delta is None and (
                    ins.mnemonic == Mnemonic.POP or ins.op0_register == Register.RSP):
                epilogue_delta = t.rsp_delta
            used_regs = info.used_registers()
            used_mem = info.used_memory()
            read_regs = [u.register for u in used_regs if u.access in READS]
            written = {RegisterExt.full_register(u.register) for u in used_regs
                       if u.access in WRITES and RegisterExt.is_gpr(u.register)}

            # (a) every memory access (also prefetches, string ops, vsib) needs a public address.
            for mem in used_mem:
                bad = [r for r in (mem.base, mem.index) if t.reg_secret(r)]
                if bad:
                    names = ", ".join(_reg_name(r) for r in bad)
                    if self.allow_table_lookups:
                        report(ins, RULE_ADDRESS, f"address uses tainted {names}", "warning")
                    else:
                        report(ins, RULE_ADDRESS, f"address uses tainted {names}")

            secret_load = any(m.access in READS and not self._load_public(t, ins, m)
                              for m in used_mem)
            secret_regs = [r for r in read_regs if t.reg_secret(r)]
            flags_in = ins.rflags_read & tainted_flags
            secret_in = bool(secret_regs or secret_load or flags_in)
            if ins.ip in t.declassify:
                secret_in = False

            # (b) conditionals: jcc / loop / jrcxz / jkcc, cmovcc, setcc.
            # A branch's register inputs (jrcxz/loop: rcx, jkcc: k) are its condition; cmovcc's
            # are data, so only its flags count.
            is_branch = ins.flow_control == FlowControl.CONDITIONAL_BRANCH
            if is_branch or ins.condition_code != ConditionCode.NONE:
                cond_regs = secret_regs if is_branch else []
                if flags_in or cond_regs:
                    what = "tainted flags" if flags_in else "tainted " + _reg_name(cond_regs[0])
                    report(ins, RULE_BRANCH, f"condition depends on {what}")

            # (c) indirect jump/call: the target must be public.
            if ins.flow_control in INDIRECT:
                if ins.op0_kind == OpKind.REGISTER:
                    target_secret = t.reg_secret(ins.op0_register)
                else:
                    target_secret = any(not self._load_public(t, ins, m) for m in used_mem
                                        if m.access in READS)
                if target_secret:
                    report(ins, RULE_INDIRECT, "branch target is tainted")

            # (d) data-dependent latency.
            if ins.mnemonic in VARIABLE_TIME and secret_in:
                report(ins, RULE_VARTIME, "operand is tainted")

            # Flags: written bits take the input taint; set/cleared bits become constants.
            computed = ins.rflags_written | ins.rflags_undefined
            if secret_in:
                tainted_flags |= computed
            else:
                tainted_flags &= ~computed
            tainted_flags &= ~(ins.rflags_cleared | ins.rflags_set)

            # GPR propagation. Stack instructions only move rsp by a constant.
            for reg in written:
                if reg == Register.RSP and ins.is_stack_instruction:
                    continue
                if ins.ip in t.restores:  # the caller's value, dead in this function
                    continue
                if secret_in:
                    t.gprs.add(reg)

            # rsp copied out (mov %rsp,%rbp / lea 8(%rsp),%rax): aliases of the stack exist.
            if not ins.is_stack_instruction and written - {Register.RSP} and (
                    any(ins.op_kind(i) == OpKind.REGISTER and ins.op_register(i) == Register.RSP
                        for i in range(ins.op_count))
                    or (ins.mnemonic == Mnemonic.LEA and Register.RSP in
                        (ins.memory_base, ins.memory_index))):
                t.rsp_escaped = True

            # Stores: remember which stack bytes may hold secrets.
            for mem in used_mem:
                if mem.access not in WRITES:
                    continue
                if not secret_in:
                    continue
                slot = t.rsp_slot(mem)
                if slot is not None:
                    t.stack.add(slot)
                elif mem.base == Register.RSP or mem.index == Register.RSP:
                    t.stack_wild = True
                elif t.rsp_escaped:
                    t.stack_wild = True

            if ins.mnemonic == Mnemonic.PUSH:
                t.rsp_delta = pre_delta - 8
            elif ins.mnemonic == Mnemonic.POP:
                t.rsp_delta = pre_delta + 8
            elif ins.mnemonic in (Mnemonic.SUB, Mnemonic.ADD) and ins.op_count == 2 \
                    and ins.op0_kind == OpKind.REGISTER and ins.op0_register == Register.RSP \
                    and ins.op1_kind in (OpKind.IMMEDIATE8TO64, OpKind.IMMEDIATE32TO64):
                imm = _signed64(ins.immediate(1))
                t.rsp_delta = pre_delta + (imm if ins.mnemonic == Mnemonic.ADD else -imm)
            elif ins.mnemonic == Mnemonic.LEA and ins.op0_register == Register.RSP \
                    and ins.memory_base == Register.RSP and ins.memory_index == Register.NONE:
                # lea d(%rsp),%rsp releases scratch inside the body (win64 CTR tails): never an epilogue
                t.rsp_delta = pre_delta + _signed64(ins.memory_displacement)
            elif ins.flow_control == FlowControl.RETURN and epilogue_delta is not None:
                t.rsp_delta = epilogue_delta
                epilogue_delta = None


def _epilogue_pops(infos) -> frozenset[int]:
    """ips of pops followed by nothing but pops up to a ret: they restore the caller's
    registers, which this function never reads again, so their taint cannot matter."""
    out: set[int] = set()
    tail = False  # inside a run of pops that ends at a ret (scanning backwards)
    for ins, _ in reversed(infos):
        if ins.flow_control == FlowControl.RETURN:
            tail = True
        elif ins.mnemonic == Mnemonic.POP and tail:
            out.add(ins.ip)
        else:
            tail = False
    return frozenset(out)


def _reg_name(reg: Register) -> str:
    return gas_register(reg)


def scan(functions: Iterable[Function], *, public_load_disps: Iterable[int] = (),
         allow_table_lookups: bool = False) -> list[Violation]:
    """Violations in every function, in function then address order."""
    scanner = _Scanner(public_load_disps, allow_table_lookups)
    out: list[Violation] = []
    for fn in functions:
        out.extend(scanner.scan(fn))
    return out


MAX_DETAIL_LINES = 20


def _detail(violations: list[Violation]) -> str:
    lines = [str(v) for v in violations[:MAX_DETAIL_LINES]]
    if len(violations) > MAX_DETAIL_LINES:
        lines.append(f"... and {len(violations) - MAX_DETAIL_LINES} more")
    return "\n".join(lines)


def check(spec, asm_path: Path | str, *, allow_table_lookups: bool | None = None) -> list[CheckResult]:
    """One `ct <function>` result per exported function (plus any other code found).
    Table lookups are warnings only in files generated with --allow-table-lookups."""
    if allow_table_lookups is None:
        allow_table_lookups = bool(getattr(spec, "table_lookups", False))
    try:
        functions = load(asm_path).functions
    except (AssembleError, ElfError, OSError) as e:
        return [CheckResult("ct", "fail", str(e))]
    by_name = {f.name: f for f in functions}
    scanner = _Scanner(set(getattr(spec, "public_load_disps", (spec.rounds_offset,))), allow_table_lookups)
    marks = declassify_marks(asm_path)
    declassify = frozenset(marks)
    results: list[CheckResult] = []
    exported = [spec.symbol(name) for name in spec.functions]
    for fn_name, symbol in zip(spec.functions, exported):
        fn = by_name.get(symbol)
        if fn is None:
            results.append(CheckResult(f"ct {fn_name}", "fail", f"symbol {symbol} not found"))
            continue
        undeclared = undeclared_marks(fn, fn_name, marks)
        if undeclared:
            results.append(CheckResult(f"ct {fn_name}", "fail", undeclared))
            continue
        results.append(_result(f"ct {fn_name}", scanner.scan(fn, declassify)))
    # Local helpers and stray code can be reached too; never leave bytes unscanned.
    for fn in functions:
        if fn.name not in exported:
            results.append(_result(f"ct {fn.name}", scanner.scan(fn)))
    return results


def declassify_marks(asm_path: Path | str) -> dict[int, str]:
    """Offset -> name of the local symbols named *_ct_declassify*: the generator marks the one
    instruction whose result is public by design (e.g. the tag check's verdict)."""
    elf = read_elf(Path(assemble(asm_path)).read_bytes())
    return {s.value: s.name for s in elf.symbols if DECLASSIFY_MARK in s.name}


def undeclared_marks(fn: Function, fn_name: str, marks: dict[int, str]) -> str:
    """Why fn's declassify marks break the contract, or "": a mark that names no reason, or a
    reason (other than declassify.ALWAYS) the function's record does not name."""
    record = FUNCTIONS.get(fn_name)
    named = set(ALWAYS) | set(record.public_by_design if record is not None else ())
    inside = sorted(name for at, name in marks.items() if fn.offset <= at < fn.offset + fn.size)
    unnamed = [name for name in inside if reason_of(name) is None]
    if unnamed:
        return f"declassifies ({', '.join(unnamed)}) for no reason generator/declassify.py knows"
    undeclared = [name for name in inside if reason_of(name) not in named]
    if not undeclared:
        return ""
    return (f"declassifies ({', '.join(undeclared)}) but generator/functions.py does not name "
            f"{' or '.join(sorted({reason_of(n) for n in undeclared}))} public by design for {fn_name} "
            f"(docs/abi.md, Constant time)")


def _result(name: str, violations: list[Violation]) -> CheckResult:
    errors = [v for v in violations if v.severity == "error"]
    if errors:
        return CheckResult(name, "fail", _detail(violations))
    if violations:
        return CheckResult(name, "pass", f"{len(violations)} warning(s)\n" + _detail(violations))
    return CheckResult(name, "pass")
