"""GF(2^128) products without carry-less multiply (--gfmul ctmul, bitsliced, gfni): the lowered
sequences against a carry-less multiply written here, the files they make (no AES-NI and no
PCLMULQDQ instruction in a gfni or bitsliced file, the features cpu_supported checks, the
static constant-time scan), the refusals, and the whole verifier on generated files."""
from __future__ import annotations

import random
from dataclasses import replace

import pytest

from aesgen.config import ConfigError, with_gfmul
from aesgen.consts import affine_transpose_unit, gfpoly
from aesgen.gf128 import fold_constant
from aesgen.gfni import affine_byte
from aesgen.ir import Const, Function, Insn, VReg
from aesgen.lower import Lowerer
from aesgen.pipeline import generate
from aesgen.simulate import Interpreter, Machine
from aesgen.spec import KernelSpec
from aesgen.target import load
from aesgen.verify import static_ct

from _support import verify_generated

ISA_WIDTHS = [("sse", 128), ("avx", 128), ("avx2", 256), ("avx512", 128), ("avx512", 512)]
# Mnemonic stems of AES-NI/VAES and of the carry-less multiply, as GNU as spells them.
FORBIDDEN = ("aesenc", "aesdec", "aesimc", "aeskeygenassist", "pclmul")


def carryless(a: int, b: int) -> int:
    """The carry-less product, written here (not the generator's)."""
    r = 0
    for i in range(b.bit_length()):
        if b >> i & 1:
            r ^= a << i
    return r


def run_lowered(spec: KernelSpec, width: int, imm: int, a: tuple[int, ...], b) -> tuple[int, ...]:
    """One `clmul` at `width`, lowered for spec, run on the simulator (its ops' semantics)."""
    x, y, out = VReg(1, "a"), VReg(2, "b"), VReg(3, "out")
    src = b if isinstance(b, Const) else y
    low = Lowerer(spec, width).insn(Insn("clmul", out, (x, src), imm=imm, width=width))
    assert all(i.op != "clmul" for i in low)
    m = Machine(spec)
    m.vec[1] = a
    if not isinstance(b, Const):
        m.vec[2] = b
    it = Interpreter(m, Function("t", ()))
    for i in low:
        it.execute(i)
    return m.vec[3]


@pytest.mark.parametrize("method", ["ctmul", "bitsliced"])
@pytest.mark.parametrize("isa,width", ISA_WIDTHS)
def test_lowered_product_is_the_carryless_product(method, isa, width):
    rng = random.Random(f"{method}{isa}{width}")
    spec = KernelSpec(("ghash",), isa, width, 1, gfmul=method)
    lanes = width // 128
    cases = [tuple(rng.getrandbits(128) for _ in range(lanes)) for _ in range(3)]
    cases.append(tuple((1 << 128) - 1 for _ in range(lanes)))  # every bit product at once: the holes' worst case
    for imm in (0x00, 0x01, 0x10, 0x11):
        for a in cases:
            for b in cases:
                got = run_lowered(spec, width, imm, a, b)
                want = tuple(carryless(a[k] >> 64 * (imm & 1) & (2**64 - 1), b[k] >> 64 * (imm >> 4) & (2**64 - 1))
                             for k in range(lanes))
                assert got == want, (imm, a, b)


@pytest.mark.parametrize("isa,width", ISA_WIDTHS)
def test_product_by_the_fold_constant_is_shifts_and_xors(isa, width):
    """The reduction's fold by c = 0xc2 << 56 (from the polynomial): no multiply at all."""
    spec = KernelSpec(("ghash",), isa, width, 1, gfmul="ctmul")
    lanes = width // 128
    c = gfpoly(lanes)
    a = tuple(random.Random(k).getrandbits(128) for k in range(lanes))
    x, out = VReg(1, "a"), VReg(3, "out")
    low = Lowerer(spec, width).insn(Insn("clmul", out, (x, c), imm=0x10, width=width))
    assert {i.op for i in low} <= {"pshufd", "psllq", "psrlq", "vxor", "ternlog", "punpcklqdq"}
    m = Machine(spec)
    m.vec[1] = a
    it = Interpreter(m, Function("t", ()))
    for i in low:
        it.execute(i)
    assert m.vec[3] == tuple(carryless(v & (2**64 - 1), fold_constant()) for v in a)


