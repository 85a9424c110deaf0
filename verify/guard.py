"""Guard pages: every buffer placed flush against a PROT_NONE page.

"after": the buffer ends where an inaccessible page begins (catches over-reads
and over-writes past the end in tail handling); "before": it starts right
after one (catches under-runs).  Both `in` and `out` (and the ctr/iv block)
are guarded at once, each in its own mapping, for every length up to N blocks
(ctr: 16N+15 bytes), separately and in place.  "len0" points every pointer,
the key schedule included, into PROT_NONE pages: length 0 must touch nothing.

The functions driven by scenes (verify/scenes.py: AEAD, hashes, XTS, OCB, OTR,
wide blocks, MPC) get the same three checks for every buffer they take (in, out,
aad, iv/nonce, tag, acc, data, h, key, ctx), placed by harness/memory.py's GuardMem.

Runs only inside a forked child (harness/isolation.run_isolated): a fault kills
that child, and the harness' handler records the address so the parent can say
which buffer was overrun and by how much.
"""
from __future__ import annotations

import ctypes
import random
from collections.abc import Iterator

from aesgen.verify import signatures
from aesgen.verify.build import Kernel, harness
from aesgen.verify.harness.isolation import Probe, Unit
from aesgen.verify.harness.memory import PAGE, GuardedRegion, GuardMem
from aesgen.verify.harness.scene import Scene, SceneError, has_io, has_length, sweep_sizes
from aesgen.verify.results import CheckResult, verdict
from aesgen.verify.scenes import scene_for

def _is_data(fn: str) -> bool:
    return signatures.family(fn) == signatures.BLOCK


