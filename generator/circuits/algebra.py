"""The AES S-box derived with sympy from its definition (FIPS-197 5.1.1), to check circuits against.

S(x) = A * x^-1 + c, where x^-1 is the inverse in GF(2^8) = GF(2)[t]/(t^8+t^4+t^3+t+1) (0 maps to 0),
A is the circulant GF(2) matrix of the definition (output bit i is the XOR of input bits i, i+4,
i+5, i+6, i+7 mod 8) and c = {63}. The inverse S-box is x = (A^-1 (y + c))^-1; A^-1 and A^-1 c come
from sympy's matrix inverse mod 2, not from a table.
"""
from __future__ import annotations

from functools import cache

from sympy import Matrix, Poly, symbols

t = symbols("t")
FIELD_MODULUS = Poly(t**8 + t**4 + t**3 + t + 1, t, modulus=2)
AFFINE_TAPS = (0, 4, 5, 6, 7)  # output bit i reads input bits i + tap (mod 8)
AFFINE_CONSTANT = 0x63


def byte_to_poly(b: int) -> Poly:
    return Poly(sum(t**i for i in range(8) if b >> i & 1), t, modulus=2)


def poly_to_byte(p: Poly) -> int:
    return sum(int(c) % 2 << e for (e,), c in p.terms() if int(c) % 2)


def field_inverse(b: int) -> int:
    return poly_to_byte(byte_to_poly(b).invert(FIELD_MODULUS)) if b else 0


def affine_matrix() -> Matrix:
    return Matrix(8, 8, lambda i, j: int((j - i) % 8 in AFFINE_TAPS))


def bits(b: int) -> Matrix:
    return Matrix(8, 1, lambda i, _: b >> i & 1)


def from_bits(v: Matrix) -> int:
    return sum((int(v[i]) % 2) << i for i in range(8))


def linear_map(matrix: Matrix, b: int) -> int:
    """matrix · b over GF(2), bytes as bit vectors (bit i the i-th coordinate)."""
    return from_bits((matrix * bits(b)).applyfunc(lambda e: e % 2))


@cache
def inverse_affine() -> tuple[Matrix, int]:
    """A^-1 over GF(2), and the constant of the inverse map y -> A^-1 y + A^-1 c."""
    inv = affine_matrix().inv_mod(2)
    return inv, linear_map(inv, AFFINE_CONSTANT)


@cache
def sbox_table() -> tuple[int, ...]:
    a = affine_matrix()
    return tuple(linear_map(a, field_inverse(x)) ^ AFFINE_CONSTANT for x in range(256))


@cache
def inv_sbox_table() -> tuple[int, ...]:
    inv, constant = inverse_affine()
    return tuple(field_inverse(linear_map(inv, y) ^ constant) for y in range(256))
