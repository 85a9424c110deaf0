"""The AES facts a hardware round needs, derived from the project's own definitions.

Nothing here is an AES table typed in: ShiftRows is read off `aesref.shift_rows` applied to byte
positions, MixColumns off `aesref.mix_columns` applied to unit columns (a GF(2) matrix from a
column's 32 bits to its 32 bits), the S-box tables are `aesref.sbox()`, and the key expansion is
FIPS-197's recurrence with the round constants of `kernels.aes.rcon`.

Bit order (the core's interface): a block is a 128-bit vector whose bits [127:120] are byte 0;
byte b of a block is state byte b of FIPS-197 (column b // 4, row b % 4). A key of KB bits has
word i (bytes 4i..4i+3) in bits [KB-1-32i -: 32].
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from ..aesref import ROUNDS_BY_BITS, inv_mix_columns, inv_shift_rows, mix_columns, rcon, shift_rows

BLOCK_BYTES = 16
WORD_BITS = 32


def rounds(bits: int) -> int:
    return ROUNDS_BY_BITS[bits]


def key_words(bits: int) -> int:
    """Nk: the key's 32-bit words."""
    return bits // WORD_BITS


def byte_bit(byte: int, bit: int, nbytes: int = BLOCK_BYTES) -> int:
    """Index in a big-endian vector of `nbytes` bytes of bit `bit` (0 = least significant) of `byte`."""
    return 8 * (nbytes - 1 - byte) + bit


@cache
def row_permutation(decrypt: bool) -> tuple[int, ...]:
    """out byte b = in byte perm[b] for (Inv)ShiftRows, read off aesref's definition."""
    return tuple((inv_shift_rows if decrypt else shift_rows)(list(range(BLOCK_BYTES))))


@cache
def column_matrix(decrypt: bool) -> tuple[tuple[int, ...], ...]:
    """(Inv)MixColumns on one column as a GF(2) map: entry o lists the input bits whose XOR is
    output bit o; bits are numbered (byte, bit) -> 8 * byte + bit within the column."""
    mix = inv_mix_columns if decrypt else mix_columns
    images = []
    for i in range(32):
        col = [0, 0, 0, 0]
        col[i // 8] = 1 << (i % 8)
        images.append(mix(col))
    return tuple(tuple(i for i in range(32) if images[i][o // 8] >> (o % 8) & 1) for o in range(32))


# -- the key expansion: a window of Nk words moving four words a round -------------------------
# The core keeps the words w[4j .. 4j+Nk-1] ("window j"); round key j is its first four words.
# A forward step makes window j+1 (four new words at the end); a backward step makes window j-1
# (four older words at the front), from the same recurrence read the other way:
#   w[n] = w[n-Nk] ^ temp(w[n-1]),  temp = SubWord(RotWord(x)) ^ rcon(n/Nk) when n % Nk == 0,
#                                   SubWord(x) when Nk > 6 and n % Nk == 4, else x.


@dataclass(frozen=True)
class WordRule:
    """How new word p (0..3) of a step is made: `base` and `src` are window positions (negative:
    the step's own new words, -1 the last one made), `kind` is "plain", "sub" or "rotsub"."""
    p: int
    base: int
    src: int
    kind: str
    rcon: int


def temp_kind(n: int, nk: int) -> tuple[str, int]:
    if n % nk == 0:
        return "rotsub", rcon(n // nk)
    if nk > 6 and n % nk == 4:
        return "sub", 0
    return "plain", 0


def forward_rules(j: int, nk: int) -> tuple[WordRule, ...]:
    """Window j -> j+1: new word p is w[4j+nk+p] (positions: window index, or nk+q for new word q)."""
    rules = []
    for p in range(4):
        n = 4 * j + nk + p
        kind, rc = temp_kind(n, nk)
        rules.append(WordRule(p, base=p, src=nk - 1 + p, kind=kind, rcon=rc))
    return tuple(rules)


def backward_rules(j: int, nk: int) -> tuple[WordRule, ...]:
    """Window j -> j-1: new word p is w[4j-4+p], made from p = 3 down to 0 (positions: window
    index, or p - 4 for new word p)."""
    rules = []
    for p in range(3, -1, -1):
        m = 4 * j - 4 + p
        kind, rc = temp_kind(m + nk, nk)
        rules.append(WordRule(p, base=nk - 4 + p, src=nk - 5 + p, kind=kind, rcon=rc))
    return tuple(rules)


def window_count(bits: int) -> int:
    """Windows 0..Nr are the ones a block uses (round key r is window r's first four words)."""
    return rounds(bits) + 1
