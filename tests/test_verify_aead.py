"""Tests for the GHASH / GCM / POLYVAL / GCM-SIV verifier: it must pass a correct kernel
and catch planted bugs; its reference (verify/gcm_ref.py) must agree with `cryptography`
and the published vectors.

The kernel under test is tests/fixtures/refaead.c, a plain-C (+ OpenSSL EVP) implementation
of the issue 4 ABI with its own key and context layouts; -DBUG_* variants each plant one fault.
"""
from __future__ import annotations

import random
from functools import lru_cache
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM, AESGCMSIV

from aesgen.spec import COMMON_FUNCTIONS, MODE_FUNCTIONS, KernelSpec
from aesgen.verify import CheckResult, gcm, signatures, vectors, verify_kernel
from aesgen.verify.build import fn_address, harness
from aesgen.verify.harness import trampoline
from aesgen.verify.reference import gcm as gcm_ref
from aesgen.verify.reference import gcmsiv as gcmsiv_ref

FIXTURE = Path(__file__).parent / "fixtures" / "refaead.c"
LINK = ("-Wl,--no-as-needed", "-lcrypto")  # the fixture's one-shot GCM is OpenSSL EVP

# The C functions each new mode exports (issue 4); aesgen.spec.MODE_FUNCTIONS will list the same.
AEAD_MODE_FUNCTIONS = {
    "ghash": ("gcm_set_key", "ghash"),
    "polyval": ("polyval",),
    "gcm": ("gcm_set_key", "ghash", "gcm_encrypt", "gcm_decrypt", "gcm_start", "gcm_aad",
            "gcm_encrypt_update", "gcm_decrypt_update", "gcm_finish"),
    "gcm-siv": ("gcmsiv_set_key", "gcmsiv_encrypt", "gcmsiv_decrypt", "polyval"),
}
NEW_FUNCTIONS = tuple(dict.fromkeys(f for fs in AEAD_MODE_FUNCTIONS.values() for f in fs))


class AeadSpec(KernelSpec):
    """The fixture's spec: its own buffer sizes, and the issue's function lists (whatever
    aesgen.spec.MODE_FUNCTIONS holds for these modes while the generator catches up)."""

    @property
    def functions(self) -> tuple[str, ...]:
        names = list(COMMON_FUNCTIONS)
        for mode in self.modes:
            names.extend(AEAD_MODE_FUNCTIONS.get(mode) or MODE_FUNCTIONS[mode])
        return tuple(dict.fromkeys(names))

    @property
    def gcm_key_bytes(self) -> int:
        return 384

    @property
    def gcm_ctx_bytes(self) -> int:
        return 384

    @property
    def gcmsiv_key_bytes(self) -> int:
        return 320


SPEC = AeadSpec.from_asm(FIXTURE)


def by_name(results: list[CheckResult]) -> dict[str, CheckResult]:
    names = [r.name for r in results]
    assert len(names) == len(set(names)), "check names must be unique"
    return {r.name: r for r in results}


def failures(results: list[CheckResult]) -> dict[str, str]:
    return {r.name: r.detail for r in results if r.status == "fail"}


@lru_cache(maxsize=None)
def run(macro: str = "", quick: bool = True, spec: KernelSpec = SPEC) -> tuple[CheckResult, ...]:
    flags = [*LINK, f"-D{macro}"] if macro else list(LINK)
    return tuple(verify_kernel(FIXTURE, spec, quick=quick, extra_flags=flags))


# ---------------------------------------------------------------- the clean kernel


@pytest.fixture(scope="module")
def clean_results() -> list[CheckResult]:
    return list(run(quick=False))


