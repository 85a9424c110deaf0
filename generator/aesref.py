"""Reference semantics of the AES-NI instructions on 128-bit ints (little-endian bytes).

Used by the simulator. The S-box is derived (inversion in GF(2^8) modulo
x^8+x^4+x^3+x+1, then the FIPS-197 affine map), not pasted.
"""
from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

AES_POLY = 0x11B


def gf256_mul(a: int, b: int) -> int:
    r = 0
    while b:
        if b & 1:
            r ^= a
        a <<= 1
        if a & 0x100:
            a ^= AES_POLY
        b >>= 1
    return r


# FIPS-197: Nr by key size.
ROUNDS_BY_BITS = {128: 10, 192: 12, 256: 14}


def rcon(i: int) -> int:
    """Round constant i (1-based): x^(i-1) in GF(2^8)."""
    r = 1
    for _ in range(i - 1):
        r = gf256_mul(r, 2)
    return r


def gf256_inv(a: int) -> int:
    # a^254 = a^-1 in GF(2^8)* (and 0 -> 0, as AES defines it).
    r = 1
    for _ in range(254):
        r = gf256_mul(r, a)
    return r if a else 0


def _affine(b: int) -> int:
    r = 0x63
    for i in range(8):
        bit = (b >> i) ^ (b >> ((i + 4) % 8)) ^ (b >> ((i + 5) % 8)) ^ (b >> ((i + 6) % 8)) ^ (b >> ((i + 7) % 8))
        r ^= (bit & 1) << i
    return r


@lru_cache(maxsize=1)
def sbox() -> tuple[int, ...]:
    return tuple(_affine(gf256_inv(x)) for x in range(256))


@lru_cache(maxsize=1)
def inv_sbox() -> tuple[int, ...]:
    s = sbox()
    inv = [0] * 256
    for i, v in enumerate(s):
        inv[v] = i
    return tuple(inv)


def _bytes(x: int) -> list[int]:
    return list(x.to_bytes(16, "little"))


def _int(b: list[int]) -> int:
    return int.from_bytes(bytes(b), "little")


def shift_rows(s: list[int]) -> list[int]:
    # State byte 4c+r is row r, column c; row r rotates left by r columns.
    return [s[4 * ((c + r) % 4) + r] for c in range(4) for r in range(4)]


def inv_shift_rows(s: list[int]) -> list[int]:
    return [s[4 * ((c - r) % 4) + r] for c in range(4) for r in range(4)]


def _mix(s: list[int], m: tuple[int, int, int, int]) -> list[int]:
    """Each 4-byte column of the state (any number of columns: Rijndael's Nb) times the circulant m."""
    out = []
    for c in range(len(s) // 4):
        col = s[4 * c: 4 * c + 4]
        for r in range(4):
            v = 0
            for k in range(4):
                v ^= gf256_mul(m[(k - r) % 4], col[k])
            out.append(v)
    return out


def mix_columns(s: list[int]) -> list[int]:
    return _mix(s, (2, 3, 1, 1))


def inv_mix_columns(s: list[int]) -> list[int]:
    return _mix(s, (14, 11, 13, 9))


def _round(state: int, key: int, box: tuple[int, ...], rows: Callable[[list[int]], list[int]],
           mix: Callable[[list[int]], list[int]] | None) -> int:
    """One AES-NI round: the rows shifted, each byte through the S-box, the columns mixed
    (none in a last round), the round key added."""
    s = [box[b] for b in rows(_bytes(state))]
    return _int(mix(s) if mix else s) ^ key


def aesenc(state: int, key: int) -> int:
    return _round(state, key, sbox(), shift_rows, mix_columns)


def aesenclast(state: int, key: int) -> int:
    return _round(state, key, sbox(), shift_rows, None)


def aesdec(state: int, key: int) -> int:
    return _round(state, key, inv_sbox(), inv_shift_rows, inv_mix_columns)


def aesdeclast(state: int, key: int) -> int:
    return _round(state, key, inv_sbox(), inv_shift_rows, None)


def aesimc(state: int) -> int:
    return _int(inv_mix_columns(_bytes(state)))


def aeskeygenassist(src: int, rcon: int) -> int:
    """[SubWord(X1), RotWord(SubWord(X1))^rcon, SubWord(X3), RotWord(SubWord(X3))^rcon]."""
    s = sbox()

    def dword(i: int) -> int:
        return (src >> (32 * i)) & 0xFFFFFFFF

    def sub(w: int) -> int:
        return int.from_bytes(bytes(s[b] for b in w.to_bytes(4, "little")), "little")

    def rot(w: int) -> int:
        return ((w >> 8) | (w << 24)) & 0xFFFFFFFF

    x1, x3 = sub(dword(1)), sub(dword(3))
    words = [x1, rot(x1) ^ rcon, x3, rot(x3) ^ rcon]
    return sum(w << (32 * i) for i, w in enumerate(words))
