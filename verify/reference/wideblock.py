"""Python references for the wide-block kernels, written from the specifications.

Rijndael with a 256-bit block and a 256-bit key (Daemen & Rijmen, "AES Proposal: Rijndael",
Nb = Nk = 8: 14 rounds, ShiftRows offsets 0, 1, 3, 4, 120 key words), and the Simpira v2
permutation with b = 2 (Gueron & Mouha, 2016: a two-branch Feistel of 15 rounds whose
F_{c,b}(x) is two AES rounds, the first keyed by the constant C_{c,b}, the second by zero).

Both are generic byte-level code: a Rijndael round of Nb columns, the state byte r + 4c
being row r of column c (the input order). Only the S-box and MixColumns' column product come
from aesgen.aesref; tests/test_wideblock.py checks both references against the published vectors.
"""
from __future__ import annotations

from functools import lru_cache

from aesgen.aesref import gf256_mul, inv_mix_columns, inv_sbox, mix_columns, sbox

RIJNDAEL256_ROUNDS = 14
RIJNDAEL256_BLOCK = 32
# ShiftRows row offsets C1, C2, C3 by block length in columns (the Rijndael proposal, table 3).
SHIFT_OFFSETS = {4: (0, 1, 2, 3), 5: (0, 1, 2, 3), 6: (0, 1, 2, 3), 7: (0, 1, 2, 4), 8: (0, 1, 3, 4)}
SIMPIRA_B = 2
SIMPIRA_ROUNDS = 6 * SIMPIRA_B + 3  # 15 for b <= 3 (Simpira v2, section 3)
SIMPIRA_BLOCK = 16 * SIMPIRA_B


def sub_bytes(s: list[int]) -> list[int]:
    box = sbox()
    return [box[x] for x in s]


def shift_rows(s: list[int], nb: int) -> list[int]:
    """Row r rotates left by C_r columns: new[r][c] = old[r][(c + C_r) mod Nb]."""
    off = SHIFT_OFFSETS[nb]
    return [s[r + 4 * ((c + off[r]) % nb)] for c in range(nb) for r in range(4)]


def inv_shift_rows(s: list[int], nb: int) -> list[int]:
    """Row r rotates right by C_r columns: new[r][c] = old[r][(c - C_r) mod Nb]."""
    off = SHIFT_OFFSETS[nb]
    return [s[r + 4 * ((c - off[r]) % nb)] for c in range(nb) for r in range(4)]


def add_round_key(s: list[int], k: bytes) -> list[int]:
    return [a ^ b for a, b in zip(s, k)]


def rijndael_round(s: list[int], k: bytes, nb: int, last: bool = False) -> list[int]:
    s = shift_rows(sub_bytes(s), nb)
    if not last:
        s = mix_columns(s)  # each of the Nb columns
    return add_round_key(s, k)


def _rcon(i: int) -> int:
    r = 1
    for _ in range(i - 1):
        r = gf256_mul(r, 2)
    return r


def expand_key(key: bytes, nb: int = 8) -> list[bytes]:
    """The Rijndael key expansion for Nk = 8: Nb * (Nr + 1) words, cut into Nr + 1 round keys."""
    nk = len(key) // 4
    nr = max(nk, nb) + 6
    box = sbox()
    w = [list(key[4 * i:4 * i + 4]) for i in range(nk)]
    for i in range(nk, nb * (nr + 1)):
        t = list(w[i - 1])
        if i % nk == 0:
            t = [box[x] for x in t[1:] + t[:1]]
            t[0] ^= _rcon(i // nk)
        elif nk > 6 and i % nk == 4:
            t = [box[x] for x in t]
        w.append([a ^ b for a, b in zip(w[i - nk], t)])
    flat = bytes(x for word in w for x in word)
    return [flat[4 * nb * r:4 * nb * (r + 1)] for r in range(nr + 1)]


def rijndael_encrypt(key: bytes, block: bytes) -> bytes:
    """Rijndael of any block and key length of 16, 20, ..., 32 bytes (Nr = max(Nk, Nb) + 6)."""
    nb = len(block) // 4
    if len(block) % 4 or nb not in SHIFT_OFFSETS or len(key) % 4 or not 4 <= len(key) // 4 <= 8:
        raise ValueError("Rijndael: block of 16, 24 or 32 bytes, key of 16..32 bytes")
    rk = expand_key(key, nb)
    s = add_round_key(list(block), rk[0])
    for r in range(1, len(rk) - 1):
        s = rijndael_round(s, rk[r], nb)
    return bytes(rijndael_round(s, rk[-1], nb, last=True))


def rijndael_decrypt(key: bytes, block: bytes) -> bytes:
    """The inverse cipher, straight from the proposal: the rounds undone in reverse order."""
    nb = len(block) // 4
    rk = expand_key(key, nb)
    box = inv_sbox()
    s = add_round_key(list(block), rk[-1])
    for r in range(len(rk) - 2, -1, -1):
        s = [box[x] for x in inv_shift_rows(s, nb)]
        s = add_round_key(s, rk[r])
        if r:
            s = inv_mix_columns(s)
    return bytes(s)


def rijndael256_encrypt(key: bytes, block: bytes) -> bytes:
    """One 32-byte block under a 32-byte key."""
    if len(key) != 32 or len(block) != RIJNDAEL256_BLOCK:
        raise ValueError("Rijndael-256: 32-byte key and block")
    return rijndael_encrypt(key, block)


def rijndael256_ecb(key: bytes, data: bytes, decrypt: bool = False) -> bytes:
    one = rijndael_decrypt if decrypt else rijndael256_encrypt
    return b"".join(one(key, data[i:i + 32]) for i in range(0, len(data), 32))


@lru_cache(maxsize=None)
def simpira_constant(c: int, b: int = SIMPIRA_B) -> bytes:
    """C_{c,b}: four 32-bit little-endian words 0x00, 0x10, 0x20, 0x30, each XOR c XOR b."""
    return b"".join(((0x10 * k) ^ c ^ b).to_bytes(4, "little") for k in range(4))


def simpira_f(x: bytes, c: int, b: int = SIMPIRA_B) -> bytes:
    """F_{c,b}(x) = AESENC(AESENC(x, C_{c,b}), 0): two full AES rounds."""
    s = rijndael_round(list(x), simpira_constant(c, b), 4)
    return bytes(rijndael_round(s, bytes(16), 4))


def simpira256(block: bytes, inverse: bool = False) -> bytes:
    """Simpira v2, b = 2: round c = 1..15 XORs F_{c,2} of one branch into the other,
    branch 0 into 1 on odd c, 1 into 0 on even c. The inverse runs c = 15..1."""
    x = [bytes(block[:16]), bytes(block[16:32])]
    rounds = range(1, SIMPIRA_ROUNDS + 1)
    for c in reversed(rounds) if inverse else rounds:
        src = (c - 1) % 2
        f = simpira_f(x[src], c)
        x[1 - src] = bytes(a ^ d for a, d in zip(x[1 - src], f))
    return x[0] + x[1]


def simpira256_many(data: bytes, inverse: bool = False) -> bytes:
    return b"".join(simpira256(data[i:i + 32], inverse) for i in range(0, len(data), 32))
