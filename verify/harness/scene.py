"""Calling a kernel function by parameter name, and the scenes the ABI, guard and simulator checks replay.

`invoke` calls a function through its signature (verify/signatures.py): pointer arguments
given as bytes are placed by a memory strategy (harness/memory.py) under the parameter's
name, and with `HeapMem` it reports bytes written outside a buffer or into a read-only one.
The caller is the kernel itself, the ABI trampoline (`trampoline.TrampolineCaller`) or the
simulator (simcheck.py).

A `Scene` is one realistic use of a function: its set-up calls (key setup, start, ...) and
the call under test, with every buffer placed by the scene's memory strategy. Each family's
check module writes a scene function per C function (`SceneFn`: scene, fn, size, aux ->
the results to compare) in its `SCENES` table (collected by verify/scenes.py); the ABI check
runs it through the trampoline and directly, the guard checks under guard pages, the
simulator check on the kernel and in the simulator.
"""
from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from aesgen.verify import signatures
from aesgen.verify.build import Kernel
from aesgen.verify.harness.memory import HeapMem, Region

Caller = Callable[[str, list], "int | None"]


class SceneError(RuntimeError):
    """A setup step (key setup, start) failed, so the call under test could not be made."""


@dataclass
class Invocation:
    ret: int | None
    regions: dict[str, Region]
    damage: list[str]

    def out(self, name: str) -> bytes:
        return self.regions[name].read()


def invoke(kernel: Kernel, fn: str, mem, args: dict, *, caller: Caller | None = None,
           alias: dict[str, str] | None = None) -> Invocation:
    """Call `fn` with `args` by parameter name.  Pointer arguments are bytes (placed in
    `mem` under the parameter's name), a Region, or a raw int address; `alias` makes
    a pointer parameter reuse another's buffer (alias={"out": "in"}: in place)."""
    sig = signatures.SIGNATURES[fn]
    regions: dict[str, Region] = {}
    argv: list = []
    for p in sig.params:
        v = args[p.name]
        if not p.is_pointer:
            argv.append(int(v))
            continue
        if alias and p.name in alias:
            r = regions[alias[p.name]]
        elif isinstance(v, Region):
            r = v
        elif isinstance(v, int):
            argv.append(v)
            continue
        else:
            r = mem.place(p.name, bytes(v), aligned=p.aligned)
        regions[p.name] = r
        argv.append(r.address)
    # which placed buffers may the call change?
    written: dict[int, bool] = {}
    for name, r in regions.items():
        written[id(r)] = written.get(id(r), False) or sig.param(name).access != "r"
    snaps = []
    if isinstance(mem, HeapMem):
        seen = set()
        for name, r in regions.items():
            if id(r) not in seen and r.raw is not None:
                seen.add(id(r))
                snaps.append((r, HeapMem.snapshot(r)))
    ret = (caller or direct_caller(kernel))(fn, argv)
    damage = []
    for r, before in snaps:
        d = HeapMem.damage(r, before, readonly=not written[id(r)])
        if d:
            damage.append(f"{fn}: {d}")
    return Invocation(ret, regions, damage)


def direct_caller(kernel: Kernel) -> Caller:
    return lambda fn, argv: kernel.fn[fn](*argv)


def fill(rng: random.Random, n: int) -> bytes:
    """Non-zero junk, so "zeroed" and "untouched" are distinguishable."""
    return rng.randbytes(n).replace(b"\0", b"\x5a")


def make_key(kernel: Kernel, mem, setup: str, key: bytes, bits: int | None = None,
             caller: Caller | None = None) -> tuple[int, Region]:
    """Run a key setup into a 64-byte aligned, 0xA5-filled buffer of the spec's size."""
    sig = signatures.SIGNATURES[setup]
    out = sig.params[2].name
    bits = len(key) * 8 if bits is None else bits
    inv = invoke(kernel, setup, mem, {"user_key": key or b"\0", "bits": bits,
                                      out: b"\xa5" * kernel.schedule_bytes(setup)}, caller=caller)
    return inv.ret, inv.regions[out]  # type: ignore[return-value]


def key_or_raise(kernel: Kernel, mem, setup: str, key: bytes) -> Region:
    """make_key for a set-up step: a refused key is a SceneError."""
    ret, region = make_key(kernel, mem, setup, key)
    if ret != 0:
        raise SceneError(f"{setup}(bits={8 * len(key)}) returned {ret}")
    return region


@dataclass
class Scene:
    """One realistic use of a function: set-up calls made directly, the call under test
    through `caller`, every buffer placed by `mem`."""

    kernel: Kernel
    mem: object
    rng: random.Random
    caller: Caller | None = None
    in_place: bool = False
    none: set[str] = field(default_factory=set)  # pointer params to aim into PROT_NONE (len0)
    damage: list[str] = field(default_factory=list)
    setup_caller: Caller | None = None  # for the set-up calls (None: the kernel, directly)

    def call(self, fn: str, args: dict, *, test: bool = False, alias: dict | None = None) -> Invocation:
        if test and self.none:
            args = {k: (self.mem.none(k) if k in self.none else v) for k, v in args.items()}  # type: ignore[attr-defined]
            alias = None
        inv = invoke(self.kernel, fn, self.mem, args, caller=self.caller if test else self.setup_caller,
                     alias=alias)
        self.damage += inv.damage
        return inv

    def key(self, setup: str, bits: int | None = None) -> tuple[bytes, Region]:
        sig = signatures.SIGNATURES[setup]
        bits = bits or sig.key_bits[self.rng.randrange(len(sig.key_bits))]
        key = self.rng.randbytes(bits // 8)
        ret, region = make_key(self.kernel, self.mem, setup, key, caller=self.setup_caller)
        if ret != 0:
            raise SceneError(f"{setup}(bits={bits}) returned {ret}")
        return key, region


def io_alias(sc: Scene) -> dict | None:
    """alias={"out": "in"} when the scene runs in place."""
    return {"out": "in"} if sc.in_place else None


def out_if_placed(inv: Invocation, name: str) -> bytes | None:
    """The buffer `name` after the call, or None when it was not placed (aimed into PROT_NONE)."""
    return inv.out(name) if name in inv.regions else None


SceneFn = Callable[[Scene, str, int, int], tuple]


def sweep_sizes(fn: str, n: int) -> range:
    """The length dimension guard/abi sweep: nblocks for hashes, IV bytes-1 for gcm_start,
    else text (or AAD) bytes."""
    if signatures.family(fn) in signatures.BLOCK_COUNTED:
        return range(n + 1)
    if not has_length(fn):
        return range(3)  # key setup: one call per key size
    if fn == "gcm_start":
        return range(16 * n + 15)
    return range(16 * n + 16)


def has_length(fn: str) -> bool:
    return any(signatures.SIGNATURES[fn].has(p)
               for p in ("len", "aadlen", "ivlen", "nblocks", "nkeys", "blocks_per_key", "n"))


def has_io(fn: str) -> bool:
    sig = signatures.SIGNATURES[fn]
    return sig.has("in") and sig.has("out")
