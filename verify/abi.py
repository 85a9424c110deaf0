"""SysV ABI checks through the C harness' trampoline, plus its negative self-tests.

Each exported function is called with realistic arguments, random values in
rbx/rbp/r12-r15 and garbage above the 32-bit `bits` argument; the harness
reports clobbered callee-saved registers, rsp, DF, MXCSR, the x87 control
word, and (via XINUSE) ymm/zmm upper state left dirty without vzeroupper.
Arguments past the sixth go on the stack (gcm_encrypt takes ten); the
callee must leave them, and the caller's frame above them, unchanged.
The result of every trampolined call is also compared with a direct call.
Prototypes come from verify/signatures.py; the AEAD and hash functions
(whose calls need a prepared key or context) are driven by verify/gcm.py.
"""
from __future__ import annotations

import ctypes
import random
from collections.abc import Iterator, Sequence

from aesgen import cpu
from aesgen.verify import signatures
from aesgen.verify.build import AlignedBuffer, Kernel, fn_address, harness
from aesgen.verify.runner import CheckResult, Probe

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


def describe(bad: int, ctx: AbiCtx) -> str:
    parts = []
    for i, reg in enumerate(CALLEE_SAVED):
        if bad & (1 << i):
            parts.append(f"{reg} clobbered ({ctx.seeded[i]:#x} -> {ctx.after[i]:#x})")
    if bad & BAD_RSP:
        parts.append(f"rsp changed by {ctx.rsp_after - ctx.rsp_before:+d}")
    if bad & BAD_DF:
        parts.append("DF set on return")
    if bad & BAD_MXCSR:
        parts.append(f"MXCSR {ctx.mxcsr_before:#x} -> {ctx.mxcsr_after:#x}")
    if bad & BAD_FCW:
        parts.append(f"x87 control word {ctx.fcw_before:#x} -> {ctx.fcw_after:#x}")
    if bad & BAD_YMM:
        parts.append("YMM upper halves left dirty (missing vzeroupper)")
    if bad & BAD_ZMM:
        parts.append("ZMM_Hi256 left dirty (missing vzeroupper)")
    for bit, reg in ((BAD_RDI, 0), (BAD_RSI, 1)):
        if bad & bit:
            parts.append(f"{('rdi', 'rsi')[reg]} clobbered ({ctx.w64_seeded[reg]:#x} -> {ctx.w64_after[reg]:#x})")
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


# ---------------------------------------------------------------- self-tests

# (callee, failure bit it must raise or None for "no failure", needs)
SELF_TESTS: tuple[tuple[str, int | None, str], ...] = (
    ("clean", None, ""),
    ("rbx", 1 << 0, ""),
    ("r15", 1 << 5, ""),
    ("df", BAD_DF, ""),
    ("mxcsr", BAD_MXCSR, ""),
    ("fcw", BAD_FCW, ""),
    ("ymm", BAD_YMM, "xinuse"),
    ("zmm", BAD_ZMM, "avx512f"),
)


