"""The `aesgen` command line, run as a user runs it (a subprocess of the installed script)."""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from _support import (APPENDIX_C, C1_CIPHER, C1_KEY, C_PLAIN, F51_CIPHER, F51_COUNTER, F51_KEY, F51_PLAIN,
                      aesgen_command, ctr32, run)
from aesgen.pipeline import generate
from aesgen.spec import MODES, WIDTHS_BY_ISA, KernelSpec
from aesgen.target import native
from aesgen.tools.cli import main

ENV = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}


def aesgen(*args: str, cwd: Path | None = None):
    return run(aesgen_command() + list(args), cwd=cwd, env=ENV)


def listing(folder: Path) -> list[str]:
    """Everything in a folder, hidden files (temporaries) included."""
    return sorted(p.name for p in folder.iterdir())


# ---------------------------------------------------------------- help

def test_help_on_every_command() -> None:
    runner = CliRunner()
    top = runner.invoke(main, ["--help"])
    assert top.exit_code == 0 and "Usage:" in top.output
    commands = sorted(main.commands)
    assert {"generate", "verify", "list", "simulate"} <= set(commands)
    for name in commands:
        assert name in top.output, f"{name} missing from the top-level help"
        r = runner.invoke(main, [name, "--help"])
        assert r.exit_code == 0, (name, r.output)
        assert "Usage:" in r.output, (name, r.output)
        assert len(r.output.strip().splitlines()) >= 3, f"{name} --help says almost nothing"


def test_generate_help_names_every_mode() -> None:
    """issue 13: the help listed 13 of the 16 modes (multikey, fixed-key-hash, cbc-multi were missing)."""
    p = aesgen("generate", "--help")
    text = re.sub(r"-\s+", "-", " ".join(p.stdout.split()))  # click wraps at hyphens
    assert all(m in text for m in MODES), [m for m in MODES if m not in text]


def test_help_and_version_from_the_installed_script() -> None:
    p = aesgen("--help")
    assert p.returncode == 0 and "generate" in p.stdout and p.stderr == ""
    for name in sorted(main.commands):
        p = aesgen(name, "--help")
        assert p.returncode == 0 and "Usage:" in p.stdout and p.stderr == "", (name, p.stderr)
    p = aesgen("--version")
    assert p.returncode == 0 and re.search(r"\d+\.\d+\.\d+", p.stdout)


# ---------------------------------------------------------------- bad input

BAD = [
    (["generate", "ccm"], "ccm"),
    (["generate", "ecb,ccm"], "ccm"),
    (["generate", "xts", "--gfdouble", "table"], "--allow-table-lookups"),
    (["generate", "xts", "--isa", "avx2", "--gfdouble", "table", "--allow-table-lookups"], "one xmm block"),
    (["generate", "xts", "--isa", "avx", "--gfdouble", "ternlog"], "AVX-512"),
    (["generate", "xts", "--gfdouble", "aoki"], "aoki"),
    (["generate", "ecb", "--gfdouble", "batch"], "--gfdouble applies"),
    (["generate", "ecb", "--isa", "neon"], "neon"),
    (["generate", "ecb", "--target", "skylake", "--isa", "foo"], "unknown ISA 'foo'"),  # was a KeyError traceback
    (["generate", "ocb", "--backend", "bitsliced"], "bitsliced"),
    (["generate", "ecb", "--backend", "bitsliced", "--isa", "avx2", "--depth", "2"], "depth"),
    (["generate", "ecb", "--isa", "avx2", "--width", "512"], "512"),
    (["generate", "ecb", "--isa", "sse", "--width", "256"], "256"),
    (["generate", "ecb", "--depth", "0"], "depth 0"),
    (["generate", "ecb", "--depth", "17"], "depth 17"),
    (["generate", "ctr32", "--isa", "avx", "--depth", "16"], "16 vector registers"),
    (["generate", "cbc", "--isa", "sse", "--depth", "16"], "16 vector registers"),
    (["generate", "ecb", "--prefix", "9lives"], "9lives"),
    (["generate", "ecb", "--prefix", "my-aes"], "my-aes"),
    (["generate", "ecb", "--prefix", ""], "C identifier"),
    (["generate", "ecb", "--depth", "abc"], "--depth"),           # click's own usage errors, too
    (["generate", "ecb", "--target", "nosuchcpu"], "nosuchcpu"),
    (["frobnicate", "ecb"], "frobnicate"),
    (["generate", "ctr32,"], "empty mode"),                       # issue 13: a trailing comma was accepted
    (["generate", "ctr32", "--profile", "short"], "--tuned"),     # issue 13: --profile without --tuned
    (["generate", "ecb", "--bogus"], "generate [OPTIONS] MODES"),  # issue 13: a usage error carries the usage
]


