"""`aesgen export` and the Microsoft x64 ABI (`--abi win64`).

The exported folder is built and checked the way a user would (`make -C DIR check`),
in both ABIs; the win64 functions are reached through ms_abi prototypes, and the same
objects called as SysV must fail (the check has teeth). The smoke vectors are checked
against `cryptography` here, so a typo in the data cannot pass unnoticed.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM, AESGCMSIV, AESOCB3

try:  # CFB and OFB's home from cryptography 47 on
    from cryptography.hazmat.decrepit.ciphers import modes as decrepit_modes
except ImportError:  # older cryptography
    decrepit_modes = modes

from _support import aesgen_command, require_cpu, run
from aesgen.functions import FUNCTIONS
from aesgen.pipeline import generate
from aesgen.spec import MODES, KernelSpec
from aesgen.verify import abi, smoke
from aesgen.verify.mpc import sigma_reference
from aesgen.verify.reference import halfgates as halfgates_reference, otr
from aesgen.verify.reference.wideblock import rijndael256_ecb, simpira256_many
from aesgen.verify.runner import verify_kernel

SMALL = "ecb,ctr32,cbc,gcm,ocb"  # a few families with stack arguments, frames and tails
# The families whose smoke vectors came last (and the multi-stream pointer arrays).
LATER = "otr,rijndael256,simpira,multikey,fixed-key-hash,cbc-multi,halfgates"
MINGW_AS = "x86_64-w64-mingw32-as"


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """No tuning file: exports choose by the model, the same on every run."""
    tune = tmp_path_factory.mktemp("tune")
    return {**{k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}, "AESGEN_TUNE_DIR": str(tune)}


def export(env: dict[str, str], out: Path, *args: str):
    return run(aesgen_command() + ["export", "--target", "native", "-o", str(out), *args], env=env)


def make(folder: Path, *targets: str, **variables: str) -> subprocess.CompletedProcess:
    cmd = ["make", "-C", str(folder), *targets, *(f"{k}={v}" for k, v in variables.items())]
    return subprocess.run(cmd, capture_output=True, text=True)


@pytest.fixture(scope="module", params=["sysv", "win64"])
def exported(request, env, tmp_path_factory) -> tuple[str, Path]:
    out = tmp_path_factory.mktemp(f"export-{request.param}")
    p = export(env, out, "--abi", request.param, "--modes", SMALL)
    assert p.returncode == 0, p.stderr
    return request.param, out


# ---------------------------------------------------------------- the folder


def test_export_writes_one_pair_per_family_and_the_build_files(exported) -> None:
    _, out = exported
    stems = [f"aesgen_native_{m}" for m in SMALL.split(",")]
    want = {f"{s}{x}" for s in stems for x in (".S", ".h")} | {"Makefile", "README.md", "smoke_test.c"}
    assert {p.name for p in out.iterdir()} == want


def test_make_check_passes_through_the_headers(exported) -> None:
    abi_name, out = exported
    p = make(out, "check", CFLAGS="-O2 -Wall -Wextra -Werror")
    assert p.returncode == 0, p.stdout + p.stderr
    assert (out / "libaesgen.a").is_file()
    lines = p.stdout.splitlines()
    for mode in SMALL.split(","):
        assert any(line.startswith(f"ok   aesgen_native_{mode}: ") and "known-answer" in line for line in lines), mode
    assert re.search(r"\d+ checks, 0 failed, 0 file\(s\) skipped", p.stdout)
    if abi_name == "win64":
        assert "__attribute__((ms_abi))" in (out / "aesgen_native_ecb.h").read_text()


def test_win64_objects_called_as_sysv_fail_the_smoke_test(exported, tmp_path: Path) -> None:
    """Negative: the same win64 objects behind SysV prototypes must not pass."""
    abi_name, out = exported
    if abi_name != "win64":
        pytest.skip("win64 exports only")
    copy = tmp_path / "sysv-calls"
    shutil.copytree(out, copy, ignore=shutil.ignore_patterns("*.o", "*.a", "smoke_test"))
    p = make(copy, "check", CFLAGS="-O2 -DAESGEN_MS_ABI=")
    assert p.returncode != 0, p.stdout


def test_readme_is_generated_from_data(exported) -> None:
    abi_name, out = exported
    text = (out / "README.md").read_text()
    assert f"aesgen export --target native --abi {abi_name} --modes {SMALL} -o DIR" in text
    assert "commit" in text or "not a git checkout" in text
    for mode, title in (("gcm", "GCM"), ("ocb", "OCB3")):
        assert f"### {title}: `aesgen_native_{mode}.h`" in text
    header = (out / "aesgen_native_gcm.h").read_text()
    clmul = "vpclmulqdq" if "vpclmulqdq" in KernelSpec.from_asm(out / "aesgen_native_gcm.S").features else "pclmulqdq"
    assert "aesgen_native_gcm_gcm_encrypt(" in text and clmul in text  # the file's requirements, as this CPU chose
    assert re.search(r"aesgen generate gcm .*--prefix aesgen_native_gcm -o aesgen_native_gcm.S", header)
    assert "not measured" in text


@pytest.mark.parametrize("abi_name", ["sysv", "win64"])
def test_later_families_pass_their_known_answers_and_a_wrong_byte_fails(env, tmp_path: Path, abi_name: str) -> None:
    """Every family prints a checked result; then one expected byte per family is flipped in
    a copy of smoke_test.c and each family must report the difference."""
    out = tmp_path / "export"
    assert export(env, out, "--abi", abi_name, "--modes", LATER).returncode == 0
    p = make(out, "check", CFLAGS="-O2 -Wall -Wextra -Werror")
    assert p.returncode == 0, p.stdout + p.stderr
    stems = [f"aesgen_native_{re.sub(r'[^a-z0-9]', '', m)}" for m in LATER.split(",")]
    for stem in stems:
        assert re.search(rf"^ok   {stem}: \d+ known-answer cases?$", p.stdout, re.M), p.stdout
    assert re.search(r"\d+ checks, 0 failed, 0 file\(s\) skipped", p.stdout)

    bad = tmp_path / "corrupted"
    shutil.copytree(out, bad, ignore=shutil.ignore_patterns("*.o", "*.a", "smoke_test"))
    source = (bad / "smoke_test.c").read_text()
    for stem in stems:  # the first expected byte of each family's first case
        start = source.index(f"static void check_{stem}(void)")
        want = re.compile(r"(static const uint8_t want_\w+\[\d+\] = \{0x)([0-9a-f]{2})").search(source, start)
        flipped = f"{int(want.group(2), 16) ^ 1:02x}"
        source = source[:want.start(2)] + flipped + source[want.end(2):]
    (bad / "smoke_test.c").write_text(source)
    p = make(bad, "check")
    assert p.returncode != 0, p.stdout
    for stem in stems:
        assert f"FAIL {stem}: " in p.stdout, (stem, p.stdout)
        assert f"ok   {stem}" not in p.stdout, (stem, p.stdout)


def test_export_is_deterministic(env, tmp_path: Path) -> None:
    for name in ("a", "b"):
        assert export(env, tmp_path / name, "--abi", "win64", "--modes", "ctr32,xts").returncode == 0
    for f in (tmp_path / "a").iterdir():
        assert f.read_bytes() == (tmp_path / "b" / f.name).read_bytes(), f.name


@pytest.mark.parametrize("args, named", [
    (["--target", "pentium4"], "pentium4"),
    (["--modes", "ecb,rot13"], "rot13"),
    (["--abi", "vax"], "vax"),
])
def test_export_refuses_in_one_line_with_exit_2(env, tmp_path: Path, args: list[str], named: str) -> None:
    out = tmp_path / "out"
    p = run(aesgen_command() + ["export", "-o", str(out), *args], env=env)
    assert p.returncode == 2
    assert named in p.stderr and len(p.stderr.strip().splitlines()) == 1
    assert not out.exists()


def test_a_depth_the_mode_refuses_is_moved_and_said(env, tmp_path: Path) -> None:
    """Westmere's model wants depth 3; OCB takes power-of-two batches: the model moves it up to
    4 (more in flight than the pipe needs costs nothing) and the README says why."""
    p = run(aesgen_command() + ["export", "--target", "westmere", "--abi", "win64", "--modes", "ocb,ctr32",
                                "-o", str(tmp_path)], env=env)
    assert p.returncode == 0, p.stderr
    assert re.search(r"OCB3 \| sse, 128-bit x depth 4 \| .*3 in flight; ocb takes depth 4, not 3\)",
                     (tmp_path / "README.md").read_text())
    m = make(tmp_path, "check")
    assert m.returncode == 0 and "0 failed" in m.stdout, m.stdout + m.stderr


def test_export_verify_records_the_results(env, tmp_path: Path) -> None:
    p = export(env, tmp_path, "--abi", "win64", "--modes", "ecb", "--verify")
    assert p.returncode == 0, p.stdout + p.stderr
    assert re.search(r"\| `aesgen_native_ecb.S` \| \d+ passed, 0 failed", (tmp_path / "README.md").read_text())


def test_a_failed_export_verify_writes_nothing_not_even_the_folder(tmp_path: Path, monkeypatch) -> None:
    from click.testing import CliRunner

    import aesgen.tools.cli as cli
    from aesgen.verify.results import CheckResult

    monkeypatch.setattr(cli, "verify_kernel", lambda *a, **k: [CheckResult("planted", "fail", "a planted failure")])
    out = tmp_path / "deep" / "vendor"
    r = CliRunner().invoke(cli.main, ["export", "--target", "westmere", "--modes", "ecb", "--verify", "-o", str(out)])
    assert r.exit_code != 0 and "nothing written" in r.output
    assert not (tmp_path / "deep").exists()


# ---------------------------------------------------------------- COFF


@pytest.mark.skipif(shutil.which(MINGW_AS) is None, reason=f"needs {MINGW_AS} (apt: binutils-mingw-w64-x86-64)")
def test_win64_export_assembles_as_coff_with_unwind_info(exported) -> None:
    abi_name, out = exported
    if abi_name != "win64":
        pytest.skip("win64 exports only")
    p = make(out, "coff")
    assert p.returncode == 0, p.stdout + p.stderr
    for mode in SMALL.split(","):
        coff = (out / f"aesgen_native_{mode}.coff.s").read_text()
        for elf_only in (".size", ".note.GNU-stack", ".rodata", ".cfi_", "@function", "@progbits"):
            assert elf_only not in coff, (mode, elf_only)
        assert not re.search(r"^\s*\.type\s", coff, re.M)  # COFF's .type sits inside .def
        assert ".seh_proc" in coff and ".seh_endprologue" in coff
        objdump = shutil.which("x86_64-w64-mingw32-objdump")
        if objdump:
            dump = subprocess.run([objdump, "-x", str(out / f"aesgen_native_{mode}.obj")],
                                  capture_output=True, text=True).stdout
            assert "pe-x86-64" in dump and ".pdata" in dump and ".xdata" in dump
            assert re.search(rf" 0x[0-9a-f]+ aesgen_native_{mode}_cpu_supported$", dump, re.M)  # no underscore


# ---------------------------------------------------------------- the win64 wrapper


def test_win64_saves_only_the_xmm_registers_a_function_uses() -> None:
    asm = generate(KernelSpec(("ecb",), "avx", 128, 1, abi="win64")).asm
    key_setup = asm[asm.index("_set_encrypt_key:"):asm.index("_set_decrypt_key:")]
    ecb = asm[asm.index("_ecb_encrypt:"):asm.index("_ecb_decrypt:")]
    saved = lambda text: set(re.findall(r"seh_savexmm %xmm(\d+)", text))  # noqa: E731
    assert saved(ecb) and saved(ecb) <= {str(i) for i in range(6, 16)}
    used = {n for n in re.findall(r"%[xy]mm(\d+)", ecb) if 6 <= int(n) <= 15}
    assert saved(ecb) == used
    assert "seh_savexmm" not in asm[asm.index("_cpu_supported:"):asm.index("_set_encrypt_key:")]
    assert saved(key_setup) <= {str(i) for i in range(6, 16)}


def test_sysv_output_is_unchanged_by_the_abi_field() -> None:
    asm = generate(KernelSpec(("ctr32",), "avx2", 256, 2)).asm
    assert "AESGEN_" not in asm and ".seh_" not in asm and "(%rsp)" in asm  # red zone tail as before


def test_abi_trampoline_win64_self_tests_catch_planted_faults() -> None:
    results = list(abi.win64_self_tests(seed=3))
    assert {r.name for r in results} >= {"abi selftest win64 fault_xmm6", "abi selftest win64 fault_rsi",
                                         "abi selftest win64 clean", "abi selftest win64 stackargs"}
    bad = [r for r in results if r.status != "pass"]
    assert not bad, bad


def test_a_win64_kernel_without_its_xmm6_save_is_caught(tmp_path: Path) -> None:
    """Negative, end to end: drop the restore of xmm6 from a generated win64 file."""
    spec = KernelSpec(("ecb",), "avx2", 256, 8, abi="win64", prefix="broken_w64")
    asm = generate(spec, "broken.S").asm
    assert "saved xmm6" in asm
    path = tmp_path / "broken.S"
    restore = re.compile(r"\s*vmovdqa \S*\(%rsp\),%xmm6\s")
    kept = [line for line in asm.splitlines() if not restore.match(line)]
    assert len(kept) < len(asm.splitlines())
    path.write_text("\n".join(kept) + "\n")
    require_cpu(spec)
    results = {r.name: r for r in verify_kernel(path, spec, quick=True)}
    assert results["abi ecb_encrypt"].status == "fail"
    assert "xmm6 clobbered" in results["abi ecb_encrypt"].detail


@pytest.mark.parametrize("modes, isa", [("ecb,ctr32,cbc", "sse"), ("gcm", "avx2"), ("ocb", "avx512")])
def test_aesgen_verify_passes_on_win64_files(modes: str, isa: str, tmp_path: Path) -> None:
    spec = KernelSpec(tuple(modes.split(",")), isa, {"sse": 128, "avx2": 256, "avx512": 512}[isa], 2, abi="win64")
    path = tmp_path / "w64.S"
    path.write_text(generate(spec, path.name).asm)
    results = verify_kernel(path, spec, quick=True)
    failed = [r for r in results if r.status == "fail"]
    assert not failed, failed
    abi_checks = [r for r in results if r.name.startswith("abi ") and "selftest" not in r.name]
    assert abi_checks and all("Microsoft x64" in r.detail for r in abi_checks if r.status == "pass")


# ---------------------------------------------------------------- the smoke vectors are right


def _ecb(key: bytes, data: bytes) -> bytes:
    e = Cipher(algorithms.AES(key), modes.ECB()).encryptor()
    return e.update(data) + e.finalize()


def _values(case: smoke.SmokeCase) -> dict[str, bytes]:
    return {b.name: bytes.fromhex(b.data) for b in case.buffers if b.data}


def _expected(case: smoke.SmokeCase) -> dict[str, bytes]:
    return {b.name: bytes.fromhex(b.expect) for b in case.buffers if b.expect is not None}


def _standard_mode(fn: str, key: bytes, iv: bytes | None):
    """cryptography's context for the standard mode the record of `fn` names."""
    std = FUNCTIONS[fn].standard
    cls = getattr(decrepit_modes, std.name, None) or getattr(modes, std.name)
    c = Cipher(algorithms.AES(key), cls() if iv is None else cls(iv))
    return c.decryptor() if std.decrypt else c.encryptor()


