"""The red zone (issue 13): which functions keep scratch below rsp, what the headers say about it,
`--no-red-zone`, and the verifier's check on the object code (verify/red_zone.py).

The SysV CTR tails (ctr32, GCM, GCM-SIV on sse/avx/avx2) keep a partial block's keystream in 16
bytes below rsp. Code that runs where the red zone is not kept (an OS kernel built with
-mno-red-zone) needs files that never touch memory below rsp.
"""
from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from _support import aesgen_command, run
from aesgen.pipeline import generate
from aesgen.spec import KernelSpec
from aesgen.verify import red_zone, verify_kernel

RED_ZONE_USERS = ("ctr32_encrypt", "gcm_encrypt", "gcm_decrypt", "gcm_encrypt_update", "gcm_decrypt_update",
                  "gcmsiv_encrypt", "gcmsiv_decrypt")


def write(spec: KernelSpec, folder: Path, name: str = "k") -> Path:
    g = generate(spec, f"{name}.S")
    path = folder / f"{name}.S"
    path.write_text(g.asm)
    path.with_suffix(".h").write_text(g.header)
    return path


def plant(path: Path, function: str, *lines: str) -> Path:
    """A copy of the file with instructions inserted after `function`'s endbr64."""
    text = path.read_text()
    label = f"\n{function}:\n"
    at = text.index("\tendbr64\n", text.index(label)) + len("\tendbr64\n")
    planted = path.with_name(f"planted_{path.name}")
    planted.write_text(text[:at] + "".join(f"\t{line}\n" for line in lines) + text[at:])
    return planted


def check(spec: KernelSpec, path: Path):
    result, selftest = red_zone.check(spec, path)
    assert selftest.status == "pass", selftest.detail
    return result


# ---------------------------------------------------------------- what the headers say

def test_headers_state_which_functions_use_the_red_zone_and_how_much(tmp_path: Path) -> None:
    spec = KernelSpec(("ecb", "ctr32", "gcm"), "avx2", 256, 2)
    g = generate(spec, "k.S")
    note = re.sub(r"\n#\s+", " ", g.asm.split("# Red zone: ", 1)[1].split("\n# Key schedule")[0])
    users = [f for f in spec.functions if f in RED_ZONE_USERS]
    assert note.startswith(", ".join(users) + " use 16 bytes below the stack pointer (the SysV red zone"), note
    assert "--no-red-zone" in note
    header = re.sub(r"\s*\n \*\s*", " ", g.header.split(" * Red zone: ", 1)[1].split(" */")[0])
    assert header.startswith(", ".join(spec.symbol(f) for f in users) + " use 16 bytes below the stack pointer")
    # the header tells the truth: the verifier's scan of the object finds exactly those functions
    path = tmp_path / "k.S"
    path.write_text(g.asm)
    found = {f.function for f in red_zone.scan(red_zone.load(path).functions)}
    assert found == {spec.symbol(f) for f in users}
    assert {f.below for f in red_zone.scan(red_zone.load(path).functions)} == {16}


@pytest.mark.parametrize("spec,says", [
    (KernelSpec(("ecb", "cbc"), "sse", 128, 2), "not used (no function touches memory below the stack pointer)"),
    (KernelSpec(("ctr32", "gcm"), "avx512", 512, 2), "not used (no function"),   # masked tails, no stack
    (KernelSpec(("ctr32", "gcm"), "sse", 128, 2, no_red_zone=True), "not used (--no-red-zone: no function"),
])
def test_headers_say_when_no_function_uses_it(spec: KernelSpec, says: str) -> None:
    g = generate(spec, "k.S")
    assert f"# Red zone: {says}" in g.asm and f" * Red zone: {says}" in g.header


def test_win64_headers_are_unchanged_by_it() -> None:
    """Win64 has no red zone; its ABI line says so already, and its header has no such line."""
    g = generate(KernelSpec(("ctr32",), "avx", 128, 2, abi="win64"), "k.S")
    assert "Red zone" not in g.asm and "Red zone" not in g.header and "no red zone" in g.asm


# ---------------------------------------------------------------- --no-red-zone

