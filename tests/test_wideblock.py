"""Rijndael-256 and Simpira-256 kernels: the references against the published vectors, the
ShiftRows compensation against an independent model of the instructions, the constants against
their definitions, refusal and header, and the whole verifier on generated files per ISA
(known answers, schedule, differential, ABI, guard pages, simulation, constant time, round trip)."""
from __future__ import annotations

import pytest

from aesgen.kernels import wideblock
from aesgen.pipeline import generate
from aesgen.spec import KernelSpec
from aesgen.verify import verify_kernel
from aesgen.verify import wideblock as checks
from aesgen.verify.reference.wideblock import rijndael_encrypt, simpira256

from _support import FIPS197_SBOX, aesgen_command, run, verify_generated

MODES = ("rijndael256", "simpira")


# ---------------------------------------------------------------- the references


def test_reference_decryption_and_inverse_undo_encryption_and_permutation():
    import random

    from aesgen.verify.reference.wideblock import rijndael_decrypt
    rng = random.Random(3)
    for block_len in (16, 20, 24, 28, 32):
        for key_len in (16, 24, 32):
            key, block = rng.randbytes(key_len), rng.randbytes(block_len)
            assert rijndael_decrypt(key, rijndael_encrypt(key, block)) == block
    x = rng.randbytes(32)
    assert simpira256(simpira256(x), inverse=True) == x and simpira256(x) != x


def test_references_reproduce_every_published_vector():
    vectors = checks.load_vectors()
    assert {v.kind for v in vectors} == {"rijndael", "simpira256"}
    assert sum(v.kind == "rijndael" for v in vectors) == 19  # Gladman's set: blocks 160..256
    for v in vectors:
        got = rijndael_encrypt(v.key, v.given) if v.kind == "rijndael" else simpira256(v.given)
        assert got == v.want, (v.key.hex(), v.given.hex())


def test_the_kernels_run_the_256_256_vector_and_simpira_of_zero():
    (ecb,) = checks.kernel_vectors(checks.ECB)
    assert ecb.want.hex().startswith("a49406115dfb30a4")
    (perm,) = checks.kernel_vectors(checks.PERMUTE)
    assert perm.given == bytes(32) and perm.want.hex().startswith("6b95ca7d")


# ---------------------------------------------------------------- constants vs definitions


def rijndael256_shift_rows(state: bytes, inverse: bool = False) -> bytes:
    """Rijndael, Nb = 8: row r of column c takes row r of column (c + (0, 1, 3, 4)[r]) mod 8
    (InvShiftRows: c - (0, 1, 3, 4)[r])."""
    way = -1 if inverse else 1
    return bytes(state[r + 4 * ((c + way * (0, 1, 3, 4)[r]) % 8)] for c in range(8) for r in range(4))


def aes_shift_rows(half: bytes, inverse: bool = False) -> bytes:
    """FIPS-197 ShiftRows (what AESENC does first), or InvShiftRows (AESDEC), of 16 bytes."""
    way = -1 if inverse else 1
    return bytes(half[r + 4 * ((c + way * r) % 4)] for c in range(4) for r in range(4))


def pshufb(x: bytes, control: bytes) -> bytes:
    return bytes(0 if k & 0x80 else x[k & 15] for k in control)


def blend(a: bytes, b: bytes, mask: bytes) -> bytes:
    """Bit by bit: mask ? b : a (what a ^ ((a ^ b) & mask) computes)."""
    return bytes((x & ~m | y & m) & 0xFF for x, y, m in zip(a, b, mask))


@pytest.mark.parametrize("decrypt", [False, True])
def test_blend_and_shuffle_then_the_instructions_shiftrows_is_rijndael256s(decrypt):
    mask, control = wideblock.shift_compensation(decrypt)
    state = bytes(range(32))
    h0, h1 = state[:16], state[16:]
    t0, t1 = pshufb(blend(h0, h1, mask), control), pshufb(blend(h1, h0, mask), control)
    assert aes_shift_rows(t0, decrypt) + aes_shift_rows(t1, decrypt) == rijndael256_shift_rows(state, decrypt)


def vpermt2b(table1: bytes, index: bytes, table2: bytes) -> bytes:
    """Intel SDM: byte k = byte (index[k] mod 2n) of table1 || table2 (n bytes each)."""
    both = table1 + table2
    return bytes(both[k % len(both)] for k in index)