@pytest.mark.parametrize("args,named", BAD, ids=lambda v: " ".join(v[1:]) if isinstance(v, list) else None)
def test_bad_input_is_one_line_exit_2_and_no_file(args: list[str], named: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("unrelated")
    before = listing(out)
    p = aesgen(*args, "-o", str(out / "k.S"))
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, f"stderr should be one line: {p.stderr!r}"
    assert named in lines[0], lines[0]
    assert "Traceback" not in p.stderr and p.stdout == ""
    assert listing(out) == before, "wrote something (or left a temporary)"


def test_output_in_a_missing_folder(tmp_path: Path) -> None:
    before = listing(tmp_path)
    p = aesgen("generate", "ecb", "--isa", "sse", "--depth", "1", "-o", str(tmp_path / "nope" / "k.S"))
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "nope" in lines[0] and "exist" in lines[0], p.stderr
    assert listing(tmp_path) == before and not (tmp_path / "nope").exists()


def test_output_must_be_a_dot_s_file(tmp_path: Path) -> None:
    p = aesgen("generate", "ecb", "-o", str(tmp_path / "k.txt"))
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and ".S" in p.stderr
    assert listing(tmp_path) == []


def test_generate_writes_both_files_and_nothing_else(tmp_path: Path) -> None:
    p = aesgen("generate", "ecb,cbc", "--isa", "avx2", "--depth", "2", "-o", str(tmp_path / "aes.S"))
    assert p.returncode == 0, p.stderr
    assert listing(tmp_path) == ["aes.S", "aes.h"]
    g = generate(KernelSpec(("ecb", "cbc"), "avx2", 256, 2), "aes.S")
    assert (tmp_path / "aes.S").read_text() == g.asm and (tmp_path / "aes.h").read_text() == g.header


# ---------------------------------------------------------------- verify

@pytest.fixture(scope="module")
def small_kernel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("cli")
    path = d / "small.S"
    isa = native().isa_for("aesni")  # the richest this CPU (as masked) runs: verify must run every check
    if isa is None:
        pytest.skip("this CPU lacks aes (AES-NI)")
    g = generate(KernelSpec(("ecb", "ctr32", "cbc"), isa, WIDTHS_BY_ISA[isa][-1], 1), path.name)
    path.write_text(g.asm)
    path.with_suffix(".h").write_text(g.header)
    return path


def summary(stdout: str) -> tuple[int, int]:
    last = stdout.strip().splitlines()[-1]
    m = re.fullmatch(r"(\d+) passed, (\d+) failed", last.strip())
    assert m, f"last line is {last!r}"
    return int(m.group(1)), int(m.group(2))


def test_verify_a_good_file(small_kernel: Path) -> None:
    p = aesgen("verify", str(small_kernel))
    assert p.returncode == 0, p.stdout[-2000:]
    passed, failed = summary(p.stdout)
    assert passed > 50 and failed == 0


def test_verify_a_corrupted_file_fails(small_kernel: Path, tmp_path: Path) -> None:
    text = small_kernel.read_text()
    assert "aesenclast" in text
    bad = tmp_path / small_kernel.name
    bad.write_text(text.replace("aesenclast", "aesenc", 1))   # the first ECB block loses its last round
    p = aesgen("verify", str(bad))
    assert p.returncode == 1, p.stdout[-2000:]
    passed, failed = summary(p.stdout)
    assert failed >= 1
    assert re.search(r"kat ecb_encrypt|diff ecb_encrypt", p.stdout), "names the failing checks"


def test_verify_errors_are_one_line(tmp_path: Path) -> None:
    (tmp_path / "random.txt").write_text("not assembly\n")
    for args, named in ((["verify", str(tmp_path / "missing.S")], "missing.S"),
                        (["verify", "/etc/hostname"], "not an aesgen file"),
                        (["verify", "random.txt"], "no such file 'random.txt'"),  # was "unknown mode 'random.txt'"
                        (["verify", str(tmp_path / "random.txt")], "not an aesgen file")):
        p = aesgen(*args)
        assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and named in p.stderr, p.stderr


# ---------------------------------------------------------------- list

def test_list_mentions_every_isa_and_width() -> None:
    p = aesgen("list")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if "mode" in line and "┃" in line)  # the widths' line
    isas, widths = lines[header - 1].split("┃")[2:-1], lines[header].split("┃")[2:-1]
    columns = [f"{i.strip()} {w.strip()}" for i, w in zip(isas, widths)]
    assert columns == ["sse 128", "avx 128", "avx2 256", "avx512 128", "avx512 256", "avx512 512"]
    rows = {line.split("│")[1].strip(): line.split("│")[2:-1] for line in lines if line.startswith("│")}
    for mode in ("ecb", "ctr32", "cbc", "xts", "ocb", "simpira"):
        assert mode in rows and len(rows[mode]) == len(columns), mode
        assert all(re.fullmatch(r"(- )?\d+", c.strip()) for c in rows[mode]), rows[mode]
    assert "this CPU" in p.stdout


