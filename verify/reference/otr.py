"""An independent, deliberately plain reference for AES-OTR (Minematsu's Offset Two-Round mode).

Written from the designer's CAESAR specification of AES-OTR (v3, and v3.1, the round-3
version; see "Versions" below), with only the AES block encryption E_K taken from
`cryptography` (ECB on single, explicitly built blocks).  Of the specification text only
its opening page (parameters, recommended sets) was at hand; the details of the algorithm
below were confirmed by reading the designer's reference C code (SUPERCOP
crypto_aead/aes128otrpv3/ref), nothing of it copied, and the published vectors decide:
this module reproduces all 190 of them.  Both ways of processing the
associated data are here: "parallel" (the PMAC-like hash; the primary recommended
variant and the one the kernels implement) and "serial" (a CBC-MAC chained into the
nonce mask); the designer's published vectors cover both.

Parameters (spec section 1.1)
-----------------------------
* key: 16, 24 or 32 bytes (AES-128/192/256); the vectors cover 128 and 256;
* nonce N: 1 to 15 bytes (8..120 bits; never empty, never a full block);
* tag length tau: 4 to 16 bytes (16 recommended, and what the kernels produce);
* the associated data A and the message M: any byte strings, both may be empty.

Notation
--------
Blocks are 16 bytes, read big-endian as elements of GF(2^128) with the polynomial
x^128 + x^7 + x^2 + x + 1: the first byte holds the coefficients of x^127..x^120.
"2X" is X times x (shift the 128-bit integer left by one; if a bit falls off the top,
XOR the low part of the polynomial, 0x87, into the last byte), "3X" = 2X xor X,
"3^2 X" = 3(3X) = 4X xor X, and "7X" = 4X xor 2X xor X.
ozp(X), for |X| < 16 bytes, is X || 0x80 || zeros (one-zero padding); a full block is
left alone.  msb_k(X) is the first k bytes of X.

Step by step (encryption of M under nonce N with associated data A)
-------------------------------------------------------------------
1. Key only (belongs in the expanded-key struct): the AES round keys, and
   Q = E_K(0^128), the mask seed of the AD hash.
2. Nonce block: Nonce = [7 bits: (8*tau) mod 128] || 0...0 || 1 || N, 16 bytes in all.
   In bytes: byte 0 = ((8*tau) mod 128) << 1, then zero bytes, then N right-aligned in
   the last len(N) bytes, with bit 0 of the byte just before N set (for a 15-byte N that
   byte is byte 0 itself).  A 16-byte tag gives 0 in the tag field, so a 12-byte nonce N
   gives 00 00 00 01 || N.  The tag field separates tag lengths: the same (K, N) with
   another tau is an unrelated encryption, not a truncation.
3. L = E_K(Nonce) (parallel), and L* = 3L.  This is the only per-message AES call that
   must precede the message blocks; it does not depend on A in the parallel variant, so
   the AD hash and the message can run side by side.  (Serial variant: L = 2(E_K(Nonce)
   xor TA), so the AD hash must finish first.)
4. Split M into 16-byte blocks M[1..m], the last one 1..16 bytes (an empty M is one empty
   block, m = 1), and pair them into chunks (M[2i-1], M[2i]), i = 1..ceil(m/2).  Chunk i
   uses the offsets L_i = 2^(i-1) L and L*_i = 2^(i-1) 3L.  Going from chunk i to i+1 is
   one doubling of each (L_{i+1} = 2 L_i = L_i xor L*_i, L*_{i+1} = 2 L*_i); the offsets
   of chunks i..i+k-1 are 2^0..2^(k-1) times (L_i, L*_i), so a kernel handling k chunks a
   batch derives them from the batch's first pair with k-1 doublings (or a table of
   2^j L, 2^j 3L) and advances by 2^k afterwards.
5. Every chunk but the last (all the full 32-byte chunks before the final 1..32 bytes)
   is a 2-round Feistel:
       C[2i-1] = E_K(L_i  xor M[2i-1]) xor M[2i]
       C[2i]   = E_K(L*_i xor C[2i-1]) xor M[2i-1]
       Sigma  ^= M[2i]          (checksum of the even blocks only: an odd block reaches
                                 the tag through the Feistel, so changing M[2i-1] alone
                                 changes C but not T -- decryption still fails, since a
                                 changed C garbles the recovered M[2i])
   The first-round calls of all chunks are independent of each other (parallel); each
   second round needs only its own chunk's first round, so a kernel pipelines k first
   rounds, then k second rounds.  Decryption runs the rounds the other way:
       M[2i-1] = E_K(L*_i xor C[2i-1]) xor C[2i];   M[2i] = E_K(L_i xor M[2i-1]) xor C[2i-1]
   (its first rounds are just as independent) -- AES decryption is never needed.
6. The last chunk (index l = ceil(m/2), offsets L_l and L*_l), with r = 1..32 bytes left
   (r = 0 only for an empty message):
   * m odd (r <= 16, including the empty message): Z = E_K(L_l); C[m] = msb_r(Z) xor M[m];
     Sigma ^= ozp(M[m]); La = L_l.
   * m even (16 < r <= 32, a Feistel with the final swap):
       Z      = E_K(L_l xor M[m-1])
       C[m]   = msb_{r-16}(Z) xor M[m]
       C[m-1] = E_K(L*_l xor ozp(C[m])) xor M[m-1]
       Sigma ^= Z xor ozp(C[m])
       La     = L*_l
     (decryption: C[m] is known, so M[m-1] comes first, then Z, then M[m]).
   Note the swap: for a full last chunk the even case yields the normal chunk's two
   ciphertext blocks in the opposite order (see the 32- and 33-byte vectors).  In the odd
   case Z = E_K(L_l) depends on the nonce and the length only, so it can join the batch
   of first rounds.
7. TE = E_K(Sigma xor c La), with c = 7 if the last block M[m] is a full 16 bytes
   (r = 16 or 32), else c = 3^2 (partial last block, and the empty message).
8. Associated data, parallel variant: if A is empty, TA = 0^128 (no AES call).  Else
   split A into blocks A[1..a], the last 1..16 bytes, and
       TA = E_K( E_K(Q xor A[1]) xor E_K(2Q xor A[2]) xor ... xor E_K(2^(a-2) Q xor A[a-1])
                 xor ozp(A[a]) xor c' 2^(a-1) Q )
   with c' = 3 if A[a] is partial, c' = 3^2 if it is a full block.  All a-1 block
   encryptions are independent (vectorize like ECB); their masks 2^j Q come from Q alone,
   so with the key fixed a kernel can keep 2^0..2^(k-1) Q with the key.
   Serial variant: TA = E_K(CBC_K(A[1..a-1]) xor ozp(A[a]) xor c'' Q), the CBC-MAC chain
   starting from 0^128, with c'' = 2 (partial A[a]) or 4 (full); TA = 0 for an empty A.
9. Tag: parallel T = msb_tau(TE xor TA); serial T = msb_tau(TE) (TA already went into L).
   Decryption recomputes T from the recovered plaintext and compares (constant time in a
   kernel); on a mismatch the C ABI returns -1 and zeroes the output.

Versions
--------
The designer's published vectors (verify/data/otr_vectors.txt) and the reference code that
produced them are labelled "AES-OTR v3"; the algorithm above reproduces all of them.  The
document titled v3.1 (the round-3 submission) was not among the sources this project could
consult (only the opening page of the v3 document, with the parameter ranges above).  This
module treats v3.1 as computing the same function as v3: a later SUPERCOP snapshot still
carries the aes*otr{p,s}v3 implementations with the same reference algorithm and an
extended vector file that agrees with the earlier one.  That is an inference, recorded
here so that a reader with the v3.1 text checks it.
"""
from __future__ import annotations

