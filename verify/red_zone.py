"""Red zone: what the object code does below rsp, read from its disassembly.

SysV leaves the 128 bytes below rsp to leaf functions (the red zone); code that runs where
they are not kept (an OS kernel built with -mno-red-zone) and the Microsoft x64 convention
(win64) allow nothing there. A file generated with --no-red-zone, and every win64 file,
must not touch memory below rsp; any other SysV file may use at most the 128 bytes.

Memory below rsp is reached through an rsp-based operand with a negative displacement (an
index register adds a non-negative offset: the displacement is the lowest byte touched), or
through a register derived from rsp. The scan follows those in instruction order, per
function: `mov %rsp,%r` and `add %rsp,%r` (r holding a non-negative offset, as POLYVAL's tail
walks its frame) make r = rsp + 0, `lea d(%rsp),%r` makes r = rsp + d, and `add`/`sub` of an
immediate move that offset; any other write to r ends it (a derived register changed by
another register is reported: the scan cannot bound it). An access through r counts like
one through rsp at the offset plus its displacement. Pushes, pops and calls move rsp first
and are not counted.

`selftest()` runs the scan on planted instructions (a store below rsp, an indexed read below
it, a copy of rsp) and fails unless each is caught.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from iced_x86 import (Code, FlowControl, Instruction, InstructionInfoFactory, Mnemonic, OpAccess, OpKind,
                       Register, RegisterExt)

from .disasm import AssembleError, ElfError, Function, decode, gas_text, load
from .results import CheckResult

SYSV_RED_ZONE = 128
NAME = "red zone"


@dataclass(frozen=True)
class Finding:
    function: str
    offset: int
    text: str
    below: int  # bytes below rsp (0: rsp copied into another register)

    def __str__(self) -> str:
        what = f"{self.below} bytes below rsp" if self.below else "changes a copy of rsp by a register (unbounded)"
        return f"{self.function}+{self.offset:#x}: {self.text}: {what}"


def _signed(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


def _has_memory_operand(ins: Instruction) -> bool:
    return any(ins.op_kind(k) == OpKind.MEMORY for k in range(ins.op_count))


LEA = (Code.LEA_R64_M, Code.LEA_R32_M)
ADD_IMM = (Code.ADD_RM64_IMM8, Code.ADD_RM64_IMM32)
SUB_IMM = (Code.SUB_RM64_IMM8, Code.SUB_RM64_IMM32)


def _dest(ins: Instruction) -> Register | None:
    """The full register an instruction writes as its first operand, if any."""
    if ins.op_count and ins.op_kind(0) == OpKind.REGISTER:
        return RegisterExt.full_register(ins.op0_register)
    return None


def scan(functions: list[Function]) -> list[Finding]:
    """Every access below rsp (direct, or through a register derived from rsp), and every
    derived register the scan cannot bound, in the functions' code."""
    infos = InstructionInfoFactory()
    out: list[Finding] = []
    for fn in functions:
        derived: dict[Register, int] = {Register.RSP: 0}  # register -> its offset from rsp
        for ins in fn.instructions:
            if _has_memory_operand(ins) and ins.code not in LEA and ins.memory_base in derived:
                lowest = derived[ins.memory_base] + _signed(ins.memory_displacement)
                if lowest < 0:
                    out.append(Finding(fn.name, ins.ip, gas_text(ins), -lowest))
            dest = _dest(ins)
            if dest is None or dest == Register.RSP:
                continue
            src = RegisterExt.full_register(ins.op1_register) if ins.op_count > 1 and \
                ins.op_kind(1) == OpKind.REGISTER else None
            if ins.code in LEA and ins.memory_base == Register.RSP:
                derived[dest] = _signed(ins.memory_displacement)
            elif ins.mnemonic in (Mnemonic.MOV, Mnemonic.ADD) and src == Register.RSP:
                derived[dest] = 0
            elif dest in derived and ins.code in ADD_IMM + SUB_IMM:
                derived[dest] += (1 if ins.code in ADD_IMM else -1) * _signed(ins.immediate(1))
            elif dest in derived and any(r.register == dest and r.access != OpAccess.READ
                                         for r in infos.info(ins).used_registers()):
                if ins.mnemonic in (Mnemonic.ADD, Mnemonic.SUB) and src is not None:
                    out.append(Finding(fn.name, ins.ip, gas_text(ins), 0))
                del derived[dest]
            if ins.flow_control == FlowControl.RETURN:
                derived = {Register.RSP: 0}
    return out


