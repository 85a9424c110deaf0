"""GF(2^128): constants derived from the polynomials, and the GHASH/POLYVAL kernels.

Expected values come from an independent bit-by-bit GHASH (SP 800-38D's
algorithm in GCM bit order), `cryptography`'s AES for H, and RFC 8452's
published POLYVAL example.
"""
from __future__ import annotations

import ctypes
import random

import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from aesgen import gf128
from aesgen.kernels import build_function
from aesgen.simulate import Machine, call
from aesgen.spec import KernelSpec

from _support import load_generated

RFC8452_H = bytes.fromhex("25629347589242761d31f826ba4b757b")
RFC8452_X = bytes.fromhex("4f4f95668c83dfb6401762bb2d01a262d1a24ddd2721d006bbe45f20d3c9f362")
RFC8452_POLYVAL = bytes.fromhex("f7a3b47b846119fae5b7866cf5e5b77e")


def gcm_mul(x: int, y: int) -> int:
    """SP 800-38D Algorithm 1 (bit 0 is the most significant bit of the block)."""
    r = 0xE1 << 120
    z, v = 0, y
    for i in range(127, -1, -1):
        if (x >> i) & 1:
            z ^= v
        v = (v >> 1) ^ (r if v & 1 else 0)
    return z


def ghash_ref(h: bytes, acc: bytes, data: bytes) -> bytes:
    hh, y = int.from_bytes(h, "big"), int.from_bytes(acc, "big")
    for i in range(0, len(data), 16):
        y = gcm_mul(y ^ int.from_bytes(data[i:i + 16], "big"), hh)
    return y.to_bytes(16, "big")


def polyval_ref(h: bytes, acc: bytes, data: bytes) -> bytes:
    """RFC 8452's relation: POLYVAL(H, X) = rev(GHASH(mulX_GHASH(rev(H)), rev(X_i)))."""
    hh = int.from_bytes(h[::-1], "big")
    hx = (hh >> 1) ^ (0xE1 << 120 if hh & 1 else 0)  # mulX_GHASH
    blocks = b"".join(data[i:i + 16][::-1] for i in range(0, len(data), 16))
    return ghash_ref(hx.to_bytes(16, "big"), acc[::-1], blocks)[::-1]


def test_constants_are_derived_from_the_polynomial():
    assert gf128.x128_mod_p() == 0xC2000000000000000000000000000001
    assert gf128.fold_constant() == 0xC200000000000000
    assert gf128.ghash_polyval_relation_holds()
    # x * x^-128 * x^127 == 1: the Montgomery inverse is right.
    assert gf128.polyval_mod(gf128.clmul(gf128.pow_x_inverse_128(), 1 << 127) << 1) == 1


def test_python_polyval_matches_rfc8452_and_the_ghash_relation():
    h, s = int.from_bytes(RFC8452_H, "little"), 0
    for i in (0, 16):
        s = gf128.dot(s ^ int.from_bytes(RFC8452_X[i:i + 16], "little"), h)
    assert s.to_bytes(16, "little") == RFC8452_POLYVAL
    assert polyval_ref(RFC8452_H, bytes(16), RFC8452_X) == RFC8452_POLYVAL


CONFIGS = [("sse", 128, 2, False), ("avx", 128, 4, True), ("avx2", 256, 2, False), ("avx2", 256, 3, True),
           ("avx512", 128, 4, False), ("avx512", 256, 3, True), ("avx512", 512, 2, False), ("avx512", 512, 4, True)]


def _lengths(spec: KernelSpec) -> list[int]:
    k = spec.ghash_blocks
    return sorted({0, 1, 2, 3, k - 1, k, k + 1, 2 * k + 3})


@pytest.mark.parametrize("isa,width,depth,karatsuba", CONFIGS)
def test_simulated_kernels_match_the_references(isa, width, depth, karatsuba):
    rng = random.Random(width * 100 + depth)
    spec = KernelSpec(("ghash", "polyval"), isa, width, depth, karatsuba=karatsuba)
    m = Machine(spec, size=1 << 21)
    for bits in (128, 192, 256):
        key = rng.randbytes(bits // 8)
        gk = m.alloc(spec.gcm_key_bytes)
        assert call(m, build_function(spec, "gcm_set_key"), m.alloc(key), bits, gk) == 0
        h = Cipher(algorithms.AES(key), modes.ECB()).encryptor().update(bytes(16))
        for n in _lengths(spec):
            data, acc = rng.randbytes(16 * n), rng.randbytes(16)
            da, aa = m.alloc(data or b"\0"), m.alloc(acc)
            call(m, build_function(spec, "ghash"), gk, aa, da, n)
            assert m.read(aa, 16) == ghash_ref(h, acc, data), (bits, n)
            hp = rng.randbytes(16)
            m.write(aa, acc)
            call(m, build_function(spec, "polyval"), m.alloc(hp), aa, da, n)
            assert m.read(aa, 16) == polyval_ref(hp, acc, data), (bits, n)


@pytest.mark.parametrize("isa,width,depth,karatsuba", CONFIGS)
def test_machine_code_matches_the_references(isa, width, depth, karatsuba):
    spec = KernelSpec(("ghash", "polyval"), isa, width, depth, karatsuba=karatsuba)
    lib = load_generated(spec)
    rng = random.Random(depth)
    raw = ctypes.create_string_buffer(spec.gcm_key_bytes + 64)
    gk = ctypes.c_void_p((ctypes.addressof(raw) + 63) // 64 * 64)
    set_key, ghash = getattr(lib, f"{spec.prefix}_gcm_set_key"), getattr(lib, f"{spec.prefix}_ghash")
    polyval = getattr(lib, f"{spec.prefix}_polyval")
    for bits in (128, 192, 256):
        key = rng.randbytes(bits // 8)
        assert set_key(key, bits, gk) == 0
        h = Cipher(algorithms.AES(key), modes.ECB()).encryptor().update(bytes(16))
        for n in range(0, 3 * spec.ghash_blocks + 4):
            data, acc = rng.randbytes(16 * n), rng.randbytes(16)
            buf = ctypes.create_string_buffer(acc, 16)
            ghash(gk, buf, data, ctypes.c_size_t(n))
            assert buf.raw[:16] == ghash_ref(h, acc, data), (bits, n)
            hp = rng.randbytes(16)
            buf = ctypes.create_string_buffer(acc, 16)
            polyval(hp, buf, data, ctypes.c_size_t(n))
            assert buf.raw[:16] == polyval_ref(hp, acc, data), (bits, n)
    assert set_key(bytes(16), 100, gk) == -1
    buf = ctypes.create_string_buffer(bytes(16), 16)
    polyval(RFC8452_H, buf, RFC8452_X, ctypes.c_size_t(2))
    assert buf.raw[:16] == RFC8452_POLYVAL