import hmac
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

BLOCK = 16
CHUNK = 2 * BLOCK
KEY_SIZES = (16, 24, 32)
NONCE_SIZES = range(1, 16)
TAG_SIZES = range(4, 17)
AdMode = Literal["parallel", "serial"]

# GF(2^128) modulus x^128 + x^7 + x^2 + x + 1; doubling folds the low terms back in.
POLYNOMIAL_LOW_EXPONENTS = (7, 2, 1, 0)
REDUCTION = sum(1 << e for e in POLYNOMIAL_LOW_EXPONENTS)     # 0x87
MASK128 = (1 << 128) - 1

VECTOR_FILE = Path(__file__).parent.parent / "data" / "otr_vectors.txt"


# ---------------------------------------------------------------- blocks and GF(2^128)


def xor(a: bytes, b: bytes) -> bytes:
    """Bytewise XOR over the shorter of the two (msb_k(a) xor b when a is longer)."""
    return bytes(p ^ q for p, q in zip(a, b))


def ozp(part: bytes) -> bytes:
    """One-zero padding to a block; a full block is returned as it is."""
    if len(part) > BLOCK:
        raise ValueError("ozp takes at most one block")
    if len(part) == BLOCK:
        return part
    return part + b"\x80" + bytes(BLOCK - len(part) - 1)