def check_standard_case(case: smoke.SmokeCase) -> None:
    """A case derived from a record's standard mode: the output, and an iv on return that continues
    the stream (one more block comes out as from one call over both)."""
    v, want = _values(case), _expected(case)
    fn = case.calls[-1].fn
    chain = [p.name for p in FUNCTIONS[fn].params if p.access == "rw"]
    iv = v[chain[0]] if chain else None
    extra = bytes(range(16))
    whole = _standard_mode(fn, v["key"], iv).update(v["given"] + extra)
    assert whole[:-16] == want["got"], case.name
    if chain:
        assert _standard_mode(fn, v["key"], want[chain[0]]).update(extra) == whole[-16:], case.name


@pytest.mark.parametrize("mode", [m for m in MODES if m not in smoke.SMOKE_CASES])
def test_derived_smoke_vectors_agree_with_cryptography(mode: str) -> None:
    assert smoke.cases(mode)
    for case in smoke.cases(mode):
        check_standard_case(case)


def test_a_derived_smoke_case_is_checked_like_a_mode_s_own() -> None:
    """The derivation on modes that have their own cases (a wrong iv on return fails)."""
    for fn in ("ecb_encrypt", "cbc_encrypt", "cbc_decrypt"):
        check_standard_case(smoke.standard_case(fn))
    case = smoke.standard_case("cbc_encrypt")
    wrong = tuple(replace(b, expect=b.data) if b.name == "iv" else b for b in case.buffers)
    with pytest.raises(AssertionError):
        check_standard_case(replace(case, buffers=wrong))