def check_placement(kernel: Kernel, fn: str, where: str, probe: Probe, *, n: int,
                    seed: int) -> Iterator[CheckResult]:
    name = f"guard {fn} {where}"
    rng = random.Random(f"{seed}:{name}")
    if harness().fault_install(probe.fault_slot()) != 0:
        yield CheckResult(name, "fail", "could not install the fault handler")
        return
    sig = signatures.SIGNATURES[fn]
    ctr = sig.has("len")  # a byte count (ctr32), else whole blocks
    top = 16 * n + 15 if ctr else 16 * n
    r_in, r_out, r_chain = GuardedRegion(top), GuardedRegion(top), GuardedRegion(16)
    probe.regions(r_in.labels("in") + r_out.labels("out") + r_chain.labels("ctr/iv"))
    r_in.fill(rng.randbytes(r_in.hi - r_in.lo))
    schedules = [kernel.make_key(sig.key_setup or "set_encrypt_key", rng.randbytes(b // 8))
                 for b in (128, 192, 256)]
    calls = 0
    lengths = range(top + 1) if ctr else range(0, top + 1, 16)
    for i, length in enumerate(lengths):
        count = length if ctr else length // 16
        ks = schedules[i % 3]
        for in_place in (False, True):
            if where == "after":
                p_in, p_out, p_chain = r_in.hi - length, r_out.hi - length, r_chain.hi - 16
            else:
                p_in, p_out, p_chain = r_in.lo, r_out.lo, r_chain.lo
            if in_place:
                p_out = p_in
            ctypes.memmove(p_chain, rng.randbytes(16), 16)
            unit = "len" if ctr else "nblocks"
            probe.note(name, f"{unit}={count}{' in-place' if in_place else ''}")
            args = [ks.address, p_in, p_out, count]
            if sig.nargs > 4:
                args.append(p_chain)
            kernel.fn[fn](*args)
            calls += 1
    yield CheckResult(name, "pass", f"{calls} calls, {where} PROT_NONE, up to {top} bytes")


def check_len0(kernel: Kernel, fn: str, probe: Probe) -> Iterator[CheckResult]:
    name = f"guard {fn} len0"
    if harness().fault_install(probe.fault_slot()) != 0:
        yield CheckResult(name, "fail", "could not install the fault handler")
        return
    regions = {k: GuardedRegion(PAGE) for k in ("key", "in", "out", "ctr/iv")}
    probe.regions([lab for k, r in regions.items() for lab in r.labels(k)])
    # every pointer aims into a PROT_NONE page; in/out/key inside the page, ctr/iv at its start
    ptr = {k: r.hi + (0 if k == "ctr/iv" else 64) for k, r in regions.items()}
    probe.note(name, "length 0, every pointer into a PROT_NONE page")
    args = [ptr["key"], ptr["in"], ptr["out"], 0]
    if signatures.SIGNATURES[fn].nargs > 4:
        args.append(ptr["ctr/iv"])
    kernel.fn[fn](*args)
    yield CheckResult(name, "pass", "touched no memory")


def check_set_key(kernel: Kernel, fn: str, where: str, probe: Probe, *, seed: int) -> Iterator[CheckResult]:
    """User key flush against a guard page; schedule buffer exactly key_bytes, flush too."""
    name = f"guard {fn} {where}"
    rng = random.Random(f"{seed}:{name}")
    if harness().fault_install(probe.fault_slot()) != 0:
        yield CheckResult(name, "fail", "could not install the fault handler")
        return
    kb = kernel.schedule_bytes(fn)
    r_key, r_ks = GuardedRegion(32), GuardedRegion(kb)
    probe.regions(r_key.labels("user_key") + r_ks.labels("key schedule"))
    for bits in signatures.SIGNATURES[fn].key_bits:
        p_key = r_key.hi - bits // 8 if where == "after" else r_key.lo
        p_ks = (r_ks.hi - kb) // 64 * 64 if where == "after" else r_ks.lo  # the ABI promises 64-byte alignment
        ctypes.memmove(p_key, rng.randbytes(bits // 8), bits // 8)
        probe.note(name, f"bits={bits} key_bytes={kb}")
        ret = kernel.fn[fn](p_key, bits, p_ks)
        if ret != 0:
            yield CheckResult(name, "fail", f"bits={bits} returned {ret}")
            return
    yield CheckResult(name, "pass", f"user key and {kb}-byte schedule {where} PROT_NONE")


def check_scene_placement(kernel: Kernel, fn: str, where: str, probe: Probe, *, n: int,
                          seed: int) -> Iterator[CheckResult]:
    """A function's scene with every buffer flush against the PROT_NONE page after it
    (`where` = "after") or before it, for every length of the sweep, separately and in place."""
    name = f"guard {fn} {where}"
    if harness().fault_install(probe.fault_slot()) != 0:
        yield CheckResult(name, "fail", "could not install the fault handler")
        return
    rng = random.Random(f"{seed}:{name}")
    mem = GuardMem(where, probe)
    scene = scene_for(fn)
    calls = 0
    unit = "nblocks" if signatures.family(fn) in signatures.BLOCK_COUNTED else (
        "ivlen-1" if fn == "gcm_start" else "aadlen" if fn == "gcm_aad" else "len")
    for size in sweep_sizes(fn, n):
        for in_place in ((False, True) if has_io(fn) else (False,)):
            probe.note(name, f"{unit}={size}{' in-place' if in_place else ''}")
            sc = Scene(kernel, mem, rng, None, in_place)
            try:
                scene(sc, fn, size, size + in_place)
            except SceneError as e:
                yield CheckResult(name, "fail", f"{unit}={size}: setup failed: {e}")
                mem.close()
                return
            calls += 1
    mem.close()
    top = sweep_sizes(fn, n)[-1]
    yield CheckResult(name, "pass", f"{calls} calls, every buffer {where} PROT_NONE, {unit} 0..{top}")


def check_scene_len0(kernel: Kernel, fn: str, probe: Probe, *, seed: int) -> Iterator[CheckResult]:
    """Zero lengths with their pointers aimed into PROT_NONE pages (ghash/polyval with
    nblocks 0: every pointer; gcm_start and the one-shots also with ivlen 0 and the iv
    pointer in PROT_NONE); the other buffers valid, flush against guard pages."""
    name = f"guard {fn} len0"
    if harness().fault_install(probe.fault_slot()) != 0:
        yield CheckResult(name, "fail", "could not install the fault handler")
        return
    rng = random.Random(f"{seed}:{name}")
    sig = signatures.SIGNATURES[fn]
    mem = GuardMem("after", probe)
    scene = scene_for(fn)
    if sig.len0_touches_nothing:
        cases = [({p.name for p in sig.pointers}, 0, None)]
    elif fn == "gcm_start":
        cases = [({"iv"}, 0, -1)]
    else:
        zero = {p.name for p in sig.pointers if p.size in ("len", "aadlen")}
        want = 0 if sig.restype is not None else None
        if sig.family == signatures.GCM_STREAM:
            want = 0  # gcm_start's return value comes first in a stream scene
        cases = [(zero, 0, want)]
        if sig.zero_on_fail:  # aux 3: a wrong tag; returns -1 and still touches no out byte
            cases.append((zero, 3, -1))
        nonce = next((p for p in ("iv", "nonce") if sig.has(f"{p}len")), None)
        if nonce:  # an empty IV/nonce is refused without touching it
            cases.append((zero | {nonce}, 0, -1))
    problems = []
    described = []
    for none, aux, want in cases:
        empty = next((f", {p}len 0" for p in ("iv", "nonce") if p in none), "")
        what = f"{', '.join(sorted(none))} in PROT_NONE" + (", wrong tag" if aux == 3 else "") + empty
        described.append(what)
        probe.note(name, what)
        sc = Scene(kernel, mem, rng, None, False, set(none))
        res = scene(sc, fn, 0, aux)
        if want is not None and res[0] != want:
            problems.append(f"{what}: returned {res[0]}, want {want}")
    mem.close()
    yield verdict(name, problems, "length 0: " + "; ".join(described) + ": touched no memory")


def scene_units(kernel: Kernel, fn: str, *, n: int, seed: int) -> list[tuple[str, Unit]]:
    """The guard units of a function driven by its family's scene."""
    out: list[tuple[str, Unit]] = []
    if scene_for(fn) is None:
        return [(f"guard {fn}", lambda p: iter([CheckResult(f"guard {fn}", "fail",
                                                            f"no call scenario for {fn} in verify/scenes.py")]))]
    for where in ("after", "before"):
        out.append((f"guard {fn} {where}",
                    lambda p, w=where: check_scene_placement(kernel, fn, w, p, n=n, seed=seed)))
    if fn != "gcm_finish" and has_length(fn):
        out.append((f"guard {fn} len0", lambda p: check_scene_len0(kernel, fn, p, seed=seed)))
    return out


def units(kernel: Kernel, *, n: int, quick: bool, seed: int) -> list[tuple[str, Unit]]:
    out: list[tuple[str, Unit]] = []
    for fn in kernel.functions:
        if fn not in kernel.fn:
            continue
        fam = signatures.family(fn)
        if fam in signatures.SCENE_FAMILIES:
            out.extend(scene_units(kernel, fn, n=n, seed=seed))
        elif fam == signatures.KEYSETUP:
            for where in ("after", "before"):
                out.append((f"guard {fn} {where}",
                            lambda p, fn=fn, w=where: check_set_key(kernel, fn, w, p, seed=seed)))
        elif _is_data(fn):
            for where in ("after", "before"):
                out.append((f"guard {fn} {where}",
                            lambda p, fn=fn, w=where: check_placement(kernel, fn, w, p, n=n, seed=seed)))
            out.append((f"guard {fn} len0", lambda p, fn=fn: check_len0(kernel, fn, p)))
    return out
