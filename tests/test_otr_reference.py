"""Tests for the AES-OTR reference (verify/reference/otr.py): it must reproduce every vector the designer
published (verify/data/otr_vectors.txt), invert itself, reject any tampering, and its
GF(2^128) arithmetic must agree with a separate, schoolbook multiplication written here.
"""
from __future__ import annotations

import random
from collections import Counter

import pytest

from aesgen.verify.reference import otr

VECTORS = otr.load_vectors()

# The modulus of the specification, written out independently of the code under test.
MODULUS = 2**128 + 2**7 + 2**2 + 2 + 1


def gf_mul(a: int, b: int) -> int:
    """a * b in GF(2)[x] / MODULUS: carry-less product, then long division."""
    product = 0
    for i in range(b.bit_length()):
        if (b >> i) & 1:
            product ^= a << i
    for bit in range(product.bit_length() - 1, 127, -1):
        if (product >> bit) & 1:
            product ^= MODULUS << (bit - 128)
    return product


def gf_mul_blocks(x: bytes, constant: int) -> bytes:
    return gf_mul(int.from_bytes(x, "big"), constant).to_bytes(16, "big")


def counting_bytes(n: int) -> bytes:
    return bytes(i % 256 for i in range(n))


# ---------------------------------------------------------------- the published vectors


@pytest.mark.parametrize("vec", VECTORS, ids=lambda v: f"{v.suite}-{v.name}")
def test_reproduces_published_vector(vec: otr.OtrVector) -> None:
    ct, tag = otr.otr_encrypt(vec.key, vec.nonce, vec.aad, vec.plaintext, len(vec.tag), vec.ad_mode)
    assert ct.hex() == vec.ciphertext.hex()
    assert tag.hex() == vec.tag.hex()
    assert otr.otr_decrypt(vec.key, vec.nonce, vec.aad, vec.ciphertext, vec.tag, vec.ad_mode) == vec.plaintext


@pytest.mark.parametrize("vec", [v for v in VECTORS if v.tag_mask], ids=lambda v: f"{v.suite}-{v.name}")
def test_tag_mask_matches_published_intermediate(vec: otr.OtrVector) -> None:
    mask = otr.otr_tag_mask(vec.key, vec.nonce, len(vec.plaintext), len(vec.tag), vec.ad_mode)
    assert mask == vec.tag_mask


def test_vector_file_covers_the_cases_the_kernels_need() -> None:
    # Guards the loader too: a parser that dropped cases would shrink these counts.
    assert Counter(v.suite for v in VECTORS) == {
        "P-AES128": 45, "P-AES256": 45, "S-AES128": 45, "S-AES256": 45, "P-AES128-long": 10}
    assert {len(v.key) for v in VECTORS} == {16, 32}
    assert {v.ad_mode for v in VECTORS} == {"parallel", "serial"}
    parallel = [v for v in VECTORS if v.ad_mode == "parallel"]
    msg_lengths = {len(v.plaintext) for v in parallel}
    assert {0, 1, 16, 17, 32, 33, 48, 63, 64, 255, 256, 1023, 1024} <= msg_lengths
    assert {0, 1, 16, 31, 32, 1023} <= {len(v.aad) for v in parallel}
    assert all(v.plaintext == counting_bytes(len(v.plaintext)) for v in VECTORS)
    assert all(v.aad == counting_bytes(len(v.aad)) for v in VECTORS)


def test_parse_rejects_malformed_records() -> None:
    good = "[s]\nKey = 00\nNonce = 01\nVariant = parallel\nCase = c\nAD =\nPT =\nCT =\nTag = ff\n"
    assert len(otr.parse_vectors(good)) == 1
    with pytest.raises(ValueError, match="missing Tag"):
        otr.parse_vectors(good.replace("Tag = ff\n", ""))
    with pytest.raises(ValueError, match="line 9"):
        otr.parse_vectors(good.replace("Tag = ff", "Tag = fz"))


# ---------------------------------------------------------------- GF(2^128) doubling and friends


def test_reduction_byte_is_the_low_part_of_the_modulus() -> None:
    assert otr.REDUCTION == 0x87 == MODULUS - 2**128