def double(x: bytes) -> bytes:
    """2X: multiplication by x, big-endian blocks, modulo x^128 + x^7 + x^2 + x + 1."""
    v = int.from_bytes(x, "big") << 1
    if v >> 128:
        v = (v & MASK128) ^ REDUCTION
    return v.to_bytes(BLOCK, "big")


def triple(x: bytes) -> bytes:
    """3X = 2X xor X."""
    return xor(double(x), x)


def times_three_squared(x: bytes) -> bytes:
    """3^2 X = 3(3X), which over GF(2) is 4X xor X."""
    return triple(triple(x))


def times_seven(x: bytes) -> bytes:
    """7X = 4X xor 2X xor X."""
    two = double(x)
    return xor(xor(double(two), two), x)


def split_blocks(data: bytes) -> list[bytes]:
    """16-byte blocks, the last one 1..16 bytes; an empty input is one empty block."""
    if not data:
        return [b""]
    return [data[i:i + BLOCK] for i in range(0, len(data), BLOCK)]


# ---------------------------------------------------------------- AES and per-key / per-nonce values


def aes_encrypt_block(key: bytes, block: bytes) -> bytes:
    """E_K on one 16-byte block (AES from `cryptography`, ECB on exactly one block)."""
    enc = Cipher(algorithms.AES(key), modes.ECB()).encryptor()
    return enc.update(block) + enc.finalize()


def ad_mask_seed(key: bytes) -> bytes:
    """Q = E_K(0^128): depends on the key alone, so a kernel keeps it with the round keys."""
    return aes_encrypt_block(key, bytes(BLOCK))


def nonce_block(nonce: bytes, taglen: int) -> bytes:
    """Format(tau, N) = [(8 tau) mod 128 in 7 bits] || 0* || 1 || N, one block."""
    check_nonce_and_tag(nonce, taglen)
    block = bytearray(BLOCK)
    block[BLOCK - len(nonce):] = nonce
    block[0] = ((8 * taglen) % (8 * BLOCK)) << 1      # the 7-bit tag field
    block[BLOCK - len(nonce) - 1] |= 0x01             # the 1 bit that ends the zero run
    return bytes(block)


def check_nonce_and_tag(nonce: bytes, taglen: int) -> None:
    if len(nonce) not in NONCE_SIZES:
        raise ValueError(f"AES-OTR nonces are 1..15 bytes, not {len(nonce)}")
    if taglen not in TAG_SIZES:
        raise ValueError(f"AES-OTR tags are 4..16 bytes, not {taglen}")


def check_key(key: bytes) -> None:
    if len(key) not in KEY_SIZES:
        raise ValueError(f"AES keys are 16, 24 or 32 bytes, not {len(key)}")


def chunk_offsets(l_base: bytes, index: int) -> tuple[bytes, bytes]:
    """(L_i, L*_i) = (2^(i-1) L, 2^(i-1) 3L) for chunk i = 1, 2, ... (slow: i-1 doublings)."""
    first, second = l_base, triple(l_base)
    for _ in range(index - 1):
        first, second = double(first), double(second)
    return first, second


# ---------------------------------------------------------------- associated data


def ad_hash_parallel(key: bytes, aad: bytes) -> bytes:
    """TA of the parallel variant (PMAC-like; 0^128 for an empty A)."""
    if not aad:
        return bytes(BLOCK)
    *whole, last = split_blocks(aad)
    mask = ad_mask_seed(key)
    acc = ozp(last)
    for block in whole:                    # independent calls; masks 2^j Q
        acc = xor(acc, aes_encrypt_block(key, xor(mask, block)))
        mask = double(mask)
    final_mask = times_three_squared(mask) if len(last) == BLOCK else triple(mask)
    return aes_encrypt_block(key, xor(acc, final_mask))


