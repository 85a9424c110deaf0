"""Files the command line writes: their permissions, and what an unwritable output gives.

Regression tests for issue 13: every written file was mode 0600 whatever the umask (mkstemp),
and an output that could not be written was a traceback with exit code 1. The tests run as
root, for whom chmod does not make a folder read-only, so the unwritable places are ones that
refuse root too: /sys (EACCES/EPERM), /proc (ENOENT), a path under a regular file, and a file
name that is taken by a folder.
"""
from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from _support import aesgen_command
from aesgen.tools.cli import write_exploration
from aesgen.tools.files import UsageFailure, write_atomically

ENV = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
SMALL = ("--isa", "sse", "--depth", "1")


def aesgen_under_umask(umask: int, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(aesgen_command() + list(args), capture_output=True, text=True, env=env or ENV,
                          preexec_fn=lambda: os.umask(umask))


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def listing(folder: Path) -> list[str]:
    """Everything in a folder, hidden files (temporaries) included."""
    return sorted(p.name for p in folder.iterdir())


def one_line_error(p: subprocess.CompletedProcess, named: str) -> None:
    assert p.returncode == 2, (p.returncode, p.stdout[-500:], p.stderr[-2000:])
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("aesgen: error: ") and named in lines[0], p.stderr
    assert "Traceback" not in p.stderr


# ---------------------------------------------------------------- permissions

def octal(v: object) -> str:
    return f"{v:04o}" if isinstance(v, int) else str(v)


@pytest.mark.parametrize("umask,expected", [(0o022, 0o644), (0o027, 0o640), (0o002, 0o664)], ids=octal)
def test_generate_follows_the_umask(tmp_path: Path, umask: int, expected: int) -> None:
    p = aesgen_under_umask(umask, "generate", "ecb", *SMALL, "-o", str(tmp_path / "k.S"))
    assert p.returncode == 0, p.stderr
    assert listing(tmp_path) == ["k.S", "k.h"]
    assert {name: oct(mode(tmp_path / name)) for name in listing(tmp_path)} == \
        {"k.S": oct(expected), "k.h": oct(expected)}


@pytest.mark.parametrize("umask,expected", [(0o022, 0o644), (0o027, 0o640)], ids=octal)
def test_export_follows_the_umask(tmp_path: Path, umask: int, expected: int) -> None:
    out = tmp_path / "vendor" / "aes"
    p = aesgen_under_umask(umask, "export", "--target", "skylake", "--modes", "ecb", "-o", str(out))
    assert p.returncode == 0, p.stderr
    names = listing(out)
    assert {"Makefile", "README.md", "smoke_test.c", "aesgen_skylake_ecb.S", "aesgen_skylake_ecb.h"} <= set(names)
    assert {n: oct(mode(out / n)) for n in names} == {n: oct(expected) for n in names}


def test_overwriting_keeps_the_files_mode(tmp_path: Path) -> None:
    """A 0644 header regenerated under a strict umask stays 0644 (it used to become 0600);
    a file the user made 0640 stays 0640."""
    asm, header = tmp_path / "k.S", tmp_path / "k.h"
    asm.write_text("old")
    header.write_text("old")
    asm.chmod(0o640)
    header.chmod(0o644)
    p = aesgen_under_umask(0o077, "generate", "ecb", *SMALL, "-o", str(asm))
    assert p.returncode == 0, p.stderr
    assert (oct(mode(asm)), oct(mode(header))) == (oct(0o640), oct(0o644))
    assert asm.read_text() != "old" and header.read_text() != "old"
    assert listing(tmp_path) == ["k.S", "k.h"]


def test_write_atomically_under_a_umask(tmp_path: Path) -> None:
    old = os.umask(0o027)
    try:
        write_atomically({tmp_path / "a.txt": "text", tmp_path / "b.bin": b"\x00\x01"})
    finally:
        os.umask(old)
    assert (mode(tmp_path / "a.txt"), mode(tmp_path / "b.bin")) == (0o640, 0o640)
    assert (tmp_path / "b.bin").read_bytes() == b"\x00\x01"


# ---------------------------------------------------------------- unwritable outputs

@pytest.mark.parametrize("target", ["/sys/aesgen-test.S", "/proc/aesgen-test.S"])
def test_generate_into_an_unwritable_folder(target: str) -> None:
    p = aesgen_under_umask(0o022, "generate", "ctr32", "--isa", "avx2", "-o", target)
    one_line_error(p, target)
    assert not Path(target).exists()


def test_generate_under_a_regular_file(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("a file, not a folder")
    p = aesgen_under_umask(0o022, "generate", "ecb", *SMALL, "-o", str(tmp_path / "file" / "k.S"))
    one_line_error(p, "not a folder")
    assert listing(tmp_path) == ["file"]


def test_generate_when_the_header_name_is_a_folder(tmp_path: Path) -> None:
    """The .S could be written but the .h cannot: neither is (no half pair, no temporary)."""
    (tmp_path / "k.h").mkdir()
    p = aesgen_under_umask(0o022, "generate", "ecb", *SMALL, "-o", str(tmp_path / "k.S"))
    one_line_error(p, "k.h")
    assert listing(tmp_path) == ["k.h"] and listing(tmp_path / "k.h") == []


@pytest.mark.parametrize("where", ["/sys/aesgen-export", "/proc/aesgen-export", "FILE/sub"])
def test_export_into_an_unwritable_place(tmp_path: Path, where: str) -> None:
    (tmp_path / "FILE").write_text("a file")
    out = where.replace("FILE", str(tmp_path / "FILE"))
    p = aesgen_under_umask(0o022, "export", "--target", "skylake", "--modes", "ecb", "-o", out)
    one_line_error(p, out)
    assert not Path(out).exists() and listing(tmp_path) == ["FILE"]


def test_export_when_a_file_name_is_a_folder(tmp_path: Path) -> None:
    out = tmp_path / "aes"
    (out / "Makefile").mkdir(parents=True)
    p = aesgen_under_umask(0o022, "export", "--target", "skylake", "--modes", "ecb", "-o", str(out))
    one_line_error(p, "Makefile")
    assert listing(out) == ["Makefile"]


@pytest.mark.parametrize("args", [
    ["bench", "ctr32", "--isa", "avx2", "--json", "/sys/aesgen-bench.json"],
    ["bench", "--ceiling", "--json", "/proc/aesgen-ceiling.json"],
    ["explore", "ctr32", "--json", "/sys/aesgen-explore.json"],
    ["explore", "ctr32", "--plot", "/proc/aesgen-explore.png"],
    ["explore", "gfdouble", "--plot", "/sys/aesgen-gfdouble.png"],
], ids=lambda a: " ".join(a[:2] + a[-2:-1]))
def test_json_and_plot_outputs_are_checked_before_the_run(args: list[str]) -> None:
    """Refused at once (one line, exit 2), not after minutes of measuring with a traceback."""
    p = aesgen_under_umask(0o022, *args)
    one_line_error(p, args[-1])
    assert not Path(args[-1]).exists()


@pytest.mark.parametrize("folder", ["/sys/aesgen-tune", "/proc/aesgen-tune"])
def test_tune_with_an_unwritable_result_folder(folder: str) -> None:
    p = aesgen_under_umask(0o022, "tune", "ctr32", env={**ENV, "AESGEN_TUNE_DIR": folder})
    one_line_error(p, folder)


def test_write_atomically_leaves_nothing_when_a_write_fails(tmp_path: Path) -> None:
    """The write itself fails (not a pre-check): a UsageFailure naming the file, and the
    temporary of the file written before it is gone too."""
    with pytest.raises(UsageFailure, match="/sys/aesgen-test"):
        write_atomically({tmp_path / "first.txt": "ok", Path("/sys/aesgen-test"): "no"})
    assert listing(tmp_path) == []


def test_explore_outputs_are_staged_then_written_under_the_umask(tmp_path: Path) -> None:
    """write_exploration: each module writer runs into a private folder; the files land in
    place through write_atomically (the umask's mode, nothing else left in the folder)."""
    class Module:
        @staticmethod
        def write_json(result, path: Path) -> None:
            path.write_text(f'{{"result": "{result}"}}')

        @staticmethod
        def plot(result, path: Path) -> None:
            assert path.suffix == ".svg"  # the writer sees the suffix: it picks the format from it
            path.write_bytes(b"<svg/>")

    old = os.umask(0o027)
    try:
        write_exploration(Module, "r", tmp_path / "e.json", tmp_path / "e.svg")
    finally:
        os.umask(old)
    assert listing(tmp_path) == ["e.json", "e.svg"]
    assert (tmp_path / "e.json").read_text() == '{"result": "r"}' and (tmp_path / "e.svg").read_bytes() == b"<svg/>"
    assert (mode(tmp_path / "e.json"), mode(tmp_path / "e.svg")) == (0o640, 0o640)