@pytest.mark.parametrize("seed", range(20))
def test_small_multiples_agree_with_schoolbook_multiplication(seed: int) -> None:
    rng = random.Random(seed)
    x = rng.randbytes(16)
    if seed == 0:
        x = b"\x80" + bytes(15)                      # the top bit set: the reduction must fire
    assert otr.double(x) == gf_mul_blocks(x, 0b10)
    assert otr.triple(x) == gf_mul_blocks(x, 0b11)
    assert otr.times_three_squared(x) == gf_mul_blocks(x, gf_mul(0b11, 0b11))
    assert otr.times_seven(x) == gf_mul_blocks(x, 0b111)


def test_double_of_top_bit_folds_into_last_byte() -> None:
    assert otr.double(b"\x80" + bytes(15)) == bytes(15) + b"\x87"
    assert otr.double(bytes(15) + b"\x01") == bytes(15) + b"\x02"


@pytest.mark.parametrize("index", [1, 2, 3, 8, 33])
def test_chunk_offsets_are_powers_of_two_times_l_and_3l(index: int) -> None:
    l_base = random.Random(index).randbytes(16)
    power = 1 << (index - 1)                         # the polynomial x^(i-1)
    first, second = otr.chunk_offsets(l_base, index)
    assert first == gf_mul_blocks(l_base, power)
    assert second == gf_mul_blocks(l_base, gf_mul(power, 0b11))


# ---------------------------------------------------------------- nonce formatting and parameters


def expected_nonce_block(nonce: bytes, taglen: int) -> bytes:
    """The spec's bit string: 7 bits of (tag bits mod 128), zeros, a 1 bit, then N."""
    bits = f"{(8 * taglen) % 128:07b}" + "0" * (120 - 8 * len(nonce)) + "1"
    bits += "".join(f"{b:08b}" for b in nonce)
    assert len(bits) == 128
    return int(bits, 2).to_bytes(16, "big")


def test_nonce_block_of_the_vectors_is_the_published_one() -> None:
    # Printed as "(n2s(tau mod n,7)||00..0||1||N)" in every case of the source files.
    assert otr.nonce_block(bytes(range(12)), 16).hex() == "00000001000102030405060708090a0b"


@pytest.mark.parametrize("noncelen", [1, 7, 12, 14, 15])
@pytest.mark.parametrize("taglen", [4, 8, 12, 15, 16])
def test_nonce_block_layout(noncelen: int, taglen: int) -> None:
    nonce = random.Random(noncelen * 100 + taglen).randbytes(noncelen)
    assert otr.nonce_block(nonce, taglen) == expected_nonce_block(nonce, taglen)


@pytest.mark.parametrize(("key", "nonce", "taglen"), [
    (bytes(15), bytes(12), 16), (bytes(16), b"", 16), (bytes(16), bytes(16), 16),
    (bytes(16), bytes(12), 3), (bytes(16), bytes(12), 17)])
def test_rejects_parameters_outside_the_spec(key: bytes, nonce: bytes, taglen: int) -> None:
    with pytest.raises(ValueError):
        otr.otr_encrypt(key, nonce, b"", b"msg", taglen)


def test_tag_length_changes_the_whole_encryption() -> None:
    # tau is in the nonce block: a 12-byte tag is not the first 12 bytes of the 16-byte one.
    key, nonce, msg = bytes(range(16)), bytes(range(12)), counting_bytes(40)
    ct16, tag16 = otr.otr_encrypt(key, nonce, b"ad", msg, 16)
    ct12, tag12 = otr.otr_encrypt(key, nonce, b"ad", msg, 12)
    assert len(tag12) == 12 and tag12 != tag16[:12] and ct12 != ct16


# ---------------------------------------------------------------- round trips, tampering, structure


def random_case(rng: random.Random) -> tuple[bytes, bytes, bytes, bytes, int, otr.AdMode]:
    key = rng.randbytes(rng.choice(otr.KEY_SIZES))
    nonce = rng.randbytes(rng.choice(otr.NONCE_SIZES))
    aad = rng.randbytes(rng.randint(0, 200))
    msg = rng.randbytes(rng.randint(0, 200))
    return key, nonce, aad, msg, rng.choice(otr.TAG_SIZES), rng.choice(("parallel", "serial"))


