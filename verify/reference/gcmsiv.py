"""An independent, deliberately slow reference for POLYVAL and AES-GCM-SIV (RFC 8452).

Written from the RFC, with only AES itself taken from `cryptography` (aes.py):

* POLYVAL (section 3) two ways: directly, as dot(a, b) = a*b*x^-128 modulo
  x^128 + x^127 + x^126 + x^121 + 1 over little-endian blocks; and through the RFC's
  relation to GHASH (Appendix A) with mulX_GHASH and ByteReverse (gcm.py's GHASH
  arithmetic). `polyval` checks the two agree on every call it is given.
* AES-GCM-SIV (section 4): per-nonce key derivation, POLYVAL over AAD || plaintext ||
  lengths, the tag, and CTR with a 32-bit little-endian counter in the first four bytes
  of the block.

Tested against `cryptography`'s AESGCMSIV and the RFC's Appendix A example
(tests/test_verify_aead.py); the verifier uses it for POLYVAL alone.
"""
from __future__ import annotations

from aesgen.verify.reference.aes import aes_ecb
from aesgen.verify.reference.gcm import BLOCK, AuthenticationError, blocks, gf_mul, mulx_ghash, pad16, xor

P_POLYVAL = (1 << 128) | (1 << 127) | (1 << 126) | (1 << 121) | 1


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
    for blk in blocks(data):
        s = dot(xor(s, blk), h)
    return s


def polyval_via_ghash(h: bytes, data: bytes, acc: bytes = bytes(16)) -> bytes:
    """RFC 8452 Appendix A: POLYVAL(H, X..) = ByteReverse(GHASH(mulX_GHASH(ByteReverse(H)), ByteReverse(X)..))."""
    hg = mulx_ghash(h[::-1])
    y = acc[::-1]
    for blk in blocks(data):
        y = gf_mul(xor(y, blk[::-1]), hg)
    return y[::-1]


def polyval(h: bytes, data: bytes, acc: bytes = bytes(16)) -> bytes:
    """POLYVAL continued from `acc`, computed both ways; raises if they ever disagree."""
    a = polyval_direct(h, data, acc)
    b = polyval_via_ghash(h, data, acc)
    if a != b:  # pragma: no cover - a broken reference must not pass silently
        raise AssertionError(f"POLYVAL direct {a.hex()} != via GHASH {b.hex()}")
    return a


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
    return xor(data, aes_ecb(enc_key, ctrs))


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
