"""The C functions a generated file can export: one record each, and the modes that export them.

A record is a function's whole C contract: its parameters (C type, name, how many bytes a pointer
spans, whether the function reads or writes it), its return type, its one-line summary, the modes
that export it, the key setup whose output it takes, and what the verifier needs to know to call
it.  Everything else is derived from it:

- the prototypes in the `.h` (`CFunction.prototype`, through pipeline.prototype);
- the kernel binding: the argument names a description sees in `b.reg` (`CFunction.kernel_args`),
  and its summary (aesgen.kernels pairs each record with the description that builds it);
- which functions a file lists, and at which mode's width and depth each one runs
  (`MODE_FUNCTIONS`, `COMMON_FUNCTIONS`, `mode_of`; aesgen.spec re-exports them);
- the verifier's signatures (aesgen.verify.signatures: ctypes types from the C types), and for a
  function that names the standard mode it implements (`StandardMode`), what the verifier's
  differential, known-answer and smoke checks expect of it (aesgen.verify.standard);
- what the benchmark times and explore sweeps per mode (`TIMED_FUNCTIONS`, `EXPLORED_FUNCTIONS`);
- the function table of docs/abi.md (aesgen.tools.abi_doc writes it; `make regen-check` diffs it).

Records are in file order: a file lists `COMMON_FUNCTIONS`, then, mode by mode in the order asked
for, that mode's functions in the order they stand here (a function two modes share appears once).
This module imports nothing from the project, so every stage can read it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace

from .declassify import REASONS

# The verifier's families: which group of checks a function gets (verify/signatures.py check_groups).
CPU, KEYSETUP, BLOCK, GCM, GCM_STREAM, HASH, GCMSIV, XTS, GFDOUBLE, OCB, OTR, WIDEBLOCK, MPC, HALFGATES = (
    "cpu", "keysetup", "block", "gcm", "gcm-stream", "hash", "gcm-siv", "xts", "gfdouble", "ocb", "otr",
    "wideblock", "mpc", "halfgates")

SCALAR_TYPES = ("size_t", "unsigned", "int", "uint64_t")  # every other parameter is a pointer (or an array of bytes)
_ARRAY = re.compile(r"(.*?)\s*\[(\d+)\]\Z")


@dataclass(frozen=True)
class Param:
    """One C parameter.

    ctype: the C type as a cast writes it: "const uint8_t *", "uint8_t[16]" (an array parameter),
      "size_t", "unsigned", "int", "const void *const *" ...
    size (pointers): how many bytes it spans: an int, the name of a length parameter ("len",
      "aadlen"...), "16*<param>" (whole blocks; "32*": 256-bit blocks; "8*": two uint32 per item),
      "<param>/8" (bits to bytes),
      "spec:<attr>" (a size the KernelSpec gives, e.g. gcm_key_bytes), or None (the verifier's
      scene places it: arrays of pointers, counts of keys). An array's size is its length.
    access (pointers): "r" (left unchanged), "w" or "rw".
    aligned: the caller guarantees 64-byte alignment (key schedules, ctx).
    kernel_name: the name the kernel description binds it by (`b.reg[...]`), where it is not the
      C name (several functions call their AES schedule `key`)."""

    name: str
    ctype: str
    size: int | str | None = None
    access: str = ""
    aligned: bool = False
    kernel_name: str = ""

    def __post_init__(self) -> None:
        array = _ARRAY.match(self.ctype)
        if array and self.size is None:
            object.__setattr__(self, "size", int(array.group(2)))
        if self.is_pointer != (self.access in ("r", "w", "rw")):
            raise ValueError(f"{self.name}: a pointer needs an access (r, w, rw), a scalar none")
        if array and self.size != int(array.group(2)):
            raise ValueError(f"{self.name}: size {self.size} is not its array length")

    @property
    def is_pointer(self) -> bool:
        return self.ctype not in SCALAR_TYPES

    @property
    def declaration(self) -> str:
        """As the prototype writes it: `const uint8_t *in`, `uint8_t ctr[16]`, `size_t len`."""
        array = _ARRAY.match(self.ctype)
        if array:
            return f"{array.group(1)} {self.name}[{array.group(2)}]"
        return f"{self.ctype}{self.name}" if self.ctype.endswith("*") else f"{self.ctype} {self.name}"

    @property
    def spec_attr(self) -> str | None:
        """The KernelSpec attribute its size comes from, if any."""
        return self.size[5:] if isinstance(self.size, str) and self.size.startswith("spec:") else None

    def nbytes(self, values: dict[str, int], spec: object) -> int:
        """Bytes it spans for the integer argument values given (and the spec's sizes)."""
        s = self.size
        if isinstance(s, int):
            return s
        if s is None:
            raise ValueError(f"{self.name} has no size")
        if self.spec_attr:
            return int(getattr(spec, self.spec_attr))
        if "*" in s:  # whole blocks of 16 or 32 bytes
            size, _, count = s.partition("*")
            return int(size) * values[count]
        if s.endswith("/8"):
            return values[s[:-2]] // 8
        return values[s]


# A file has these whatever its modes (the records' `modes`).
EVERY_FILE: tuple[str, ...] = ()


@dataclass(frozen=True)
class StandardMode:
    """The standard block-cipher mode a function implements, named as `cryptography` names its mode
    class ("ECB", "CBC", "CFB", "OFB"; SP 800-38A): the verifier checks the function against that
    library and the mode's published CAVP vectors, with no reference of its own."""

    name: str
    decrypt: bool = False


# Key sizes a key setup is tried with: none, too small, one bit short or over, each AES size (refused
# where the setup does not take it: GCM-SIV has no 192, Rijndael-256 only 256), far too large.
KEY_BITS_TRIED = (0, 64, 127, 128, 192, 255, 256, 257, 512)


@dataclass(frozen=True)
class CFunction:
    """One exported C function (unprefixed name) and its contract."""

    name: str
    returns: str                     # "int" or "void"
    params: tuple[Param, ...]
    summary: str                     # the header's comment line
    modes: tuple[str, ...]           # the modes that export it (EVERY_FILE: all files)
    family: str                      # the verifier's family (the constants above)
    # The key setup function that makes the key (or the context's key) it reads.
    key_setup: str | None = None
    # Key setup functions: the key sizes they accept (any other: -1, nothing touched). They fill a
    # key in the file's layout, so they run at the file's width and depth, whatever their mode's.
    key_bits: tuple[int, ...] = ()
    # With every length 0 the function dereferences no pointer (key included).
    len0_touches_nothing: bool = False
    # Decrypt-and-verify: returns -1 on a wrong tag with every output byte zeroed.
    zero_on_fail: bool = False
    # Block functions: the standard computation it implements (None: the verifier has its own reference).
    standard: StandardMode | None = None
    # `aesgen bench` times it (bench.c knows how to call it); `explored`: the one function explore and
    # tune sweep for its mode.
    timed: bool = False
    explored: bool = False
    # What the function makes public by design (keys of declassify.REASONS; docs/abi.md
    # "Constant time"): the static check fails a `*_ct_declassify_<reason>_*` mark whose reason
    # is not named here, so a new declassification is a visible change to the contract, not a
    # quiet one. (declassify.ALWAYS: the win64 wrappers' argument copies, in every function.)
    public_by_design: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.returns not in ("int", "void"):
            raise ValueError(f"{self.name}: returns int or void, not {self.returns!r}")
        if self.explored and not self.timed:
            raise ValueError(f"{self.name}: explore sweeps only what the benchmark times")
        unknown = [r for r in self.public_by_design if r not in REASONS]
        if unknown:
            raise ValueError(f"{self.name}: public_by_design names no declassify reason {unknown}")

    @property
    def is_key_setup(self) -> bool:
        return bool(self.key_bits)

    @property
    def rejected_bits(self) -> tuple[int, ...]:
        """Key sizes the verifier tries on a key setup that it must refuse: every size it does not
        accept among KEY_BITS_TRIED."""
        return tuple(b for b in KEY_BITS_TRIED if b not in self.key_bits)

    @property
    def kernel_args(self) -> tuple[str, ...]:
        """The argument names its kernel description binds, in SysV order."""
        return tuple(p.kernel_name or p.name for p in self.params)

    def prototype(self, symbol: str) -> str:
        """`int P_set_encrypt_key(const uint8_t *user_key, unsigned bits, void *key)`."""
        return f"{self.returns} {symbol}({', '.join(p.declaration for p in self.params) or 'void'})"

    @property
    def nargs(self) -> int:
        return len(self.params)

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

    @property
    def schedule_attr(self) -> str | None:
        """Key setup: the KernelSpec attribute giving the size of the key it fills."""
        if not self.is_key_setup:
            return None
        return next(p.spec_attr for p in self.params if p.access == "w" and p.spec_attr)

    def spec_attrs(self) -> tuple[str, ...]:
        """KernelSpec attributes its buffers are sized by."""
        return tuple(dict.fromkeys(p.spec_attr for p in self.params if p.spec_attr))

    def nbytes(self, param: Param | str, values: dict[str, int], spec: object) -> int:
        """Bytes `param` spans for the integer argument values given."""
        return (self.param(param) if isinstance(param, str) else param).nbytes(values, spec)


@dataclass(frozen=True)
class Mode:
    name: str                        # as `aesgen generate` takes it
    title: str                       # in the file's header line


# In this order in default prefixes (spec.default_prefix).
_MODES = (Mode("ecb", "ECB"), Mode("ctr32", "CTR32"), Mode("cbc", "CBC"), Mode("cfb", "CFB128"),
          Mode("ghash", "GHASH"), Mode("polyval", "POLYVAL"), Mode("gcm", "GCM"), Mode("gcm-siv", "GCM-SIV"),
          Mode("xts", "XTS"), Mode("gfdouble", "GF(2^128) doubling"), Mode("ocb", "OCB3"), Mode("otr", "OTR"),
          Mode("rijndael256", "Rijndael-256"), Mode("simpira", "Simpira-256"), Mode("multikey", "multi-key ECB"),
          Mode("fixed-key-hash", "fixed-key hash"), Mode("cbc-multi", "multi-stream CBC"),
          Mode("halfgates", "half-gates garbling"))


# -- parameters several functions share ---------------------------------------------------------
def _in(size: str) -> Param:
    return Param("in", "const uint8_t *", size, "r")


def _out(size: str) -> Param:
    return Param("out", "uint8_t *", size, "w")


def _schedule(name: str, attr: str, kernel_name: str = "") -> Param:
    """A key the function reads, 64-byte aligned, of the spec's size `attr`."""
    return Param(name, "const void *", f"spec:{attr}", "r", aligned=True, kernel_name=kernel_name)


def _filled(key: Param) -> Param:
    """The same key as a key setup function's output."""
    return replace(key, ctype="void *", access="w")


KEY = _schedule("key", "key_bytes")
DKEY = _schedule("dkey", "key_bytes", kernel_name="key")
GKEY = _schedule("gkey", "gcm_key_bytes", kernel_name="key")
SKEY = _schedule("skey", "gcmsiv_key_bytes", kernel_name="key")
XKEY = _schedule("xkey", "xts_key_bytes")
OKEY = _schedule("okey", "ocb_key_bytes")
TKEY = _schedule("tkey", "otr_key_bytes", kernel_name="key")
RKEY = _schedule("rkey", "rijndael256_key_bytes")
CTX = Param("ctx", "void *", "spec:gcm_ctx_bytes", "rw", aligned=True)
LEN, NBLOCKS, BITS = Param("len", "size_t"), Param("nblocks", "size_t"), Param("bits", "unsigned")
AAD = (Param("aad", "const uint8_t *", "aadlen", "r"), Param("aadlen", "size_t"))
TEXT = (_in("len"), _out("len"), LEN)  # in, out, len: the AEAD and XTS texts
GATE_ID = Param("first_gate_id", "uint64_t")  # half-gates: gate i of a call hashes with tweaks 2(id+i), 2(id+i)+1


def _tag(decrypt: bool, size: int | str) -> Param:
    """The tag: written by encryption, read (and checked) by decryption."""
    ctype = "uint8_t *" if isinstance(size, str) else f"uint8_t[{size}]"
    return Param("tag", f"const {ctype}" if decrypt else ctype, size, "r" if decrypt else "w")


# -- record makers for the shapes several functions share ----------------------------------------

def _key_setup(name: str, key: Param, summary: str, modes: tuple[str, ...],
               bits: tuple[int, ...] = (128, 192, 256)) -> CFunction:
    """(user_key, bits, key) -> 0, or -1 for a bad `bits`."""
    return CFunction(name, "int", (Param("user_key", "const uint8_t *", "bits/8", "r"), BITS, _filled(key)),
                     summary, modes, KEYSETUP, key_bits=bits)


def _blocks(name: str, key: Param, count: Param, chain: str | None, setup: str, summary: str,
            mode: str, **rest: object) -> CFunction:
    """(key, in, out, nblocks or len[, ctr or iv]): the block-cipher modes (`rest`: standard, timed...)."""
    size = "len" if count == LEN else f"16*{count.name}"
    params = (key, _in(size), _out(size), count) + ((Param(chain, "uint8_t[16]", access="rw"),) if chain else ())
    return CFunction(name, "void", params, summary, (mode,), BLOCK, key_setup=setup, len0_touches_nothing=True,
                     **rest)


def _aead(name: str, family: str, key: Param, nonce: str, setup: str, decrypt: bool, summary: str,
          mode: str, taglen: bool = True, **timing: bool) -> CFunction:
    """(key, nonce, noncelen, aad, aadlen, in, out, len, tag[, taglen]) -> int: the one-shot AEADs."""
    tag = (_tag(decrypt, "taglen"), Param("taglen", "size_t")) if taglen else (_tag(decrypt, 16),)
    public = ("nonce_bits",) if family == OCB else ()
    public += ("verdict",) if decrypt else ()
    return CFunction(name, "int", (key, Param(nonce, "const uint8_t *", f"{nonce}len", "r"),
                                   Param(f"{nonce}len", "size_t"), *AAD, *TEXT, *tag),
                     summary, (mode,), family, key_setup=setup, zero_on_fail=decrypt,
                     public_by_design=public, **timing)


def _gcmsiv(name: str, decrypt: bool, summary: str) -> CFunction:
    return CFunction(name, "int", (SKEY, Param("nonce", "const uint8_t[12]", access="r"), *AAD, *TEXT,
                                   _tag(decrypt, 16)),
                     summary, ("gcm-siv",), GCMSIV, key_setup="gcmsiv_set_key", zero_on_fail=decrypt,
                     timed=not decrypt, public_by_design=("verdict",) if decrypt else ())


def _stream(name: str, returns: str, params: tuple[Param, ...], summary: str) -> CFunction:
    """Streaming AES-GCM: a context the caller keeps between calls (an update's main loop also
    reads the first counter)."""
    update = ("first_counter",) if name.endswith("_update") else ()
    return CFunction(name, returns, params, summary, ("gcm",), GCM_STREAM, key_setup="gcm_set_key",
                     public_by_design=("byte_counts", *update, "key_pointer"))


def _hash(name: str, key: Param, summary: str, modes: tuple[str, ...], setup: str | None) -> CFunction:
    """(key or h, acc, data, nblocks): GHASH and POLYVAL, continued from acc (both timed and explored)."""
    return CFunction(name, "void", (key, Param("acc", "uint8_t[16]", access="rw"),
                                    Param("data", "const uint8_t *", "16*nblocks", "r"), NBLOCKS),
                     summary, modes, HASH, key_setup=setup, len0_touches_nothing=True, timed=True, explored=True,
                     public_by_design=("data_pointer",))


def _xts(name: str, summary: str, **timing: bool) -> CFunction:
    return CFunction(name, "void", (XKEY, *TEXT, Param("tweak", "const uint8_t[16]", access="r")),
                     summary, ("xts",), XTS, key_setup="xts_set_key", len0_touches_nothing=True, **timing)


def _gfdouble(name: str, summary: str) -> CFunction:
    return CFunction(name, "void", (Param("tweak", "const uint8_t[16]", access="r"), _out("16*nblocks"), NBLOCKS),
                     summary, ("gfdouble",), GFDOUBLE, len0_touches_nothing=True, timed=True)


def _wideblock(name: str, key: tuple[Param, ...], setup: str | None, summary: str, mode: str,
               **timing: bool) -> CFunction:
    """nblocks 32-byte blocks from in to out (Rijndael-256 under a key, or Simpira-256)."""
    return CFunction(name, "void", (*key, _in("32*nblocks"), _out("32*nblocks"), NBLOCKS), summary, (mode,),
                     WIDEBLOCK, key_setup=setup, len0_touches_nothing=True, **timing)


def _labels(name: str, access: str = "r") -> Param:
    """16-byte labels, one per gate."""
    return Param(name, "const uint8_t *" if access == "r" else "uint8_t *", "16*n", access)


# _gather: the label array (its extent is the caller's: the scene places it) and two uint32 byte offsets per gate
GATHERED = (Param("labels", "const uint8_t *", None, "r"), Param("in", "const uint32_t *", "8*n", "r"))


def _halfgates(name: str, params: tuple[Param, ...], summary: str) -> CFunction:
    """(fixed_key, ..., n): n AND gates; the fixed key is a set_encrypt_key schedule."""
    return CFunction(name, "void", (_schedule("fixed_key", "key_bytes", kernel_name="key"), *params,
                                    Param("n", "size_t")),
                     summary, ("halfgates",), HALFGATES, key_setup="set_encrypt_key", len0_touches_nothing=True,
                     public_by_design=("wire_place",))


_RECORDS = (
    CFunction("cpu_supported", "int", (), "1 if CPUID and XGETBV allow this file's instructions", EVERY_FILE, CPU),
    _key_setup("set_encrypt_key", KEY, "AES key expansion (FIPS-197)", EVERY_FILE),
    _key_setup("set_decrypt_key", KEY, "equivalent inverse cipher key schedule", EVERY_FILE),
    _blocks("ecb_encrypt", KEY, NBLOCKS, None, "set_encrypt_key", "ECB encryption", "ecb",
            standard=StandardMode("ECB"), timed=True, explored=True),
    _blocks("ecb_decrypt", DKEY, NBLOCKS, None, "set_decrypt_key", "ECB decryption", "ecb",
            standard=StandardMode("ECB", decrypt=True), timed=True),
    # CTR with a 32-bit counter is not cryptography's CTR (a 128-bit counter): the verifier models it
    _blocks("ctr32_encrypt", KEY, LEN, "ctr", "set_encrypt_key",
            "CTR with a 32-bit big-endian counter (encrypts and decrypts)", "ctr32", timed=True, explored=True),
    _blocks("cbc_encrypt", KEY, NBLOCKS, "iv", "set_encrypt_key", "CBC encryption (serial)", "cbc",
            standard=StandardMode("CBC"), timed=True),
    _blocks("cbc_decrypt", DKEY, NBLOCKS, "iv", "set_decrypt_key", "CBC decryption (parallel)", "cbc",
            standard=StandardMode("CBC", decrypt=True), timed=True, explored=True),
    _blocks("cfb_encrypt", KEY, NBLOCKS, "iv", "set_encrypt_key",
            "CFB128 encryption (serial); iv ends as the last ciphertext block", "cfb", standard=StandardMode("CFB")),
    # GCM (SP 800-38D): the hash alone (ghash), the one-shot and the streaming functions (gcm)
    _key_setup("gcm_set_key", GKEY, "GCM key: AES schedule and the powers of H", ("ghash", "gcm")),
    _hash("ghash", GKEY, "GHASH (SP 800-38D) of whole blocks, continued from acc", ("ghash", "gcm"), "gcm_set_key"),
    _aead("gcm_encrypt", GCM, GKEY, "iv", "gcm_set_key", False, "AES-GCM encryption and tag (one call)", "gcm",
          timed=True, explored=True),
    _aead("gcm_decrypt", GCM, GKEY, "iv", "gcm_set_key", True,
          "AES-GCM decryption; -1 and out zeroed on a wrong tag", "gcm", timed=True),
    _stream("gcm_start", "int", (replace(CTX, access="w"), replace(GKEY, kernel_name=""),
                                 Param("iv", "const uint8_t *", "ivlen", "r"), Param("ivlen", "size_t")),
            "streaming AES-GCM: a new message (-1 for an empty IV)"),
    _stream("gcm_aad", "void", (CTX, Param("aad", "const uint8_t *", "len", "r"), LEN),
            "streaming AES-GCM: more AAD, before any text"),
    _stream("gcm_encrypt_update", "void", (CTX, *TEXT), "streaming AES-GCM: encrypt len more bytes (any chunking)"),
    _stream("gcm_decrypt_update", "void", (CTX, *TEXT), "streaming AES-GCM: decrypt len more bytes (any chunking)"),
    _stream("gcm_finish", "void", (CTX, _tag(False, 16)),
            "streaming AES-GCM: the 16-byte tag; the context's secrets are wiped"),
    # GCM-SIV (RFC 8452); POLYVAL alone is the polyval mode
    _key_setup("gcmsiv_set_key", SKEY, "AES-GCM-SIV key: the key-generating key's AES schedule (128 or 256 bits)",
               ("gcm-siv",), bits=(128, 256)),
    _gcmsiv("gcmsiv_encrypt", False, "AES-GCM-SIV (RFC 8452) encryption and tag"),
    _gcmsiv("gcmsiv_decrypt", True, "AES-GCM-SIV decryption; -1 and out zeroed on a wrong tag"),
    _hash("polyval", Param("h", "const uint8_t[16]", access="r"),
          "POLYVAL (RFC 8452) of whole blocks, continued from acc", ("polyval", "gcm-siv"), None),
    # XTS (IEEE 1619) and the doubling sequences alone
    CFunction("xts_set_key", "int", (Param("key1", "const uint8_t *", "bits/8", "r"),
                                     Param("key2", "const uint8_t *", "bits/8", "r"), BITS, _filled(XKEY),
                                     Param("enc", "int")),
              "XTS key: key1's schedule (encrypt, or decrypt if enc == 0), then key2's", ("xts",), XTS,
              key_bits=(128, 192, 256)),
    _xts("xts_encrypt", "XTS-AES (IEEE 1619) encryption with ciphertext stealing", timed=True, explored=True),
    _xts("xts_decrypt", "XTS-AES (IEEE 1619) decryption with ciphertext stealing", timed=True),
    _gfdouble("gfdouble_le", "out[i] = tweak * x^i in GF(2^128), little-endian blocks (XTS)"),
    _gfdouble("gfdouble_be", "out[i] = tweak * x^i in GF(2^128), big-endian blocks (OCB, OTR)"),
    # OCB3 (RFC 7253)
    _key_setup("ocb_set_key", OKEY, "OCB key: both AES schedules, L_*, L_$, L_0..L_63 and the batch offset tables",
               ("ocb",)),
    _aead("ocb_encrypt", OCB, OKEY, "nonce", "ocb_set_key", False, "AES-OCB3 (RFC 7253) encryption and tag", "ocb",
          timed=True, explored=True),
    _aead("ocb_decrypt", OCB, OKEY, "nonce", "ocb_set_key", True,
          "AES-OCB3 decryption; -1 and out zeroed on a wrong tag", "ocb", timed=True),
    # AES-OTR v3.1, parallel AD
    _key_setup("otr_set_key", TKEY, "AES-OTR key: the AES encryption schedule, then Q = E_K(0)", ("otr",)),
    _aead("otr_encrypt", OTR, TKEY, "nonce", "otr_set_key", False,
          "AES-OTR v3.1 (parallel AD) encryption and 16-byte tag", "otr", taglen=False, timed=True, explored=True),
    _aead("otr_decrypt", OTR, TKEY, "nonce", "otr_set_key", True,
          "AES-OTR v3.1 decryption; -1 and out zeroed on a wrong tag or nonce length", "otr", taglen=False,
          timed=True),
    # batched kernels (MPC / garbling) and multi-stream CBC: the verifier's scenes size their buffers
    CFunction("set_encrypt_keys", "int", (Param("user_keys", "const uint8_t *", access="r"), BITS,
                                          Param("nkeys", "unsigned"), Param("keys", "void *", access="w", aligned=True)),
              "nkeys AES key expansions into one multikey schedule (round keys interleaved)", ("multikey",), MPC,
              len0_touches_nothing=True),
    CFunction("ecb_encrypt_multikey", "void", (Param("keys", "const void *", access="r", aligned=True),
                                               Param("nkeys", "unsigned"), Param("in", "const uint8_t *", access="r"),
                                               Param("out", "uint8_t *", access="w"),
                                               Param("blocks_per_key", "size_t")),
              "ECB of blocks_per_key blocks under each of nkeys keys, keys in the lanes", ("multikey",), MPC,
              key_setup="set_encrypt_keys", len0_touches_nothing=True, timed=True, explored=True),
    CFunction("fixed_key_hash", "void", (KEY, _in("16*nblocks"), _out("16*nblocks"), NBLOCKS),
              "correlation-robust hash pi(sigma(x)) ^ sigma(x) under one fixed key", ("fixed-key-hash",), MPC,
              key_setup="set_encrypt_key", len0_touches_nothing=True, timed=True, explored=True),
    # arrays of nstreams pointers (read; the streams' buffers are written)
    CFunction("cbc_encrypt_multi", "void", (Param("keys", "const void *const *", access="r"),
                                            Param("in", "const uint8_t *const *", access="r"),
                                            Param("out", "uint8_t *const *", access="r"), NBLOCKS,
                                            Param("ivs", "uint8_t *const *", access="r"), Param("nstreams", "unsigned")),
              "CBC encryption of nstreams independent equal-length streams, interleaved", ("cbc-multi",), MPC,
              key_setup="set_encrypt_key", len0_touches_nothing=True, timed=True, explored=True,
              public_by_design=("caller_pointer",)),
    # half-gates garbling of n AND gates (kernels/halfgates.py; the hash and tweaks: docs/abi.md)
    _halfgates("halfgates_garble", (Param("delta", "const uint8_t[16]", access="r"), _labels("a0"), _labels("b0"),
                                    GATE_ID, Param("tables", "uint8_t *", "32*n", "w"), _labels("c0", "w")),
               "half-gates garbling of n AND gates: 32-byte tables and output 0-labels"),
    _halfgates("halfgates_eval", (_labels("a"), _labels("b"), GATE_ID, Param("tables", "const uint8_t *", "32*n", "r"),
                                  _labels("c", "w")),
               "half-gates evaluation of n AND gates from their tables"),
    # the same with each gate's inputs by byte offset in a label array: A at labels + in[2i], B at labels + in[2i+1]
    _halfgates("halfgates_garble_gather", (Param("delta", "const uint8_t[16]", access="r"), *GATHERED, GATE_ID,
                                           Param("tables", "uint8_t *", "32*n", "w"), _labels("c0", "w")),
               "half-gates garbling of n AND gates, their input 0-labels at byte offsets in a label array"),
    _halfgates("halfgates_eval_gather", (*GATHERED, GATE_ID, Param("tables", "const uint8_t *", "32*n", "r"),
                                         _labels("c", "w")),
               "half-gates evaluation of n AND gates, their input labels at byte offsets in a label array"),
    # 256-bit blocks on the AES round instructions (kernels/wideblock.py)
    _key_setup("rijndael256_set_encrypt_key", RKEY,
               "Rijndael-256 key expansion (Nk = Nb = 8: 120 words); bits must be 256", ("rijndael256",), bits=(256,)),
    _key_setup("rijndael256_set_decrypt_key", RKEY,
               "Rijndael-256 equivalent inverse cipher schedule; bits must be 256", ("rijndael256",), bits=(256,)),
    _wideblock("rijndael256_ecb_encrypt", (RKEY,), "rijndael256_set_encrypt_key",
               "Rijndael-256 (256-bit blocks, 14 rounds) in ECB: nblocks 32-byte blocks", "rijndael256",
               timed=True, explored=True),
    _wideblock("rijndael256_ecb_decrypt", (RKEY,), "rijndael256_set_decrypt_key",
               "Rijndael-256 ECB decryption (the decryption schedule)", "rijndael256", timed=True),
    _wideblock("simpira256_permute", (), None, "Simpira v2 (b = 2) of each of nblocks 32-byte blocks", "simpira",
               timed=True, explored=True),
    _wideblock("simpira256_inverse", (), None,
               "the inverse of Simpira v2 (b = 2) of each of nblocks 32-byte blocks", "simpira", timed=True),
)

FUNCTIONS: dict[str, CFunction] = {f.name: f for f in _RECORDS}
MODES: tuple[str, ...] = tuple(m.name for m in _MODES)
MODE_TITLES: dict[str, str] = {m.name: m.title for m in _MODES}
# C functions each mode contributes (besides COMMON_FUNCTIONS), in file order.
MODE_FUNCTIONS: dict[str, tuple[str, ...]] = {m: tuple(f.name for f in _RECORDS if m in f.modes) for m in MODES}
COMMON_FUNCTIONS: tuple[str, ...] = tuple(f.name for f in _RECORDS if f.modes == EVERY_FILE)


def mode_of(function: str) -> str | None:
    """The mode whose width/depth a C function runs at (None: the file's): its first mode, but
    key setup (whose key has the file's layout) and the functions of every file have none."""
    f = FUNCTIONS.get(function)
    return f.modes[0] if f and f.modes and not f.is_key_setup else None


# What `aesgen bench` times for each mode (its own functions, not those it shares with an earlier
# mode: gcm times gcm_encrypt, not ghash), and the one function explore and tune sweep per mode.
TIMED_FUNCTIONS: dict[str, tuple[str, ...]] = {
    m: tuple(f.name for f in _RECORDS if f.timed and mode_of(f.name) == m) for m in MODES}
EXPLORED_FUNCTIONS: dict[str, str] = {
    m: f.name for m in MODES for f in _RECORDS if f.explored and mode_of(f.name) == m}
