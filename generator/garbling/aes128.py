"""AES-128 (FIPS-197) with its key expansion as a Bristol circuit, from aesgen's own definitions.

The S-box is the Boyar-Peralta netlist shipped in aesgen.circuits (`sbox_bp113`: 32 AND, 81 XOR/XNOR);
ShiftRows is aesref.shift_rows applied to the state's bytes (the 16 S-boxes of a round, and the 4 of
a key word, are written gate by gate: see Builder.netlist); MixColumns and xtime are the GF(2)-linear
maps of aesref.gf256_mul (b_i = a_i ^ t ^ xtime(a_i ^ a_i+1), t the column's XOR); the round
constants come from kernels/aes.rcon. 200 S-boxes (160 in the rounds, 40 in the key expansion).

Inputs: the key (128 bits), the plaintext block (128 bits); output: the ciphertext block. A block
of bytes is the little-endian integer of its bytes (bit i: bit i mod 8 of byte i div 8), as in
bristol.py.
"""
from __future__ import annotations

from aesgen import circuits
from aesgen.aesref import gf256_mul, rcon, shift_rows

from .bristol import Bristol
from .builder import Builder

Byte = list[int]  # 8 wires, bit 0 (the least significant) first


def xtime_sources() -> list[list[int]]:
    """Output bit t of 2 * x in GF(2^8): the input bits it is the XOR of."""
    return [[s for s in range(8) if gf256_mul(2, 1 << s) >> t & 1] for t in range(8)]


def linear(b: Builder, x: Byte, sources: list[list[int]]) -> Byte:
    out = []
    for srcs in sources:
        w = x[srcs[0]]
        for s in srcs[1:]:
            w = b.xor(w, x[s])
        out.append(w)
    return out


def sub_bytes(b: Builder, xs: list[Byte]) -> list[Byte]:
    """The S-box netlist on each byte, the copies written gate by gate; its U0 is a byte's top bit,
    S0 the result's."""
    return [out[::-1] for out in b.netlist(circuits.load("sbox_bp113"), [x[::-1] for x in xs])]


def mix_column(b: Builder, col: list[Byte]) -> list[Byte]:
    xt = xtime_sources()
    t = b.xor_words(b.xor_words(col[0], col[1]), b.xor_words(col[2], col[3]))
    return [b.xor_words(b.xor_words(col[i], t), linear(b, b.xor_words(col[i], col[(i + 1) % 4]), xt))
            for i in range(4)]


def expand_key(b: Builder, key: list[Byte]) -> list[list[Byte]]:
    """The 11 round keys (16 bytes each) of FIPS-197 5.2 for Nk = 4."""
    w = [key[4 * i:4 * i + 4] for i in range(4)]
    for i in range(4, 44):
        temp = w[i - 1]
        if i % 4 == 0:
            temp = sub_bytes(b, temp[1:] + temp[:1])  # SubWord(RotWord)
            c = rcon(i // 4)
            temp[0] = [b.xor_const(temp[0][t], c >> t & 1) for t in range(8)]
        w.append([b.xor_words(p, q) for p, q in zip(w[i - 4], temp)])
    return [[x for word in w[4 * r:4 * r + 4] for x in word] for r in range(11)]


def add_round_key(b: Builder, state: list[Byte], rk: list[Byte]) -> list[Byte]:
    return [b.xor_words(s, k) for s, k in zip(state, rk)]


def aes128_circuit() -> Bristol:
    b = Builder()
    key_bits, pt_bits = b.input(128), b.input(128)
    key = [key_bits[8 * i:8 * i + 8] for i in range(16)]
    state = [pt_bits[8 * i:8 * i + 8] for i in range(16)]
    rks = expand_key(b, key)
    state = add_round_key(b, state, rks[0])
    for r in range(1, 11):
        state = shift_rows(sub_bytes(b, state))
        if r < 10:
            state = [x for c in range(4) for x in mix_column(b, state[4 * c:4 * c + 4])]
        state = add_round_key(b, state, rks[r])
    return b.finish([[w for x in state for w in x]])
