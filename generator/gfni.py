"""AES from GFNI: the bit matrices and byte shuffles, derived from the definitions.

vgf2p8affineinvqb computes, per byte, A * x^-1 + c over GF(2) (x^-1 in GF(2^8) modulo
x^8 + x^4 + x^3 + x + 1, 0 -> 0) and vgf2p8affineqb A * x + c. With A the AES affine map
and c = 0x63 the first is SubBytes exactly. Multiplying by a field constant m is linear,
so m * S(x) = (M_m A) x^-1 + M_m c is one instruction too: MixColumns' 2*S and
InvMixColumns' 0e/0b/0d/09 * InvS come straight out of the S-box step.

The matrices are built with sympy over GF(2) from the maps they represent (applied to
the unit bytes), inverted with sympy where needed, and packed the way the instructions
read them: output bit i is the parity of (byte 7 - i of the qword) AND x.
"""
from __future__ import annotations

from functools import lru_cache

import sympy

from .aesref import gf256_mul

AES_CONSTANT = 0x63  # the affine map's constant: FIPS-197 5.1.1


def _bits(v: int) -> list[int]:
    return [(v >> j) & 1 for j in range(8)]


def _matrix_of(f) -> sympy.Matrix:
    """The GF(2) matrix of a linear map on bytes (column j = f(bit j))."""
    return sympy.Matrix(8, 8, lambda i, j: _bits(f(1 << j))[i])


def _apply(m: sympy.Matrix, v: int) -> int:
    col = m * sympy.Matrix(_bits(v))
    return sum((int(col[i]) % 2) << i for i in range(8))


def _rotl8(v: int, n: int) -> int:
    return ((v << n) | (v >> (8 - n))) & 0xFF


@lru_cache(maxsize=None)
def aes_affine() -> sympy.Matrix:
    """FIPS-197 5.1.1: b ^ rotl(b,1) ^ rotl(b,2) ^ rotl(b,3) ^ rotl(b,4) (before + 0x63)."""
    return _matrix_of(lambda b: b ^ _rotl8(b, 1) ^ _rotl8(b, 2) ^ _rotl8(b, 3) ^ _rotl8(b, 4))


def times(m: int) -> sympy.Matrix:
    """Multiplication by the field constant m, as a GF(2) matrix."""
    return _matrix_of(lambda b: gf256_mul(m, b))


def inverse(mat: sympy.Matrix) -> sympy.Matrix:
    return mat.inv_mod(2)


def identity() -> sympy.Matrix:
    return sympy.eye(8)


def pack(mat: sympy.Matrix) -> int:
    """The qword operand: byte 7 - i holds row i (the input bits output bit i sums)."""
    q = 0
    for i in range(8):
        row = sum((int(mat[i, j]) % 2) << j for j in range(8))
        q |= row << (8 * (7 - i))
    return q


def affine_byte(qword: int, x: int, imm: int) -> int:
    """One byte of vgf2p8affineqb, as the instruction defines it (the simulator's model)."""
    out = 0
    for i in range(8):
        out |= (bin(((qword >> (8 * (7 - i))) & 0xFF) & x).count("1") & 1) << i
    return out ^ imm


def sub_bytes_step(m: int = 1) -> tuple[int, int]:
    """(matrix qword, imm) for vgf2p8affineinvqb giving m * S(x)."""
    a = (times(m) * aes_affine()).applyfunc(lambda v: v % 2)
    return pack(a), _apply(times(m), AES_CONSTANT)


def inv_sub_bytes_pre() -> tuple[int, int]:
    """(matrix, imm) for vgf2p8affineqb: y -> A^-1 (y + 0x63), whose inverse is InvS(y)."""
    ainv = inverse(aes_affine())
    return pack(ainv), _apply(ainv, AES_CONSTANT)


def times_inverse(m: int) -> tuple[int, int]:
    """(matrix, imm) for vgf2p8affineinvqb: w -> m * w^-1."""
    return pack(times(m)), 0


# ---------------------------------------------------------------------------- byte shuffles
def shift_rows(inverse_: bool = False) -> bytes:
    """pshufb control: byte 4c + r takes byte 4((c + r) mod 4) + r (ShiftRows), or
    4((c - r) mod 4) + r (InvShiftRows)."""
    sign = -1 if inverse_ else 1
    return bytes(4 * ((c + sign * r) % 4) + r for c in range(4) for r in range(4))


def rotate_columns(n: int) -> bytes:
    """pshufb control: row r of each column takes row r + n (a dword rotated right by 8n bits)."""
    return bytes(4 * c + (r + n) % 4 for c in range(4) for r in range(4))


def word_rotation_for_keygen() -> bytes:
    """aeskeygenassist's dwords: SubWord(X1), RotWord(SubWord(X1)), SubWord(X3), RotWord(SubWord(X3))."""
    out = []
    for src, rot in ((1, 0), (1, 1), (3, 0), (3, 1)):
        out += [4 * src + (r + rot) % 4 for r in range(4)]
    return bytes(out)
