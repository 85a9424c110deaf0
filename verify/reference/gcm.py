"""An independent, deliberately slow reference for GHASH and AES-GCM (NIST SP 800-38D).

Everything here is written from the standard, bit by bit, with only AES itself taken from
`cryptography` (aes.py: ECB over explicitly built blocks):

* GF(2^128) multiplication in GCM's reflected bit order: section 6.3, Algorithm 1 (the
  leftmost bit of a block is the coefficient of x^0; R = 11100001 || 0^120).
* GHASH (Algorithm 2), continued from an arbitrary accumulator.
* GCM encryption/decryption (Algorithms 3-5) with any IV length (J0 = GHASH of the padded
  IV when it is not 96 bits) and any tag length.

This module is tested against `cryptography`'s AESGCM (tests/test_verify_aead.py), and is
what the verifier uses where `cryptography` cannot be (IVs shorter than 8 or longer than
128 bytes, GHASH alone). gcmsiv.py builds POLYVAL and AES-GCM-SIV on it.
"""
from __future__ import annotations

from aesgen.verify.reference.aes import aes_ecb

BLOCK = 16
R_GCM = 0xE1 << 120                                   # SP 800-38D: 11100001 || 0^120


class AuthenticationError(ValueError):
    """The tag did not verify."""


# ---------------------------------------------------------------- GF(2^128), GCM bit order


def gf_mul(x: bytes, y: bytes) -> bytes:
    """X * Y in GF(2^128) with SP 800-38D's bit order (Algorithm 1, one bit at a time)."""
    xi = int.from_bytes(x, "big")
    z, v = 0, int.from_bytes(y, "big")
    for i in range(128):
        if (xi >> (127 - i)) & 1:          # x_i: bit i counted from the leftmost
            z ^= v
        v = (v >> 1) ^ R_GCM if v & 1 else v >> 1
    return z.to_bytes(16, "big")


def mulx_ghash(h: bytes) -> bytes:
    """H * x in GCM's representation (RFC 8452 Appendix A's mulX_GHASH)."""
    v = int.from_bytes(h, "big")
    return ((v >> 1) ^ R_GCM if v & 1 else v >> 1).to_bytes(16, "big")


def xor(a: bytes, b: bytes) -> bytes:
    return bytes(p ^ q for p, q in zip(a, b))


def blocks(data: bytes) -> list[bytes]:
    if len(data) % BLOCK:
        raise ValueError("GHASH/POLYVAL input must be whole blocks")
    return [data[i:i + BLOCK] for i in range(0, len(data), BLOCK)]


def pad16(data: bytes) -> bytes:
    return data + bytes(-len(data) % BLOCK)


def ghash(h: bytes, data: bytes, acc: bytes = bytes(16)) -> bytes:
    """GHASH_H over whole blocks, continued from `acc` (Y_i = (Y_{i-1} xor X_i) * H)."""
    y = acc
    for blk in blocks(data):
        y = gf_mul(xor(y, blk), h)
    return y


# ---------------------------------------------------------------- AES-GCM (SP 800-38D)


def inc32(block: bytes, k: int) -> bytes:
    """SP 800-38D inc_32 applied k times: the last 32 bits, big-endian, modulo 2^32."""
    low = (int.from_bytes(block[12:], "big") + k) & 0xFFFFFFFF
    return block[:12] + low.to_bytes(4, "big")


def gcm_h(key: bytes) -> bytes:
    return aes_ecb(key, bytes(16))


def gcm_j0(h: bytes, iv: bytes) -> bytes:
    if not iv:
        raise ValueError("GCM IV must not be empty")
    if len(iv) == 12:
        return iv + b"\x00\x00\x00\x01"
    return ghash(h, pad16(iv) + bytes(8) + (8 * len(iv)).to_bytes(8, "big"))


def gctr(key: bytes, icb: bytes, data: bytes) -> bytes:
    """GCTR_K(ICB, X): CTR with the 32-bit big-endian increment of the last word."""
    n = -(-len(data) // BLOCK)
    ks = aes_ecb(key, b"".join(inc32(icb, i) for i in range(n)))
    return xor(data, ks)


def gcm_mac_input(aad: bytes, ct: bytes) -> bytes:
    return pad16(aad) + pad16(ct) + (8 * len(aad)).to_bytes(8, "big") + (8 * len(ct)).to_bytes(8, "big")


def gcm_tag(key: bytes, iv: bytes, aad: bytes, ct: bytes, taglen: int = 16) -> bytes:
    h = gcm_h(key)
    j0 = gcm_j0(h, iv)
    s = ghash(h, gcm_mac_input(aad, ct))
    return xor(aes_ecb(key, j0), s)[:taglen]


def gcm_encrypt(key: bytes, iv: bytes, aad: bytes, pt: bytes, taglen: int = 16) -> tuple[bytes, bytes]:
    """(ciphertext, tag) for any IV length >= 1 byte and tag length 1..16."""
    h = gcm_h(key)
    j0 = gcm_j0(h, iv)
    ct = gctr(key, inc32(j0, 1), pt)
    return ct, gcm_tag(key, iv, aad, ct, taglen)


def gcm_decrypt(key: bytes, iv: bytes, aad: bytes, ct: bytes, tag: bytes) -> bytes:
    """The plaintext, or AuthenticationError."""
    if gcm_tag(key, iv, aad, ct, len(tag)) != tag:
        raise AuthenticationError("GCM tag mismatch")
    h = gcm_h(key)
    return gctr(key, inc32(gcm_j0(h, iv), 1), ct)
