"""GF(2^128) doubling methods and XTS: the reduction constant from its polynomial, every
method simulated and run against a bitwise doubling written here, XTS against
`cryptography` (2x128, 2x256) and IEEE 1619's vector 1, the table method's refusal and its
flagged loads, and the whole verifier on generated files."""
from __future__ import annotations

import ctypes
import random

import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from aesgen.config import ConfigError, with_doubling
from aesgen.doubling import METHODS, refusal
from aesgen.gf128 import doubling_reduction
from aesgen.kernels import build_function
from aesgen.kernels.xts_table import TABLE_FROM_BYTES
from aesgen.simulate import Machine, call
from aesgen.spec import KernelSpec
from aesgen.verify import static_ct

from _support import load_generated, verify_generated

P, SZ = ctypes.c_void_p, ctypes.c_size_t


def times_x(v: int) -> int:
    """One doubling written from the definition: x^128 = x^7 + x^2 + x + 1."""
    v <<= 1
    if v >> 128:
        v ^= (1 << 128) | (1 << 7) | (1 << 2) | (1 << 1) | 1
    return v


def sequence(tweak: bytes, n: int, order: str) -> bytes:
    v, out = int.from_bytes(tweak, order), []
    for _ in range(n):
        out.append(v.to_bytes(16, order))
        v = times_x(v)
    return b"".join(out)


def xts(key1: bytes, key2: bytes, tweak: bytes, data: bytes, decrypt: bool) -> bytes:
    c = Cipher(algorithms.AES(key1 + key2), modes.XTS(tweak))
    ctx = c.decryptor() if decrypt else c.encryptor()
    return ctx.update(data) + ctx.finalize()


# Every (isa, width) a method can be generated for, one depth each (the table method only
# with the permission).
CONFIGS = [(m, isa, w) for m in METHODS for isa, w in
           (("sse", 128), ("avx", 128), ("avx2", 256), ("avx512", 128), ("avx512", 256), ("avx512", 512))
           if refusal(m, isa, w, table_lookups=True) is None]


def spec_for(method: str, isa: str, width: int, depth: int = 3, modes_=("xts", "gfdouble")) -> KernelSpec:
    return KernelSpec(modes_, isa, width, depth, gfdouble=method, table_lookups=method == "table")


def test_the_reduction_byte_comes_from_the_polynomial():
    assert doubling_reduction() == 0x87
    assert times_x(1 << 127) == doubling_reduction()


@pytest.mark.parametrize("method,isa,width", CONFIGS)
def test_simulated_sequences_match_bitwise_doubling(method, isa, width):
    spec = spec_for(method, isa, width)
    rng = random.Random(f"{method}{isa}{width}")
    for fn, order in (("gfdouble_le", "little"), ("gfdouble_be", "big")):
        f = build_function(spec, fn)
        for n in (0, 1, 2, 3 * spec.lanes * spec.depth + 5):
            m = Machine(spec, size=1 << 16)
            t = rng.choice([b"\xff" * 16, rng.randbytes(16)])
            out = m.alloc(bytes(16 * n + 16))
            call(m, f, m.alloc(t), out, n)
            assert m.read(out, 16 * n) == sequence(t, n, order), (fn, n)