# ---------------------------------------------------------------- simulate

def sim_lines(p) -> dict[str, str]:
    assert p.returncode == 0, p.stderr
    return dict(re.findall(r"^(\w+): ([0-9a-f]*)$", p.stdout, re.M))


def test_f51_vectors_agree_with_cryptography() -> None:
    """Guards the pasted SP 800-38A figures against a typo (before they judge the CLI)."""
    assert ctr32(F51_KEY, F51_COUNTER, F51_PLAIN)[0] == F51_CIPHER


@pytest.mark.parametrize("cfg", [["--isa", "sse", "--depth", "1"], ["--isa", "avx2", "--depth", "4"],
                                 ["--isa", "avx512", "--width", "512", "--depth", "2"]])
def test_simulate_ctr32_reproduces_sp800_38a_f51(cfg: list[str]) -> None:
    p = aesgen("simulate", "ctr32_encrypt", "--key", F51_KEY.hex(), "--iv", F51_COUNTER.hex(),
               "--in", F51_PLAIN.hex(), *cfg)
    out = sim_lines(p)
    assert out["out"] == F51_CIPHER.hex()
    assert out["ctr"] == "f0f1f2f3f4f5f6f7f8f9fafbfcfdff01"   # ...feff + 2, mod 2^32 in the last 4 bytes


@pytest.mark.parametrize("bits", (128, 192, 256))
def test_simulate_ecb_reproduces_fips197_appendix_c(bits: int) -> None:
    key, ct = APPENDIX_C[bits]
    out = sim_lines(aesgen("simulate", "ecb_encrypt", "--key", key.hex(), "--in", C_PLAIN.hex()))
    assert out["out"] == ct.hex()
    back = sim_lines(aesgen("simulate", "ecb_decrypt", "--key", key.hex(), "--in", ct.hex(), "--isa", "sse"))
    assert back["out"] == C_PLAIN.hex()


def test_simulate_cbc_returns_the_iv() -> None:
    out = sim_lines(aesgen("simulate", "cbc_encrypt", "--key", C1_KEY.hex(), "--in", C_PLAIN.hex(),
                           "--iv", "00" * 16, "--isa", "avx"))
    assert out == {"out": C1_CIPHER.hex(), "iv": C1_CIPHER.hex()}


def test_simulate_output_is_one_line_for_long_inputs() -> None:
    data = bytes(range(64))
    p = aesgen("simulate", "ctr32_encrypt", "--key", F51_KEY.hex(), "--iv", F51_COUNTER.hex(), "--in", data.hex())
    assert sim_lines(p)["out"] == ctr32(F51_KEY, F51_COUNTER, data)[0].hex()


def test_simulate_bad_function_is_one_line() -> None:
    p = aesgen("simulate", "ccm_encrypt", "--key", "00" * 16)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and "ccm_encrypt" in p.stderr


def test_default_depth_is_lowered_per_mode_to_what_fits_but_an_explicit_depth_is_not(tmp_path) -> None:
    from aesgen.model import max_depth

    fit = max_depth("avx", 128, "rijndael256")
    assert 0 < fit < 8  # a 256-bit block is two halves per group: depth 8 does not fit 16 xmm
    p = aesgen("generate", "rijndael256,ecb", "--isa", "avx", "-o", str(tmp_path / "k.S"))
    assert p.returncode == 0, p.stderr
    assert f"--per-mode rijndael256=128x{fit}" in (tmp_path / "k.S").read_text()
    p = aesgen("generate", "rijndael256", "--isa", "avx", "--depth", "8", "-o", str(tmp_path / "refused.S"))
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert not (tmp_path / "refused.S").exists()
