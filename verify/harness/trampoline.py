"""The C harness' ABI trampoline: one call with seeded registers, checked on return.

`call` enters a function through harness.c's trampoline (SysV, or `win64=True` for the
Microsoft x64 convention) with random values in the callee-saved registers, garbage above
32-bit arguments (`mask32`), arguments past the sixth on the stack and canaries in the
caller's frame above them. It returns the failure bits and the observations (`AbiCtx`,
mirroring harness.c's `abi_ctx`); `describe` turns them into a sentence. Clobbered
callee-saved registers, rsp, DF, MXCSR, the x87 control word, stack arguments, the caller's
frame and (via XINUSE) ymm/zmm upper state left dirty without vzeroupper are caught; on
win64 also rdi, rsi and xmm6-15.

`TrampolineCaller` is a scene's caller (`scene.invoke`) that makes the call under test
through the trampoline and collects what it reports.
"""
from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence

from aesgen.verify import signatures
from aesgen.verify.build import Kernel, harness

U64, U32, U16 = ctypes.c_uint64, ctypes.c_uint32, ctypes.c_uint16


class AbiCtx(ctypes.Structure):
    """Mirror of `abi_ctx` in harness.c."""

    _fields_ = [
        ("fn", U64), ("args", U64 * 6), ("seeded", U64 * 6), ("after", U64 * 6),
        ("rsp_before", U64), ("rsp_after", U64), ("rflags_after", U64), ("ret", U64),
        ("xinuse_before", U64), ("xinuse_after", U64),
        ("mxcsr_before", U32), ("mxcsr_after", U32), ("fcw_before", U16), ("fcw_after", U16),
        ("flags", U32), ("nstack", U64), ("stack", U64 * 8), ("stack_after", U64 * 8),
        ("w64_seeded", U64 * 2), ("w64_after", U64 * 2), ("args56_after", U64 * 2),
        ("xmm_seeded", ctypes.c_uint8 * 160), ("xmm_after", ctypes.c_uint8 * 160),
    ]


assert ctypes.sizeof(AbiCtx) == 720

CALLEE_SAVED = ("rbx", "rbp", "r12", "r13", "r14", "r15")
BAD_RSP, BAD_DF, BAD_MXCSR, BAD_FCW, BAD_YMM, BAD_ZMM, BAD_STACKARG, BAD_FRAME = (
    1 << k for k in range(6, 14))
BAD_RDI, BAD_RSI = 1 << 14, 1 << 15
BAD_XMM6 = 1 << 16  # bit 16 + i: xmm(6 + i)
MAX_ARGS = 6 + 8


def xinuse_supported() -> bool:
    return bool(harness().abi_xinuse_supported()) and bool(harness().abi_avx_enabled())


def call(fn: int, args: Sequence[int] = (), mask32: int = 0, seed: int = 0,
         win64: bool = False) -> tuple[int, AbiCtx]:
    """Call `fn` through the trampoline; returns (failure bits, observations).

    Arguments 7.. go on the stack; bit i of mask32 puts garbage above argument i's low 32 bits.
    win64: call it as a Microsoft x64 function (arguments 5.. on the stack above the shadow
    space) and check rdi, rsi and xmm6-15 too."""
    if len(args) > MAX_ARGS:
        raise ValueError(f"the trampoline passes at most {MAX_ARGS} arguments, got {len(args)}")
    ctx = AbiCtx()
    ctx.fn = fn
    for i, a in enumerate(args):
        if i < 6:
            ctx.args[i] = a & 0xFFFFFFFFFFFFFFFF
        else:
            ctx.stack[i - 6] = a & 0xFFFFFFFFFFFFFFFF
    ctx.nstack = max(0, len(args) - 6)
    enter = harness().abi_call_win64 if win64 else harness().abi_call
    bad = enter(ctypes.byref(ctx), seed & 0xFFFFFFFFFFFFFFFF, mask32)
    return bad, ctx


# One failure bit each: what the sentence says about it, from the observations.
FINDINGS: tuple[tuple[int, Callable[[AbiCtx], str]], ...] = (
    (BAD_RSP, lambda c: f"rsp changed by {c.rsp_after - c.rsp_before:+d}"),
    (BAD_DF, lambda c: "DF set on return"),
    (BAD_MXCSR, lambda c: f"MXCSR {c.mxcsr_before:#x} -> {c.mxcsr_after:#x}"),
    (BAD_FCW, lambda c: f"x87 control word {c.fcw_before:#x} -> {c.fcw_after:#x}"),
    (BAD_YMM, lambda c: "YMM upper halves left dirty (missing vzeroupper)"),
    (BAD_ZMM, lambda c: "ZMM_Hi256 left dirty (missing vzeroupper)"),
    (BAD_RDI, lambda c: f"rdi clobbered ({c.w64_seeded[0]:#x} -> {c.w64_after[0]:#x})"),
    (BAD_RSI, lambda c: f"rsi clobbered ({c.w64_seeded[1]:#x} -> {c.w64_after[1]:#x})"),
)


def describe(bad: int, ctx: AbiCtx) -> str:
    parts = []
    for i, reg in enumerate(CALLEE_SAVED):
        if bad & (1 << i):
            parts.append(f"{reg} clobbered ({ctx.seeded[i]:#x} -> {ctx.after[i]:#x})")
    parts += [finding(ctx) for bit, finding in FINDINGS if bad & bit]
    xmm = [f"xmm{6 + i}" for i in range(10) if bad & (BAD_XMM6 << i)]
    if xmm:
        parts.append(f"{', '.join(xmm)} clobbered (callee-saved on win64)")
    if bad & BAD_STACKARG:
        which = [f"arg {7 + i} ({ctx.stack[i]:#x} -> {ctx.stack_after[i]:#x})"
                 for i in range(ctx.nstack) if ctx.stack[i] != ctx.stack_after[i]]
        which += [f"arg {5 + i} ({ctx.args[4 + i]:#x} -> {ctx.args56_after[i]:#x})"
                  for i in range(2) if ctx.args[4 + i] != ctx.args56_after[i]]
        parts.append("stack argument changed: " + ", ".join(which))
    if bad & BAD_FRAME:
        which = [f"{8 * (i - ctx.nstack)}" for i in range(ctx.nstack, 8) if ctx.stack[i] != ctx.stack_after[i]]
        parts.append("caller's stack frame above the arguments written at +" + ", +".join(which))
    return "; ".join(parts)


class TrampolineCaller:
    """Calls through the harness' ABI trampoline; collects what it reports."""

    def __init__(self, kernel: Kernel, seed: int) -> None:
        self.kernel, self.seed = kernel, seed
        self.bad: list[str] = []

    def __call__(self, fn: str, argv: list) -> int | None:
        sig = signatures.SIGNATURES[fn]
        bad, ctx = call(self.kernel.address(fn), argv, sig.mask32, self.seed, self.kernel.spec.abi == "win64")
        if bad:
            self.bad.append(describe(bad, ctx))
        if sig.restype is None:
            return None
        return ctypes.c_int32(ctx.ret & 0xFFFFFFFF).value
