"""The Microsoft x64 calling convention around a SysV body (`--abi win64`).

Every kernel is written against SysV (arguments in rdi, rsi, rdx, rcx, r8, r9, then
the stack). For win64 the emitter wraps each allocated function:

* prologue: push rdi and rsi (callee-saved on Windows), allocate a frame, save the
  xmm6-15 the body writes (only those: the low 128 bits are what Windows preserves),
  then move rcx, rdx, r8, r9 and the stack arguments 5.. (above the caller's 32-byte
  shadow space) to where the SysV body reads them;
* the body, unchanged (Windows has no red zone: kernels that keep scratch below rsp
  allocate it instead when spec.abi is win64, and a body that still did is refused);
* an epilogue in place of every `ret`.

Frame, from rsp upwards at the end of the prologue (rsp 16-byte aligned there, as the
unwind codes for the xmm saves require):

    [0, 8*n)         arguments 7.. copied for the body (it reads them above its return address)
    [X, X+16*k)      the saved xmm6-15, X 16-byte aligned
    (8 bytes of padding), saved rsi, saved rdi, return address, shadow space, args 5..

A body that uses the stack (pushes, a frame, stack arguments, a scratch block) then
gets 8 more bytes, standing for its return address: it runs with rsp 8 mod 16 as after
a SysV call (legacy SSE memory operands on its frame need the alignment it planned).

The unwind information (`.seh_*`, emitted for COFF only) describes that frame exactly
for bodies that leave the stack alone (ECB, CBC, XTS, ...). The 8 alignment bytes and a
body's own pushes of rbx/rbp/r12-r15 and frames (GCM, OCB, OTR, cpu_supported, ...)
come after the prologue and are not described: no kernel calls out or raises, so no
exception unwinds through them, but a debugger's stack walk inside them is approximate.
"""
from __future__ import annotations

from dataclasses import dataclass

from .declassify import stem as declassify_stem
from .ir import SYSV_ARGS, BuildError, Insn, Mark, MarkKind, Mem, Phys

WIN64_ARGS = ("rcx", "rdx", "r8", "r9")
CALLEE_SAVED_XMM = range(6, 16)
# On entry, argument 5 is above the return address and the caller's 32-byte shadow space.
STACK_ARGS_AT_ENTRY = 8 + 32
PUSHED = ("rdi", "rsi")



@dataclass(frozen=True)
class Directive:
    """A line of assembler directives for one object format ("elf" or "coff")."""

    flavour: str
    text: str


@dataclass(frozen=True)
class Frame:
    nstack: int  # arguments 7.. the body reads from the stack
    saved_xmm: tuple[int, ...]
    realign: bool  # the body uses the stack: give it rsp 8 mod 16, as after a SysV call

    @property
    def pad(self) -> int:
        return 8 if self.realign else 0

    @property
    def xmm_area(self) -> int:
        return (8 * self.nstack + 15) // 16 * 16

    @property
    def size(self) -> int:
        """rsp after the two pushes is 8 mod 16: the allocation makes it 0 mod 16."""
        return self.xmm_area + 16 * len(self.saved_xmm) + 8

    def entry_arg(self, k: int) -> Mem:
        """Argument k (0-based, k >= 4) where the caller put it, seen from the end of the prologue."""
        return Mem("rsp", self.size + 8 * len(PUSHED) + STACK_ARGS_AT_ENTRY + 8 * (k - 4), bits=64)


def _mems(i: Insn) -> list[Mem]:
    return [o for o in (i.dst, *i.srcs) if isinstance(o, Mem)]


def bytes_below_rsp(items: list) -> int:
    """How far below rsp the items read or write (0: never): their red-zone use. An access
    at a negative displacement may add a non-negative index (CTR's byte loop), so the
    displacement is the lowest byte touched."""
    return max((-m.disp for i in items if isinstance(i, Insn) for m in _mems(i) if m.base == "rsp" and m.disp < 0),
               default=0)


def check_body(items: list, convention: str = "win64") -> None:
    """Win64 has no red zone (nor has a --no-red-zone file): a body must not touch the stack
    below rsp (the kernels allocate such scratch themselves when spec.red_zone_allowed is false)."""
    if bytes_below_rsp(items):
        raise BuildError(f"internal: a function reads or writes below rsp, which {convention} does not allow")


