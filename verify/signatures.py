"""The one table of every C function the verifier knows how to call.

Each entry gives the C prototype (ctypes argument and return types) and, for
every pointer parameter, how many bytes it spans and whether the function
reads or writes it; the family says which checks apply.  build.py, abi.py,
guard.py, differential.py, kat.py, simcheck.py, the family checks and runner.py all
read this table, so a new function is added here once.  A function a spec
lists but this table lacks becomes a failed `signature <fn>` check, never a
KeyError.
"""
from __future__ import annotations

import ctypes
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from aesgen.spec import COMMON_FUNCTIONS, MODE_FUNCTIONS
from aesgen.verify.results import CheckResult

P, SZ, U, I = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint, ctypes.c_int

# Families: which group of checks a function gets.
CPU, KEYSETUP, BLOCK, GCM, GCM_STREAM, HASH, GCMSIV, XTS, GFDOUBLE, OCB, OTR, WIDEBLOCK, MPC = (
    "cpu", "keysetup", "block", "gcm", "gcm-stream", "hash", "gcm-siv", "xts", "gfdouble", "ocb", "otr",
    "wideblock", "mpc")


@dataclass(frozen=True)
class Param:
    """One C parameter.

    size (pointers only): an int (bytes), the name of a length parameter
    ("len", "aadlen", ...), "16*<param>" (whole blocks; "32*": 256-bit blocks), "<param>/8" (bits to
    bytes), or "spec:<attr>" (a size the KernelSpec provides, e.g. gcm_key_bytes).
    access: "r" (must be left unchanged), "w" or "rw".
    aligned: the caller guarantees 64-byte alignment (key schedules, ctx)."""

    name: str
    ctype: object
    size: int | str | None = None
    access: str = ""
    aligned: bool = False

    @property
    def is_pointer(self) -> bool:
        return self.ctype is P


@dataclass(frozen=True)
class Signature:
    name: str
    params: tuple[Param, ...]
    restype: object
    family: str
    # The key setup function that fills this function's key/ctx-owning parameter.
    key_setup: str | None = None
    # Key setup functions: accepted key sizes and the KernelSpec attribute for the schedule size.
    key_bits: tuple[int, ...] = ()
    schedule_attr: str | None = None
    # With every length 0 the function must not dereference any pointer (key included).
    len0_touches_nothing: bool = False
    # Outputs are zeroed whenever the function returns -1 (decrypt-and-verify).
    zero_on_fail: bool = False

    @property
    def argtypes(self) -> list:
        return [p.ctype for p in self.params]

    @property
    def nargs(self) -> int:
        return len(self.params)

    @property
    def mask32(self) -> int:
        """Bit i set: argument i is 32 bits wide (the trampoline puts garbage above it)."""
        return sum(1 << i for i, p in enumerate(self.params) if p.ctype in (U, I))

    @property
    def pointers(self) -> tuple[Param, ...]:
        return tuple(p for p in self.params if p.is_pointer)

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(f"{self.name} has no parameter {name!r}")

    def has(self, name: str) -> bool:
        return any(p.name == name for p in self.params)

    def spec_attrs(self) -> tuple[str, ...]:
        """KernelSpec attributes this function's buffers are sized by."""
        out = [p.size[5:] for p in self.params if isinstance(p.size, str) and p.size.startswith("spec:")]
        if self.schedule_attr:
            out.append(self.schedule_attr)
        return tuple(dict.fromkeys(out))

    def nbytes(self, param: Param | str, values: dict[str, int], spec: object) -> int:
        """Bytes `param` spans for the integer argument values given."""
        p = self.param(param) if isinstance(param, str) else param
        s = p.size
        if isinstance(s, int):
            return s
        if s is None:
            raise ValueError(f"{self.name}.{p.name} has no size")
        if s.startswith("spec:"):
            return int(getattr(spec, s[5:]))
        if "*" in s:  # whole blocks of 16 or 32 bytes
            size, _, count = s.partition("*")
            return int(size) * values[count]
        if s.endswith("/8"):
            return values[s[:-2]] // 8
        return values[s]


def _sig(name: str, family: str, restype: object, *params: Param, **kw) -> Signature:
    return Signature(name, tuple(params), restype, family, **kw)


_KEY = Param("key", P, "spec:key_bytes", "r", aligned=True)
_GKEY = Param("gkey", P, "spec:gcm_key_bytes", "r", aligned=True)
_SKEY = Param("skey", P, "spec:gcmsiv_key_bytes", "r", aligned=True)
_CTX = Param("ctx", P, "spec:gcm_ctx_bytes", "rw", aligned=True)
_XKEY = Param("xkey", P, "spec:xts_key_bytes", "r", aligned=True)
_OKEY = Param("okey", P, "spec:ocb_key_bytes", "r", aligned=True)
_TKEY = Param("tkey", P, "spec:otr_key_bytes", "r", aligned=True)
_RKEY = Param("rkey", P, "spec:rijndael256_key_bytes", "r", aligned=True)