def instructions(spec: KernelSpec) -> list[str]:
    return [str(i).split()[0] for i in generate(spec).instructions]


@pytest.mark.parametrize("modes", [("ghash", "polyval"), ("gcm", "gcm-siv")])
@pytest.mark.parametrize("method", ["ctmul", "bitsliced"])
def test_gfni_files_have_no_aesni_and_no_pclmulqdq(modes, method):
    spec = KernelSpec(modes, "avx512", 256, 1, backend="gfni", gfmul=method)
    used = instructions(spec)
    assert not [m for m in used if any(f in m for f in FORBIDDEN)]
    assert not {"aes", "vaes", "pclmulqdq", "vpclmulqdq"} & set(spec.features)


@pytest.mark.parametrize("modes", [("ghash", "polyval"), ("gcm", "gcm-siv")])
def test_gfni_matrix_files_have_no_aesni_and_no_pclmulqdq(modes):
    spec = KernelSpec(modes, "avx512", 512, 1, backend="gfni", gfmul="gfni")
    used = instructions(spec)
    assert not [m for m in used if any(f in m for f in FORBIDDEN)]
    assert "vgf2p8affineqb" in used
    assert not {"aes", "vaes", "pclmulqdq", "vpclmulqdq"} & set(spec.features)
    assert {"gfni", "avx512vbmi"} <= set(spec.features)


@pytest.mark.parametrize("modes", [("ghash", "polyval"), ("gcm",), ("gcm-siv",)])
@pytest.mark.parametrize("isa,width", [("sse", 128), ("avx2", 256), ("avx512", 256)])
def test_bitsliced_files_have_no_aesni_no_pclmulqdq_no_gfni(modes, isa, width):
    spec = KernelSpec(modes, isa, width, 1, backend="bitsliced")
    used = instructions(spec)
    assert not [m for m in used if any(f in m for f in FORBIDDEN + ("gf2p8",))]
    assert not {"aes", "vaes", "pclmulqdq", "vpclmulqdq", "gfni"} & set(spec.features)


@pytest.mark.parametrize("backend,method,modes", [
    ("gfni", "ctmul", ("ghash", "polyval")), ("gfni", "bitsliced", ("ghash", "polyval")),
    ("bitsliced", "ctmul", ("ghash", "polyval")), ("bitsliced", "ctmul", ("gcm",)),
    ("bitsliced", "ctmul", ("gcm-siv",)), ("bitsliced", "bitsliced", ("gcm-siv",)),
    ("gfni", "ctmul-gpr", ("ghash", "polyval")), ("bitsliced", "ctmul-gpr", ("ghash", "polyval"))])
@pytest.mark.parametrize("abi", ["sysv", "win64"])
def test_static_constant_time_scan_passes(tmp_path, backend, method, modes, abi):
    spec = KernelSpec(modes, "avx512", 256, 1, backend=backend, gfmul=method, abi=abi)
    path = tmp_path / "k.S"
    path.write_text(generate(spec).asm)
    assert [(r.name, r.detail) for r in static_ct.check(spec, path) if r.status != "pass"] == []


@pytest.mark.parametrize("abi", ["sysv", "win64"])
def test_static_constant_time_scan_passes_with_matrices(tmp_path, abi):
    spec = KernelSpec(("ghash", "polyval"), "avx512", 512, 1, backend="gfni", gfmul="gfni", abi=abi)
    path = tmp_path / "k.S"
    path.write_text(generate(spec).asm)
    assert [(r.name, r.detail) for r in static_ct.check(spec, path) if r.status != "pass"] == []


