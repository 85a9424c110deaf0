"""Compile kernels and the C harness into shared objects, and load them.

Objects are cached by a hash of (compiler, flags, source bytes) under a per-user
work directory, so repeated verification and parallel test workers share them.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from aesgen.spec import KernelSpec

HARNESS_SOURCE = Path(__file__).with_name("harness.c")
# C fixtures use intrinsics; generated .S files need no ISA flags.
C_FLAGS = ("-O2", "-maes", "-mssse3", "-msse4.1")
COMMON_FLAGS = ("-shared", "-fPIC", "-Wl,-z,noexecstack")


class BuildError(RuntimeError):
    """Compilation failed: first line says what, the rest is the compiler's stderr."""


def compiler() -> str:
    cc = os.environ.get("CC", "cc")
    found = shutil.which(cc)
    if not found:
        raise BuildError(f"C compiler {cc!r} not found on PATH (set CC)")
    return found


LLVM_VERSION = "19"  # what `make setup` installs (llvm-19)


def llvm_tool(name: str) -> str | None:
    """An LLVM tool (llvm-mc, llvm-nm, ...): name-19 on PATH, LLVM 19's bin folder, else plain name."""
    for candidate in (f"{name}-{LLVM_VERSION}", f"/usr/lib/llvm-{LLVM_VERSION}/bin/{name}", name):
        found = shutil.which(candidate)
        if found:
            return found
    return None


def build_dir() -> Path:
    """Where shared objects are cached ($AESGEN_BUILD_DIR or a per-user temp dir)."""
    d = os.environ.get("AESGEN_BUILD_DIR")
    path = Path(d) if d else Path(tempfile.gettempdir()) / f"aesgen-verify-{os.getuid()}"
    path.mkdir(parents=True, exist_ok=True)
    return path