def _block(name: str, count: str, chain: str | None, setup: str) -> Signature:
    size = count if count == "len" else f"16*{count}"
    params = [_KEY, Param("in", P, size, "r"), Param("out", P, size, "w"), Param(count, SZ)]
    if chain:
        params.append(Param(chain, P, 16, "rw"))
    return _sig(name, BLOCK, None, *params, key_setup=setup, len0_touches_nothing=True)


def _setup(name: str, out: Param, bits: tuple[int, ...]) -> Signature:
    return _sig(name, KEYSETUP, I, Param("user_key", P, "bits/8", "r"), Param("bits", U),
                Param(out.name, P, out.size, "w", aligned=True),
                key_bits=bits, schedule_attr=str(out.size)[5:])


def _oneshot(name: str, family: str, key: Param, nonce: str, setup: str, decrypt: bool) -> Signature:
    """An AEAD one-shot: (key, nonce, noncelen, aad, aadlen, in, out, len, tag, taglen) -> int."""
    return _sig(name, family, I, key, Param(nonce, P, f"{nonce}len", "r"), Param(f"{nonce}len", SZ),
                Param("aad", P, "aadlen", "r"), Param("aadlen", SZ),
                Param("in", P, "len", "r"), Param("out", P, "len", "w"), Param("len", SZ),
                Param("tag", P, "taglen", "r" if decrypt else "w"), Param("taglen", SZ),
                key_setup=setup, zero_on_fail=decrypt)


def _gcmsiv(name: str, decrypt: bool) -> Signature:
    return _sig(name, GCMSIV, I, _SKEY, Param("nonce", P, 12, "r"),
                Param("aad", P, "aadlen", "r"), Param("aadlen", SZ),
                Param("in", P, "len", "r"), Param("out", P, "len", "w"), Param("len", SZ),
                Param("tag", P, 16, "r" if decrypt else "w"),
                key_setup="gcmsiv_set_key", zero_on_fail=decrypt)


def _xts(name: str) -> Signature:
    return _sig(name, XTS, None, _XKEY, Param("in", P, "len", "r"), Param("out", P, "len", "w"),
                Param("len", SZ), Param("tweak", P, 16, "r"), key_setup="xts_set_key",
                len0_touches_nothing=True)


def _otr(name: str, decrypt: bool) -> Signature:
    return _sig(name, OTR, I, _TKEY, Param("nonce", P, "noncelen", "r"), Param("noncelen", SZ),
                Param("aad", P, "aadlen", "r"), Param("aadlen", SZ),
                Param("in", P, "len", "r"), Param("out", P, "len", "w"), Param("len", SZ),
                Param("tag", P, 16, "r" if decrypt else "w"), key_setup="otr_set_key", zero_on_fail=decrypt)


def _wideblock(name: str, *key: Param, setup: str | None = None) -> Signature:
    """nblocks 32-byte blocks from in to out (Rijndael-256 under a key, or Simpira-256)."""
    return _sig(name, WIDEBLOCK, None, *key, Param("in", P, "32*nblocks", "r"),
                Param("out", P, "32*nblocks", "w"), Param("nblocks", SZ), key_setup=setup,
                len0_touches_nothing=True)


def _gfdouble(name: str) -> Signature:
    return _sig(name, GFDOUBLE, None, Param("tweak", P, 16, "r"), Param("out", P, "16*nblocks", "w"),
                Param("nblocks", SZ), len0_touches_nothing=True)


