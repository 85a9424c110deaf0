"""The verifier's view of every C function: the records of aesgen.functions with ctypes types.

A record gives the C prototype and, for every pointer parameter, how many bytes it spans and
whether the function reads or writes it; its family says which checks apply.  build.py, abi.py,
guard.py, differential.py, kat.py, simcheck.py, the family checks and runner.py all read this view, so a new
function is one record in aesgen.functions.  A function a spec lists but the registry lacks
becomes a failed `signature <fn>` check, never a KeyError.  (The references the checks compare
with stay independent of the generator on purpose; only the C facts come from the registry.)
"""
from __future__ import annotations

import ctypes
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, fields

from aesgen.functions import (  # noqa: F401  (the families: re-exported for the checks)
    BLOCK, COMMON_FUNCTIONS, CPU, FUNCTIONS, GCM, GCM_STREAM, GCMSIV, GFDOUBLE, HASH, KEYSETUP, MODE_FUNCTIONS, MPC,
    HALFGATES, OCB, OTR, WIDEBLOCK, XTS, CFunction)
from aesgen.verify.results import CheckResult

P, SZ, U, I = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint, ctypes.c_int
# ctypes of the scalar C types (every other parameter is a pointer: P).
SCALARS = {"size_t": SZ, "unsigned": U, "int": I, "uint64_t": ctypes.c_uint64}


class Signature(CFunction):
    """A registry record as the verifier calls it: ctypes argument and return types."""

    @classmethod
    def of(cls, record: CFunction) -> Signature:
        return cls(**{f.name: getattr(record, f.name) for f in fields(record)})

    @property
    def argtypes(self) -> list:
        return [P if p.is_pointer else SCALARS[p.ctype] for p in self.params]

    @property
    def restype(self) -> object:
        return I if self.returns == "int" else None

    @property
    def mask32(self) -> int:
        """Bit i set: argument i is 32 bits wide (the trampoline puts garbage above it)."""
        return sum(1 << i for i, t in enumerate(self.argtypes) if t in (U, I))

    @property
    def bytewise(self) -> bool:
        """Block functions: the length counts bytes (`len`), not 16-byte blocks (`nblocks`)."""
        return self.has("len")

    @property
    def chain(self) -> str | None:
        """Block functions: the chaining value they read and update (`ctr`, `iv`), if any."""
        return next((p.name for p in self.params if p.access == "rw"), None) if self.family == BLOCK else None


SIGNATURES: dict[str, Signature] = {name: Signature.of(record) for name, record in FUNCTIONS.items()}

AEAD_FAMILIES = (GCM, GCM_STREAM, HASH, GCMSIV)
# Families whose calls are driven by scenes (a prepared key or context): each family's
# check module's SCENES, collected by verify/scenes.py.
SCENE_FAMILIES = AEAD_FAMILIES + (XTS, GFDOUBLE, OCB, OTR, WIDEBLOCK, MPC, HALFGATES)
# Families whose length is counted in blocks (MPC: blocks per key or stream; key count for setup).
BLOCK_COUNTED = (HASH, GFDOUBLE, WIDEBLOCK, MPC, HALFGATES)  # HALFGATES: gates


def lookup(name: str) -> Signature | None:
    return SIGNATURES.get(name)


def family(name: str) -> str | None:
    sig = SIGNATURES.get(name)
    return sig.family if sig else None


def in_family(functions: Iterable[str], *families: str) -> list[str]:
    return [f for f in functions if family(f) in families]


@dataclass
class FunctionSet:
    """The functions of one spec, split into callable ones and ones that cannot be checked."""

    functions: tuple[str, ...]                       # every listed function, deduplicated, in order
    problems: list[CheckResult] = field(default_factory=list)
    unusable: dict[str, str] = field(default_factory=dict)  # function -> why it is not checked

    @property
    def usable(self) -> tuple[str, ...]:
        return tuple(f for f in self.functions if f not in self.unusable)


