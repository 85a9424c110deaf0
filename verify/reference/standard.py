"""The standard block-cipher modes, from `cryptography`: what a function whose record names one
(aesgen.functions.StandardMode) must compute, and the published vectors that check it.

A record that names its mode needs no reference of its own: the differential, known-answer and
smoke checks of the `block` family take everything from here. What the library has no mode for
(CTR with a 32-bit counter) keeps its own reference (verify/differential.py).
"""
from __future__ import annotations

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes as current

from aesgen.functions import StandardMode
from aesgen.verify import vectors

try:  # where cryptography >= 47 keeps CFB and OFB; the old home still has them before 49
    from cryptography.hazmat.decrepit.ciphers import modes as decrepit
except ImportError:  # pragma: no cover - older cryptography
    decrepit = current

# What a mode carries from one call to the next in its 16-byte iv (SP 800-38A): the last
# ciphertext block (CBC, CFB), or the last output of the block cipher (OFB). ECB has no iv.
NEXT_IV = {"CBC": "ciphertext", "CFB": "ciphertext", "OFB": "keystream"}
# Modes whose block cipher input is the iv chain, not the text: the text is XORed with its output.
# FIPS-197's plaintext goes in as the iv (and a zero text) to give its ciphertext.
ENCRYPTS_THE_CHAIN = ("CFB", "OFB")


def _mode(std: StandardMode, iv: bytes | None) -> object:
    cls = getattr(decrepit, std.name, None) or getattr(current, std.name)
    return cls() if std.name == "ECB" else cls(iv)


def expected(std: StandardMode, key: bytes, data: bytes, iv: bytes | None) -> tuple[bytes, bytes | None]:
    """The output for `data` and the iv the function must leave behind (None: the mode has none)."""
    if not data:
        return b"", iv
    cipher = Cipher(algorithms.AES(key), _mode(std, iv))
    ctx = cipher.decryptor() if std.decrypt else cipher.encryptor()
    out = ctx.update(data) + ctx.finalize()
    return out, next_iv(std, data, out, iv)


def next_iv(std: StandardMode, data: bytes, out: bytes, iv: bytes | None) -> bytes | None:
    """The iv after a call that turned `data` into `out` (whole blocks)."""
    if iv is None or not data:
        return iv
    carried = NEXT_IV[std.name]
    if carried == "keystream":
        return bytes(a ^ b for a, b in zip(data[-16:], out[-16:]))
    return (data if std.decrypt else out)[-16:]


def fips197_case(std: StandardMode, bits: int) -> tuple[bytes, bytes, bytes, bytes]:
    """FIPS-197 Appendix C through the mode: (key, iv, data, the output it must give)."""
    key, pt, ct = vectors.FIPS197_APPENDIX_C[bits]
    zero = bytes(16)
    if std.name in ENCRYPTS_THE_CHAIN:
        return key, pt, zero, ct
    return (key, zero, ct, pt) if std.decrypt else (key, zero, pt, ct)


def vector_files(std: StandardMode) -> tuple[vectors.VectorFile, ...]:
    """The mode's CAVP known-answer and multi-block files (every key size)."""
    return vectors.cavp(std.name)