def self_tests(seed: int) -> Iterator[CheckResult]:
    """Prove the trampoline catches each planted fault and passes a clean callee."""
    h = harness()
    have_xinuse = xinuse_supported()
    for fault, bit, needs in SELF_TESTS:
        name = f"abi selftest {fault}"
        if needs and not have_xinuse:
            yield CheckResult(name, "skip", "XGETBV(ECX=1) not available: vzeroupper cannot be observed")
            continue
        if needs == "avx512f" and cpu.missing_features(["avx512f"]):
            # Not applicable rather than skipped: without AVX-512 the trampoline cannot see
            # zmm16-31 and no kernel that runs here (no AVX-512 either) can write them.
            continue
        bad, ctx = call(fn_address(h, f"abi_fault_{fault}"), (0, 128), mask32=0b10, seed=seed)
        yield planted_fault_verdict(name, bad, ctx, bit)

    # A callee that reads `unsigned bits` as 64-bit must see garbage above bit 31.
    bad, ctx = call(fn_address(h, "abi_fault_upper32"), (0, 128), mask32=0b10, seed=seed)
    ok = ctx.ret & 0xFF == 0
    yield CheckResult("abi selftest upper32", "pass" if ok else "fail",
                      "garbage above a 32-bit argument is visible" if ok
                      else "upper 32 bits of a 32-bit argument were clean: the check is toothless")

    # Ten arguments: 7..10 really arrive on the stack, and touching them or the frame is caught.
    ten = tuple(range(1, 7)) + (0x1111 << 32, 0x2222, 0x4444 << 16, 0x8888)
    bad, ctx = call(fn_address(h, "abi_stack_echo"), ten, seed=seed)
    want = ten[6] ^ ten[7] ^ ten[8] ^ ten[9]
    ok = bad == 0 and ctx.ret == want
    yield CheckResult("abi selftest stackargs", "pass" if ok else "fail",
                      "arguments 7..10 reach the callee on the stack, no false alarm" if ok
                      else f"stack arguments wrong: returned {ctx.ret:#x} want {want:#x}; {describe(bad, ctx)}")
    for fault, bit in (("stackarg", BAD_STACKARG), ("frame", BAD_FRAME)):
        bad, ctx = call(fn_address(h, f"abi_fault_{fault}"), ten, seed=seed)
        ok = bool(bad & bit)
        yield CheckResult(f"abi selftest {fault}", "pass" if ok else "fail",
                          f"caught: {describe(bad, ctx)}" if ok else "planted fault NOT caught")


def planted_fault_verdict(name: str, bad: int, ctx, bit: int | None) -> CheckResult:
    """A self-test call of a stub that returns its second argument (128): a clean stub must raise
    nothing, a faulty one must raise `bit`."""
    if bit is None:
        ok = bad == 0 and (ctx.ret & 0xFFFFFFFF) == 128
        detail = "no false alarm" if ok else f"false alarm: {describe(bad, ctx) or 'wrong return value'}"
    else:
        ok = bool(bad & bit)
        detail = f"caught: {describe(bad, ctx)}" if ok else "planted fault NOT caught"
    return CheckResult(name, "pass" if ok else "fail", detail)


# (win64 callee, failure bit it must raise or None)
WIN64_SELF_TESTS: tuple[tuple[str, int | None], ...] = (
    ("clean", None),
    ("fault_xmm6", BAD_XMM6),
    ("fault_xmm15", BAD_XMM6 << 9),
    ("fault_rsi", BAD_RSI),
    ("fault_rdi", BAD_RDI),
)


def win64_self_tests(seed: int) -> Iterator[CheckResult]:
    """Prove the Microsoft x64 trampoline catches clobbered rdi/rsi/xmm6-15 and a written
    stack argument, and that arguments 1-8 arrive where Windows puts them."""
    h = harness()
    for fault, bit in WIN64_SELF_TESTS:
        name = f"abi selftest win64 {fault}"
        bad, ctx = call(fn_address(h, f"abi_w64_{fault}"), (0, 128), mask32=0b10, seed=seed, win64=True)
        yield planted_fault_verdict(name, bad, ctx, bit)
    eight = (1, 2, 3, 4, 0x1111 << 32, 0x2222, 0x4444 << 16, 0x8888)
    bad, ctx = call(fn_address(h, "abi_w64_stack_echo"), eight, seed=seed, win64=True)
    want = eight[4] ^ eight[5] ^ eight[6] ^ eight[7]
    ok = bad == 0 and ctx.ret == want
    yield CheckResult("abi selftest win64 stackargs", "pass" if ok else "fail",
                      "arguments 5..8 reach the callee above the shadow space, no false alarm" if ok
                      else f"stack arguments wrong: returned {ctx.ret:#x} want {want:#x}; {describe(bad, ctx)}")
    bad, ctx = call(fn_address(h, "abi_w64_fault_arg5"), eight, seed=seed, win64=True)
    ok = bool(bad & BAD_STACKARG)
    yield CheckResult("abi selftest win64 arg5", "pass" if ok else "fail",
                      f"caught: {describe(bad, ctx)}" if ok else "planted fault NOT caught")


# ---------------------------------------------------------------- kernel functions


def _alloc(data: bytes, offset: int = 0) -> AlignedBuffer:
    b = AlignedBuffer(max(len(data), 1), offset=offset)
    b.write(data)
    return b