@pytest.mark.parametrize("mode", sorted(smoke.SMOKE_CASES))
def test_smoke_vectors_agree_with_cryptography(mode: str) -> None:
    for case in smoke.SMOKE_CASES[mode]:
        v, want = _values(case), _expected(case)
        if "back" in want:  # decrypting (inverting) must give the input back
            assert want["back"] == v.get("pt", v.get("given")), case.name
        if mode == "ecb":
            assert _ecb(v["key"], v["pt"]) == want["ct"]
        elif mode == "ctr32":
            e = Cipher(algorithms.AES(v["key"]), modes.CTR(v["ctr"])).encryptor()
            assert e.update(v["pt"]) == want["ct"]
            n = int.from_bytes(v["ctr"][12:], "big") + len(v["pt"]) // 16
            assert want["ctr"] == v["ctr"][:12] + (n % 2**32).to_bytes(4, "big")
        elif mode == "cbc":
            e = Cipher(algorithms.AES(v["key"]), modes.CBC(v["iv"])).encryptor()
            assert e.update(v["pt"]) == want["ct"] and want["iv"] == want["ct"][-16:]
        elif mode == "gcm":
            assert AESGCM(v["key"]).encrypt(v["iv"], v["pt"], None) == want["ct"] + want["tag"]
        elif mode == "gcm-siv":
            assert AESGCMSIV(v["key"]).encrypt(v["nonce"], b"", None) == want["tag"]
        elif mode == "xts":
            e = Cipher(algorithms.AES(v["key1"] + v["key2"]), modes.XTS(v["tweak"])).encryptor()
            assert e.update(v["pt"]) == want["ct"]
        elif mode == "ocb":
            assert AESOCB3(v["key"]).encrypt(v["n1"], b"", None) == want["tag1"]
            assert AESOCB3(v["key"]).encrypt(v["n2"], v["pt"], v["ad"]) == want["ct"] + want["tag2"]
        elif mode == "ghash":  # the published tags of GCM test cases 1 and 2, through cryptography
            tag = lambda pt: AESGCM(v["key"]).encrypt(bytes(12), pt, None)[-16:]  # noqa: E731
            assert want["acc"] == bytes(a ^ b for a, b in zip(tag(bytes(16)), tag(b"")))
            assert v["data"][:16] == AESGCM(v["key"]).encrypt(bytes(12), bytes(16), None)[:16]
            assert v["data"][16:] == (128).to_bytes(16, "big")
        elif mode == "gfdouble":  # x^127 * x = x^7 + x^2 + x + 1, * x again: x^8 + x^3 + x^2 + x
            assert want["out_le"][16:32] == bytes([0x87]) + bytes(15)
            assert want["out_le"][32:] == bytes([0x0e, 0x01]) + bytes(14)
            assert want["out_be"][16:32] == bytes(15) + bytes([0x87])
            assert want["out_be"][32:] == bytes(14) + bytes([0x01, 0x0e])
        elif mode == "polyval":  # RFC 8452 Appendix A, through an independent POLYVAL (_dot below)
            h, acc = int.from_bytes(v["h"], "little"), 0
            for i in range(0, len(v["x"]), 16):
                acc = _dot(acc ^ int.from_bytes(v["x"][i:i + 16], "little"), h)
            assert acc.to_bytes(16, "little") == want["acc"]
        elif mode == "otr":  # the designer's vectors, through the reference written from the specification
            assert otr.otr_encrypt(v["key"], v["nonce"], v["ad"], v["pt"]) == (want["ct"], want["tag"])
        elif mode == "rijndael256":  # Gladman's vector, through the reference written from the specification
            assert rijndael256_ecb(v["key"], v["pt"]) == want["ct"] and len(v["key"]) == len(v["pt"]) == 32
        elif mode == "simpira":
            assert simpira256_many(v["given"]) == want["permuted"] and v["given"] == bytes(32)
        elif mode == "multikey":  # each key's blocks through AES-ECB
            n, per_key = case.calls[0].args[2], len(v["keys"]) // case.calls[0].args[2]
            assert n >= 2 and len(set(v["keys"][k * per_key:(k + 1) * per_key] for k in range(n))) == n
            for k in range(n):
                key, block = v["keys"][k * per_key:(k + 1) * per_key], slice(16 * k, 16 * k + 16)
                assert _ecb(key, v["pt"][block]) == want["ct"][block]
        elif mode == "fixed-key-hash":  # the definition: pi(sigma(x)) ^ sigma(x), pi = AES under the key
            for i in range(0, len(v["x"]), 16):
                s = sigma_reference(v["x"][i:i + 16])
                assert bytes(a ^ b for a, b in zip(_ecb(v["key"], s), s)) == want["hash"][i:i + 16]
        elif mode == "cbc-multi":  # each stream on its own through AES-CBC
            streams = sum(1 for name in v if name.startswith("src"))
            assert streams >= 2
            for s in range(streams):
                e = Cipher(algorithms.AES(v["key"]), modes.CBC(v[f"iv{s}"])).encryptor()
                assert e.update(v[f"src{s}"]) == want[f"dst{s}"] and want[f"iv{s}"] == want[f"dst{s}"][-16:]
        elif mode == "halfgates":  # AES from cryptography in the reference; the AND gate's meaning
            key, delta, gid = v["key"], v["delta"], case.calls[1].args[4]
            a0 = [v["a0"][i:i + 16] for i in (0, 16)]
            b0 = [v["b0"][i:i + 16] for i in (0, 16)]
            tables, c0 = halfgates_reference.garble(key, delta, a0, b0, gid)
            assert b"".join(tables) == want["tables"] and b"".join(c0) == want["c0"]
            ones = [bytes(p ^ q for p, q in zip(x, delta)) for x in c0]
            assert want["c"] == b"".join(ones)
            assert v["a1"] == b"".join(bytes(p ^ q for p, q in zip(x, delta)) for x in a0)
        else:
            pytest.fail(f"no independent check for the {mode} smoke vector")