def build_shared(source: Path | str, extra_flags: Sequence[str] = ()) -> Path:
    """Compile a `.S` or `.c` file into a cached shared object and return its path."""
    src = Path(source)
    try:
        text = src.read_bytes()
    except OSError as e:
        raise BuildError(f"cannot read {src}: {e.strerror}") from None
    if src.suffix not in (".S", ".s", ".c"):
        raise BuildError(f"{src}: expected a .S or .c file")
    cc = compiler()
    flags = [*COMMON_FLAGS, *(C_FLAGS if src.suffix == ".c" else ()), *extra_flags]
    h = hashlib.sha256()
    for part in (cc, "\0".join(flags), src.suffix):
        h.update(part.encode() + b"\0")
    h.update(text)
    out = build_dir() / f"{src.stem}-{h.hexdigest()[:20]}.so"
    if out.exists():
        return out
    # Compile to a private name, then rename: concurrent builders never see half a file.
    fd, tmp = tempfile.mkstemp(suffix=".so", dir=out.parent)
    os.close(fd)
    cmd = [cc, *flags, "-o", tmp, str(src)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise BuildError(
                f"{src}: compilation failed ({' '.join(cmd[1:-3])})\n{proc.stderr.rstrip()}"
            )
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return out


@lru_cache(maxsize=1)
def harness() -> ctypes.CDLL:
    """The loaded C harness (built on first use)."""
    lib = ctypes.CDLL(str(build_shared(HARNESS_SOURCE)))
    P, U64, SZ = ctypes.c_void_p, ctypes.c_uint64, ctypes.c_size_t
    for call in (lib.abi_call, lib.abi_call_win64):
        call.argtypes = [P, U64, ctypes.c_uint]
        call.restype = ctypes.c_uint
    lib.call_ms_abi.argtypes = [P, P]
    lib.call_ms_abi.restype = U64
    lib.abi_xinuse_supported.restype = ctypes.c_int
    lib.abi_avx_enabled.restype = ctypes.c_int
    lib.mct_cbc.argtypes = [P, P, SZ, ctypes.c_uint, P, P, P, P, ctypes.c_int]
    lib.mct_cbc.restype = ctypes.c_int
    lib.fault_install.argtypes = [P]
    lib.fault_install.restype = ctypes.c_int
    return lib


def fn_address(lib: ctypes.CDLL, name: str) -> int:
    return ctypes.cast(getattr(lib, name), ctypes.c_void_p).value or 0


class AlignedBuffer:
    """A ctypes byte buffer whose usable part starts at a chosen alignment + offset."""

    def __init__(self, size: int, align: int = 64, offset: int = 0, fill: int = 0) -> None:
        self._raw = ctypes.create_string_buffer(bytes([fill]) * (size + align + offset))
        base = ctypes.addressof(self._raw)
        self.address = (base + align - 1) // align * align + offset
        self.size = size

    def write(self, data: bytes, at: int = 0) -> None:
        ctypes.memmove(self.address + at, data, len(data))

    def read(self, n: int | None = None, at: int = 0) -> bytes:
        return ctypes.string_at(self.address + at, self.size - at if n is None else n)


@dataclass
class KeySchedule:
    """An opaque key schedule in a 64-byte aligned buffer (kept alive by this object)."""

    buf: AlignedBuffer
    bits: int
    ret: int

    @property
    def address(self) -> int:
        return self.buf.address

    def raw(self) -> bytes:
        return self.buf.read()


MS_ABI_ARGS = 14  # what harness.c's call_ms_abi passes


class MsAbiFunction:
    """A win64 kernel function, called like a ctypes function but through an
    `__attribute__((ms_abi))` pointer (harness.c `call_ms_abi`)."""

    def __init__(self, address: int, argtypes: list, restype: object) -> None:
        self.address, self.argtypes, self.restype = address, list(argtypes), restype

    def __call__(self, *args):
        if len(args) > MS_ABI_ARGS:
            raise ValueError(f"call_ms_abi passes at most {MS_ABI_ARGS} arguments")
        argv = (ctypes.c_uint64 * MS_ABI_ARGS)()
        keep = []  # buffers made for bytes arguments live until the call returns
        for i, a in enumerate(args):
            if isinstance(a, bytes):
                keep.append(ctypes.create_string_buffer(a, max(len(a), 1)))
                a = keep[-1]
            argv[i] = _word(a)
        r = harness().call_ms_abi(self.address, argv)
        if self.restype is None:
            return None
        return self.restype(r & 0xFFFFFFFF if ctypes.sizeof(self.restype) == 4 else r).value


def _word(a) -> int:
    """One integer register's worth of a ctypes-style argument."""
    if a is None:
        return 0
    if isinstance(a, int):
        return a & 0xFFFFFFFFFFFFFFFF
    if isinstance(a, ctypes._SimpleCData):
        return (a.value or 0) & 0xFFFFFFFFFFFFFFFF
    if hasattr(a, "_obj"):  # ctypes.byref(x)
        return ctypes.addressof(a._obj)
    return ctypes.cast(a, ctypes.c_void_p).value or 0


class Kernel:
    """A loaded kernel: typed access to the ABI of one prefix in one shared object.

    Prototypes come from verify/signatures.py.  `functions` is the spec's list,
    deduplicated; `fn` holds the callable ones; `missing` the absent symbols;
    `unusable` maps a function to why it is not checked (no signature, a spec
    size attribute missing); `problems` are the failed checks saying so."""

    def __init__(self, so_path: Path | str, spec: KernelSpec) -> None:
        from aesgen.verify import signatures

        from aesgen.verify import visibility

        self.spec = spec
        self.lib = ctypes.CDLL(str(so_path))
        # --hidden files export nothing: their functions are found in the object's .symtab
        self._hidden = visibility.hidden_addresses(so_path, self.lib, [spec.symbol(f) for f in spec.functions]) \
            if getattr(spec, "hidden", False) else {}
        fset = signatures.function_set(spec)
        self.functions: tuple[str, ...] = fset.functions
        self.unusable: dict[str, str] = dict(fset.unusable)
        self.problems = list(fset.problems)
        self.fn: dict[str, ctypes._CFuncPtr] = {}
        self.missing: list[str] = []
        for name in self.functions:
            try:
                f = self._function(spec.symbol(name))
            except AttributeError:
                self.missing.append(spec.symbol(name))
                continue
            sig = signatures.lookup(name)
            if sig is None or name in self.unusable:
                continue
            f.argtypes, f.restype = sig.argtypes, sig.restype
            self.fn[name] = f if spec.abi == "sysv" else MsAbiFunction(self.address(name), sig.argtypes, sig.restype)

    def _function(self, symbol: str):
        """The loaded function named symbol (AttributeError if there is none)."""
        if symbol in self._hidden:
            return self.lib._FuncPtr(self._hidden[symbol])
        return getattr(self.lib, symbol)

    def address(self, name: str) -> int:
        return ctypes.cast(self._function(self.spec.symbol(name)), ctypes.c_void_p).value or 0

    def schedule_bytes(self, setup: str) -> int:
        """Size of the opaque buffer key setup function `setup` fills (from the spec)."""
        from aesgen.verify import signatures

        sig = signatures.lookup(setup)
        if sig is None or sig.schedule_attr is None:
            raise KeyError(f"{setup} is not a key setup function")
        return int(getattr(self.spec, sig.schedule_attr))

    def make_key(self, setup: str, key: bytes, bits: int | None = None) -> KeySchedule:
        """Run key setup function `setup` into a fresh 64-byte aligned, 0xA5-filled buffer."""
        bits = len(key) * 8 if bits is None else bits
        buf = AlignedBuffer(self.schedule_bytes(setup), fill=0xA5)
        kbuf = ctypes.create_string_buffer(key, max(len(key), 1))
        ret = self.fn[setup](kbuf, bits, buf.address)
        return KeySchedule(buf, bits, ret)

    def set_key(self, key: bytes, decrypt: bool = False, bits: int | None = None) -> KeySchedule:
        return self.make_key("set_decrypt_key" if decrypt else "set_encrypt_key", key, bits)

    def run(self, name: str, ks: KeySchedule, data: bytes, chain: bytes | None = None,
            *, in_off: int = 0, out_off: int = 0, in_place: bool = False) -> tuple[bytes, bytes | None]:
        """Run a mode function on `data`; returns (output, updated ctr/iv or None)."""
        from aesgen.verify import signatures

        n = len(data)
        sig = signatures.lookup(name)
        count = n if sig is not None and sig.has("len") else n // 16
        src = AlignedBuffer(n, offset=in_off)
        src.write(data)
        dst = src if in_place else AlignedBuffer(n, offset=out_off)
        if chain is None:
            self.fn[name](ks.address, src.address, dst.address, count)
            return dst.read(n), None
        cb = ctypes.create_string_buffer(chain, 16)
        self.fn[name](ks.address, src.address, dst.address, count, cb)
        return dst.read(n), cb.raw[:16]
