"""The bitsliced backend: its layout constants against FIPS-197's definitions (ShiftRows,
MixColumns, InvMixColumns, field multiplication) computed independently here, the
transposition network on a Python model, the stored key-schedule layout written twice
(generator and verifier), refusals, and the whole verifier (known answers, differential,
ABI, guard pages, static constant-time scan, round trip) on every ISA and width."""
from __future__ import annotations

import random
import re
from dataclasses import replace

import pytest

from aesgen import bitslice
from aesgen.kernels.frame import PAGE
from aesgen.pipeline import generate
from aesgen.spec import KernelSpec

from _support import aesgen_command, expand_key, gmul, inv_mix_columns, run, verify_generated

MODES = ("ecb", "ctr32", "cbc")


def shift_rows_fips(block: bytes) -> bytes:
    """FIPS-197 5.1.2 on a column-major block: s'[r][c] = s[r][(c + r) mod 4]."""
    return bytes(block[4 * ((c + r) % 4) + r] for c in range(4) for r in range(4))


def mix_column_fips(col: list[int]) -> list[int]:
    return [gmul(col[r], 2) ^ gmul(col[(r + 1) % 4], 3) ^ col[(r + 2) % 4] ^ col[(r + 3) % 4] for r in range(4)]


def shuffle(data: bytes, control: bytes) -> bytes:
    return bytes(data[i] for i in control)


def test_byte_transpose_and_row_turns_match_fips197():
    rng = random.Random(1)
    t = bitslice.byte_transpose()
    turn = bitslice.rows_turned
    for _ in range(20):
        block = rng.randbytes(16)
        assert shuffle(shuffle(block, t), t) == block  # its own inverse
        planes = shuffle(block, t)
        assert planes[4 * 1 + 2] == block[4 * 2 + 1]  # row 1, column 2
        assert shuffle(shuffle(planes, turn(1)), t) == shift_rows_fips(block)
        assert shuffle(shuffle(planes, turn(2)), t) == shift_rows_fips(shift_rows_fips(block))
        assert shuffle(shuffle(planes, turn(1)), turn(-1)) == planes
        rotated = shuffle(shuffle(planes, bitslice.rotate_rows_bytes(1)), t)
        assert rotated == bytes(block[4 * c + (r + 1) % 4] for c in range(4) for r in range(4))


@pytest.mark.parametrize("c", [2, 4])
def test_times_matrix_is_field_multiplication(c):
    m = bitslice.times_matrix(c)
    for v in range(256):
        bits = [v >> (7 - p) & 1 for p in range(8)]  # plane p = bit 7 - p
        out = sum((sum(bits[j] for j in m[p]) & 1) << (7 - p) for p in range(8))
        assert out == gmul(c, v)


def test_mix_columns_decompositions():
    """What the emitter computes: out = 2u + rot1(s) + rot2(u), u = s + rot1(s); and
    InvMixColumns = MixColumns(t), t = s + 4 (s + rot2(s))."""
    rng = random.Random(2)
    for _ in range(200):
        s = [rng.randrange(256) for _ in range(4)]
        rot = lambda v, n: [v[(r + n) % 4] for r in range(4)]  # noqa: E731  row r takes row r + n
        u = [a ^ b for a, b in zip(s, rot(s, 1))]
        got = [gmul(2, u[r]) ^ rot(s, 1)[r] ^ rot(u, 2)[r] for r in range(4)]
        assert got == mix_column_fips(s)
        a = [x ^ y for x, y in zip(s, rot(s, 2))]
        t = [s[r] ^ gmul(4, a[r]) for r in range(4)]
        assert mix_column_fips(t) == list(inv_mix_columns(bytes(s) * 4)[:4])


def _qword_shift(v: int, n: int, left: bool) -> int:
    out = 0
    for q in range(2):
        word = v >> (64 * q) & (2**64 - 1)
        word = (word << n if left else word >> n) & (2**64 - 1)
        out |= word << (64 * q)
    return out