def holes_product(a: int, b: int, holes: int) -> int:
    """The 128-bit carry-less product as ctmul-gpr makes it: integer products of parts with
    holes, each class masked (a model written here from the method, not the kernel's code)."""
    parts = [[sum((x >> p & 1) << p for p in range(i, 64, holes)) for i in range(holes)] for x in (a, b)]
    out = 0
    for r in range(holes):
        s = 0
        for i in range(holes):
            s ^= parts[0][i] * parts[1][(r - i) % holes]
        out |= s & sum(1 << p for p in range(r, 128, holes))
    return out


def test_gpr_holes_of_five_give_the_carryless_product_and_four_do_not():
    rng = random.Random(11)
    for a, b in [(2**64 - 1, 2**64 - 1)] + [(rng.getrandbits(64), rng.getrandbits(64)) for _ in range(300)]:
        assert holes_product(a, b, 5) == carryless(a, b)
    # Holes of 4: 16 bit products meet at positions 60..63 of a part pair: their sum carries
    # into the class's next position.
    assert holes_product(2**64 - 1, 2**64 - 1, 4) != carryless(2**64 - 1, 2**64 - 1)


def test_transpose_unit_turns_columns_into_an_operand():
    """vgf2p8affineqb(unit, Q), Q's byte k the column of input bit 7 - k, is the operand whose
    byte 7 - r is output bit r's row: what the matrices' in-place transposition relies on."""
    rng = random.Random(5)
    unit = int.from_bytes(affine_transpose_unit().data[:8], "little")
    for _ in range(50):
        cols = [rng.randrange(256) for _ in range(8)]  # column of input bit b: cols[b]
        q = sum(cols[7 - k] << (8 * k) for k in range(8))
        operand = sum(affine_byte(q, (unit >> (8 * c)) & 0xFF, 0) << (8 * c) for c in range(8))
        for x in range(256):  # the operand applied to x is the sum of the columns of x's set bits
            expect = 0
            for bit in range(8):
                if x >> bit & 1:
                    expect ^= cols[bit]
            assert affine_byte(operand, x, 0) == expect


def test_defaults_and_refusals():
    assert KernelSpec(("ghash",), "avx512", 512, 4).gfmul == "clmul"
    assert KernelSpec(("ghash",), "avx512", 512, 4, backend="gfni").gfmul == "gfni"  # the matrices
    assert KernelSpec(("ghash",), "avx512", 256, 4, backend="gfni").gfmul == "ctmul"
    assert KernelSpec(("gcm",), "avx512", 512, 4, backend="gfni", overrides=(("gcm", 256, 4),)).gfmul == "ctmul"
    bs = KernelSpec(("ghash",), "avx2", 256, 1, backend="bitsliced")
    with pytest.raises(ConfigError, match="logic instructions only"):
        with_gfmul(bs, "clmul")
    with pytest.raises(ConfigError, match="applies to the modes"):
        with_gfmul(KernelSpec(("ctr32",), "avx2", 256, 1), "ctmul")
    with pytest.raises(ConfigError, match="unknown --gfmul"):
        with_gfmul(bs, "tables")
    slow = replace(load("haswell"), name="slowmul", variable_time_multiply="its multiplier exits early")
    with pytest.raises(ConfigError, match="not constant-time on target slowmul"):
        with_gfmul(KernelSpec(("ghash",), "avx2", 256, 1, backend="gfni"), "", slow)
    assert with_gfmul(KernelSpec(("ghash",), "avx2", 256, 1, backend="gfni"), "bitsliced", slow).gfmul == "bitsliced"
    assert with_gfmul(KernelSpec(("ghash",), "avx2", 256, 1, backend="gfni"), "", load("haswell")).gfmul == "ctmul"
    for isa, width, backend in (("avx2", 256, "gfni"), ("avx512", 256, "gfni"), ("avx512", 512, "bitsliced")):
        with pytest.raises(ConfigError, match="--gfmul gfni .* needs --isa avx512 --width 512"):
            with_gfmul(KernelSpec(("ghash",), isa, width, 1, backend=backend), "gfni")
    with pytest.raises(ConfigError, match="not constant-time on target slowmul"):  # its single products: ctmul
        with_gfmul(KernelSpec(("ghash",), "avx512", 512, 1, backend="gfni"), "gfni", slow)


