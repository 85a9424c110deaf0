"""Stack frames: the one convention every kernel with scratch on the stack follows.

At entry rsp is 8 mod 16 (the call pushed the return address). A function that needs
callee-saved registers pushes them first (`push_saved`, in the order given), then takes a
frame with one `sub rsp, size` (`open_frame`), the size from `aligned`: the payload rounded
up so that rsp is 16-byte aligned after the pushes and the `sub`. rsp moves only by
constants and is never copied into another register (no frame pointer), so every slot is
rsp + a constant the static constant-time check can track. The epilogue gives the frame
back and pops the saved registers in reverse order (`drop_frame`), then returns
(`leave_frame`: `aes.finish`, vzeroupper first after ymm/zmm code). Secrets in the frame
are wiped by the kernel before it is dropped.

A frame whose vectors must not split cache lines (32-byte tables) is aligned to 32 bytes
inside the body (`align32`): rsp goes down by 0 or 16, a public amount kept in a register
and given back by `unalign32` before the frame is dropped. The amount comes from rsp's bit 4
through the flags (bt, sbb), so rsp is still never copied into another register.

win64 files need nothing more than stack probes for frames over a page (`open_frame`): their
wrapper saves xmm6-15, rdi and rsi around the body.
"""
from __future__ import annotations

from aesgen.dsl import FunctionBuilder
from aesgen.ir import SYSV_CALLEE_SAVED, Mem

from .aes import finish

PAGE = 4096  # the smallest x86-64 page: what a Windows stack grows by
# The SysV callee-saved GPRs, in push order: what GCM, GCM-SIV, OCB and OTR save.
CALLEE_SAVED = SYSV_CALLEE_SAVED


def aligned(payload: int, pushes: int = len(CALLEE_SAVED)) -> int:
    """The frame size for `payload` bytes (a multiple of 8) below `pushes` pushed registers:
    8 more when rsp would otherwise end 8 mod 16."""
    return payload + (8 + 8 * pushes + payload) % 16


def push_saved(b: FunctionBuilder, saved: tuple[str, ...] = CALLEE_SAVED) -> None:
    """The prologue's pushes (stack arguments are then at b.stack_arg(name, pushed=len(saved)))."""
    for r in saved:
        b.s("push.r64", r)


def open_frame(b: FunctionBuilder, size: int, comment: str = "") -> None:
    """rsp down by `size` (from `aligned`): the frame's slots are at rsp + 0 .. size. On win64
    a frame over a page goes down a page at a time, touching each (a stack probe, as __chkstk):
    Windows commits the stack one guard page at a time, and an access past it faults."""
    while b.spec.abi == "win64" and size > PAGE:
        b.s("sub.r64.imm", "rsp", imm=PAGE, comment="win64 stack probe: one page")
        b.s("mov.m32.imm", Mem("rsp", 0, bits=32), imm=0, comment="touched before the next")
        size -= PAGE
    b.s("sub.r64.imm", "rsp", imm=size, comment=comment)


def drop_frame(b: FunctionBuilder, frame: int, saved: tuple[str, ...] = ()) -> None:
    """Undo a prologue that pushed `saved` and then took `frame` bytes of stack."""
    b.s("add.r64.imm", "rsp", imm=frame)
    for r in reversed(saved):
        b.s("pop.r64", r)


def leave_frame(b: FunctionBuilder, frame: int, saved: tuple[str, ...] = ()) -> None:
    """The epilogue of such a function: drop the frame, return."""
    drop_frame(b, frame, saved)
    finish(b)


def align32(b: FunctionBuilder, amount: str) -> None:
    """rsp (16-byte aligned) down to 32-byte alignment; `amount` keeps the 0 or 16 (public)."""
    b.s("bt.r64.imm", "rsp", imm=4, comment="rsp 16 mod 32?")
    b.s("sbb.r64.r64", amount, amount)
    b.s("and.r64.imm", amount, imm=16)
    b.s("sub.r64.r64", "rsp", amount, comment="32-byte aligned: no vector of the frame splits a cache line")


def unalign32(b: FunctionBuilder, amount: str) -> None:
    b.s("add.r64.r64", "rsp", amount)
