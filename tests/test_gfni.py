"""The GFNI backend: its bit matrices checked on all 256 bytes against FIPS-197's S-box
table and an independent field multiply, the instruction's matrix layout, and the whole
verifier (known answers, differential, ABI, guard pages, simulation == machine code) on
generated files for every ISA."""
from __future__ import annotations

import pytest

from aesgen import gfni
from aesgen.spec import KernelSpec

from _support import FIPS197_INV_SBOX, FIPS197_SBOX, gmul, verify_generated


def inverse(x: int) -> int:
    return next((y for y in range(1, 256) if gmul(x, y) == 1), 0)


def test_sub_bytes_is_one_affine_of_the_inverse():
    q, c = gfni.sub_bytes_step(1)
    assert [gfni.affine_byte(q, inverse(x), c) for x in range(256)] == list(FIPS197_SBOX)


@pytest.mark.parametrize("m", [1, 2, 3, 0x0E, 0x0B, 0x0D, 0x09])
def test_field_multiples_of_the_sbox(m):
    q, c = gfni.sub_bytes_step(m)
    assert all(gfni.affine_byte(q, inverse(x), c) == gmul(m, FIPS197_SBOX[x]) for x in range(256))
    pre, cp = gfni.inv_sub_bytes_pre()
    qm, cm = gfni.times_inverse(m)
    assert all(gfni.affine_byte(qm, inverse(gfni.affine_byte(pre, y, cp)), cm) == gmul(m, FIPS197_INV_SBOX[y])
               for y in range(256))


def test_matrix_layout_row_i_is_byte_7_minus_i():
    # output bit 0 = input bit 7: only byte 7 (row 0) has a bit, bit 7
    assert gfni.affine_byte(0x80 << 56, 0x80, 0) == 1
    assert gfni.affine_byte(0x80 << 56, 0x7F, 0) == 0


def test_shuffles_are_permutations_and_inverse():
    sr, isr = gfni.shift_rows(), gfni.shift_rows(inverse_=True)
    assert sorted(sr) == list(range(16)) and bytes(sr[isr[i]] for i in range(16)) == bytes(range(16))
    assert gfni.rotate_columns(1)[:4] == bytes([1, 2, 3, 0])


@pytest.mark.parametrize("isa,width,depth", [
    ("sse", 128, 2), ("avx", 128, 3), ("avx2", 256, 2), ("avx512", 512, 4)])
def test_generated_file_verifies(tmp_path, isa, width, depth):
    results = verify_generated(tmp_path, KernelSpec(("ecb", "ctr32", "cbc"), isa, width, depth, backend="gfni"),
                               quick=True)
    names = {r.name for r in results}
    assert "simulate ctr32_encrypt" in names or any(n.startswith("simulate") for n in names)


def test_gfni_files_need_gfni_not_aes():
    spec = KernelSpec(("ecb",), "avx512", 512, 4, backend="gfni")
    assert "gfni" in spec.features and "aes" not in spec.features and "vaes" not in spec.features
