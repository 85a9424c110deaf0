"""Tests for the runtime verifier: it must pass a correct kernel and catch planted bugs.

The kernel under test is tests/fixtures/refkernel.c, a one-block-at-a-time C
implementation of the ABI; -DBUG_* variants each plant one fault.
"""
from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from aesgen.spec import KernelSpec
from aesgen.verify import CheckResult, verify_kernel
from aesgen.verify import abi, kat, vectors
from aesgen.verify.build import BuildError, build_shared, compiler, fn_address, harness
from aesgen.verify.harness import trampoline
from aesgen.verify.harness.isolation import run_isolated

FIXTURE = Path(__file__).parent / "fixtures" / "refkernel.c"
RUNTIME_GROUPS = {"build", "symbols", "cpu_supported", "keyschedule", "kat", "mct", "diff", "abi", "guard"}


def by_name(results: list[CheckResult]) -> dict[str, CheckResult]:
    names = [r.name for r in results]
    assert len(names) == len(set(names)), "check names must be unique"
    return {r.name: r for r in results}


def failures(results: list[CheckResult]) -> dict[str, str]:
    return {r.name: r.detail for r in results if r.status == "fail"}


# ---------------------------------------------------------------- the clean kernel


@pytest.fixture(scope="module")
def clean_results() -> list[CheckResult]:
    return verify_kernel(FIXTURE)


def test_reference_kernel_passes_everything(clean_results: list[CheckResult]) -> None:
    assert failures(clean_results) == {}
    res = by_name(clean_results)
    for name in (
        "build", "symbols", "cpu_supported",
        "keyschedule 128", "keyschedule 192", "keyschedule 256", "keyschedule badbits",
        "kat ecb_encrypt FIPS197-128", "kat ecb_encrypt ECBVarTxt192", "kat ecb_decrypt ECBMMT256",
        "kat ctr32_encrypt aes-128-ctr", "kat cbc_decrypt CBCGFSbox256", "kat cbc_encrypt CBCMMT192",
        "mct cbc_encrypt 128", "mct cbc_decrypt 256",
        "diff ecb_decrypt 192", "diff ctr32_encrypt 128", "diff cbc_decrypt 256",
        "abi set_encrypt_key", "abi cbc_decrypt", "abi selftest clean", "abi selftest rbx",
        "abi selftest upper32",
        "guard ctr32_encrypt after", "guard ctr32_encrypt before", "guard cbc_encrypt len0",
        "guard set_decrypt_key after",
    ):
        assert res[name].status == "pass", (name, res[name])
    # the non-.S fixture cannot be checked statically; everything else ran
    assert {r.name for r in clean_results if r.status == "skip"} == {"static_ct", "roundtrip", "red_zone"}


def test_every_kat_file_is_used(clean_results: list[CheckResult]) -> None:
    names = {r.name for r in clean_results}
    for mode, fns in (("ECB", ("ecb_encrypt", "ecb_decrypt")), ("CBC", ("cbc_encrypt", "cbc_decrypt"))):
        for vf in vectors.cavp(mode):
            for fn in fns:
                assert f"kat {fn} {vf.name}" in names


def test_spec_defaults_to_the_file_header() -> None:
    spec = KernelSpec.from_asm(FIXTURE)
    assert spec.prefix == "refkernel" and spec.width == 128


# ---------------------------------------------------------------- planted bugs

BUGS = [
    # (macro, check that must fail, text its detail must contain)
    ("BUG_CTR_OVERREAD", "guard ctr32_encrypt after", "guard page after in"),
    ("BUG_CTR_OVERWRITE", "guard ctr32_encrypt after", "guard page after out"),
    ("BUG_CTR_NO_UPDATE", "diff ctr32_encrypt 128", "ctr on return"),
    ("BUG_CTR_WRAP", "diff ctr32_encrypt 192", "ffffffff"),
    ("BUG_CBC_IV", "diff cbc_encrypt 256", "iv on return"),
    ("BUG_CBC_IV", "kat cbc_encrypt CBCMMT128", "iv on return"),
    ("BUG_CBC_INPLACE", "diff cbc_decrypt 128", "in-place"),
    ("BUG_RBX", "abi ecb_encrypt", "rbx clobbered"),
]


@pytest.mark.parametrize("macro,check,text", BUGS, ids=[f"{b[0]}:{b[1]}" for b in BUGS])
def test_planted_bug_is_caught(macro: str, check: str, text: str) -> None:
    results = verify_kernel(FIXTURE, quick=True, extra_flags=[f"-D{macro}"])
    res = by_name(results)
    assert res[check].status == "fail", res[check]
    assert text in res[check].detail
    # the bug is pinned on its function: unrelated checks still pass
    assert res["kat ecb_decrypt ECBGFSbox128"].status == "pass"
    assert res["keyschedule 256"].status == "pass"