def check_function(kernel: Kernel, fn: str, probe: Probe, *, n: int, trials: int,
                   seed: int) -> CheckResult:
    name = f"abi {fn}"
    win64 = kernel.spec.abi == "win64"
    sig = signatures.lookup(fn)
    if sig is None:
        return CheckResult(name, "fail", f"{fn}: no signature registered, cannot be called")
    if sig.family in signatures.SCENE_FAMILIES:
        from aesgen.verify import gcm
        return gcm.abi_check(kernel, fn, probe, n=n, trials=trials, seed=seed)
    rng = random.Random(f"{seed}:{name}")
    addr = kernel.address(fn)
    spec = kernel.spec
    problems: list[str] = []
    for trial in range(trials):
        cseed = rng.getrandbits(64)
        probe.note(name, f"trial {trial}")
        if sig.family == signatures.CPU:
            bad, ctx = call(addr, (), 0, cseed, win64)
            if bad:
                problems.append(describe(bad, ctx))
            continue
        if sig.family == signatures.KEYSETUP:
            bits = sig.key_bits[trial % len(sig.key_bits)]
            key = rng.randbytes(bits // 8)
            kbuf = _alloc(key)
            ks = AlignedBuffer(kernel.schedule_bytes(fn), fill=0xA5)
            bad, ctx = call(addr, (kbuf.address, bits, ks.address), sig.mask32, cseed, win64)
            direct = kernel.make_key(fn, key)
            if bad:
                problems.append(describe(bad, ctx))
            elif ctx.ret & 0xFFFFFFFF != 0:
                problems.append(f"bits={bits} with garbage in the upper 32 bits: returned "
                                f"{ctypes.c_int32(ctx.ret & 0xFFFFFFFF).value}")
            elif ks.read() != direct.raw():
                problems.append(f"bits={bits}: schedule differs from a direct call")
            continue
        bits = (128, 192, 256)[trial % 3]
        key = rng.randbytes(bits // 8)
        ks = kernel.make_key(sig.key_setup or "set_encrypt_key", key)
        bytewise = sig.has("len")  # ctr32: a byte count, others whole blocks
        blocks = (n, 1, spec.max_group_blocks)[trial % 3]
        length = 16 * blocks + (rng.randrange(1, 16) if bytewise else 0)
        data = rng.randbytes(length)
        chain = rng.randbytes(16)
        count = length if bytewise else blocks
        outs = []
        for via_trampoline in (True, False):
            src, dst = _alloc(data, rng.randrange(16)), _alloc(bytes(length), rng.randrange(16))
            cb = _alloc(chain)
            args = [ks.address, src.address, dst.address, count]
            if sig.nargs > 4:
                args.append(cb.address)
            if via_trampoline:
                bad, ctx = call(addr, args, sig.mask32, cseed, win64)
                if bad:
                    problems.append(f"{describe(bad, ctx)} (length {length})")
            else:
                kernel.fn[fn](*args)
            outs.append((dst.read(length), cb.read(16)))
        if outs[0] != outs[1]:
            problems.append(f"result through the trampoline differs from a direct call (length {length})")
        if len(problems) >= 3:
            break
    if problems:
        return CheckResult(name, "fail", "; ".join(dict.fromkeys(problems)))
    note = "" if xinuse_supported() else " (vzeroupper not observable: no XGETBV ECX=1)"
    how = " through the Microsoft x64 convention (rdi, rsi, xmm6-15 seeded too)" if win64 else ""
    return CheckResult(name, "pass", f"{trials} calls with seeded callee-saved registers{how}{note}")


def check(kernel: Kernel, probe: Probe, *, n: int, quick: bool, seed: int) -> Iterator[CheckResult]:
    probe.note("abi selftest", "")
    yield from self_tests(seed)
    if kernel.spec.abi == "win64":
        yield from win64_self_tests(seed)
    for fn in kernel.functions:
        if fn in kernel.fn:
            probe.note(f"abi {fn}", "")
            yield check_function(kernel, fn, probe, n=n, trials=3 if quick else 9, seed=seed)
