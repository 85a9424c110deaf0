"""Half-gates garbling with free-XOR and point-and-permute, written from the paper (Zahur, Rosulek,
Evans, "Two Halves Make a Whole", EUROCRYPT 2015, Fig. 2), with the tweakable hash of docs/abi.md:

    H(x, t) = pi(sigma(x) ^ t) ^ sigma(x) ^ t,  pi = AES under the fixed key (`cryptography`),
    sigma(xL || xR) = (xL ^ xR) || xL  (xL the first 8 bytes),
    gate i of a call: t = 2 (first_gate_id + i) and t' = t + 1, 64-bit little-endian in bytes 0..7.

Blocks are bytes; nothing here comes from the generator.
"""
from __future__ import annotations

from aesgen.verify.reference.aes import aes_ecb


def xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b))


def lsb(x: bytes) -> int:
    """The point-and-permute bit: bit 0 of byte 0."""
    return x[0] & 1


def sigma(x: bytes) -> bytes:
    return xor(x[:8], x[8:16]) + x[:8]


def tweak(t: int) -> bytes:
    return (t % (1 << 64)).to_bytes(8, "little") + bytes(8)


def hashes(key: bytes, items: list[tuple[bytes, int]]) -> list[bytes]:
    """H(x, t) for each (x, t), all through one ECB call."""
    ys = [xor(sigma(x), tweak(t)) for x, t in items]
    out = aes_ecb(key, b"".join(ys))
    return [xor(out[16 * k:16 * k + 16], y) for k, y in enumerate(ys)]


def garble(key: bytes, delta: bytes, a0: list[bytes], b0: list[bytes], first_gate_id: int) -> tuple[list[bytes], list[bytes]]:
    """(tables TG || TE, output 0-labels) of AND gates i with input 0-labels a0[i], b0[i]."""
    tables, c0 = [], []
    for i, (wa, wb) in enumerate(zip(a0, b0)):
        j = 2 * (first_gate_id + i)
        pa, pb = lsb(wa), lsb(wb)
        ha0, ha1, hb0, hb1 = hashes(key, [(wa, j), (xor(wa, delta), j), (wb, j + 1), (xor(wb, delta), j + 1)])
        # the garbler's half gate: the garbler knows pb
        tg = xor(xor(ha0, ha1), delta if pb else bytes(16))
        wg0 = xor(ha0, tg) if pa else ha0
        # the evaluator's half gate: the evaluator knows b
        te = xor(xor(hb0, hb1), wa)
        we0 = xor(hb0, xor(te, wa)) if pb else hb0
        tables.append(tg + te)
        c0.append(xor(wg0, we0))
    return tables, c0


def evaluate(key: bytes, a: list[bytes], b: list[bytes], first_gate_id: int, tables: list[bytes]) -> list[bytes]:
    """The evaluator's output labels of AND gates i from labels a[i], b[i] and their tables."""
    out = []
    for i, (wa, wb) in enumerate(zip(a, b)):
        j = 2 * (first_gate_id + i)
        tg, te = tables[i][:16], tables[i][16:]
        ha, hb = hashes(key, [(wa, j), (wb, j + 1)])
        wg = xor(ha, tg) if lsb(wa) else ha
        we = xor(hb, xor(te, wa)) if lsb(wb) else hb
        out.append(xor(wg, we))
    return out