def test_guard_crash_names_function_length_and_signal() -> None:
    res = by_name(verify_kernel(FIXTURE, quick=True, extra_flags=["-DBUG_CTR_OVERREAD"]))
    detail = res["guard ctr32_encrypt after"].detail
    assert "SIGSEGV" in detail and "len=" in detail
    assert res["guard ctr32_encrypt before"].status == "pass"  # the over-read is past the end only


# ---------------------------------------------------------------- trampoline


def test_trampoline_catches_each_planted_fault() -> None:
    h = harness()
    expect = {"rbx": "rbx clobbered", "r15": "r15 clobbered", "df": "DF set",
              "mxcsr": "MXCSR", "fcw": "x87 control word"}
    if trampoline.xinuse_supported():
        expect["ymm"] = "YMM upper"
    for fault, text in expect.items():
        bad, ctx = trampoline.call(fn_address(h, f"abi_fault_{fault}"), (0, 128), 0b10, seed=7)
        assert bad, fault
        assert text in trampoline.describe(bad, ctx)
    bad, ctx = trampoline.call(fn_address(h, "abi_fault_clean"), (0, 128), 0b10, seed=7)
    assert bad == 0 and ctx.ret & 0xFFFFFFFF == 128
    # garbage really is above the 32-bit argument, and different seeds give different values
    _, c1 = trampoline.call(fn_address(h, "abi_fault_clean"), (0, 128), 0b10, seed=1)
    _, c2 = trampoline.call(fn_address(h, "abi_fault_clean"), (0, 128), 0b10, seed=2)
    assert c1.args[1] >> 32 and c1.args[1] != c2.args[1] and c1.seeded[0] != c2.seeded[0]


def test_self_tests_all_pass_on_this_machine() -> None:
    results = list(abi.self_tests(seed=3))
    assert [r for r in results if r.status == "fail"] == []
    assert {r.name for r in results} >= {"abi selftest clean", "abi selftest rbx", "abi selftest df"}


# ---------------------------------------------------------------- vectors and key schedule


def test_vector_files_parse() -> None:
    ecb = {vf.name: vf for vf in vectors.cavp("ECB")}
    assert len(ecb) == 15
    assert len(ecb["ECBVarTxt128"].encrypt) == 128 and len(ecb["ECBVarTxt128"].decrypt) == 128
    assert all(len(v.ciphertext) % 16 == 0 and v.iv == b"" for v in ecb["ECBMMT256"].encrypt)
    cbc = {vf.name: vf for vf in vectors.cavp("CBC")}
    assert len(cbc["CBCMMT192"].encrypt[0].key) == 24 and len(cbc["CBCMMT192"].encrypt[0].iv) == 16
    ctr = vectors.ctr_rfc3686()
    assert [len(vf.encrypt) for vf in ctr] == [3, 3, 3]
    assert ctr[0].encrypt[0].iv == bytes.fromhex("00000030000000000000000000000001")
    assert len(ctr[0].encrypt[2].plaintext) == 36  # a partial final block
    for vf in vectors.cbc_mct():
        assert len(vf.encrypt) == 100 and len(vf.decrypt) == 100
        assert vf.encrypt[1].iv == vf.encrypt[0].ciphertext  # IV[i+1] = CT[999]


def test_fips197_vectors_agree_with_cryptography() -> None:
    for key, pt, ct in vectors.FIPS197_APPENDIX_C.values():
        enc = Cipher(algorithms.AES(key), modes.ECB()).encryptor()
        assert enc.update(pt) == ct


def test_key_expansion_matches_fips197_appendix_a() -> None:
    a1 = kat.expand_key(bytes.fromhex("2b7e151628aed2a6abf7158809cf4f3c"))
    assert a1[10] == bytes.fromhex("d014f9a8c9ee2589e13f0cc8b6630ca6")
    assert a1[1] == bytes.fromhex("a0fafe1788542cb123a339392a6c7605")
    a3 = kat.expand_key(bytes.fromhex("603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4"))
    assert len(a3) == 15 and a3[14] == bytes.fromhex("fe4890d1e6188d0b046df344706c631e")
    assert kat.sbox()[0x00] == 0x63 and kat.sbox()[0x53] == 0xED