@pytest.mark.parametrize("decrypt", [False, True])
@pytest.mark.parametrize("lanes", [1, 2, 4])
def test_two_table_indices_then_the_instructions_shiftrows_is_rijndael256s(lanes, decrypt):
    index = wideblock.two_table_index(lanes, decrypt).data
    blocks = [bytes(range(32 * k, 32 * k + 32)) for k in range(lanes)]
    halves = [b"".join(blk[16 * p:16 * p + 16] for blk in blocks) for p in (0, 1)]  # dealt
    y = [vpermt2b(halves[p], index, halves[1 - p]) for p in (0, 1)]
    for k, blk in enumerate(blocks):
        got = aes_shift_rows(y[0][16 * k:16 * k + 16], decrypt) + aes_shift_rows(y[1][16 * k:16 * k + 16], decrypt)
        assert got == rijndael256_shift_rows(blk, decrypt)


def test_simulated_blendv_takes_bytes_where_the_mask_byte_has_its_top_bit_set():
    import random

    from aesgen import semantics
    rng = random.Random(7)
    for _ in range(20):
        a, b, m = (rng.randbytes(16) for _ in range(3))
        want = bytes(y if z & 0x80 else x for x, y, z in zip(a, b, m))  # Intel SDM, VPBLENDVB
        got = semantics.blendv(*(int.from_bytes(v, "little") for v in (a, b, m)), None)
        assert got.to_bytes(16, "little") == want


def test_avx512_files_with_rijndael256_require_and_check_vbmi():
    spec = KernelSpec(("rijndael256",), "avx512", 512, 4)
    assert "avx512vbmi" in spec.features
    assert "avx512vbmi" not in KernelSpec(("simpira",), "avx512", 512, 4).features
    assert "vpermt2b" in generate(spec).asm
    assert "avx512vbmi" not in KernelSpec(("rijndael256",), "avx2", 256, 4).features


def test_simpira_constants_follow_the_definition():
    # C_{c,b} = (0x00 ^ c ^ b, 0x10 ^ c ^ b, 0x20 ^ c ^ b, 0x30 ^ c ^ b) as little-endian dwords, b = 2
    c1 = wideblock.simpira_constant(1, 1).data
    assert c1 == bytes([3, 0, 0, 0, 0x13, 0, 0, 0, 0x23, 0, 0, 0, 0x33, 0, 0, 0])
    c15 = wideblock.simpira_constant(15, 4).data
    assert len(c15) == 64 and c15[:16] * 4 == c15 and c15[0] == 15 ^ 2 and c15[12] == 0x30 ^ 15 ^ 2


def test_reference_key_expansion_uses_the_fips197_sbox():
    # the last key word of round 1 of an all-zero key: SubWord(RotWord(0)) ^ rcon ... chain
    from aesgen.verify.reference.wideblock import expand_key
    rk = expand_key(bytes(32))
    assert len(rk) == 15 and all(len(k) == 32 for k in rk)
    # w[8] = w[0] ^ SubWord(RotWord(w[7])) ^ (01 00 00 00), with every word zero: 63 63 63 63 ^ 01
    assert rk[1][:4] == bytes([FIPS197_SBOX[0] ^ 1] + [FIPS197_SBOX[0]] * 3)


# ---------------------------------------------------------------- generation


def test_a_depth_that_cannot_fit_is_refused_in_one_line(tmp_path):
    res = run(aesgen_command() + ["generate", "rijndael256", "--isa", "avx2", "--depth", "8",
                                  "-o", str(tmp_path / "k.S")])
    assert res.returncode == 2
    assert len(res.stderr.strip().splitlines()) == 1 and "vector registers" in res.stderr
    assert not (tmp_path / "k.S").exists()


def test_header_states_the_schedule_size_and_prototypes():
    spec = KernelSpec(MODES, "avx512", 512, 4)
    header = generate(spec).header
    assert f"#define {spec.prefix}_RIJNDAEL256_KEY_BYTES {spec.rijndael256_key_bytes} " in header
    assert spec.rijndael256_key_bytes == 30 * 64
    assert f"int {spec.prefix}_rijndael256_set_encrypt_key(const uint8_t *user_key, unsigned bits, void *rkey);" \
        in header
    assert f"void {spec.prefix}_simpira256_permute(const uint8_t *in, uint8_t *out, size_t nblocks);" in header
    assert f"void {spec.prefix}_rijndael256_ecb_decrypt(const void *rkey, const uint8_t *in" in header
    assert f"void {spec.prefix}_simpira256_inverse(const uint8_t *in, uint8_t *out, size_t nblocks);" in header