def allowed_below_rsp(spec) -> int:
    """Bytes a function of this file may use below rsp: the SysV red zone, or none."""
    return SYSV_RED_ZONE if getattr(spec, "red_zone_allowed", spec.abi == "sysv") else 0


def violations(spec, findings: list[Finding]) -> list[Finding]:
    limit = allowed_below_rsp(spec)
    return [f for f in findings if (f.below == 0 and limit == 0) or f.below > limit]


# Planted faults: (machine code, bytes below rsp the scan must report; 0: a copy of rsp changed by a
# register), as GNU as encodes them (not from the generator):
#   mov %rax,-8(%rsp) | xor -0x10(%rsp,%r10),%r11b | lea -0x20(%rsp),%rdx; mov %rax,(%rdx)
#   mov %rsp,%r10; add $0x10,%r10; mov %rax,-0x18(%r10) | mov %rsp,%rax; sub %rcx,%rax
# and, which must pass: mov %rax,8(%rsp); lea 16(%rsp),%rsp; mov $4,%r10; add %rsp,%r10; mov (%r10),%rax;
# add $0x20,%r10; mov -0x20(%r10),%rax.
PLANTED = (
    (bytes.fromhex("48894424f8"), 8),
    (bytes.fromhex("46325c14f0"), 16),
    (bytes.fromhex("488d5424e0" "488902"), 32),
    (bytes.fromhex("4989e2" "4983c210" "498942e8"), 8),
    (bytes.fromhex("4889e0" "4829c8"), 0),
)
HARMLESS = bytes.fromhex("4889442408" "488d642410" "49c7c204000000" "4901e2" "498b02" "4983c220" "498b42e0")


def selftest() -> CheckResult:
    """The scan must catch each planted access below rsp and copy of rsp, and pass the harmless ones."""
    missed = []
    for code, below in PLANTED:
        fn = Function("planted", ".text", 0, len(code), True, decode(code))
        found = scan([fn])
        if len(found) != 1 or found[0].below != below or not violations(_NoRedZone(), found):
            text = "; ".join(gas_text(i) for i in fn.instructions)
            missed.append(f"{code.hex()} ({text}): scan gave {[str(f) for f in found]}")
    harmless = scan([Function("harmless", ".text", 0, len(HARMLESS), True, decode(HARMLESS))])
    if harmless:
        missed.append(f"flagged harmless code: {[str(f) for f in harmless]}")
    if missed:
        return CheckResult(f"{NAME} selftest", "fail", "\n".join(missed))
    return CheckResult(f"{NAME} selftest", "pass", f"{len(PLANTED)} planted faults caught")


class _NoRedZone:
    """A spec stand-in for the self-test: a file that may not use the red zone."""

    abi = "sysv"
    red_zone_allowed = False


def check(spec, asm_path: Path | str) -> list[CheckResult]:
    """One result for the file (which functions go below rsp, and whether they may), and the self-test."""
    try:
        functions = load(asm_path).functions
    except (AssembleError, ElfError, OSError) as e:
        return [CheckResult(NAME, "fail", str(e))]
    findings = scan(functions)
    bad = violations(spec, findings)
    limit = allowed_below_rsp(spec)
    rule = f"at most {limit} bytes below rsp (SysV red zone)" if limit else "nothing below rsp"
    if bad:
        by_function: dict[str, list[Finding]] = {}
        for f in bad:
            by_function.setdefault(f.function, []).append(f)
        lines = [f"{max(fs, key=lambda f: f.below)}" + (f" (and {len(fs) - 1} more)" if len(fs) > 1 else "")
                 for fs in by_function.values()]
        result = CheckResult(NAME, "fail", f"allowed: {rule}; found:\n" + "\n".join(lines))
    else:
        users = sorted({f.function for f in findings if f.below})
        used = max((f.below for f in findings), default=0)
        detail = f"{', '.join(users)}: up to {used} bytes below rsp" if users else "no access below rsp"
        result = CheckResult(NAME, "pass", f"{detail} (allowed: {rule})")
    return [result, selftest()]