def _py_cipher(rks: list[bytes], block: bytes, decrypt: bool) -> bytes:
    """A slow textbook AES over the given round keys (equivalent inverse cipher for decrypt)."""
    s = kat.sbox()
    inv = [0] * 256
    for i, v in enumerate(s):
        inv[v] = i
    g = kat.gmul
    x = bytes(a ^ b for a, b in zip(block, rks[0]))
    nr = len(rks) - 1
    for r in range(1, nr + 1):
        if decrypt:
            x = bytes(inv[x[4 * ((c - rr) % 4) + rr]] for c in range(4) for rr in range(4))
            if r < nr:
                x = kat.inv_mix_columns(x)
        else:
            x = bytes(s[x[4 * ((c + rr) % 4) + rr]] for c in range(4) for rr in range(4))
            if r < nr:
                x = bytes(
                    g(col[i], 2) ^ g(col[(i + 1) % 4], 3) ^ col[(i + 2) % 4] ^ col[(i + 3) % 4]
                    for col in (x[4 * c:4 * c + 4] for c in range(4)) for i in range(4))
        x = bytes(a ^ b for a, b in zip(x, rks[r]))
    return x


def test_python_key_schedules_drive_a_correct_cipher() -> None:
    rng = random.Random(5)
    for bits in (128, 192, 256):
        key, block = rng.randbytes(bits // 8), rng.randbytes(16)
        ecb = Cipher(algorithms.AES(key), modes.ECB())
        ct = ecb.encryptor().update(block)
        assert _py_cipher(kat.expand_key(key), block, decrypt=False) == ct
        assert _py_cipher(kat.decrypt_round_keys(key), ct, decrypt=True) == block


# ---------------------------------------------------------------- skips, builds, isolation


def test_missing_cpu_features_skip_every_runtime_check() -> None:
    spec = KernelSpec(modes=("ecb", "ctr32", "cbc"), isa="sse", width=128, depth=2,
                      prefix="refkernel", features=("aes", "no_such_flag"))
    results = verify_kernel(FIXTURE, spec)
    res = by_name(results)
    assert res["build"].status == "pass"
    runtime = [r for r in results if r.name not in ("build", "visibility", "static_ct", "roundtrip", "red_zone")]
    assert runtime and all(r.status == "skip" and "no_such_flag" in r.detail for r in runtime)


def test_build_error_is_one_line_plus_compiler_output(tmp_path: Path) -> None:
    bad = tmp_path / "broken.S"
    bad.write_text("# aesgen-spec: {}\n.text\n  notaninstruction %rax\n")
    with pytest.raises(BuildError) as e:
        build_shared(bad)
    first, _, rest = str(e.value).partition("\n")
    assert "broken.S: compilation failed" in first and "notaninstruction" in rest
    spec = KernelSpec.from_json(KernelSpec.from_asm(FIXTURE).to_json())
    res = by_name(verify_kernel(bad, spec))
    assert res["build"].status == "fail" and res["diff ecb_encrypt"].status == "skip"


def test_build_is_cached_by_content_and_flags() -> None:
    a = build_shared(FIXTURE)
    assert build_shared(FIXTURE) == a
    assert build_shared(FIXTURE, ["-DBUG_RBX"]) != a


def test_assembly_input(tmp_path: Path) -> None:
    """The .S path: the fixture compiled to assembly, with the spec line a generated file carries."""
    asm = tmp_path / "refkernel.S"
    body = subprocess.run([compiler(), "-S", "-O2", "-maes", "-mssse3", "-msse4.1", "-fPIC",
                           "-o", "-", str(FIXTURE)], check=True, capture_output=True, text=True).stdout
    spec = KernelSpec.from_asm(FIXTURE)
    asm.write_text(f"# aesgen-spec: {spec.to_json()}\n{body}")
    results = verify_kernel(asm, quick=True)
    # static_ct / roundtrip judge generated files; gcc output is not one, so only runtime counts here
    runtime = {k: v for k, v in failures(results).items() if k.split()[0] in RUNTIME_GROUPS}
    assert runtime == {}
    assert by_name(results)["guard cbc_decrypt after"].status == "pass"


def test_isolation_turns_crashes_hangs_and_exceptions_into_failures() -> None:
    def crash(probe):
        yield CheckResult("first", "pass")
        probe.note("crashy", "step 3")
        os.kill(os.getpid(), signal.SIGSEGV)
        yield CheckResult("never", "pass")

    def boom(probe):
        probe.note("boomy", "parsing")
        raise ValueError("nope")
        yield  # pragma: no cover

    def hang(probe):
        probe.note("hangs", "forever")
        time.sleep(30)
        yield  # pragma: no cover

    r = run_isolated("crash", crash)
    assert [x.name for x in r] == ["first", "crashy"]
    assert r[1].status == "fail" and "SIGSEGV" in r[1].detail and "step 3" in r[1].detail
    r = run_isolated("boom", boom)
    assert r[0].name == "boomy" and r[0].status == "fail" and "ValueError: nope" in r[0].detail
    r = run_isolated("hang", hang, timeout=1.0)
    assert r[0].name == "hangs" and "timed out" in r[0].detail
