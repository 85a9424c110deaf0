"""An independent, deliberately slow reference for GHASH, POLYVAL, AES-GCM and AES-GCM-SIV.

Everything here is written from the standards, bit by bit, with only AES
itself taken from `cryptography` (ECB over explicitly built blocks):

* GF(2^128) multiplication in GCM's reflected bit order: NIST SP 800-38D,
  section 6.3, Algorithm 1 (the leftmost bit of a block is the coefficient of
  x^0; R = 11100001 || 0^120).
* GHASH (SP 800-38D, Algorithm 2), continued from an arbitrary accumulator.
* POLYVAL (RFC 8452, section 3) two ways: directly, as dot(a, b) = a*b*x^-128
  modulo x^128 + x^127 + x^126 + x^121 + 1 over little-endian blocks; and
  through the RFC's relation to GHASH (Appendix A) with mulX_GHASH and
  ByteReverse.  `polyval` checks the two agree on every call it is given.
* GCM encryption/decryption (SP 800-38D, Algorithms 3-5) with any IV length
  (J0 = GHASH of the padded IV when it is not 96 bits) and any tag length.
* AES-GCM-SIV (RFC 8452, section 4): per-nonce key derivation, POLYVAL over
  AAD || plaintext || lengths, the tag, and CTR with a 32-bit little-endian
  counter in the first four bytes of the block.

This module is tested against `cryptography`'s AESGCM/AESGCMSIV and the RFC's
Appendix A example (tests/test_verify_aead.py), and is what the verifier uses
where `cryptography` cannot be (IVs shorter than 8 or longer than 128 bytes,
GHASH and POLYVAL alone).
"""
from __future__ import annotations

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

BLOCK = 16
R_GCM = 0xE1 << 120                                   # SP 800-38D: 11100001 || 0^120
P_POLYVAL = (1 << 128) | (1 << 127) | (1 << 126) | (1 << 121) | 1
MASK128 = (1 << 128) - 1


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


def _xor(a: bytes, b: bytes) -> bytes:
    return bytes(p ^ q for p, q in zip(a, b))


def _blocks(data: bytes) -> list[bytes]:
    if len(data) % BLOCK:
        raise ValueError("GHASH/POLYVAL input must be whole blocks")
    return [data[i:i + BLOCK] for i in range(0, len(data), BLOCK)]


def pad16(data: bytes) -> bytes:
    return data + bytes(-len(data) % BLOCK)


def ghash(h: bytes, data: bytes, acc: bytes = bytes(16)) -> bytes:
    """GHASH_H over whole blocks, continued from `acc` (Y_i = (Y_{i-1} xor X_i) * H)."""
    y = acc
    for blk in _blocks(data):
        y = gf_mul(_xor(y, blk), h)
    return y


# ---------------------------------------------------------------- POLYVAL (RFC 8452)


def _clmul(a: int, b: int) -> int:
    r = 0
    while b:
        if b & 1:
            r ^= a
        a <<= 1
        b >>= 1
    return r


def dot(a: bytes, b: bytes) -> bytes:
    """RFC 8452 dot(a, b) = a * b * x^-128 mod x^128 + x^127 + x^126 + x^121 + 1 (LE blocks)."""
    r = _clmul(int.from_bytes(a, "little"), int.from_bytes(b, "little"))
    for i in range(255, 127, -1):          # reduce modulo the POLYVAL polynomial
        if (r >> i) & 1:
            r ^= P_POLYVAL << (i - 128)
    for _ in range(128):                   # times x^-1, 128 times (P has a constant term)
        if r & 1:
            r ^= P_POLYVAL
        r >>= 1
    return r.to_bytes(16, "little")


def polyval_direct(h: bytes, data: bytes, acc: bytes = bytes(16)) -> bytes:
    """POLYVAL(H, X_1..X_s) continued from `acc`: S_j = dot(S_{j-1} xor X_j, H)."""
    s = acc
    for blk in _blocks(data):
        s = dot(_xor(s, blk), h)
    return s


def polyval_via_ghash(h: bytes, data: bytes, acc: bytes = bytes(16)) -> bytes:
    """RFC 8452 Appendix A: POLYVAL(H, X..) = ByteReverse(GHASH(mulX_GHASH(ByteReverse(H)), ByteReverse(X)..))."""
    hg = mulx_ghash(h[::-1])
    y = acc[::-1]
    for blk in _blocks(data):
        y = gf_mul(_xor(y, blk[::-1]), hg)
    return y[::-1]