SIGNATURES: dict[str, Signature] = {s.name: s for s in (
    _sig("cpu_supported", CPU, I),
    _setup("set_encrypt_key", _KEY, (128, 192, 256)),
    _setup("set_decrypt_key", _KEY, (128, 192, 256)),
    _block("ecb_encrypt", "nblocks", None, "set_encrypt_key"),
    _block("ecb_decrypt", "nblocks", None, "set_decrypt_key"),
    _block("ctr32_encrypt", "len", "ctr", "set_encrypt_key"),
    _block("cbc_encrypt", "nblocks", "iv", "set_encrypt_key"),
    _block("cbc_decrypt", "nblocks", "iv", "set_decrypt_key"),
    # GCM (SP 800-38D)
    _setup("gcm_set_key", _GKEY, (128, 192, 256)),
    _oneshot("gcm_encrypt", GCM, _GKEY, "iv", "gcm_set_key", decrypt=False),
    _oneshot("gcm_decrypt", GCM, _GKEY, "iv", "gcm_set_key", decrypt=True),
    _sig("gcm_start", GCM_STREAM, I, Param("ctx", P, "spec:gcm_ctx_bytes", "w", aligned=True), _GKEY,
         Param("iv", P, "ivlen", "r"), Param("ivlen", SZ), key_setup="gcm_set_key"),
    _sig("gcm_aad", GCM_STREAM, None, _CTX, Param("aad", P, "len", "r"), Param("len", SZ),
         key_setup="gcm_set_key"),
    _sig("gcm_encrypt_update", GCM_STREAM, None, _CTX, Param("in", P, "len", "r"),
         Param("out", P, "len", "w"), Param("len", SZ), key_setup="gcm_set_key"),
    _sig("gcm_decrypt_update", GCM_STREAM, None, _CTX, Param("in", P, "len", "r"),
         Param("out", P, "len", "w"), Param("len", SZ), key_setup="gcm_set_key"),
    _sig("gcm_finish", GCM_STREAM, None, _CTX, Param("tag", P, 16, "w"), key_setup="gcm_set_key"),
    _sig("ghash", HASH, None, _GKEY, Param("acc", P, 16, "rw"), Param("data", P, "16*nblocks", "r"),
         Param("nblocks", SZ), key_setup="gcm_set_key", len0_touches_nothing=True),
    # GCM-SIV (RFC 8452)
    _setup("gcmsiv_set_key", _SKEY, (128, 256)),
    _gcmsiv("gcmsiv_encrypt", decrypt=False),
    _gcmsiv("gcmsiv_decrypt", decrypt=True),
    _sig("polyval", HASH, None, Param("h", P, 16, "r"), Param("acc", P, 16, "rw"),
         Param("data", P, "16*nblocks", "r"), Param("nblocks", SZ), len0_touches_nothing=True),
    # XTS (IEEE 1619) and the doubling sequences
    _sig("xts_set_key", XTS, I, Param("key1", P, "bits/8", "r"), Param("key2", P, "bits/8", "r"),
         Param("bits", U), Param("xkey", P, "spec:xts_key_bytes", "w", aligned=True), Param("enc", I),
         key_bits=(128, 192, 256), schedule_attr="xts_key_bytes"),
    _xts("xts_encrypt"),
    _xts("xts_decrypt"),
    _gfdouble("gfdouble_le"),
    _gfdouble("gfdouble_be"),
    # OCB3 (RFC 7253)
    _setup("ocb_set_key", _OKEY, (128, 192, 256)),
    _oneshot("ocb_encrypt", OCB, _OKEY, "nonce", "ocb_set_key", decrypt=False),
    _oneshot("ocb_decrypt", OCB, _OKEY, "nonce", "ocb_set_key", decrypt=True),
    # AES-OTR v3.1, parallel AD
    _setup("otr_set_key", _TKEY, (128, 192, 256)),
    _otr("otr_encrypt", decrypt=False),
    _otr("otr_decrypt", decrypt=True),
    # batched kernels (MPC / garbling) and multi-stream CBC: verify/mpc.py (sizes depend on counts)
    _sig("set_encrypt_keys", MPC, I, Param("user_keys", P, None, "r"), Param("bits", U), Param("nkeys", U),
         Param("keys", P, None, "w", aligned=True), len0_touches_nothing=True),
    _sig("ecb_encrypt_multikey", MPC, None, Param("keys", P, None, "r", aligned=True), Param("nkeys", U),
         Param("in", P, None, "r"), Param("out", P, None, "w"), Param("blocks_per_key", SZ),
         key_setup="set_encrypt_keys", len0_touches_nothing=True),
    _sig("fixed_key_hash", MPC, None, _KEY, Param("in", P, "16*nblocks", "r"), Param("out", P, "16*nblocks", "w"),
         Param("nblocks", SZ), key_setup="set_encrypt_key", len0_touches_nothing=True),
    # pointer arrays of nstreams entries (each stream's buffers are placed by the scene)
    _sig("cbc_encrypt_multi", MPC, None, Param("keys", P, None, "r"), Param("in", P, None, "r"),
         Param("out", P, None, "r"), Param("nblocks", SZ), Param("ivs", P, None, "r"), Param("nstreams", U),
         key_setup="set_encrypt_key", len0_touches_nothing=True),
    # 256-bit blocks (kernels/wideblock.py)
    _setup("rijndael256_set_encrypt_key", _RKEY, (256,)),
    _setup("rijndael256_set_decrypt_key", _RKEY, (256,)),
    _wideblock("rijndael256_ecb_encrypt", _RKEY, setup="rijndael256_set_encrypt_key"),
    _wideblock("rijndael256_ecb_decrypt", _RKEY, setup="rijndael256_set_decrypt_key"),
    _wideblock("simpira256_permute"),
    _wideblock("simpira256_inverse"),
)}

AEAD_FAMILIES = (GCM, GCM_STREAM, HASH, GCMSIV)
# Families whose calls are driven by scenes (a prepared key or context): each family's
# check module's SCENES, collected by verify/scenes.py.
SCENE_FAMILIES = AEAD_FAMILIES + (XTS, GFDOUBLE, OCB, OTR, WIDEBLOCK, MPC)
# Families whose length is counted in blocks (MPC: blocks per key or stream; key count for setup).
BLOCK_COUNTED = (HASH, GFDOUBLE, WIDEBLOCK, MPC)


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
            "aesgen.spec.MODE_FUNCTIONS: their functions are not checked"))
    fs = FunctionSet(tuple(dict.fromkeys(names)), problems)
    needs: dict[str, list[str]] = {}
    for fn in fs.functions:
        sig = SIGNATURES.get(fn)
        if sig is None:
            fs.unusable[fn] = "no signature registered"
            fs.problems.append(CheckResult(
                f"signature {fn}", "fail",
                f"{fn} is listed by the spec but has no entry in aesgen.verify.signatures.SIGNATURES: "
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