def test_every_family_has_a_smoke_vector() -> None:
    assert set(smoke.SMOKE_CASES) <= set(MODES)
    assert [m for m in MODES if not smoke.cases(m)] == []


def _dot(a: int, b: int) -> int:
    """RFC 8452 dot(a, b) = a * b * x^-128 mod x^128 + x^127 + x^126 + x^121 + 1 (bit i: x^i)."""
    poly = (1 << 128) | (1 << 127) | (1 << 126) | (1 << 121) | 1
    r = 0
    for i in range(128):
        if b >> i & 1:
            r ^= a << i
    for i in range(255, 127, -1):  # reduce to degree < 128
        if r >> i & 1:
            r ^= poly << (i - 128)
    for _ in range(128):  # divide by x, 128 times: add the polynomial when odd
        if r & 1:
            r ^= poly
        r >>= 1
    return r


# ---------------------------------------------------------------- everything


@pytest.mark.full
@pytest.mark.parametrize("abi_name", ["sysv", "win64"])
def test_full_export_checks(env, tmp_path: Path, abi_name: str) -> None:
    assert export(env, tmp_path, "--abi", abi_name).returncode == 0
    p = make(tmp_path, "check", CFLAGS="-O2 -Wall -Wextra -Werror")
    assert p.returncode == 0, p.stdout + p.stderr
    assert re.search(r"\d+ checks, 0 failed", p.stdout)
    assert len(re.findall(r"^ok   \S+: \d+ known-answer cases?$", p.stdout, re.M)) == len(MODES), p.stdout