def ad_hash_serial(key: bytes, aad: bytes) -> bytes:
    """TA of the serial variant (CBC-MAC; 0^128 for an empty A)."""
    if not aad:
        return bytes(BLOCK)
    *whole, last = split_blocks(aad)
    chain = bytes(BLOCK)
    for block in whole:
        chain = aes_encrypt_block(key, xor(chain, block))
    q = ad_mask_seed(key)
    final_mask = double(double(q)) if len(last) == BLOCK else double(q)
    return aes_encrypt_block(key, xor(xor(chain, ozp(last)), final_mask))


# ---------------------------------------------------------------- the message: 2-round Feistel chunks


@dataclass(frozen=True)
class CoreResult:
    """The output of the encryption/decryption core for one message."""

    output: bytes          # ciphertext (encrypting) or plaintext (decrypting)
    te: bytes              # E_K(Sigma xor c La)
    tag_mask: bytes        # c La, the published vectors' "(3^2 or 7)La"


def _full_chunk(key: bytes, first: bytes, second: bytes, offsets: tuple[bytes, bytes],
                decrypting: bool) -> tuple[bytes, bytes, bytes]:
    """One 32-byte chunk through the Feistel; returns (out1, out2, even plaintext block)."""
    l_i, l_star = offsets
    if decrypting:
        m1 = xor(aes_encrypt_block(key, xor(l_star, first)), second)
        m2 = xor(aes_encrypt_block(key, xor(l_i, m1)), first)
        return m1, m2, m2
    c1 = xor(aes_encrypt_block(key, xor(l_i, first)), second)
    c2 = xor(aes_encrypt_block(key, xor(l_star, c1)), first)
    return c1, c2, second


def _last_chunk(key: bytes, rest: bytes, offsets: tuple[bytes, bytes],
                decrypting: bool) -> tuple[bytes, bytes, bytes]:
    """The final 0..32 bytes; returns (output, its contribution to Sigma, La)."""
    l_i, l_star = offsets
    if len(rest) <= BLOCK:                                # odd number of blocks
        z = aes_encrypt_block(key, l_i)
        out = xor(z, rest)
        plain = out if decrypting else rest
        return out, ozp(plain), l_i
    first, second = rest[:BLOCK], rest[BLOCK:]
    if decrypting:                                        # first = C[m-1], second = C[m]
        padded_c = ozp(second)
        m1 = xor(aes_encrypt_block(key, xor(l_star, padded_c)), first)
        z = aes_encrypt_block(key, xor(l_i, m1))
        return m1 + xor(z, second), xor(z, padded_c), l_star
    z = aes_encrypt_block(key, xor(l_i, first))
    c_last = xor(z, second)
    padded_c = ozp(c_last)
    c1 = xor(aes_encrypt_block(key, xor(l_star, padded_c)), first)
    return c1 + c_last, xor(z, padded_c), l_star


def otr_core(key: bytes, l_base: bytes, data: bytes, decrypting: bool = False) -> CoreResult:
    """EF_K / DF_K: the message through the chunks with offsets from L, and TE."""
    full_chunks = (len(data) - 1) // CHUNK if data else 0
    l_i, l_star = l_base, triple(l_base)
    checksum = bytes(BLOCK)
    out = bytearray()
    for j in range(full_chunks):
        chunk = data[j * CHUNK:(j + 1) * CHUNK]
        o1, o2, even_plain = _full_chunk(key, chunk[:BLOCK], chunk[BLOCK:], (l_i, l_star), decrypting)
        out += o1 + o2
        checksum = xor(checksum, even_plain)
        l_i, l_star = double(l_i), double(l_star)        # 2^(i-1) L and 2^(i-1) 3L for the next chunk
    rest = data[full_chunks * CHUNK:]
    tail, contribution, la = _last_chunk(key, rest, (l_i, l_star), decrypting)
    out += tail
    checksum = xor(checksum, contribution)
    last_block_full = len(rest) in (BLOCK, CHUNK)
    tag_mask = times_seven(la) if last_block_full else times_three_squared(la)
    return CoreResult(bytes(out), aes_encrypt_block(key, xor(checksum, tag_mask)), tag_mask)


# ---------------------------------------------------------------- AES-OTR encryption / decryption


