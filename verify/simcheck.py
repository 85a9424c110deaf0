"""Differential test against the kernel's own description: machine code vs simulator.

The simulator runs the DSL program before lowering, scheduling and register
allocation, so a disagreement points at the back end (lowering, allocation,
encoding), not at the AES math, which the `cryptography` differential covers.
A few short lengths per function and key size keep it fast (the simulator is
plain Python).  The functions driven by scenes (verify/scenes.py: AEAD, hashes,
XTS, OCB, OTR, wide blocks, MPC) replay their family's scene, once on the kernel
and once entirely inside the simulator.
"""
from __future__ import annotations

import ctypes
import random

from aesgen.kernels import FUNCTIONS, build_function
from aesgen.simulate import Machine, call
from aesgen.spec import KernelSpec
from aesgen.verify import signatures
from aesgen.verify.build import Kernel
from aesgen.verify.harness.isolation import Probe
from aesgen.verify.harness.memory import HeapMem, Region
from aesgen.verify.harness.scene import Scene
from aesgen.verify.results import CheckResult
from aesgen.verify.scenes import scene_for

def lengths(spec: KernelSpec, fn: str) -> list[int]:
    group = spec.max_group_blocks
    blocks = [0, 1, group + 1]
    if signatures.SIGNATURES[fn].bytewise:
        return [0, 5, 16 * (group + 1) + 7]
    return [16 * b for b in blocks]


def simulate(spec: KernelSpec, fn: str, key: bytes, data: bytes, chain: bytes | None) -> tuple[bytes, bytes | None]:
    m = Machine(spec)
    sched = m.alloc(spec.key_bytes)
    sig = signatures.SIGNATURES[fn]
    call(m, build_function(spec, sig.key_setup or "set_encrypt_key"), m.alloc(key), len(key) * 8, sched)
    ia, oa = m.alloc(data or b"\0"), m.alloc(max(len(data), 1))
    count = len(data) if sig.bytewise else len(data) // 16
    args = [sched, ia, oa, count]
    ca = None
    if chain is not None:
        ca = m.alloc(chain)
        args.append(ca)
    call(m, build_function(spec, fn), *args)
    return m.read(oa, len(data)), (m.read(ca, 16) if ca is not None else None)


def check(kernel: Kernel, probe: Probe, *, seed: int) -> list[CheckResult]:
    spec = kernel.spec
    rng = random.Random(seed ^ 0x51A)
    results = []
    for fn in kernel.fn:
        if signatures.family(fn) != signatures.BLOCK:
            continue
        problems = []
        for bits in (128, 192, 256):
            key = rng.randbytes(bits // 8)
            ks = kernel.make_key(signatures.SIGNATURES[fn].key_setup or "set_encrypt_key", key)
            for n in lengths(spec, fn):
                probe.note(f"simulate {fn}", f"AES-{bits}, {n} bytes")
                data = rng.randbytes(n)
                chain = rng.randbytes(12) + b"\xff\xff\xff\xfe" if signatures.SIGNATURES[fn].chain else None
                got = kernel.run(fn, ks, data, chain)
                want = simulate(spec, fn, key, data, chain)
                if got != want:
                    problems.append(f"AES-{bits} {n} bytes: kernel and simulation differ")
        results.append(CheckResult(f"simulate {fn}", "fail" if problems else "pass", "; ".join(problems[:3])))
    for fn in kernel.fn:
        if signatures.family(fn) in signatures.SCENE_FAMILIES:
            probe.note(f"simulate {fn}", "")
            results.append(check_aead(kernel, fn, probe, seed=seed))
    return results


class MachineMem:
    """A scene's memory inside the simulator's address space."""

    def __init__(self, machine: Machine) -> None:
        self.m = machine

    def place(self, label: str, data: bytes, *, aligned: bool = False) -> Region:
        if aligned:  # key schedules and contexts: room to spare, so a kernel/spec size mismatch
            addr = self.m.alloc(len(data) + 4096, align=64)  # (a test fixture's own layout) cannot
            self.m.write(addr, data)                          # make the simulation corrupt itself
        else:
            addr = self.m.alloc(data, align=1)
        return Region(label, addr, len(data), self)

    def read(self, addr: int, n: int) -> bytes:
        return self.m.read(addr, n)


def check_aead(kernel: Kernel, fn: str, probe: Probe, *, seed: int) -> CheckResult:
    """A function's call scene (verify/scenes.py) run on the kernel and, from the same
    random state, on the simulator (every call of the scene simulated); results must agree."""
    name = f"simulate {fn}"
    spec = kernel.spec
    scene = scene_for(fn)
    if scene is None:
        return CheckResult(name, "fail", f"no call scenario for {fn} in verify/scenes.py")
    built: dict[str, object] = {}

    def machine_caller(machine: Machine):
        def c(f: str, argv: list) -> int | None:
            sig = signatures.SIGNATURES[f]
            if f not in FUNCTIONS:
                raise LookupError(f"aesgen.kernels has no DSL description of {f} yet")
            if f not in built:
                built[f] = build_function(spec, f)
            ret = call(machine, built[f], *argv)  # type: ignore[arg-type]
            return None if sig.restype is None else ctypes.c_int32(ret & 0xFFFFFFFF).value
        return c

    rng = random.Random(f"{seed}:{name}")
    group = spec.max_group_blocks
    hashing = signatures.family(fn) in signatures.BLOCK_COUNTED
    sizes = [0, 1, group + 1] if hashing else [0, 5, 16 * (group + 1) + 7]
    problems: list[str] = []
    for size in sizes:
        sub = rng.getrandbits(64)
        probe.note(name, f"size {size}")
        outs = []
        for simulated in (False, True):
            if simulated:
                m = Machine(spec)
                mc = machine_caller(m)
                sc = Scene(kernel, MachineMem(m), random.Random(sub), mc, setup_caller=mc)
            else:
                sc = Scene(kernel, HeapMem(random.Random(sub)), random.Random(sub))
            try:
                outs.append(scene(sc, fn, size, size))
            except LookupError as e:
                return CheckResult(name, "skip", str(e))
        if outs[0] != outs[1]:
            problems.append(f"size {size}: kernel {_short(outs[0])} simulation {_short(outs[1])}")
    return CheckResult(name, "fail" if problems else "pass",
                       "; ".join(problems[:3]) or f"sizes {sizes}: kernel == simulation")


def _short(res: tuple) -> str:
    return "(" + ", ".join(x.hex()[:16] if isinstance(x, bytes) else repr(x) for x in res) + ")"