def test_generation_is_deterministic():
    spec = KernelSpec(MODES, "avx2", 256, 3)
    assert generate(spec, "k.S").asm == generate(spec, "k.S").asm


def test_a_wrong_shuffle_is_caught_by_the_verifier(tmp_path, monkeypatch):
    mask, control = wideblock.shift_compensation()
    swapped = control[:4] + control[8:12] + control[4:8] + control[12:]
    monkeypatch.setattr(wideblock, "shift_compensation", lambda decrypt=False: (mask, swapped))
    spec = KernelSpec(("rijndael256",), "avx", 128, 2)
    path = tmp_path / "kernel.S"
    path.write_text(generate(spec, path.name).asm)
    failed = {r.name for r in verify_kernel(path, spec, quick=True) if r.status == "fail"}
    assert {"kat rijndael256_ecb_encrypt", "diff rijndael256_ecb_encrypt"} <= failed


# ---------------------------------------------------------------- the verifier per ISA

CONFIGS = [("sse", 128, 3), ("avx", 128, 5), ("avx2", 256, 2), ("avx2", 256, 5), ("avx512", 128, 8),
           ("avx512", 256, 8), ("avx512", 512, 8)]


@pytest.mark.parametrize("isa,width,depth", CONFIGS)
def test_generated_file_verifies(tmp_path, isa, width, depth):
    results = verify_generated(tmp_path, KernelSpec(MODES, isa, width, depth), quick=True)
    names = {r.name for r in results}
    for fn in (checks.ECB, checks.ECB_DECRYPT, checks.PERMUTE, checks.INVERSE):
        assert {f"ct {fn}", f"kat {fn}", f"diff {fn}", f"simulate {fn}", f"abi {fn}", f"guard {fn} after",
                f"guard {fn} before", f"guard {fn} len0"} <= names
    for setup in (checks.SET_KEY, checks.SET_DKEY):
        assert {f"kat {setup}", f"badargs {setup}", f"guard {setup} after"} <= names
    assert "roundtrip" in names


@pytest.mark.full
@pytest.mark.parametrize("isa,width,depth", CONFIGS + [("sse", 128, 1), ("sse", 128, 5), ("avx512", 512, 1),
                                                        ("avx512", 512, 10), ("avx512", 256, 3)])
def test_generated_file_verifies_full(tmp_path, isa, width, depth):
    verify_generated(tmp_path, KernelSpec(MODES, isa, width, depth))


# ---------------------------------------------------------------- bench bookkeeping (no timing asserted)


def test_bench_ceiling_counts_the_aes_rounds_per_32_byte_block_whatever_the_key_bits():
    from aesgen.bench.timing import op_ceiling
    from aesgen.bench.ceiling import Ceiling, InstructionCost

    ceiling = Ceiling(tsc_hz=2e9, core_hz=3e9, costs=[InstructionCost("vaesenc", 512, 1.0, 4.0, 0.0)])
    spec = KernelSpec(MODES, "avx512", 512, 4)
    for bits in (128, 256):  # 64 bytes per zmm: 2 x 14 (Rijndael-256) or 15 x 2 (Simpira) zmm rounds per 2 zmm
        assert op_ceiling(ceiling, spec, checks.ECB, bits).bytes_per_cycle == pytest.approx(64 / 14)
        assert op_ceiling(ceiling, spec, checks.PERMUTE, bits).bytes_per_cycle == pytest.approx(64 / 15)


def test_bench_times_whole_32_byte_blocks_with_no_peer(tmp_path):
    from aesgen.cpu import missing_features
    from aesgen.bench.timing import bench

    spec = KernelSpec(MODES, "avx", 128, 2)
    missing = missing_features(spec.features)
    if missing:
        pytest.skip(f"CPU lacks {' '.join(missing)}")
    path = tmp_path / "k.S"
    path.write_text(generate(spec).asm)
    r = bench(spec, path, ops=[checks.ECB, checks.PERMUTE], sizes=[16, 64, 96], peers=("openssl",), trials=3,
              budget=0)
    assert sorted({(m.op, m.size) for m in r.measurements}) == [(checks.ECB, 64), (checks.ECB, 96),
                                                                (checks.PERMUTE, 64), (checks.PERMUTE, 96)]
    assert {m.impl for m in r.measurements} == {"aesgen"}
    assert r.peers["openssl"].startswith("n/a (no Rijndael-256 / Simpira")
