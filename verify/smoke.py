"""Known-answer smoke checks for exported files, as data, and the C test that runs them.

`aesgen export` writes `smoke_test.c`: for every exported file it calls the kernel
functions through the file's header alone (no aesgen, no Python) and compares with
published vectors embedded as bytes. A case is a list of buffers and calls; `SMOKE_CASES`
says which cases exercise a mode, and a mode without an entry whose functions name their
standard mode in their records gets a CAVP vector of that mode (`cases`). A mode with
neither is still compiled, linked and reported by `cpu_supported`; the README says it
has no smoke vector and that `aesgen verify` is its evidence.

Sources (data, not derived here): FIPS-197 Appendix C; NIST SP 800-38A F.2.1 and
F.5.1; McGrew and Viega, "The Galois/Counter Mode of Operation", test cases 1 and 2
(GHASH alone as the XOR of their tags); RFC 8452 Appendix A (POLYVAL) and C.1 (first
case); IEEE 1619-2007 Appendix B, vector 2; RFC 7253 Appendix A (first two cases); NIST
SP 800-38A F.1 and F.2.5 and FIPS-197 C.3 (verify/vectors.py); the AES-OTR v3 designer's
vectors (verify/data/otr_vectors.txt); Gladman's Rijndael-256/256 and Simpira-256 of zero
(verify/data/wideblock_vectors.txt). The doubling case follows the definition of
multiplication by x (IEEE 1619 section 5.2); the fixed-key hash's cases choose the input
through sigma's inverse so that the published AES pair gives the answer (see
`_fixed_key_hash_case`).
"""
from __future__ import annotations

from dataclasses import dataclass

from aesgen.functions import FUNCTIONS, MODE_FUNCTIONS, mode_of
from aesgen.verify import vectors, wideblock
from aesgen.verify.reference import standard
from aesgen.verify.reference import otr
from aesgen.verify.mpc import sigma_inverse
from aesgen.verify.reference import halfgates


@dataclass(frozen=True)
class Buf:
    """A byte buffer of a case: initial bytes (`data`, hex), or `size` zero bytes, or a
    key schedule sized by a header macro (`schedule`: e.g. "KEY_BYTES", 64-byte aligned),
    or an array of pointers to earlier buffers (`pointers`, elements `ctype *const`, the
    header's parameter type: the multi-stream functions take one pointer per stream);
    `expect`: the bytes it must hold after the calls (hex)."""

    name: str
    data: str = ""
    size: int = 0
    schedule: str = ""
    expect: str | None = None
    pointers: tuple[str, ...] = ()
    ctype: str = "uint8_t"

    @property
    def nbytes(self) -> int:
        return len(self.data) // 2 if self.data else self.size


@dataclass(frozen=True)
class Call:
    """fn(args...): a str argument names a buffer, an int is passed as is, None is NULL;
    `returns`: the int result it must give (None: void or not checked)."""

    fn: str
    args: tuple
    returns: int | None = None


@dataclass(frozen=True)
class SmokeCase:
    name: str
    buffers: tuple[Buf, ...]
    calls: tuple[Call, ...]

    @property
    def functions(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(c.fn for c in self.calls))