@pytest.mark.parametrize("method,isa,width", CONFIGS)
def test_machine_code_xts_matches_cryptography(method, isa, width):
    spec = spec_for(method, isa, width, modes_=("xts",))
    lib = load_generated(spec)
    set_key = getattr(lib, spec.symbol("xts_set_key"))
    set_key.argtypes, set_key.restype = [P, P, ctypes.c_uint, P, ctypes.c_int], ctypes.c_int
    rng = random.Random(method + isa)
    group = 16 * spec.lanes * spec.depth
    for bits in (128, 256):
        k1, k2 = rng.randbytes(bits // 8), rng.randbytes(bits // 8)
        for decrypt in (False, True):
            fn = getattr(lib, spec.symbol("xts_decrypt" if decrypt else "xts_encrypt"))
            fn.argtypes = [P, P, P, SZ, P]
            key = ctypes.create_string_buffer(spec.xts_key_bytes + 64)
            at = (ctypes.addressof(key) + 63) // 64 * 64
            assert set_key(k1, k2, bits, at, 0 if decrypt else 1) == 0
            table = max(3 * group, TABLE_FROM_BYTES)  # where the GPR tweak tables start (512 bits)
            for n in (16, 17, 31, 32, 47, group - 1, group, group + 16 + 5, 3 * group + 15,
                      table + 16 + 5, table + group + 16 + 5):
                tweak, data = rng.randbytes(16), rng.randbytes(n)
                out = ctypes.create_string_buffer(n)
                fn(at, data, out, n, tweak)
                assert out.raw == xts(k1, k2, tweak, data, decrypt), (bits, decrypt, n)


def test_ieee1619_vector_1_by_hand():
    """IEEE 1619-2007 Annex B vector 1: all-zero keys, tweak and 32 zero bytes."""
    spec = KernelSpec(("xts",), "avx2", 256, 2)
    lib = load_generated(spec)
    set_key, enc = getattr(lib, spec.symbol("xts_set_key")), getattr(lib, spec.symbol("xts_encrypt"))
    set_key.argtypes, enc.argtypes = [P, P, ctypes.c_uint, P, ctypes.c_int], [P, P, P, SZ, P]
    key = ctypes.create_string_buffer(spec.xts_key_bytes + 64)
    at = (ctypes.addressof(key) + 63) // 64 * 64
    set_key(bytes(16), bytes(16), 128, at, 1)
    out = ctypes.create_string_buffer(32)
    enc(at, bytes(32), out, 32, bytes(16))
    assert out.raw.hex() == "917cf69ebd68b2ec9b9fe9a3eadda692cd43d2f59598ed858c02c2652fbf922e"


def test_short_input_touches_nothing():
    spec = KernelSpec(("xts",), "avx512", 512, 4)
    lib = load_generated(spec)
    enc = getattr(lib, spec.symbol("xts_encrypt"))
    enc.argtypes = [P, P, P, SZ, P]
    out = ctypes.create_string_buffer(b"\x5a" * 15, 15)
    enc(None, b"\1" * 15, out, 15, None)  # NULL key and tweak: must not be read
    assert out.raw == b"\x5a" * 15


def test_table_method_needs_permission_and_is_flagged(tmp_path):
    base = KernelSpec(("xts",), "avx", 128, 2)
    with pytest.raises(ConfigError, match="--allow-table-lookups"):
        with_doubling(base, "table", False)
    spec = with_doubling(base, "table", True)
    assert spec.gfdouble == "table" and spec.table_lookups
    from aesgen.pipeline import generate
    path = tmp_path / "t.S"
    path.write_text(generate(spec, path.name).asm)
    allowed = {r.name: r for r in static_ct.check(spec, path)}
    assert allowed["ct xts_encrypt"].status == "pass" and "secret-address" in allowed["ct xts_encrypt"].detail
    strict = {r.name: r for r in static_ct.check(spec, path, allow_table_lookups=False)}
    assert strict["ct xts_encrypt"].status == "fail"


@pytest.mark.parametrize("method,isa,width,why", [
    ("table", "avx2", 256, "one xmm block"), ("ternlog", "avx", 128, "AVX-512"),
    ("batch", "sse", 128, "VEX"), ("doubled", "avx512", 512, "unknown")])
def test_refusals_name_the_problem(method, isa, width, why):
    assert why in refusal(method, isa, width, table_lookups=True)


@pytest.mark.parametrize("isa,width,depth,method", [
    ("sse", 128, 4, "krovetz"), ("avx", 128, 2, "lanewise"), ("avx2", 256, 4, "batch"),
    ("avx512", 512, 8, "batch")])
def test_generated_file_verifies(tmp_path, isa, width, depth, method):
    results = verify_generated(tmp_path, spec_for(method, isa, width, depth), quick=True)
    names = {r.name for r in results}
    assert {"diff xts_encrypt 192", "diff gfdouble_be", "badargs xts_set_key", "guard xts_decrypt after"} <= names
    assert any(n.startswith("kat xts_decrypt XTSGenAES256") for n in names)


@pytest.mark.full
@pytest.mark.parametrize("method,isa,width", CONFIGS)
@pytest.mark.parametrize("depth", [1, 4, 8])
def test_generated_file_verifies_full(tmp_path, method, isa, width, depth):
    if isa in ("sse", "avx", "avx2") and depth == 8:
        depth = 6
    verify_generated(tmp_path, spec_for(method, isa, width, depth))


# -- the batch loop's tweaks from general-purpose registers (kernels/xts_table.py) ----------
@pytest.mark.parametrize("isa,width,depth,method,backend,gpr", [
    ("avx512", 512, 8, "batch", "aesni", True), ("avx512", 512, 2, "batch", "aesni", True),
    ("avx512", 512, 8, "lanewise", "aesni", False), ("avx512", 512, 9, "batch", "aesni", False),
    ("avx512", 512, 1, "batch", "aesni", False), ("avx512", 256, 8, "batch", "aesni", False),
    ("avx2", 256, 4, "batch", "aesni", True), ("avx2", 256, 7, "batch", "aesni", True),
    ("avx2", 256, 4, "krovetz", "aesni", False), ("avx", 128, 4, "batch", "aesni", False),
    ("avx512", 512, 4, "batch", "gfni", False)])
def test_gpr_tweak_table_only_where_chosen(isa, width, depth, method, backend, gpr):
    """VAES at its widest (zmm on AVX-512, ymm on AVX2), the batch method, AES-NI, depth 2..8:
    the table (sarx doublings); anything else keeps the vector doubling in the loop."""
    import iced_x86 as ix
    from aesgen.pipeline import generate
    spec = KernelSpec(("xts",), isa, width, depth, backend=backend, gfdouble=method)
    sarx = sum(ins.mnemonic == ix.Mnemonic.SARX for ins in generate(spec).instructions)
    # per key size and direction, lanes x depth doublings per fill: two fills riding the
    # vector-tweak batches, one per table in the loop (unrolled twice)
    assert sarx == (2 * 3 * 4 * (width // 128) * depth if gpr else 0)


@pytest.mark.parametrize("bits", [128, 256])
def test_simulated_gpr_tweak_table_matches_cryptography(bits):
    """The simulator runs the table's doublings, jumps and both tables (from where they
    start, a batch more and a vector, and a partial block for stealing) as written;
    cryptography says what is right."""
    spec = KernelSpec(("xts",), "avx512", 512, 2)
    rng = random.Random(bits)
    k1, k2, tweak = rng.randbytes(bits // 8), rng.randbytes(bits // 8), rng.randbytes(16)
    batch = 16 * spec.lanes * spec.depth
    n = max(3 * batch, TABLE_FROM_BYTES) + batch + 16 * spec.lanes + 5
    data = rng.randbytes(n)
    for decrypt in (False, True):
        m = Machine(spec, size=1 << 16)
        xkey = m.alloc(bytes(spec.xts_key_bytes), align=64)
        call(m, build_function(spec, "xts_set_key"), m.alloc(k1), m.alloc(k2), bits, xkey, 0 if decrypt else 1)
        out = m.alloc(bytes(n))
        call(m, build_function(spec, "xts_decrypt" if decrypt else "xts_encrypt"),
             xkey, m.alloc(data), out, n, m.alloc(tweak))
        assert m.read(out, n) == xts(k1, k2, tweak, data, decrypt), decrypt