def test_reference_aead_kernel_passes_everything(clean_results: list[CheckResult]) -> None:
    # `simulate <fn>` compares with the generator's own DSL descriptions, which are written
    # in parallel (tests/test_ghash.py and the kernel matrix own those); it may pass or skip.
    fails = {k: v for k, v in failures(clean_results).items() if not k.startswith("simulate ")}
    assert fails == {}
    res = by_name(clean_results)
    must_pass = [
        "build", "symbols", "cpu_supported",
        "kat gcm_encrypt gcmEncryptExtIV128", "kat gcm_encrypt gcmEncryptExtIV256",
        "kat gcm_decrypt gcmDecrypt192", "kat gcm_encrypt_update gcmEncryptExtIV192",
        "kat gcm_decrypt_update gcmDecrypt256", "kat ghash gcmEncryptExtIV128",
        "kat polyval RFC8452", "kat polyval RFC8452-256",
        "kat gcmsiv_encrypt RFC8452-128", "kat gcmsiv_decrypt RFC8452-256",
        "diff gcm_encrypt 128", "diff gcm_encrypt 192", "diff gcm_decrypt 256",
        "diff gcmsiv_encrypt 256", "diff gcmsiv_decrypt 128", "diff ghash", "diff polyval",
        "tamper gcm_decrypt 192", "tamper gcmsiv_decrypt 256",
        "stream gcm 128", "stream gcm 256",
        "badargs gcm_set_key", "badargs gcm_encrypt", "badargs gcm_decrypt", "badargs gcm_start",
        "badargs gcmsiv_set_key",
        "abi selftest stackargs", "abi selftest stackarg", "abi selftest frame", "abi selftest rbx",
    ]
    for fn in NEW_FUNCTIONS:
        must_pass += [f"abi {fn}", f"guard {fn} after", f"guard {fn} before"]
        if signatures.family(fn) != signatures.KEYSETUP and fn != "gcm_finish":
            must_pass.append(f"guard {fn} len0")
    for name in must_pass:
        assert res[name].status == "pass", (name, res[name])
    assert "4 stack arguments" in res["abi gcm_encrypt"].detail
    assert "2 stack arguments" in res["abi gcmsiv_decrypt"].detail
    allowed_skips = {"static_ct", "roundtrip", "red_zone"}
    if vectors.gcm_cryptopp() is None:
        allowed_skips |= {f"kat {f} McGrew-Viega" for f in
                          ("gcm_encrypt", "gcm_decrypt", "gcm_encrypt_update", "gcm_decrypt_update", "ghash")}
    else:
        assert res["kat gcm_encrypt McGrew-Viega"].status == "pass"
    skips = {r.name for r in clean_results if r.status == "skip" and not r.name.startswith("simulate ")}
    assert skips <= allowed_skips


def test_every_gcm_vector_file_is_used(clean_results: list[CheckResult]) -> None:
    res = by_name(clean_results)
    for vf in vectors.gcm_cavp("gcmEncryptExtIV"):
        for fn in ("gcm_encrypt", "gcm_encrypt_update", "ghash"):
            assert res[f"kat {fn} {vf.name}"].status == "pass"
        assert res[f"kat gcm_encrypt {vf.name}"].detail == f"{len(vf.vectors)} vectors"
    for vf in vectors.gcm_cavp("gcmDecrypt"):
        rejected = sum(v.plaintext is None for v in vf.vectors)
        assert f"{rejected} with a wrong tag" in res[f"kat gcm_decrypt {vf.name}"].detail


# ---------------------------------------------------------------- planted bugs

BUGS = [
    # (macro, check that must fail, text its detail must contain)
    ("BUG_AEAD_NO_ZERO", "tamper gcm_decrypt 128", "out bytes are not zero"),
    ("BUG_AEAD_NO_ZERO", "kat gcm_decrypt gcmDecrypt256", "out is not zeroed"),
    ("BUG_AEAD_AAD_PARTIAL", "stream gcm 192", "aad chunks"),
    ("BUG_AEAD_IV16", "guard gcm_encrypt after", "guard page after iv"),
    ("BUG_AEAD_IV16", "guard gcm_start after", "ivlen-1=11"),
    ("BUG_SIV_BE_CTR", "diff gcmsiv_encrypt 128", "block 1"),
    ("BUG_SIV_BE_CTR", "kat gcmsiv_encrypt RFC8452-256", "block 1"),
    ("BUG_POLYVAL_NO_ACC", "diff polyval", "acc"),
    ("BUG_POLYVAL_NO_ACC", "kat polyval RFC8452", "continued over two calls"),
]