def function_set(spec: object) -> FunctionSet:
    """spec.functions, deduplicated; unknown functions, unknown modes and missing size
    attributes become failed checks naming them instead of exceptions."""
    problems: list[CheckResult] = []
    try:
        names: Sequence[str] = tuple(spec.functions)  # type: ignore[attr-defined]
    except KeyError:
        modes = list(getattr(spec, "modes", ()))
        unknown = [m for m in modes if m not in MODE_FUNCTIONS]
        names = list(COMMON_FUNCTIONS) + [f for m in modes for f in MODE_FUNCTIONS.get(m, ())]
        problems.append(CheckResult(
            "spec", "fail", f"mode(s) {', '.join(map(repr, unknown))} have no entry in "
            "aesgen.functions: their functions are not checked"))
    fs = FunctionSet(tuple(dict.fromkeys(names)), problems)
    needs: dict[str, list[str]] = {}
    for fn in fs.functions:
        sig = SIGNATURES.get(fn)
        if sig is None:
            fs.unusable[fn] = "no signature registered"
            fs.problems.append(CheckResult(
                f"signature {fn}", "fail",
                f"{fn} is listed by the spec but has no record in aesgen.functions (SIGNATURES): "
                "the verifier cannot call it"))
            continue
        for attr in sig.spec_attrs():
            try:
                value = getattr(spec, attr)
                ok = isinstance(value, int) and value > 0
            except Exception:  # a property that raises is as missing as an absent one
                ok = False
            if not ok:
                needs.setdefault(attr, []).append(fn)
    for attr, fns in needs.items():
        for fn in fns:
            fs.unusable[fn] = f"KernelSpec.{attr} missing"
        fs.problems.append(CheckResult(
            f"spec {attr}", "fail",
            f"KernelSpec has no usable attribute {attr!r} (a positive int of bytes), needed by "
            + ", ".join(fns) + "; their runtime checks are skipped"))
    # Functions that need another function to prepare their key or context.
    present = set(fs.functions)
    for fn in fs.functions:
        sig = SIGNATURES.get(fn)
        if sig and sig.key_setup and sig.key_setup not in present and fn not in fs.unusable:
            fs.unusable[fn] = f"{sig.key_setup} not in the file"
            fs.problems.append(CheckResult(
                f"signature {fn}", "fail", f"{fn} needs {sig.key_setup} to build its key, "
                "but the spec does not list it"))
    return fs


def check_groups(fn: str) -> list[str]:
    """Names of the check groups a function gets (used to report skips when nothing can run)."""
    fam = family(fn)
    if fam == CPU:
        return ["cpu_supported", f"abi {fn}"]
    if fam == KEYSETUP:
        groups = [f"abi {fn}", f"guard {fn} after", f"guard {fn} before"]
        if fn in ("set_encrypt_key", "set_decrypt_key"):
            return ["keyschedule"] + groups
        if fn in ("rijndael256_set_encrypt_key", "rijndael256_set_decrypt_key"):
            return [f"kat {fn}", f"badargs {fn}"] + groups
        return [f"badargs {fn}"] + groups
    if fam == BLOCK:
        groups = [f"kat {fn}", f"diff {fn}", f"simulate {fn}", f"abi {fn}",
                  f"guard {fn} after", f"guard {fn} before", f"guard {fn} len0"]
        return groups + ([f"mct {fn}"] if fn.startswith("cbc") else [])
    if fam in (XTS, GFDOUBLE):
        groups = [f"abi {fn}", f"guard {fn} after", f"guard {fn} before"]
        if fn == "xts_set_key":
            return [f"badargs {fn}"] + groups
        return [f"diff {fn}", f"guard {fn} len0"] + groups + ([f"kat {fn}"] if fam == XTS else [])
    if fam == OCB:
        groups = [f"kat {fn}", f"diff {fn}", f"badargs {fn}", f"abi {fn}", f"guard {fn} after",
                  f"guard {fn} before", f"guard {fn} len0", f"simulate {fn}"]
        return groups + ([f"tamper {fn}"] if fn == "ocb_decrypt" else [])
    if fam == OTR:
        guards = [f"abi {fn}", f"guard {fn} after", f"guard {fn} before"]
        if fn == "otr_set_key":
            return [f"badargs {fn}"] + guards
        return [f"kat {fn}", f"diff {fn}", f"badargs {fn}", f"guard {fn} len0"] + guards + \
            ([f"tamper {fn}"] if fn == "otr_decrypt" else [])
    if fam in (WIDEBLOCK, MPC):
        return [f"kat {fn}", f"diff {fn}", f"simulate {fn}", f"abi {fn}", f"guard {fn} after",
                f"guard {fn} before", f"guard {fn} len0"]
    if fam == HALFGATES:
        return [f"diff {fn}", "roundtrip halfgates", f"simulate {fn}", f"abi {fn}", f"guard {fn} after",
                f"guard {fn} before", f"guard {fn} len0"]
    if fam in AEAD_FAMILIES:
        groups = [f"kat {fn}", f"abi {fn}", f"guard {fn} after", f"guard {fn} before", f"guard {fn} len0"]
        if fam != GCM_STREAM:
            groups.append(f"diff {fn}")
        if fn in ("gcm_decrypt", "gcmsiv_decrypt"):
            groups.append(f"tamper {fn}")
        if fn in ("gcm_encrypt", "gcm_decrypt", "gcm_start"):
            groups.append(f"badargs {fn}")
        if fn == "gcm_start":
            groups.append("stream gcm")
        return groups
    return [f"signature {fn}"]
