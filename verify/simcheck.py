"""Differential test against the kernel's own description: machine code vs simulator.

The simulator runs the DSL program before lowering, scheduling and register
allocation, so a disagreement points at the back end (lowering, allocation,
encoding), not at the AES math, which the `cryptography` differential covers.
A few short lengths per function and key size keep it fast (the simulator is
plain Python).
"""
from __future__ import annotations

import random

from aesgen.kernels import build_function
from aesgen.simulate import Machine, call
from aesgen.spec import KernelSpec
from aesgen.verify.build import Kernel
from aesgen.verify.runner import CheckResult, Probe

CHAINED = {"ctr32_encrypt", "cbc_encrypt", "cbc_decrypt"}


def lengths(spec: KernelSpec, fn: str) -> list[int]:
    group = spec.max_group_blocks
    blocks = [0, 1, group + 1]
    if fn == "ctr32_encrypt":
        return [0, 5, 16 * (group + 1) + 7]
    return [16 * b for b in blocks]


def simulate(spec: KernelSpec, fn: str, key: bytes, data: bytes, chain: bytes | None) -> tuple[bytes, bytes | None]:
    m = Machine(spec)
    sched = m.alloc(spec.key_bytes)
    setter = "set_decrypt_key" if fn.endswith("decrypt") and fn != "ctr32_encrypt" else "set_encrypt_key"
    call(m, build_function(spec, setter), m.alloc(key), len(key) * 8, sched)
    ia, oa = m.alloc(data or b"\0"), m.alloc(max(len(data), 1))
    count = len(data) if fn == "ctr32_encrypt" else len(data) // 16
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
        if fn in ("cpu_supported", "set_encrypt_key", "set_decrypt_key"):
            continue
        problems = []
        for bits in (128, 192, 256):
            key = rng.randbytes(bits // 8)
            ks = kernel.set_key(key, decrypt=fn in ("ecb_decrypt", "cbc_decrypt"))
            for n in lengths(spec, fn):
                probe.note(f"simulate {fn}", f"AES-{bits}, {n} bytes")
                data = rng.randbytes(n)
                chain = rng.randbytes(12) + b"\xff\xff\xff\xfe" if fn in CHAINED else None
                got = kernel.run(fn, ks, data, chain)
                want = simulate(spec, fn, key, data, chain)
                if got != want:
                    problems.append(f"AES-{bits} {n} bytes: kernel and simulation differ")
        results.append(CheckResult(f"simulate {fn}", "fail" if problems else "pass", "; ".join(problems[:3])))
    return results