@pytest.mark.parametrize("macro,check,text", BUGS, ids=[f"{b[0]}:{b[1]}" for b in BUGS])
def test_planted_bug_is_caught(macro: str, check: str, text: str) -> None:
    res = by_name(list(run(macro)))
    assert res[check].status == "fail", res[check]
    assert text in res[check].detail, res[check].detail
    # the bug is pinned on its function: unrelated checks still pass
    assert res["diff ghash"].status == "pass"
    assert res["badargs gcm_set_key"].status == "pass"
    assert res["abi gcm_encrypt"].status == "pass"


def test_each_bug_leaves_the_other_features_alone() -> None:
    unrelated = {
        "BUG_AEAD_NO_ZERO": ("diff gcm_decrypt 128", "stream gcm 128", "tamper gcmsiv_decrypt 128"),
        "BUG_AEAD_AAD_PARTIAL": ("kat gcm_encrypt gcmEncryptExtIV128", "diff gcm_encrypt 256"),
        "BUG_AEAD_IV16": ("kat gcm_encrypt gcmEncryptExtIV128", "stream gcm 128", "guard gcm_encrypt before"),
        "BUG_SIV_BE_CTR": ("diff polyval", "kat gcm_encrypt gcmEncryptExtIV192"),
        "BUG_POLYVAL_NO_ACC": ("diff gcm_encrypt 128", "kat ghash gcmEncryptExtIV256"),
    }
    for macro, names in unrelated.items():
        res = by_name(list(run(macro)))
        for name in names:
            assert res[name].status == "pass", (macro, name, res[name])


# ---------------------------------------------------------------- robustness of the wiring


def test_unknown_function_is_a_failed_check_not_a_crash() -> None:
    class Unknown(AeadSpec):
        @property
        def functions(self) -> tuple[str, ...]:
            return ("cpu_supported", "set_encrypt_key", "set_decrypt_key", "polyval", "frobnicate")

    spec = Unknown(modes=("polyval",), isa="sse", width=128, depth=2, prefix="refaead",
                   features=("aes", "ssse3", "sse4_1"))
    res = by_name(verify_kernel(FIXTURE, spec, quick=True, extra_flags=list(LINK)))
    assert res["signature frobnicate"].status == "fail"
    assert "SIGNATURES" in res["signature frobnicate"].detail
    assert "refaead_frobnicate" in res["symbols"].detail
    assert res["diff polyval"].status == "pass" and res["guard polyval after"].status == "pass"
    assert not any(n.endswith("frobnicate") and n != "signature frobnicate" for n in res)


def test_missing_size_attribute_names_itself_and_its_functions() -> None:
    class NoCtx(AeadSpec):
        @property
        def gcm_ctx_bytes(self) -> int:
            raise AttributeError("gcm_ctx_bytes")

    spec = NoCtx(modes=("gcm",), isa="sse", width=128, depth=2, prefix="refaead",
                 features=("aes", "ssse3", "sse4_1"))
    res = by_name(verify_kernel(FIXTURE, spec, quick=True, extra_flags=list(LINK)))
    detail = res["spec gcm_ctx_bytes"].detail
    assert res["spec gcm_ctx_bytes"].status == "fail" and "gcm_start" in detail and "gcm_finish" in detail
    assert "abi gcm_start" not in res and "stream gcm 128" not in res
    assert res["diff gcm_encrypt 128"].status == "pass"


def test_unknown_mode_is_a_failed_check() -> None:
    spec = KernelSpec(modes=("polyval", "no-such-mode"), isa="sse", width=128, depth=2, prefix="refaead",
                      features=("aes", "ssse3", "sse4_1"))
    fset = signatures.function_set(spec)
    assert fset.functions == (*COMMON_FUNCTIONS, "polyval")
    assert [p.name for p in fset.problems] == ["spec"] and "'no-such-mode'" in fset.problems[0].detail
    res = by_name(verify_kernel(FIXTURE, spec, quick=True, extra_flags=list(LINK)))
    assert res["spec"].status == "fail"
    assert res["kat polyval RFC8452"].status == "pass" and res["keyschedule 128"].status == "pass"


