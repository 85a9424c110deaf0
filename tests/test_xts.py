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
from aesgen.kernels.xts_table import TABLE_FROM_BYTES, layout, table_from
from aesgen.spec import FEATURES_BY_ISA
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


# -- the batch loop's tweaks from tables (kernels/xts_table.py, xts_far.py) ----------------------
@pytest.mark.parametrize("isa,width,depth,method,backend,kind", [
    ("avx512", 512, 8, "batch", "aesni", "registers"), ("avx512", 512, 2, "batch", "aesni", "registers"),
    ("avx512", 512, 8, "lanewise", "aesni", None), ("avx512", 512, 9, "batch", "aesni", None),
    ("avx512", 512, 1, "batch", "aesni", None), ("avx512", 256, 8, "batch", "aesni", None),
    ("avx2", 256, 4, "batch", "aesni", "memory"), ("avx2", 256, 7, "batch", "aesni", "memory"),
    ("avx2", 256, 8, "batch", "aesni", "far"), ("avx2", 256, 4, "krovetz", "aesni", None),
    ("avx", 128, 4, "batch", "aesni", None), ("avx", 128, 5, "krovetz", "aesni", "memory"),
    ("avx512", 512, 4, "batch", "gfni", None)])
def test_tweak_tables_only_where_chosen(isa, width, depth, method, backend, kind):
    """VAES at its widest with the batch method (zmm: AES-256 only), or AES-NI xmm on 16
    registers with krovetz; AES-NI, depth 2 and up: tweak tables; anything else keeps the
    vector doubling in the loop.
    Counted per key size and direction: GPR doublings (sarx with BMI2, else sar), lanes x
    depth a fill: with tweaks in registers two fills riding the filling batches and one per
    table in the loop (two); in memory two and three. x^64 tables: a vpunpcklqdq of a vector just
    loaded from a table, per vector, for each of the four filling batches and the five in the loop."""
    import iced_x86 as ix
    from aesgen.pipeline import generate
    spec = KernelSpec(("xts",), isa, width, depth, backend=backend, gfdouble=method)
    instructions = generate(spec).instructions
    mnemonics = [ins.mnemonic for ins in instructions]
    doublings = sum(m in (ix.Mnemonic.SARX, ix.Mnemonic.SAR) for m in mnemonics)
    from_stack = {}  # vector register -> whether its latest write was a load from the stack
    steps = 0
    for ins in instructions:
        if ins.mnemonic == ix.Mnemonic.VPUNPCKLQDQ and from_stack.get(ins.op2_register):
            steps += 1
        if ins.op_count and ins.op0_kind == ix.OpKind.REGISTER:
            from_stack[ins.op0_register] = ins.mnemonic == ix.Mnemonic.VMOVDQU and ins.memory_base == ix.Register.RSP
    fills = {"registers": 4, "memory": 5}.get(kind, 0)
    # the key sizes whose loops take the tables: zmm only AES-256 (xts_table.ZMM_TABLE_ROUNDS)
    keys = 1 if kind == "registers" else 3
    assert [layout(spec, width, depth, nr) is not None for nr in (10, 12, 14)] == (
        [False, False, True] if kind == "registers" else [kind is not None] * 3)
    assert doublings == 2 * keys * fills * (width // 128) * depth
    assert steps == (2 * keys * (4 + 5) * depth if kind == "far" else 0)
    # the GPR doubling's sign spread is sarx where the ISA's files require BMI2 (avx2, avx512)
    assert (ix.Mnemonic.SARX in mnemonics) == (kind is not None and kind != "far" and "bmi2" in FEATURES_BY_ISA[isa])


@pytest.mark.parametrize("bits", [128, 256])
@pytest.mark.parametrize("isa,width,depth,method", [
    ("avx512", 512, 2, "batch"), ("avx2", 256, 8, "batch"), ("avx2", 256, 3, "batch"), ("avx", 128, 3, "krovetz")])
def test_simulated_tweak_tables_match_cryptography(bits, isa, width, depth, method):
    """The simulator runs the tables' doublings, jumps or x^64 steps as written (from where
    they start, past a pass over every table, a vector more and a partial block for
    stealing); cryptography says what is right."""
    spec = KernelSpec(("xts",), isa, width, depth, gfdouble=method)
    tables = layout(spec, width, depth)
    assert tables is not None
    rng = random.Random(bits)
    k1, k2, tweak = rng.randbytes(bits // 8), rng.randbytes(bits // 8), rng.randbytes(16)
    batch = 16 * spec.lanes * spec.depth
    n = table_from(batch, tables) + tables.tables * batch + 16 * spec.lanes + 5
    data = rng.randbytes(n)
    for decrypt in (False, True):
        m = Machine(spec, size=1 << 16)
        xkey = m.alloc(bytes(spec.xts_key_bytes), align=64)
        call(m, build_function(spec, "xts_set_key"), m.alloc(k1), m.alloc(k2), bits, xkey, 0 if decrypt else 1)
        out = m.alloc(bytes(n))
        call(m, build_function(spec, "xts_decrypt" if decrypt else "xts_encrypt"),
             xkey, m.alloc(data), out, n, m.alloc(tweak))
        assert m.read(out, n) == xts(k1, k2, tweak, data, decrypt), decrypt