# ---------------------------------------------------------------- drop-in options (issue 13)


def test_export_passes_hidden_and_no_red_zone_to_every_file(env, tmp_path: Path) -> None:
    p = export(env, tmp_path, "--modes", "ecb,ctr32,gcm", "--hidden", "--no-red-zone")
    assert p.returncode == 0, p.stderr
    for mode in ("ecb", "ctr32", "gcm"):
        spec = KernelSpec.from_asm(tmp_path / f"aesgen_native_{mode}.S")
        assert spec.hidden and spec.no_red_zone and spec.object_format == "elf", mode
        assert "Red zone: not used (--no-red-zone" in (tmp_path / f"aesgen_native_{mode}.h").read_text()
    readme = (tmp_path / "README.md").read_text()
    assert "aesgen export --target native --abi sysv --modes ecb,ctr32,gcm --hidden --no-red-zone -o DIR" in readme
    assert "hidden symbols" in readme and "No function touches memory below the stack pointer" in readme
    # the hidden functions still link into the smoke test (static library), and work
    p = make(tmp_path, "check")
    assert p.returncode == 0, p.stdout + p.stderr
    assert re.search(r"\d+ checks, 0 failed, 0 file\(s\) skipped", p.stdout)
    lib = tmp_path / "libk.so"
    assert run(["cc", "-shared", "-fPIC", "-o", str(lib), str(tmp_path / "aesgen_native_ecb.S")]).returncode == 0
    assert "aesgen_native_ecb" not in run(["nm", "-D", "--defined-only", str(lib)]).stdout


def test_export_macho(env, tmp_path: Path) -> None:
    from aesgen.verify import macho

    p = export(env, tmp_path, "--modes", "ecb,xts", "--format", "macho")
    assert p.returncode == 0, p.stderr
    assert "Mach-O files: build on macOS" in (tmp_path / "Makefile").read_text()
    assert "--format macho" in (tmp_path / "README.md").read_text()
    for mode in ("ecb", "xts"):
        path = tmp_path / f"aesgen_native_{mode}.S"
        spec = KernelSpec.from_asm(path)
        assert spec.object_format == "macho", mode
        if macho.llvm_mc():
            assert [r.status for r in macho.check(spec, path)] == ["pass"] * 3, mode


def test_export_refuses_win64_macho_in_one_line(env, tmp_path: Path) -> None:
    out = tmp_path / "out"
    p = export(env, out, "--abi", "win64", "--format", "macho", "--modes", "ecb")
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and "--format macho" in p.stderr
    assert not out.exists()