def test_swapmove_network_transposes_bits_as_documented():
    rng = random.Random(3)
    blocks = [rng.getrandbits(128) for _ in range(8)]
    x = list(blocks)
    for shift, mask, pairs in bitslice.SWAPMOVE_LAYERS:
        m = int.from_bytes(bytes([mask]) * 16, "little")
        for a, b in pairs:
            t = (_qword_shift(x[a], shift, False) ^ x[b]) & m
            x[b] ^= t
            x[a] ^= _qword_shift(t, shift, True)
    for p in range(8):
        for q in range(16):
            for j in range(8):
                assert x[p] >> (8 * q + j) & 1 == blocks[7 - j] >> (8 * q + 7 - p) & 1


def test_key_planes_layout_agrees_with_the_verifier():
    from aesgen.verify.kat import bit_planes

    for turn, rk in enumerate(expand_key(bytes(range(16)))):
        for t in (turn, -turn):
            assert b"".join(bitslice.planes_of_block(rk, t)) == bit_planes(rk, 1, t)


@pytest.mark.parametrize("decrypt", [False, True])
def test_drifting_coordinate_controls(decrypt):
    """After round r the true byte (row, col) sits at (row, col + turn * row), turn = r (-r
    decrypting): rot_n there takes (row + n, col + n * turn); the way out applies the turn and
    the byte transpose; round keys go in the other way."""
    t = bitslice.byte_transpose()
    for r in range(15):
        turn = -r if decrypt else r
        rot1, rot2, out = bitslice.drift_entry(r, decrypt)
        for n, got in ((1, rot1), (2, rot2)):
            assert got == bytes(4 * ((q // 4 + n) % 4) + (q % 4 + n * turn) % 4 for q in range(16))
        block = random.Random(r).randbytes(16)  # a true state in memory order
        stored = bytes(shuffle(block, t)[4 * (q // 4) + (q % 4 - turn * (q // 4)) % 4] for q in range(16))
        assert shuffle(stored, out) == block
        assert shuffle(block, bitslice.key_entry(r, decrypt)) == stored


def test_features_need_no_aes_ni():
    for isa, width in (("sse", 128), ("avx2", 256), ("avx512", 512)):
        spec = KernelSpec(MODES, isa, width, 1, backend="bitsliced")
        assert "aes" not in spec.features and "vaes" not in spec.features and "gfni" not in spec.features
    assert KernelSpec(MODES, "avx512", 512, 2, backend="bitsliced").key_bytes == (15 * 512 + 4 + 63) // 64 * 64


@pytest.mark.parametrize("args,message", [
    (["--isa", "avx2", "--depth", "2"], "depth is the number of 8-plane sets"),
    (["--depth", "3"], "depth is the number of 8-plane sets"),
    (["--isa", "avx2", "--no-ternlog"], "--no-ternlog applies to"),
])
def test_refusals_are_one_line_exit_2(tmp_path, args, message):
    res = run(aesgen_command() + ["generate", "ecb,ctr32,cbc", "--backend", "bitsliced", *args,
                                  "-o", str(tmp_path / "k.S")])
    assert res.returncode == 2 and message in res.stderr and len(res.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("isa", ["sse", "avx2", "avx512"])
def test_simulate_runs_bitsliced(isa):
    """The simulator runs code written on physical registers (FIPS-197 Appendix C.1)."""
    res = run(aesgen_command() + ["simulate", "ecb_encrypt", "--backend", "bitsliced", "--isa", isa,
                                  "--key", "000102030405060708090a0b0c0d0e0f",
                                  "--in", "00112233445566778899aabbccddeeff"])
    assert res.returncode == 0 and "out: 69c4e0d86a7b0430d8cdb78070b4c55a" in res.stdout


def test_other_modes_are_refused(tmp_path):
    res = run(aesgen_command() + ["generate", "xts", "--backend", "bitsliced", "-o", str(tmp_path / "k.S")])
    assert res.returncode == 2 and "implements ecb, ctr32, cbc, ghash, polyval, gcm, gcm-siv, not xts" in res.stderr


def test_output_is_deterministic_and_compact():
    spec = KernelSpec(MODES, "avx512", 512, 2, backend="bitsliced")
    a, b = generate(spec), generate(spec)
    assert a.asm == b.asm and a.header == b.header
    assert len(a.asm) < 400_000  # a round loop, not 10/12/14 unrolled rounds per mode
    assert "vpternlogd" in a.asm and "no AES-NI" in a.asm and "aesenc" not in a.asm
    plain = generate(KernelSpec(MODES, "avx512", 512, 2, backend="bitsliced", no_ternlog=True))
    assert "vpternlogd" not in plain.asm and "--no-ternlog" in plain.asm


CONFIGS = [("sse", 128, 1), ("avx", 128, 1), ("avx2", 256, 1), ("avx512", 128, 1), ("avx512", 256, 2),
           ("avx512", 512, 1), ("avx512", 512, 2)]


@pytest.mark.parametrize("isa,width,depth", CONFIGS)
def test_generated_file_verifies(tmp_path, isa, width, depth):
    results = verify_generated(tmp_path, KernelSpec(MODES, isa, width, depth, backend="bitsliced"), quick=True)
    names = {r.name for r in results if r.status == "pass"}
    if not any(r.detail.startswith("CPU lacks") for r in results):
        assert {"ct ctr32_encrypt", "roundtrip", "keyschedule 256"} <= names


@pytest.mark.parametrize("isa,width,depth", [("sse", 128, 1), ("avx512", 256, 2)])
def test_win64_file_verifies(tmp_path, isa, width, depth):
    verify_generated(tmp_path, KernelSpec(MODES, isa, width, depth, backend="bitsliced", abi="win64"), quick=True)


def stack_moves(asm: str) -> list[tuple[int, str]]:
    """Each `sub $n,%rsp` of a file's text: n, and the instruction after it."""
    lines = [ln.split("#")[0].strip() for ln in asm.splitlines()]
    code = [ln for ln in lines if ln and not ln.startswith(("AESGEN_", "."))]
    return [(int(m.group(1), 0), code[k + 1]) for k, ln in enumerate(code)
            if (m := re.fullmatch(r"sub \$(\w+),%rsp", ln))]


def test_win64_frames_over_a_page_are_probed(tmp_path):
    """GCM-SIV's frame holds the message schedule as planes (15 x 512 bytes at width 512): over
    a page. On win64 rsp goes down a page at a time and touches each (Windows commits its stack
    one guard page at a time: an access past it faults); SysV takes the frame at once."""
    spec = KernelSpec(("gcm-siv",), "avx512", 512, 2, backend="bitsliced")
    assert max(n for n, _ in stack_moves(generate(spec).asm)) > PAGE
    moves = stack_moves(generate(replace(spec, abi="win64")).asm)
    assert max(n for n, _ in moves) <= PAGE
    probes = [after for n, after in moves if n == PAGE]
    assert probes and set(probes) == {"movl $0,(%rsp)"}
    verify_generated(tmp_path, replace(spec, abi="win64"), quick=True)


def test_no_ternlog_file_verifies(tmp_path):
    verify_generated(tmp_path, KernelSpec(MODES, "avx512", 512, 2, backend="bitsliced", no_ternlog=True),
                     quick=True)


@pytest.mark.full
@pytest.mark.parametrize("isa,width,depth", CONFIGS + [("avx512", 128, 2), ("avx512", 256, 1)])
def test_generated_file_verifies_fully(tmp_path, isa, width, depth):
    verify_generated(tmp_path, KernelSpec(MODES, isa, width, depth, backend="bitsliced"))