def polyval(h: bytes, data: bytes, acc: bytes = bytes(16)) -> bytes:
    """POLYVAL continued from `acc`, computed both ways; raises if they ever disagree."""
    a = polyval_direct(h, data, acc)
    b = polyval_via_ghash(h, data, acc)
    if a != b:  # pragma: no cover - a broken reference must not pass silently
        raise AssertionError(f"POLYVAL direct {a.hex()} != via GHASH {b.hex()}")
    return a


# ---------------------------------------------------------------- AES (from cryptography)


def aes_ecb(key: bytes, data: bytes, decrypt: bool = False) -> bytes:
    c = Cipher(algorithms.AES(key), modes.ECB())
    ctx = c.decryptor() if decrypt else c.encryptor()
    return ctx.update(data) + ctx.finalize()


def inc32(block: bytes, k: int) -> bytes:
    """SP 800-38D inc_32 applied k times: the last 32 bits, big-endian, modulo 2^32."""
    low = (int.from_bytes(block[12:], "big") + k) & 0xFFFFFFFF
    return block[:12] + low.to_bytes(4, "big")


# ---------------------------------------------------------------- AES-GCM (SP 800-38D)


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
    return _xor(data, ks)


def gcm_mac_input(aad: bytes, ct: bytes) -> bytes:
    return pad16(aad) + pad16(ct) + (8 * len(aad)).to_bytes(8, "big") + (8 * len(ct)).to_bytes(8, "big")


def gcm_tag(key: bytes, iv: bytes, aad: bytes, ct: bytes, taglen: int = 16) -> bytes:
    h = gcm_h(key)
    j0 = gcm_j0(h, iv)
    s = ghash(h, gcm_mac_input(aad, ct))
    return _xor(aes_ecb(key, j0), s)[:taglen]


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


# ---------------------------------------------------------------- AES-GCM-SIV (RFC 8452)


def gcmsiv_keys(key: bytes, nonce: bytes) -> tuple[bytes, bytes]:
    """(message_authentication_key, message_encryption_key) for one nonce (RFC 8452 section 4)."""
    if len(key) not in (16, 32) or len(nonce) != 12:
        raise ValueError("AES-GCM-SIV needs a 16- or 32-byte key and a 12-byte nonce")
    count = 4 if len(key) == 16 else 6
    out = aes_ecb(key, b"".join(i.to_bytes(4, "little") + nonce for i in range(count)))
    halves = [out[16 * i:16 * i + 8] for i in range(count)]
    return b"".join(halves[:2]), b"".join(halves[2:])


def _siv_ctr(enc_key: bytes, tag: bytes, data: bytes) -> bytes:
    block = bytearray(tag)
    block[15] |= 0x80
    first = int.from_bytes(block[:4], "little")
    n = -(-len(data) // BLOCK)
    ctrs = b"".join(((first + i) & 0xFFFFFFFF).to_bytes(4, "little") + bytes(block[4:]) for i in range(n))
    return _xor(data, aes_ecb(enc_key, ctrs))


def _siv_tag(auth_key: bytes, enc_key: bytes, nonce: bytes, aad: bytes, pt: bytes) -> bytes:
    lengths = (8 * len(aad)).to_bytes(8, "little") + (8 * len(pt)).to_bytes(8, "little")
    s = bytearray(polyval(auth_key, pad16(aad) + pad16(pt) + lengths))
    for i in range(12):
        s[i] ^= nonce[i]
    s[15] &= 0x7F
    return aes_ecb(enc_key, bytes(s))


def gcmsiv_encrypt(key: bytes, nonce: bytes, aad: bytes, pt: bytes) -> tuple[bytes, bytes]:
    """(ciphertext, tag)."""
    auth_key, enc_key = gcmsiv_keys(key, nonce)
    tag = _siv_tag(auth_key, enc_key, nonce, aad, pt)
    return _siv_ctr(enc_key, tag, pt), tag


def gcmsiv_decrypt(key: bytes, nonce: bytes, aad: bytes, ct: bytes, tag: bytes) -> bytes:
    auth_key, enc_key = gcmsiv_keys(key, nonce)
    pt = _siv_ctr(enc_key, tag, ct)
    if _siv_tag(auth_key, enc_key, nonce, aad, pt) != tag:
        raise AuthenticationError("GCM-SIV tag mismatch")
    return pt