def test_spec_line_round_trips_the_method():
    spec = KernelSpec(("ghash",), "avx512", 256, 2, backend="gfni", gfmul="bitsliced")
    assert KernelSpec.from_json(spec.to_json()) == spec
    default = KernelSpec(("ghash",), "avx512", 256, 2)
    assert "gfmul" not in default.to_json()  # AES-NI files' spec lines stay as they were


def test_gcm_override_gives_ghash_its_powers():
    """Regression: with --per-mode gcm=512x7 on a depth-8 file, P_ghash (depth 8: 32 blocks a
    batch) had a table of 28 powers."""
    spec = KernelSpec(("gcm",), "avx512", 512, 8, overrides=(("gcm", 512, 7),))
    assert spec.ghash_blocks == 32


@pytest.mark.parametrize("backend,isa,width,method", [
    ("gfni", "sse", 128, "ctmul"), ("gfni", "avx2", 256, "ctmul"), ("gfni", "avx512", 512, "bitsliced"),
    ("gfni", "avx512", 512, "gfni"), ("aesni", "avx512", 512, "gfni"),
    ("gfni", "avx2", 256, "ctmul-gpr"), ("bitsliced", "sse", 128, "ctmul-gpr"),
    ("bitsliced", "avx2", 256, "ctmul"), ("bitsliced", "avx512", 512, "bitsliced")])
def test_hash_files_verify(tmp_path, backend, isa, width, method):
    spec = KernelSpec(("ghash", "polyval"), isa, width, 1, backend=backend, gfmul=method)
    verify_generated(tmp_path, spec, quick=True)


@pytest.mark.full  # files of 8-15 MB (every GHASH product is a long sequence): minutes each
@pytest.mark.parametrize("isa,width", [("avx2", 256), ("avx512", 512)])
def test_gfni_gcm_files_verify(tmp_path, isa, width):
    spec = KernelSpec(("gcm", "gcm-siv"), isa, width, 1, backend="gfni")
    verify_generated(tmp_path, spec, quick=True)


# GCM whose main loop hashes on byte-plane chains (PlaneStitch), one-shot and streaming; an odd
# depth (batches of 4 blocks: reduced one by one) in the full run.
@pytest.mark.parametrize("depth", [2, pytest.param(1, marks=pytest.mark.full), pytest.param(4, marks=pytest.mark.full)])
def test_gfni_matrix_gcm_files_verify(tmp_path, depth):
    spec = KernelSpec(("gcm",), "avx512", 512, depth, backend="gfni")
    assert spec.gfmul == "gfni"
    verify_generated(tmp_path, spec, quick=True)


# The bitsliced GCM and GCM-SIV files: the whole verifier (CAVP, McGrew-Viega, RFC 8452,
# differential against cryptography, tamper, streaming chunkings, guard pages, ABI, kernel ==
# simulation).
@pytest.mark.parametrize("isa,width,depth", [("avx2", 256, 1), ("avx512", 512, 2)])
def test_bitsliced_gcm_files_verify(tmp_path, isa, width, depth):
    spec = KernelSpec(("gcm", "gcm-siv", "ghash", "polyval"), isa, width, depth, backend="bitsliced")
    results = verify_generated(tmp_path, spec, quick=True)
    assert [r.name for r in results if r.status == "skip"] == []  # the simulation included


@pytest.mark.full
@pytest.mark.parametrize("isa,width,depth,method", [
    ("sse", 128, 1, "ctmul"), ("avx", 128, 1, "ctmul"), ("avx512", 128, 1, "ctmul"), ("avx512", 256, 2, "bitsliced")])
def test_bitsliced_gcm_files_verify_everywhere(tmp_path, isa, width, depth, method):
    spec = KernelSpec(("gcm", "gcm-siv"), isa, width, depth, backend="bitsliced", gfmul=method)
    verify_generated(tmp_path, spec, quick=True)