def test_missing_cpu_features_skip_every_aead_check() -> None:
    spec = AeadSpec(modes=("gcm", "gcm-siv"), isa="sse", width=128, depth=2, prefix="refaead",
                    features=("aes", "no_such_flag"))
    results = verify_kernel(FIXTURE, spec, extra_flags=list(LINK))
    runtime = [r for r in results if r.name not in ("build", "visibility", "static_ct", "roundtrip", "red_zone")]
    assert runtime and all(r.status == "skip" and "no_such_flag" in r.detail for r in runtime)
    names = {r.name for r in runtime}
    assert {"kat gcm_encrypt", "tamper gcm_decrypt", "stream gcm", "guard gcmsiv_encrypt len0"} <= names


def test_registry_covers_every_mode_function() -> None:
    listed = set(COMMON_FUNCTIONS) | {f for fs in MODE_FUNCTIONS.values() for f in fs} | set(NEW_FUNCTIONS)
    assert listed <= set(signatures.SIGNATURES)
    sig = signatures.SIGNATURES["gcm_encrypt"]
    assert sig.nargs == 10 and [p.name for p in sig.params[6:]] == ["out", "len", "tag", "taglen"]
    assert signatures.SIGNATURES["gcmsiv_decrypt"].nargs == 8
    assert signatures.SIGNATURES["gcm_set_key"].mask32 == 0b10
    assert set(signatures.SIGNATURES["ghash"].spec_attrs()) == {"gcm_key_bytes"}
    assert set(signatures.SIGNATURES["gcm_aad"].spec_attrs()) == {"gcm_ctx_bytes"}


# ---------------------------------------------------------------- trampoline stack arguments


def test_trampoline_passes_and_guards_stack_arguments() -> None:
    h = harness()
    args = (1, 2, 3, 4, 5, 6, 0xA << 40, 0xB << 20, 0xC, 0xD << 60)
    bad, ctx = trampoline.call(fn_address(h, "abi_stack_echo"), args, seed=5)
    assert bad == 0 and ctx.ret == args[6] ^ args[7] ^ args[8] ^ args[9]
    # garbage above a 32-bit stack argument (mask bit 6 = argument 7)
    bad, ctx = trampoline.call(fn_address(h, "abi_stack_echo"), args, mask32=1 << 6, seed=5)
    assert bad == 0 and ctx.ret >> 32 != (args[6] ^ args[7] ^ args[8] ^ args[9]) >> 32
    bad, ctx = trampoline.call(fn_address(h, "abi_fault_stackarg"), args, seed=5)
    assert bad & trampoline.BAD_STACKARG and "arg 7" in trampoline.describe(bad, ctx)
    bad, ctx = trampoline.call(fn_address(h, "abi_fault_frame"), args, seed=5)
    assert bad & trampoline.BAD_FRAME and not bad & trampoline.BAD_STACKARG
    # six or fewer arguments: the frame slots are still watched, nothing else changes
    bad, ctx = trampoline.call(fn_address(h, "abi_fault_clean"), (0, 128), 0b10, seed=5)
    assert bad == 0 and ctx.ret & 0xFFFFFFFF == 128 and ctx.nstack == 0
    bad, ctx = trampoline.call(fn_address(h, "abi_fault_stackarg"), (0, 128), seed=5)
    assert bad & trampoline.BAD_FRAME
    with pytest.raises(ValueError):
        trampoline.call(fn_address(h, "abi_fault_clean"), tuple(range(15)))


# ---------------------------------------------------------------- the references (reference/gcm.py, gcmsiv.py)


