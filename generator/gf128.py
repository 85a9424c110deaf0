"""GF(2^128) for GHASH and POLYVAL: the constants, derived from the polynomials.

POLYVAL (RFC 8452) works in GF(2)[x] / P(x), P = x^128 + x^127 + x^126 + x^121 + 1,
with 16-byte strings read little-endian (bit i of the integer = coefficient
of x^i) — exactly what pclmulqdq multiplies. Its product is Montgomery's:
dot(a, b) = a * b * x^-128 mod P. GHASH's field (x^128 + x^7 + x^2 + x + 1,
bit-reflected) is the same computation on byte-reversed blocks with the key
multiplied by x (RFC 8452, Appendix A), so one multiplier serves both.

The reduction folds 64 bits at a time: P = 1 mod x^64, and
P - 1 - x^128 = (x^57 + x^62 + x^63) * x^64, so adding L0 * P to a value
whose low 64 bits are L0 clears them, and costs one carry-less multiply of
L0 by c = x^57 + x^62 + x^63 (0xc200000000000000). Two folds divide by
x^128. The 128-bit constant 0xc2000000000000000000000000000001 is
x^128 mod P: the xor that multiplying by x needs when bit 127 falls off.
"""
from __future__ import annotations

from functools import lru_cache

import sympy

X = sympy.symbols("x")
POLYVAL_POLY = X**128 + X**127 + X**126 + X**121 + 1
GHASH_POLY = X**128 + X**7 + X**2 + X + 1


def _poly_int(p) -> int:
    """The integer whose bit i is the coefficient of x^i (over GF(2))."""
    poly = sympy.Poly(p, X, modulus=2)
    return sum(1 << int(m[0]) for m, c in zip(poly.monoms(), poly.coeffs()) if int(c) % 2)


@lru_cache(maxsize=None)
def x128_mod_p() -> int:
    """x^128 mod P(x): the xor constant of multiplying by x (0xc2...01)."""
    return _poly_int(sympy.rem(X**128, POLYVAL_POLY, X, modulus=2))


@lru_cache(maxsize=None)
def fold_constant() -> int:
    """c with P = 1 + c * x^64 + x^128: the 64-bit multiplier of each reduction fold."""
    rest = sympy.expand(POLYVAL_POLY - 1 - X**128)
    return _poly_int(sympy.cancel(rest / X**64))


@lru_cache(maxsize=None)
def doubling_reduction() -> int:
    """x^128 mod x^128 + x^7 + x^2 + x + 1 (0x87): what multiplying a block by x (XTS, OCB,
    OTR: no bit reflection) xors into its low byte when bit 127 falls off."""
    return _poly_int(sympy.rem(X**128, GHASH_POLY, X, modulus=2))


def times_x_pow(v: int, k: int) -> int:
    """v * x^k mod x^128 + x^7 + x^2 + x + 1, one doubling at a time (the reference)."""
    for _ in range(k):
        v <<= 1
        v = (v & M128) ^ (doubling_reduction() if v >> 128 else 0)
    return v


def ghash_polyval_relation_holds() -> bool:
    """GHASH's polynomial is POLYVAL's reflected: x^128 P(1/x) = x^128 + x^7 + x^2 + x + 1."""
    reflected = sympy.expand(X**128 * POLYVAL_POLY.subs(X, 1 / X))
    return sympy.Poly(reflected - GHASH_POLY, X, modulus=2).is_zero


# Reference arithmetic (plain ints), used by the simulator-level tests.
M128 = (1 << 128) - 1


def clmul(a: int, b: int) -> int:
    r = 0
    while b:
        if b & 1:
            r ^= a
        a <<= 1
        b >>= 1
    return r


def polyval_mod(v: int) -> int:
    """v mod P for v of any degree."""
    p = _poly_int(POLYVAL_POLY)
    while v.bit_length() > 128:
        v ^= p << (v.bit_length() - 129)
    return v


def dot(a: int, b: int) -> int:
    """POLYVAL's product a * b * x^-128 mod P."""
    inv = pow_x_inverse_128()
    return polyval_mod(clmul(polyval_mod(clmul(a, b)), inv))


@lru_cache(maxsize=None)
def pow_x_inverse_128() -> int:
    """x^-128 mod P, found with sympy's polynomial inverse."""
    inv = sympy.invert(X**128, POLYVAL_POLY, domain=sympy.GF(2))
    return _poly_int(inv)


def mul_x(v: int) -> int:
    """v * x mod P (RFC 8452 mulX_POLYVAL)."""
    v <<= 1
    return (v & M128) ^ (x128_mod_p() if v >> 128 else 0)