@pytest.mark.parametrize("isa,width", [("sse", 128), ("avx", 128), ("avx2", 256), ("avx512", 256)])
def test_no_red_zone_files_stay_above_rsp(isa: str, width: int, tmp_path: Path) -> None:
    spec = KernelSpec(("ctr32", "gcm", "gcm-siv"), isa, width, 2, no_red_zone=True)
    result = check(spec, write(spec, tmp_path))
    assert result.status == "pass" and result.detail.startswith("no access below rsp"), result.detail
    # the same modes without the option do use it (where the CTR tail is not masked), and the
    # check, asked to hold that file to --no-red-zone, fails it and names the functions
    default = write(replace(spec, no_red_zone=False), tmp_path, "default")
    strict = check(spec, default)
    if isa == "avx512":
        assert strict.status == "pass"
    else:
        assert strict.status == "fail", strict.detail
        assert {f"{spec.prefix}_{f}" for f in RED_ZONE_USERS} == \
            set(re.findall(r"^(\w+)\+0x[0-9a-f]+: ", strict.detail, re.M))
        assert check(replace(spec, no_red_zone=False), default).status == "pass"  # 16 <= 128 bytes


def test_no_red_zone_bitsliced(tmp_path: Path) -> None:
    spec = KernelSpec(("ecb", "ctr32", "cbc"), "avx2", 256, 1, backend="bitsliced", no_red_zone=True)
    assert check(spec, write(spec, tmp_path)).status == "pass"


def test_the_option_is_recorded_and_regenerates(tmp_path: Path) -> None:
    out = tmp_path / "k.S"
    p = run(aesgen_command() + ["generate", "ctr32", "--isa", "avx", "--depth", "2", "--no-red-zone", "-o", str(out)])
    assert p.returncode == 0, p.stderr
    spec = KernelSpec.from_asm(out)
    assert spec.no_red_zone and '"no_red_zone":true' in out.read_text()
    assert "--no-red-zone" in out.read_text().splitlines()[3]  # the regenerate command
    assert generate(spec, "k.S").asm == out.read_text()
    assert '"no_red_zone"' not in generate(replace(spec, no_red_zone=False)).asm  # default files as before


# ---------------------------------------------------------------- the check catches planted faults

@pytest.mark.parametrize("lines,below", [
    (["movq %rax,-8(%rsp)"], 8),
    (["lea -0x40(%rsp),%r9", "movq %rax,8(%r9)"], 56),
    (["mov %rsp,%r10", "sub %rcx,%r10", "movq (%r10),%rax"], 0),
])
def test_a_planted_access_below_rsp_fails_a_no_red_zone_file(lines: list[str], below: int, tmp_path: Path) -> None:
    spec = KernelSpec(("ecb", "ctr32"), "avx2", 256, 2, no_red_zone=True)
    src = write(spec, tmp_path)
    assert check(spec, src).status == "pass"
    symbol = spec.symbol("ecb_decrypt")
    result = check(spec, plant(src, symbol, *lines))
    assert result.status == "fail"
    what = f"{below} bytes below rsp" if below else "changes a copy of rsp by a register"
    assert re.search(rf"^{symbol}\+0x[0-9a-f]+: .*: {what}", result.detail, re.M), result.detail


def test_a_default_file_may_use_128_bytes_not_more(tmp_path: Path) -> None:
    spec = KernelSpec(("ecb",), "sse", 128, 1)
    src = write(spec, tmp_path)
    symbol = spec.symbol("ecb_encrypt")
    assert check(spec, plant(src, symbol, "movq %rax,-128(%rsp)")).status == "pass"
    beyond = check(spec, plant(src, symbol, "movq %rax,-136(%rsp)"))
    assert beyond.status == "fail" and "136 bytes below rsp" in beyond.detail


def test_the_selftest_fails_when_the_scan_misses_a_plant(monkeypatch) -> None:
    assert red_zone.selftest().status == "pass"
    # a "fault" the scan rightly does not flag (mov %rax,8(%rsp)) must make the self-test fail
    monkeypatch.setattr(red_zone, "PLANTED", red_zone.PLANTED + ((bytes.fromhex("4889442408"), 8),))
    assert red_zone.selftest().status == "fail"


# ---------------------------------------------------------------- the whole verifier

@pytest.mark.parametrize("spec", [
    KernelSpec(("ctr32", "gcm", "gcm-siv"), "sse", 128, 2, no_red_zone=True),
    KernelSpec(("ecb", "ctr32", "cbc", "gcm", "xts"), "avx2", 256, 2, no_red_zone=True),
    KernelSpec(("ctr32",), "avx2", 256, 1, backend="bitsliced", no_red_zone=True),
], ids=lambda s: f"{'+'.join(s.modes)}-{s.isa}-{s.backend}")
def test_verify_passes_on_no_red_zone_files(spec: KernelSpec, tmp_path: Path) -> None:
    results = verify_kernel(write(spec, tmp_path), spec, quick=True)
    failed = [f"{r.name}: {r.detail}" for r in results if r.status == "fail"]
    assert failed == []
    assert any(r.name == "red zone" and r.status == "pass" for r in results)