def test_rfc8452_appendix_a() -> None:
    ex = vectors.RFC8452_POLYVAL
    assert gcmsiv_ref.polyval_direct(ex["H"], ex["X"]) == ex["POLYVAL"]
    assert gcmsiv_ref.polyval_via_ghash(ex["H"], ex["X"]) == ex["POLYVAL"]
    assert gcm_ref.mulx_ghash(ex["H"][::-1]) == ex["mulX_GHASH(ByteReverse(H))"]
    blocks = ex["X"][:16][::-1] + ex["X"][16:][::-1]
    assert gcm_ref.ghash(ex["mulX_GHASH(ByteReverse(H))"], blocks) == ex["GHASH"]
    # continued accumulators
    acc = gcmsiv_ref.polyval(ex["H"], ex["X"][:16])
    assert gcmsiv_ref.polyval(ex["H"], ex["X"][16:], acc) == ex["POLYVAL"]


def test_gf_mul_field_laws() -> None:
    rng = random.Random(3)
    one = bytes([0x80]) + bytes(15)  # x^0 in GCM's reflected order
    for _ in range(20):
        a, b, c = (rng.randbytes(16) for _ in range(3))
        assert gcm_ref.gf_mul(a, one) == a
        assert gcm_ref.gf_mul(a, b) == gcm_ref.gf_mul(b, a)
        assert gcm_ref.gf_mul(gcm_ref.gf_mul(a, b), c) == gcm_ref.gf_mul(a, gcm_ref.gf_mul(b, c))
        bc = bytes(x ^ y for x, y in zip(b, c))
        ab_ac = bytes(x ^ y for x, y in zip(gcm_ref.gf_mul(a, b), gcm_ref.gf_mul(a, c)))
        assert gcm_ref.gf_mul(a, bc) == ab_ac
        assert gcmsiv_ref.polyval_direct(a, b + c, bytes(16)) == gcmsiv_ref.polyval_via_ghash(a, b + c)


def test_reference_matches_cryptography() -> None:
    rng = random.Random(11)
    for i in range(60):
        key = rng.randbytes((16, 24, 32)[i % 3])
        iv = rng.randbytes(rng.choice((8, 12, 12, 16, 33, 64, 128)))
        aad, pt = rng.randbytes(rng.randrange(70)), rng.randbytes(rng.randrange(90))
        ct, tag = gcm_ref.gcm_encrypt(key, iv, aad, pt)
        assert ct + tag == AESGCM(key).encrypt(iv, pt, aad)
        assert gcm_ref.gcm_decrypt(key, iv, aad, ct, tag[:5]) == pt
        with pytest.raises(gcm_ref.AuthenticationError):
            gcm_ref.gcm_decrypt(key, iv, aad + b"x", ct, tag)
        skey, nonce = rng.randbytes((16, 32)[i % 2]), rng.randbytes(12)
        ct, tag = gcmsiv_ref.gcmsiv_encrypt(skey, nonce, aad, pt)
        assert ct + tag == AESGCMSIV(skey).encrypt(nonce, pt, aad)
        assert gcmsiv_ref.gcmsiv_decrypt(skey, nonce, aad, ct, tag) == pt
        with pytest.raises(gcm_ref.AuthenticationError):
            gcmsiv_ref.gcmsiv_decrypt(skey, nonce, aad, ct, bytes([tag[0] ^ 1]) + tag[1:])


def test_fast_reference_for_odd_iv_lengths_matches_the_bitwise_reference() -> None:
    """gcm.gcm_reference (reference/gcm.py for J0, AESGCM for the bulk) == reference/gcm.py bit by bit."""
    rng = random.Random(12)
    for i in range(40):
        key = rng.randbytes((16, 24, 32)[i % 3])
        iv = rng.randbytes((1, 2, 7, 129, 200, 12, 64)[i % 7])
        aad, pt, taglen = rng.randbytes(rng.randrange(60)), rng.randbytes(rng.randrange(80)), 4 + i % 13
        ct, tag, oracle = gcm.gcm_reference(key, iv, aad, pt, taglen)
        assert (ct, tag) == gcm_ref.gcm_encrypt(key, iv, aad, pt, taglen), (i, oracle)