def uses_stack(items: list) -> bool:
    return any(isinstance(i, Insn) and (i.op in ("push.r64", "pop.r64") or i.dst == "rsp"
                                        or any(m.base == "rsp" for m in _mems(i))) for i in items)


def written_xmm(items: list) -> tuple[int, ...]:
    """The callee-saved vector registers (xmm6-15 at any width) the body uses."""
    used = {o.num for i in items if isinstance(i, Insn) for o in (i.dst, *i.srcs) if isinstance(o, Phys)}
    return tuple(n for n in CALLEE_SAVED_XMM if n in used)


def frame_for(items: list, nargs: int) -> Frame:
    check_body(items)
    nstack = max(0, nargs - len(SYSV_ARGS))
    return Frame(nstack, written_xmm(items), realign=nstack > 0 or uses_stack(items))


def _xmm_move(op: str, reg: int, mem: Mem) -> Insn:
    role = f"saved xmm{reg}"
    if op == "vstore_key":
        return Insn(op, mem, (Phys(reg, role),), width=128, comment="win64: callee-saved")
    return Insn(op, Phys(reg, role), (mem,), width=128, comment="win64: callee-saved")


def prologue(frame: Frame, nargs: int, symbol: str = "") -> list:
    """`symbol`: the function's, for the declassify marks of its argument moves."""
    out: list = []
    for r in PUSHED:
        out += [Insn("push.r64", r, comment="win64: callee-saved"), Directive("coff", f".seh_pushreg %{r}")]
    out += [Insn("sub.r64.imm", "rsp", imm=frame.size, comment="win64 frame (no red zone)"),
            Directive("coff", f".seh_stackalloc {frame.size}")]
    for j, reg in enumerate(frame.saved_xmm):
        off = frame.xmm_area + 16 * j
        out += [_xmm_move("vstore_key", reg, Mem("rsp", off)), Directive("coff", f".seh_savexmm %xmm{reg}, {off}")]
    out.append(Directive("coff", ".seh_endprologue"))
    # Arguments 7.. first, through rdi (not yet an argument; it only ever holds pointers,
    # so the static check sees a public copy), then rcx and rdx before they are overwritten.
    for j in range(frame.nstack):
        out += [Insn("mov.r64.m64", "rdi", (frame.entry_arg(6 + j),), comment=f"win64 argument {7 + j}"),
                Insn("mov.m64.r64", Mem("rsp", 8 * j, bits=64), ("rdi",), comment="where the SysV body reads it")]
    for k, (src, dst) in enumerate(zip(WIN64_ARGS, SYSV_ARGS)):
        if k < nargs:
            # The caller's pointers and lengths are public; the static check's taint is per
            # register for the whole function, and a body may fill rcx, rdx, r8 or r9 with
            # secrets later (the multiplier's rdx): the copies are declassified by design.
            out.append(Mark(MarkKind.DECLASSIFY, f"{symbol}_{declassify_stem('win64_argument')}{k + 1}", True))
            out.append(Insn("mov.r64.r64", dst, (src,), comment=f"win64 argument {k + 1}"))
    for k in range(4, min(nargs, 6)):
        out.append(Insn("mov.r64.m64", SYSV_ARGS[k], (frame.entry_arg(k),),
                        comment=f"win64 argument {k + 1}"))
    if frame.realign:
        # The unwind codes need rsp 0 mod 16 (xmm saves), a SysV body expects 8 mod 16
        # (legacy SSE memory operands on its frame): 8 more bytes, where its return address would be.
        out.append(Insn("sub.r64.imm", "rsp", imm=frame.pad, comment="SysV alignment for the body"))
    return out


def epilogue(frame: Frame) -> list:
    out: list = [_xmm_move("vload_key", reg, Mem("rsp", frame.pad + frame.xmm_area + 16 * j))
                 for j, reg in enumerate(frame.saved_xmm)]
    total = frame.size + frame.pad
    out.append(Insn("add.r64.imm", "rsp", imm=total, comment="win64 epilogue"))
    out += [Insn("pop.r64", r) for r in reversed(PUSHED)]
    return out + [Insn("ret")]


def wrap(items: list, nargs: int, symbol: str) -> list:
    """items: a SysV function's allocated items, endbr64 first; `symbol` its name. Returns the
    win64 function."""
    frame = frame_for(items, nargs)
    out = [items[0], *prologue(frame, nargs, symbol)]
    for it in items[1:]:
        out.extend(epilogue(frame) if isinstance(it, Insn) and it.op == "ret" else [it])
    return out