def _block_case(name: str, key: str, pt: str, ct: str, cipher: str = "", block: int = 16,
                schedule: str = "KEY_BYTES") -> SmokeCase:
    """Encrypt pt, decrypt it back; `cipher` prefixes the function names (e.g. "rijndael256_")."""
    bits, nblocks = len(key) * 4, len(pt) // 2 // block
    return SmokeCase(name, (
        Buf("key", key), Buf("ks", schedule=schedule), Buf("dks", schedule=schedule),
        Buf("pt", pt), Buf("ct", size=len(ct) // 2, expect=ct), Buf("back", size=len(pt) // 2, expect=pt),
    ), (
        Call(f"{cipher}set_encrypt_key", ("key", bits, "ks"), 0),
        Call(f"{cipher}ecb_encrypt", ("ks", "pt", "ct", nblocks)),
        Call(f"{cipher}set_decrypt_key", ("key", bits, "dks"), 0),
        Call(f"{cipher}ecb_decrypt", ("dks", "ct", "back", nblocks)),
    ))


SP800_38A_KEY = "2b7e151628aed2a6abf7158809cf4f3c"
SP800_38A_PT = ("6bc1bee22e409f96e93d7e117393172a" "ae2d8a571e03ac9c9eb76fac45af8e51"
                "30c81c46a35ce411e5fbc1191a0a52ef" "f69f2445df4f9b17ad2b417be66c3710")
SP800_38A_CTR = ("874d6191b620e3261bef6864990db6ce" "9806f66b7970fdff8617187bb9fffdff"
                 "5ae4df3edbd5d35e5b4f09020db03eab" "1e031dda2fbe03d1792170a0f3009cee")
SP800_38A_CBC = ("7649abac8119b246cee98e9b12e9197d" "5086cb9b507219ee95db113a917678b2"
                 "73bed6b8e3c1743b7116e69e22229516" "3ff1caa1681fac09120eca307586e1a7")

# GCM test cases 1 and 2 share K = 0 and IV = 0: their tags are E(K, J0) and
# E(K, J0) ^ GHASH(H, C || lengths), so GHASH alone is the XOR of the two published tags.
GCM_TC1_TAG = "58e2fccefa7e3061367f1d57a4e7455a"
GCM_TC2_CT = "0388dace60b6a392f328c2b971b2fe78"
GCM_TC2_TAG = "ab6e47d42cec13bdf53a67b21257bddf"
GCM_TC2_LENGTHS = (0).to_bytes(8, "big").hex() + (8 * 16).to_bytes(8, "big").hex()  # len(A), len(C) in bits


def _xor_hex(a: str, b: str) -> str:
    return bytes(x ^ y for x, y in zip(bytes.fromhex(a), bytes.fromhex(b))).hex()


# Multiplication by x in GF(2^128) mod x^128 + x^7 + x^2 + x + 1 (IEEE 1619 section 5.2,
# RFC 7253 double()): the polynomial's low terms are what a carry out of x^127 adds back.
GF128_LOW_TERMS = sum(1 << e for e in (7, 2, 1, 0))


def _times_x(block: bytes, order: str) -> bytes:
    v = int.from_bytes(block, order) << 1
    if v >> 128:
        v ^= (1 << 128) | GF128_LOW_TERMS
    return v.to_bytes(16, order)


def _doublings(start: bytes, n: int, order: str) -> str:
    out, t = [], start
    for _ in range(n):
        out.append(t)
        t = _times_x(t, order)
    return b"".join(out).hex()


TOP_BIT_LE = bytes(15) + b"\x80"  # x^127: the next doubling reduces
TOP_BIT_BE = b"\x80" + bytes(15)


def _wide_vector(fn: str) -> wideblock.Vector:
    """The one published vector a 256-bit-block kernel runs (verify/data/wideblock_vectors.txt)."""
    (v,) = wideblock.kernel_vectors(fn)
    return v


def _rijndael256_case() -> SmokeCase:
    v = _wide_vector(wideblock.ECB)
    return _block_case("Gladman's Rijndael vectors (256-bit block, 256-bit key)", v.key.hex(), v.given.hex(),
                       v.want.hex(), cipher="rijndael256_", block=32, schedule="RIJNDAEL256_KEY_BYTES")


def _simpira_case() -> SmokeCase:
    v = _wide_vector(wideblock.PERMUTE)
    return SmokeCase("Simpira-256 of zero (Gueron-Mouha reference), and back", (
        Buf("given", v.given.hex()), Buf("permuted", size=32, expect=v.want.hex()),
        Buf("back", size=32, expect=v.given.hex()),
    ), (
        Call("simpira256_permute", ("given", "permuted", 1)),
        Call("simpira256_inverse", ("permuted", "back", 1)),
    ))


def _otr_case(suite: str, case: str) -> SmokeCase:
    """A designer's AES-OTR v3 vector (verify/data/otr_vectors.txt): encrypt, then decrypt
    with the published tag; the kernels run the parallel AD hash and 16-byte tags."""
    (v,) = [v for v in otr.load_vectors() if v.suite == suite and v.name == case]
    n = len(v.plaintext)
    return SmokeCase(f"AES-OTR v3 {suite} {case} (Minematsu)", (
        Buf("key", v.key.hex()), Buf("tk", schedule="OTR_KEY_BYTES"), Buf("nonce", v.nonce.hex()),
        Buf("ad", v.aad.hex()), Buf("pt", v.plaintext.hex()), Buf("ct", size=n, expect=v.ciphertext.hex()),
        Buf("tag", size=16, expect=v.tag.hex()), Buf("back", size=n, expect=v.plaintext.hex()),
    ), (
        Call("otr_set_key", ("key", 8 * len(v.key), "tk"), 0),
        Call("otr_encrypt", ("tk", "nonce", len(v.nonce), "ad", len(v.aad), "pt", "ct", n, "tag"), 0),
        Call("otr_decrypt", ("tk", "nonce", len(v.nonce), "ad", len(v.aad), "ct", "back", n, "tag"), 0),
    ))


def _ecb_published(bits: int) -> tuple[tuple[bytes, bytes, bytes], ...]:
    """(key, plaintext, ciphertext) of one block each: FIPS-197 Appendix C, SP 800-38A F.1."""
    sp = vectors.SP800_38A_CIPHERTEXT[("ECB", bits)]
    return (vectors.FIPS197_APPENDIX_C[bits],
            (vectors.SP800_38A_KEYS[bits], vectors.SP800_38A_PLAINTEXT[:16], sp[:16]))


def _multikey_case(bits: int) -> SmokeCase:
    """Two published keys of one size in one call, one block each."""
    keys, pts, cts = (b"".join(field) for field in zip(*_ecb_published(bits)))
    n = len(keys) // (bits // 8)
    return SmokeCase(f"FIPS-197 C and SP 800-38A F.1 (AES-{bits}): {n} keys in one call", (
        Buf("keys", keys.hex()), Buf("ks", schedule=f"MULTIKEY_SCHEDULE_BYTES({n})"),
        Buf("pt", pts.hex()), Buf("ct", size=len(cts), expect=cts.hex()),
    ), (
        Call("set_encrypt_keys", ("keys", bits, n, "ks"), 0),
        Call("ecb_encrypt_multikey", ("ks", n, "pt", "ct", 1)),
    ))


def _fixed_key_hash_case(name: str, key: bytes, pt: bytes, ct: bytes) -> SmokeCase:
    """The hash is pi(sigma(x)) ^ sigma(x) with pi = AES under the key: choosing x so that
    sigma(x) is a published plaintext P (x = sigma^-1(P): xL = P[8..15], xR = P[0..7] ^
    P[8..15], verify/mpc.py) makes the published answer C ^ P, block by block."""
    x = b"".join(sigma_inverse(pt[i:i + 16]) for i in range(0, len(pt), 16))
    return SmokeCase(f"{name} through sigma: x = sigma^-1(P) hashes to C ^ P", (
        Buf("key", key.hex()), Buf("ks", schedule="KEY_BYTES"), Buf("x", x.hex()),
        Buf("hash", size=len(pt), expect=_xor_hex(ct.hex(), pt.hex())),
    ), (
        Call("set_encrypt_key", ("key", 8 * len(key), "ks"), 0),
        Call("fixed_key_hash", ("ks", "x", "hash", len(pt) // 16)),
    ))


def _halfgates_case() -> SmokeCase:
    """Two AND gates garbled under the FIPS-197 C.1 key with fixed labels (the expected tables and
    0-labels from the paper's reference, verify/reference/halfgates.py), then evaluated on the
    1-labels of both inputs: the result must be each gate's 1-label, C0 ^ delta."""
    key, gid = vectors.FIPS197_APPENDIX_C[128][0], 5
    delta = bytes(range(1, 33, 2))  # lowest bit set
    a0, b0 = [bytes(range(16 * k, 16 * k + 16)) for k in (2, 4)], [bytes(range(16 * k + 5, 16 * k + 21)) for k in (3, 5)]
    tables, c0 = halfgates.garble(key, delta, a0, b0, gid)
    one = lambda labels: b"".join(halfgates.xor(x, delta) for x in labels).hex()  # noqa: E731
    return SmokeCase("half-gates: two AND gates garbled (the paper's reference), evaluated on 1-labels", (
        Buf("key", key.hex()), Buf("ks", schedule="KEY_BYTES"), Buf("delta", delta.hex()),
        Buf("a0", b"".join(a0).hex()), Buf("b0", b"".join(b0).hex()),
        Buf("tables", size=64, expect=b"".join(tables).hex()), Buf("c0", size=32, expect=b"".join(c0).hex()),
        Buf("a1", one(a0)), Buf("b1", one(b0)), Buf("c", size=32, expect=one(c0)),
    ), (
        Call("set_encrypt_key", ("key", 128, "ks"), 0),
        Call("halfgates_garble", ("ks", "delta", "a0", "b0", gid, "tables", "c0", 2)),
        Call("halfgates_eval", ("ks", "a1", "b1", gid, "tables", "c", 2)),
    ))


def _cbc_multi_case(bits: int, streams: int) -> SmokeCase:
    """SP 800-38A F.2 (CBC encryption) cut into `streams` streams of equal length: stream s
    chains from the ciphertext block before its first (the published IV for stream 0), each
    with a schedule of its own, and its IV must end as its last ciphertext block."""
    key, ct = vectors.SP800_38A_KEYS[bits], vectors.SP800_38A_CIPHERTEXT[("CBC", bits)]
    pt, chain = vectors.SP800_38A_PLAINTEXT, vectors.SP800_38A_IV + ct
    size = len(pt) // streams
    part = lambda data, s: data[s * size:(s + 1) * size].hex()  # noqa: E731
    buffers = [Buf("key", key.hex())]
    for s in range(streams):
        buffers += [Buf(f"ks{s}", schedule="KEY_BYTES"), Buf(f"src{s}", part(pt, s)),
                    Buf(f"dst{s}", size=size, expect=part(ct, s)),
                    Buf(f"iv{s}", chain[s * size:s * size + 16].hex(), expect=ct[(s + 1) * size - 16:(s + 1) * size].hex())]
    named = lambda stem: tuple(f"{stem}{s}" for s in range(streams))  # noqa: E731
    buffers += [Buf("keys", pointers=named("ks"), ctype="const void"), Buf("srcs", pointers=named("src"), ctype="const uint8_t"),
                Buf("dsts", pointers=named("dst")), Buf("ivs", pointers=named("iv"))]
    blocks = size // 16
    return SmokeCase(f"SP 800-38A F.2 (CBC-AES{bits}) as {streams} streams of {blocks} block{'s' * (blocks > 1)}",
                     tuple(buffers), (
        *(Call("set_encrypt_key", ("key", bits, f"ks{s}"), 0) for s in range(streams)),
        Call("cbc_encrypt_multi", ("keys", "srcs", "dsts", blocks, "ivs", streams)),
    ))


SMOKE_CASES: dict[str, tuple[SmokeCase, ...]] = {
    "ecb": (
        _block_case("FIPS-197 C.1 (AES-128)", "000102030405060708090a0b0c0d0e0f",
                    "00112233445566778899aabbccddeeff", "69c4e0d86a7b0430d8cdb78070b4c55a"),
        _block_case("FIPS-197 C.3 (AES-256)", "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f",
                    "00112233445566778899aabbccddeeff", "8ea2b7ca516745bfeafc49904b496089"),
    ),
    "ctr32": (SmokeCase("SP 800-38A F.5.1 (CTR-AES128.Encrypt)", (
        Buf("key", SP800_38A_KEY), Buf("ks", schedule="KEY_BYTES"),
        Buf("ctr", "f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff", expect="f0f1f2f3f4f5f6f7f8f9fafbfcfdff03"),
        Buf("pt", SP800_38A_PT), Buf("ct", size=64, expect=SP800_38A_CTR),
    ), (
        Call("set_encrypt_key", ("key", 128, "ks"), 0),
        Call("ctr32_encrypt", ("ks", "pt", "ct", 64, "ctr")),
    )),),
    "cbc": (SmokeCase("SP 800-38A F.2.1/F.2.2 (CBC-AES128)", (
        Buf("key", SP800_38A_KEY), Buf("ks", schedule="KEY_BYTES"), Buf("dks", schedule="KEY_BYTES"),
        Buf("iv", "000102030405060708090a0b0c0d0e0f", expect=SP800_38A_CBC[-32:]),
        Buf("iv2", "000102030405060708090a0b0c0d0e0f", expect=SP800_38A_CBC[-32:]),
        Buf("pt", SP800_38A_PT), Buf("ct", size=64, expect=SP800_38A_CBC), Buf("back", size=64, expect=SP800_38A_PT),
    ), (
        Call("set_encrypt_key", ("key", 128, "ks"), 0),
        Call("cbc_encrypt", ("ks", "pt", "ct", 4, "iv")),
        Call("set_decrypt_key", ("key", 128, "dks"), 0),
        Call("cbc_decrypt", ("dks", "ct", "back", 4, "iv2")),
    )),),
    "gcm": (SmokeCase("GCM test case 2 (McGrew-Viega)", (
        Buf("key", "00" * 16), Buf("gk", schedule="GCM_KEY_BYTES"), Buf("iv", "00" * 12),
        Buf("pt", "00" * 16), Buf("ct", size=16, expect=GCM_TC2_CT),
        Buf("tag", size=16, expect=GCM_TC2_TAG), Buf("back", size=16, expect="00" * 16),
    ), (
        Call("gcm_set_key", ("key", 128, "gk"), 0),
        Call("gcm_encrypt", ("gk", "iv", 12, None, 0, "pt", "ct", 16, "tag", 16), 0),
        Call("gcm_decrypt", ("gk", "iv", 12, None, 0, "ct", "back", 16, "tag", 16), 0),
    )),),
    "ghash": (SmokeCase("GCM test cases 1 and 2 (McGrew-Viega): GHASH(H, C || lengths) = T2 ^ T1", (
        Buf("key", "00" * 16), Buf("gk", schedule="GCM_KEY_BYTES"),
        Buf("acc", "00" * 16, expect=_xor_hex(GCM_TC2_TAG, GCM_TC1_TAG)), Buf("data", GCM_TC2_CT + GCM_TC2_LENGTHS),
    ), (
        Call("gcm_set_key", ("key", 128, "gk"), 0),
        Call("ghash", ("gk", "acc", "data", 2)),
    )),),
    "gfdouble": (SmokeCase("x^127 times x^i, i < 3, mod x^128 + x^7 + x^2 + x + 1 (IEEE 1619, RFC 7253)", (
        Buf("t_le", TOP_BIT_LE.hex()), Buf("out_le", size=48, expect=_doublings(TOP_BIT_LE, 3, "little")),
        Buf("t_be", TOP_BIT_BE.hex()), Buf("out_be", size=48, expect=_doublings(TOP_BIT_BE, 3, "big")),
    ), (
        Call("gfdouble_le", ("t_le", "out_le", 3)),
        Call("gfdouble_be", ("t_be", "out_be", 3)),
    )),),
    "polyval": (SmokeCase("RFC 8452 Appendix A (POLYVAL)", (
        Buf("h", "25629347589242761d31f826ba4b757b"),
        Buf("acc", "00" * 16, expect="f7a3b47b846119fae5b7866cf5e5b77e"),
        Buf("x", "4f4f95668c83dfb6401762bb2d01a262" "d1a24ddd2721d006bbe45f20d3c9f362"),
    ), (
        Call("polyval", ("h", "acc", "x", 2)),
    )),),
    "gcm-siv": (SmokeCase("RFC 8452 C.1 (AES-128-GCM-SIV, empty message)", (
        Buf("key", "01" + "00" * 15), Buf("sk", schedule="GCMSIV_KEY_BYTES"), Buf("nonce", "03" + "00" * 11),
        Buf("none", size=1), Buf("tag", size=16, expect="dc20e2d83f25705bb49e439eca56de25"),
    ), (
        Call("gcmsiv_set_key", ("key", 128, "sk"), 0),
        Call("gcmsiv_encrypt", ("sk", "nonce", None, 0, "none", "none", 0, "tag"), 0),
        Call("gcmsiv_decrypt", ("sk", "nonce", None, 0, "none", "none", 0, "tag"), 0),
    )),),
    "xts": (SmokeCase("IEEE 1619-2007 vector 2 (XTS-AES-128)", (
        Buf("key1", "11" * 16), Buf("key2", "22" * 16), Buf("xk", schedule="XTS_KEY_BYTES"),
        Buf("xdk", schedule="XTS_KEY_BYTES"), Buf("tweak", "3333333333" + "00" * 11), Buf("pt", "44" * 32),
        Buf("ct", size=32, expect="c454185e6a16936e39334038acef838bfb186fff7480adc4289382ecd6d394f0"),
        Buf("back", size=32, expect="44" * 32),
    ), (
        Call("xts_set_key", ("key1", "key2", 128, "xk", 1), 0),
        Call("xts_encrypt", ("xk", "pt", "ct", 32, "tweak")),
        Call("xts_set_key", ("key1", "key2", 128, "xdk", 0), 0),
        Call("xts_decrypt", ("xdk", "ct", "back", 32, "tweak")),
    )),),
    "ocb": (SmokeCase("RFC 7253 Appendix A (AES-128-OCB3, cases 1 and 2)", (
        Buf("key", "000102030405060708090a0b0c0d0e0f"), Buf("ok", schedule="OCB_KEY_BYTES"),
        Buf("n1", "bbaa99887766554433221100"), Buf("none", size=1),
        Buf("tag1", size=16, expect="785407bfffc8ad9edcc5520ac9111ee6"),
        Buf("n2", "bbaa99887766554433221101"), Buf("ad", "0001020304050607"), Buf("pt", "0001020304050607"),
        Buf("ct", size=8, expect="6820b3657b6f615a"), Buf("tag2", size=16, expect="5725bda0d3b4eb3a257c9af1f8f03009"),
        Buf("back", size=8, expect="0001020304050607"),
    ), (
        Call("ocb_set_key", ("key", 128, "ok"), 0),
        Call("ocb_encrypt", ("ok", "n1", 12, None, 0, "none", "none", 0, "tag1", 16), 0),
        Call("ocb_encrypt", ("ok", "n2", 12, "ad", 8, "pt", "ct", 8, "tag2", 16), 0),
        Call("ocb_decrypt", ("ok", "n2", 12, "ad", 8, "ct", "back", 8, "tag2", 16), 0),
    )),),
    "otr": (_otr_case("P-AES128", "M63B-H31B"), _otr_case("P-AES256", "M32B-H16B")),
    "rijndael256": (_rijndael256_case(),),
    "simpira": (_simpira_case(),),
    "multikey": (_multikey_case(128), _multikey_case(256)),
    "fixed-key-hash": (
        _fixed_key_hash_case("FIPS-197 C.1 (AES-128)", *vectors.FIPS197_APPENDIX_C[128]),
        _fixed_key_hash_case("SP 800-38A F.1.5 (AES-256)", vectors.SP800_38A_KEYS[256], vectors.SP800_38A_PLAINTEXT,
                             vectors.SP800_38A_CIPHERTEXT[("ECB", 256)]),
    ),
    "cbc-multi": (_cbc_multi_case(128, 2), _cbc_multi_case(256, 4)),
    "halfgates": (_halfgates_case(),),
}


def standard_case(fn: str) -> SmokeCase:
    """A function whose record names its standard mode: the first multi-block vector of that mode's
    CAVP MMT file for AES-128, through the header (the iv on return as the mode defines it)."""
    record = FUNCTIONS[fn]
    std = record.standard
    assert std is not None, fn
    vf = next(f for f in standard.vector_files(std) if f.name.endswith("MMT128"))
    v = next(v for v in (vf.decrypt if std.decrypt else vf.encrypt) if len(v.plaintext) > 16)
    given, want = (v.ciphertext, v.plaintext) if std.decrypt else (v.plaintext, v.ciphertext)
    schedule = record.params[0].spec_attr or ""
    buffers = [Buf("key", v.key.hex()), Buf("ks", schedule=schedule.upper()), Buf("given", given.hex()),
               Buf("got", size=len(want), expect=want.hex())]
    chain = [p.name for p in record.params if p.access == "rw"]
    buffers += [Buf(c, v.iv.hex(), expect=standard.next_iv(std, given, want, v.iv).hex()) for c in chain]
    return SmokeCase(f"CAVP {vf.name} COUNT={v.count} ({fn})", tuple(buffers), (
        Call(record.key_setup or "set_encrypt_key", ("key", 8 * len(v.key), "ks"), 0),
        Call(fn, ("ks", "given", "got", len(given) // 16, *chain)),
    ))


def cases(mode: str) -> tuple[SmokeCase, ...]:
    """A mode's smoke cases: its own in SMOKE_CASES, else one per function of the mode that names its
    standard mode (a CAVP vector of that mode)."""
    if mode in SMOKE_CASES:
        return SMOKE_CASES[mode]
    return tuple(standard_case(fn) for fn in MODE_FUNCTIONS[mode]
                 if mode_of(fn) == mode and FUNCTIONS[fn].standard is not None)


def cases_for(modes: tuple[str, ...], functions: tuple[str, ...]) -> list[SmokeCase]:
    """The cases a file with these modes and functions can run."""
    return [c for m in modes if m in MODE_FUNCTIONS for c in cases(m) if set(c.functions) <= set(functions)]


# ----------------------------------------------------------------------------- C


def _bytes(hexdata: str) -> str:
    data = bytes.fromhex(hexdata)
    return "{" + ", ".join(f"0x{b:02x}" for b in data) + "}" if data else "{0}"


def _c_arg(a, prefix: str) -> str:
    if a is None:
        return "NULL"
    if isinstance(a, str):
        return a
    return str(a)


def case_c(prefix: str, case: SmokeCase) -> list[str]:
    """C statements (one block) that run a case against the functions of `prefix`."""
    lines = [f"    {{   /* {case.name} */", f'        const char *what = "{prefix}: {case.name}";']
    for b in case.buffers:
        if b.schedule:
            lines.append(f"        static _Alignas(64) uint8_t {b.name}[{prefix}_{b.schedule}];")
        elif b.pointers:
            lines.append(f"        {b.ctype} *const {b.name}[{len(b.pointers)}] = {{{', '.join(b.pointers)}}};")
        elif b.data:
            lines.append(f"        uint8_t {b.name}[{b.nbytes}] = {_bytes(b.data)};")
        else:
            lines.append(f"        uint8_t {b.name}[{max(b.nbytes, 1)}] = {{0}};")
    for fn in case.functions:  # called through pointers of the header's types (ms_abi on win64)
        lines.append(f"        __typeof__(&{prefix}_{fn}) volatile p_{fn} = {prefix}_{fn};")
    for c in case.calls:
        call = f"p_{c.fn}({', '.join(_c_arg(a, prefix) for a in c.args)})"
        if c.returns is None:
            lines.append(f"        {call};")
        else:
            lines.append(f'        expect_int(what, "{c.fn}", {call}, {c.returns});')
    for b in case.buffers:
        if b.expect is not None:
            n = len(b.expect) // 2
            lines.append(f"        static const uint8_t want_{b.name}[{max(n, 1)}] = {_bytes(b.expect)};")
            lines.append(f'        expect_bytes(what, "{b.name}", {b.name}, want_{b.name}, {n});')
    lines.append("    }")
    return lines