def test_reference_matches_published_vectors() -> None:
    """Including what cryptography refuses: 1-byte IVs (CAVP IVlen = 8) and truncated tags."""
    for vf in vectors.gcm_cavp("gcmEncryptExtIV"):
        for v in vf.vectors[::29]:
            assert gcm_ref.gcm_encrypt(v.key, v.iv, v.aad, v.plaintext, len(v.tag)) == (v.ciphertext, v.tag)
    assert any(len(v.iv) == 1 for v in vectors.gcm_cavp("gcmEncryptExtIV")[0].vectors[::29])
    for v in vectors.gcm_cavp("gcmDecrypt")[1].vectors[::37]:
        if v.plaintext is None:
            with pytest.raises(gcm_ref.AuthenticationError):
                gcm_ref.gcm_decrypt(v.key, v.iv, v.aad, v.ciphertext, v.tag)
        else:
            assert gcm_ref.gcm_decrypt(v.key, v.iv, v.aad, v.ciphertext, v.tag) == v.plaintext
    for vf in vectors.gcmsiv_rfc8452():
        for v in vf.vectors:
            assert gcmsiv_ref.gcmsiv_encrypt(v.key, v.iv, v.aad, v.plaintext) == (v.ciphertext, v.tag)
    cpp = vectors.gcm_cryptopp()
    if cpp is not None:
        for v in cpp.vectors:
            if v.plaintext is not None:
                assert gcm_ref.gcm_encrypt(v.key, v.iv, v.aad, v.plaintext) == (v.ciphertext, v.tag)


# ---------------------------------------------------------------- vector parsing


def test_gcm_vector_files_parse() -> None:
    for kind in vectors.GCM_KINDS:
        for vf in vectors.gcm_cavp(kind):
            text = vf.path.read_text()
            assert len(vf.vectors) == text.count("Count = ") == 7875
            assert max(v.group for v in vf.vectors) == 525
            assert sum(v.plaintext is None for v in vf.vectors) == text.count("\nFAIL")
            assert {len(v.iv) for v in vf.vectors} == {1, 12, 128}
            assert {len(v.tag) for v in vf.vectors} == {4, 8, 12, 13, 14, 15, 16}
    dec = vectors.gcm_cavp("gcmDecrypt")[0].vectors
    assert dec[1].plaintext is None and dec[0].plaintext == b""


def test_gcmsiv_vectors_parse() -> None:
    f128, f256 = vectors.gcmsiv_rfc8452()
    assert (f128.name, f256.name) == ("RFC8452-128", "RFC8452-256")
    assert len(f128.vectors) == 23 and len(f256.vectors) == 25
    assert all(len(v.key) == 16 for v in f128.vectors) and all(len(v.key) == 32 for v in f256.vectors)
    for vf in (f128, f256):  # the empty cases added from RFC 8452 C.1/C.2
        v = vf.vectors[0]
        assert v.plaintext == b"" and AESGCMSIV(v.key).encrypt(v.iv, b"", b"") == v.tag
    assert any(v.aad for v in f128.vectors)
    assert all(len(v.key) == 24 for v in vectors.gcmsiv_192().vectors)


def test_cryptopp_gcm_parse() -> None:
    cpp = vectors.gcm_cryptopp()
    if cpp is None:
        pytest.skip(f"{vectors.CRYPTOPP_GCM} not installed (Debian package libcrypto++-utils)")
    vs = cpp.vectors
    assert len(vs) == 22
    assert vs[0].plaintext is None  # "Test: NotVerify"
    assert {len(v.key) for v in vs} == {16, 24, 32}
    assert {len(v.iv) for v in vs} == {8, 12, 16, 60}
    assert len(vs[-1].plaintext) == 11 * 65 and vs[-1].plaintext[:2] == b"\x00\x6b"  # "r11 006bc1..."
    # McGrew-Viega test case 4: header and a 60-byte plaintext
    v = vs[4]
    assert v.aad == bytes.fromhex("feedfacedeadbeeffeedfacedeadbeefabaddad2") and len(v.plaintext) == 60
    assert v.tag == bytes.fromhex("5bc94fbc3221a5db94fae95ae7121a47")