def _run(key: bytes, nonce: bytes, aad: bytes, data: bytes, taglen: int, ad_mode: AdMode,
         decrypting: bool) -> tuple[CoreResult, bytes]:
    """(core result, tag) for either direction."""
    check_key(key)
    encrypted_nonce = aes_encrypt_block(key, nonce_block(nonce, taglen))
    if ad_mode == "parallel":
        core = otr_core(key, encrypted_nonce, data, decrypting)
        return core, xor(core.te, ad_hash_parallel(key, aad))[:taglen]
    if ad_mode == "serial":
        l_base = double(xor(encrypted_nonce, ad_hash_serial(key, aad)))
        core = otr_core(key, l_base, data, decrypting)
        return core, core.te[:taglen]
    raise ValueError(f"ad_mode is 'parallel' or 'serial', not {ad_mode!r}")


def otr_encrypt(key: bytes, nonce: bytes, aad: bytes, pt: bytes, taglen: int = 16,
                ad_mode: AdMode = "parallel") -> tuple[bytes, bytes]:
    """(ciphertext, tag); the ciphertext is as long as the plaintext."""
    core, tag = _run(key, nonce, aad, pt, taglen, ad_mode, decrypting=False)
    return core.output, tag


def otr_decrypt(key: bytes, nonce: bytes, aad: bytes, ct: bytes, tag: bytes,
                ad_mode: AdMode = "parallel") -> bytes | None:
    """The plaintext, or None when the tag (of len(tag) bytes, 4..16) does not verify."""
    core, expected = _run(key, nonce, aad, ct, len(tag), ad_mode, decrypting=True)
    return core.output if hmac.compare_digest(expected, tag) else None


def otr_tag_mask(key: bytes, nonce: bytes, msglen: int, taglen: int = 16,
                 ad_mode: AdMode = "parallel", aad: bytes = b"") -> bytes:
    """c La for a message of `msglen` bytes (the vectors' "(3^2 or 7)La"); depends on the
    length only, not on the message content."""
    core, _ = _run(key, nonce, aad, bytes(msglen), taglen, ad_mode, decrypting=False)
    return core.tag_mask


# ---------------------------------------------------------------- the designer's published vectors


@dataclass(frozen=True)
class OtrVector:
    """One published case: `name` as the designer labels it (e.g. "M17B-H1B")."""

    suite: str
    name: str
    ad_mode: AdMode
    key: bytes
    nonce: bytes
    aad: bytes
    plaintext: bytes
    ciphertext: bytes
    tag: bytes
    tag_mask: bytes | None          # published for some cases only


_LINE = re.compile(r"^([A-Za-z]+)\s*=\s*([0-9a-fA-F]*|parallel|serial)\s*$")
_SUITE_FIELDS = ("Key", "Nonce", "Variant")
_CASE_FIELDS = ("AD", "PT", "CT", "Tag")


def _case(suite: str, fields: dict[str, str], case: dict[str, str]) -> OtrVector:
    missing = [f for f in _SUITE_FIELDS if f not in fields] + [f for f in _CASE_FIELDS if f not in case]
    if missing:
        raise ValueError(f"{suite} {case.get('Case')}: missing {', '.join(missing)}")
    mask = case.get("TagMask")
    return OtrVector(suite, case["Case"], fields["Variant"], bytes.fromhex(fields["Key"]),  # type: ignore[arg-type]
                     bytes.fromhex(fields["Nonce"]), bytes.fromhex(case["AD"]), bytes.fromhex(case["PT"]),
                     bytes.fromhex(case["CT"]), bytes.fromhex(case["Tag"]),
                     bytes.fromhex(mask) if mask else None)


def parse_vectors(text: str) -> list[OtrVector]:
    """Sections "[suite]" set Key/Nonce/Variant; each "Case = name" starts a record."""
    vectors: list[OtrVector] = []
    suite, fields, case = "", {}, {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            if case:
                vectors.append(_case(suite, fields, case))
            suite, fields, case = line[1:-1], {}, {}
            continue
        name, _, value = (part.strip() for part in line.partition("="))
        if name == "Case":
            if case:
                vectors.append(_case(suite, fields, case))
            case = {"Case": value}
        elif _LINE.match(line) is None:
            raise ValueError(f"line {number}: not 'Name = hex': {raw!r}")
        elif name in _SUITE_FIELDS and not case:
            fields[name] = value
        else:
            case[name] = value
    if case:
        vectors.append(_case(suite, fields, case))
    return vectors


def load_vectors(path: Path = VECTOR_FILE) -> list[OtrVector]:
    return parse_vectors(path.read_text(encoding="ascii"))