@pytest.mark.parametrize("seed", range(60))
def test_round_trip_random_lengths(seed: int) -> None:
    key, nonce, aad, msg, taglen, mode = random_case(random.Random(seed))
    ct, tag = otr.otr_encrypt(key, nonce, aad, msg, taglen, mode)
    assert len(ct) == len(msg) and len(tag) == taglen
    assert otr.otr_decrypt(key, nonce, aad, ct, tag, mode) == msg


@pytest.mark.parametrize("msglen", [0, 1, 16, 31, 32, 33, 64, 70])
@pytest.mark.parametrize("mode", ["parallel", "serial"])
def test_every_single_bit_flip_is_rejected(msglen: int, mode: otr.AdMode) -> None:
    rng = random.Random(msglen)
    key, nonce, aad, msg = rng.randbytes(16), rng.randbytes(12), rng.randbytes(19), rng.randbytes(msglen)
    ct, tag = otr.otr_encrypt(key, nonce, aad, msg, ad_mode=mode)
    fields = {"nonce": nonce, "aad": aad, "ct": ct, "tag": tag}
    for name, value in fields.items():
        for bit in range(8 * len(value)):
            flipped = bytearray(value)
            flipped[bit // 8] ^= 1 << (bit % 8)
            args = {**fields, name: bytes(flipped)}
            assert otr.otr_decrypt(key, args["nonce"], args["aad"], args["ct"], args["tag"], mode) is None, \
                f"{name} bit {bit} accepted"


def test_truncated_or_extended_inputs_are_rejected() -> None:
    key, nonce = bytes(range(16)), bytes(range(12))
    ct, tag = otr.otr_encrypt(key, nonce, b"header", counting_bytes(50))
    assert otr.otr_decrypt(key, nonce, b"header", ct[:-1], tag) is None
    assert otr.otr_decrypt(key, nonce, b"header", ct + b"\x00", tag) is None
    assert otr.otr_decrypt(key, nonce, b"header\x00", ct, tag) is None
    assert otr.otr_decrypt(key, nonce, b"", ct, tag) is None


@pytest.mark.parametrize(("offset", "tag_moves"), [(2 * 32 + 5, False), (2 * 32 + 16 + 5, True)])
def test_chunks_before_the_last_encrypt_independently(offset: int, tag_moves: bool) -> None:
    # What a vectorized kernel relies on: a chunk's ciphertext depends on its own 32 bytes
    # (and the nonce), not on its neighbours.  The checksum Sigma sums the even blocks only,
    # so a change to an odd plaintext block moves its chunk's ciphertext but not the tag
    # (decryption of a changed ciphertext still fails: it garbles the even block too).
    key, nonce = bytes(range(16)), bytes(range(12))
    msg = bytearray(counting_bytes(32 * 5 + 7))
    ct, tag = otr.otr_encrypt(key, nonce, b"", bytes(msg))
    msg[offset] ^= 0xFF                              # a byte of chunk 3, odd or even block
    ct2, tag2 = otr.otr_encrypt(key, nonce, b"", bytes(msg))
    changed = {i // 32 for i in range(len(ct)) if ct[i] != ct2[i]}
    assert changed == {2}
    assert (tag != tag2) == tag_moves


def test_parallel_ad_leaves_the_ciphertext_alone_serial_does_not() -> None:
    key, nonce, msg = bytes(range(16)), bytes(range(12)), counting_bytes(45)
    for mode, ciphertext_moves in (("parallel", False), ("serial", True)):
        ct_a, tag_a = otr.otr_encrypt(key, nonce, b"A", msg, ad_mode=mode)
        ct_b, tag_b = otr.otr_encrypt(key, nonce, b"B", msg, ad_mode=mode)
        assert (ct_a != ct_b) == ciphertext_moves and tag_a != tag_b


def test_empty_ad_contributes_nothing_to_the_parallel_tag() -> None:
    # TA = 0 for an empty A: the tag is TE itself, E_K(Sigma xor c La).
    key, nonce, msg = bytes(range(16)), bytes(range(12)), counting_bytes(21)
    _, tag = otr.otr_encrypt(key, nonce, b"", msg)
    l_base = otr.aes_encrypt_block(key, otr.nonce_block(nonce, 16))
    assert tag == otr.otr_core(key, l_base, msg).te
