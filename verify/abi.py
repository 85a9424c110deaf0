"""SysV ABI checks through the C harness' trampoline, plus its negative self-tests.

Each exported function is called with realistic arguments, random values in
rbx/rbp/r12-r15 and garbage above the 32-bit `bits` argument; the harness
reports clobbered callee-saved registers, rsp, DF, MXCSR, the x87 control
word, and (via XINUSE) ymm/zmm upper state left dirty without vzeroupper.
Arguments past the sixth go on the stack (gcm_encrypt takes ten); the
callee must leave them, and the caller's frame above them, unchanged.
The result of every trampolined call is also compared with a direct call.
Prototypes come from verify/signatures.py; the functions whose calls need a
prepared key or context (AEAD, hashes, XTS, OCB, OTR, wide blocks, MPC) run their
family's scene (verify/scenes.py) through the trampoline and directly.  The
trampoline itself is harness/trampoline.py.
"""
from __future__ import annotations

import ctypes
import random
from collections.abc import Iterator

from aesgen import cpu
from aesgen.verify import signatures
from aesgen.verify.build import AlignedBuffer, Kernel, fn_address, harness
from aesgen.verify.harness.isolation import Probe
from aesgen.verify.harness.memory import HeapMem
from aesgen.verify.harness.scene import Scene, SceneError, has_io, sweep_sizes
from aesgen.verify.harness.trampoline import (BAD_DF, BAD_FCW, BAD_FRAME, BAD_MXCSR, BAD_RDI, BAD_RSI, BAD_STACKARG,
                                              BAD_XMM6, BAD_YMM, BAD_ZMM, TrampolineCaller, call, describe,
                                              xinuse_supported)
from aesgen.verify.results import CheckResult
from aesgen.verify.scenes import scene_for

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
        return check_scene_function(kernel, fn, probe, n=n, trials=trials, seed=seed)
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


def check_scene_function(kernel: Kernel, fn: str, probe: Probe, *, n: int, trials: int, seed: int) -> CheckResult:
    """The call under test through the trampoline and directly, from the same random state:
    no ABI violation, identical results."""
    name = f"abi {fn}"
    scene = scene_for(fn)
    if scene is None:
        return CheckResult(name, "fail", f"no call scenario for {fn} in verify/scenes.py")
    rng = random.Random(f"{seed}:{name}")
    top = sweep_sizes(fn, n)[-1]
    group = kernel.spec.max_group_blocks
    one_group = group if signatures.family(fn) in signatures.BLOCK_COUNTED else 16 * group + 7
    problems: list[str] = []
    for trial in range(trials):
        size = (top, 1, min(top, one_group))[trial % 3]
        sub, cseed = rng.getrandbits(64), rng.getrandbits(64)
        in_place = has_io(fn) and trial % 2 == 1
        probe.note(name, f"trial {trial} size={size}{' in-place' if in_place else ''}")
        outs = []
        for via in (True, False):
            caller = TrampolineCaller(kernel, cseed) if via else None
            sc = Scene(kernel, HeapMem(random.Random(sub)), random.Random(sub), caller, in_place)
            try:
                outs.append(scene(sc, fn, size, trial))
            except SceneError as e:
                problems.append(f"setup failed: {e}")
                break
            if caller is not None:
                problems += [f"{b} (size {size})" for b in caller.bad]
            problems += sc.damage
        if len(outs) == 2 and outs[0] != outs[1]:
            problems.append(f"result through the trampoline differs from a direct call (size {size})")
        if len(problems) >= 3:
            break
    if problems:
        return CheckResult(name, "fail", "; ".join(dict.fromkeys(problems)))
    sig = signatures.SIGNATURES[fn]
    stack = f", {sig.nargs - 6} stack arguments checked" if sig.nargs > 6 else ""
    how = " through the Microsoft x64 convention (rdi, rsi, xmm6-15 seeded too)" if kernel.spec.abi == "win64" else ""
    return CheckResult(name, "pass", f"{trials} calls with seeded callee-saved registers{how}{stack}")


def check(kernel: Kernel, probe: Probe, *, n: int, quick: bool, seed: int) -> Iterator[CheckResult]:
    probe.note("abi selftest", "")
    yield from self_tests(seed)
    if kernel.spec.abi == "win64":
        yield from win64_self_tests(seed)
    for fn in kernel.functions:
        if fn in kernel.fn:
            probe.note(f"abi {fn}", "")
            yield check_function(kernel, fn, probe, n=n, trials=3 if quick else 9, seed=seed)
