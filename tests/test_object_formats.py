"""What the rendered `.S` is as a file for other toolchains: the multi-arch guard, and the
lines the C preprocessor sees (issue 13, drop-in details).

Every `.S` wraps its code in a preprocessor condition (x86-64 ELF; win64: x86-64 COFF or
ELF), so a multi-arch build that compiles every `.S` gets an empty object on other
architectures; `.note.GNU-stack` stays on every ELF object.
"""
from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from _support import run
from aesgen.pipeline import generate
from aesgen.spec import KernelSpec
from aesgen.verify.build import llvm_tool

CC = shutil.which(os.environ.get("CC", "cc"))
needs_cc = pytest.mark.skipif(CC is None, reason="no C compiler (cc) on PATH")
LLVM_MC = llvm_tool("llvm-mc")

SPECS = {
    "ecb+ctr32+cbc-sse": KernelSpec(("ecb", "ctr32", "cbc"), "sse", 128, 2),
    "gcm+xts-avx512": KernelSpec(("gcm", "xts"), "avx512", 512, 2),
    "ctr32-bitsliced": KernelSpec(("ctr32",), "avx2", 256, 1, backend="bitsliced"),
    "ecb+ctr32-win64": KernelSpec(("ecb", "ctr32"), "avx2", 256, 2, abi="win64"),
}
# Lines the C preprocessor treats as directives (a `#` comment that begins with one of these
# words, or with a number, would be one too).
DIRECTIVE = re.compile(r"^\s*#\s*(if|ifdef|ifndef|elif|else|endif|define|undef|include|include_next|line|"
                       r"error|warning|pragma|ident|import|assert|unassert|\d)\b")


def preprocess(src: Path, *defines: str) -> str:
    """The file as the C preprocessor gives it to an assembler, with only `defines` predefined."""
    p = run([CC, "-E", "-P", "-undef", *(f"-D{d}" for d in defines), "-x", "assembler-with-cpp", str(src)])
    assert p.returncode == 0, p.stderr
    return p.stdout


def code_lines(text: str) -> list[str]:
    """What an assembler would act on: not blank, not a `#` comment."""
    return [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def write(spec: KernelSpec, folder: Path) -> Path:
    path = folder / "k.S"
    path.write_text(generate(spec, path.name).asm)
    return path


@needs_cc
@pytest.mark.parametrize("name", SPECS)
def test_other_architectures_see_no_code(name: str, tmp_path: Path) -> None:
    src = write(SPECS[name], tmp_path)
    stack_note = ['.section .note.GNU-stack,"",%progbits']
    # aarch64 ELF: only the stack note; aarch64 Mach-O / Windows: nothing at all
    assert code_lines(preprocess(src, "__aarch64__", "__ELF__")) == stack_note
    assert code_lines(preprocess(src, "__aarch64__", "__APPLE__", "__MACH__")) == []
    assert code_lines(preprocess(src, "__aarch64__", "_WIN32")) == []
    assert code_lines(preprocess(src, "__riscv", "__ELF__")) == stack_note
    # x86-64 ELF: the code, the property note and the stack note
    x86 = code_lines(preprocess(src, "__x86_64__", "__ELF__"))
    assert x86[-1] == stack_note[0] and ".section .note.gnu.property,\"a\"" in x86
    assert sum(line == "endbr64" for line in x86) == len(SPECS[name].functions)


@needs_cc
@pytest.mark.skipif(LLVM_MC is None, reason="needs llvm-mc (apt: llvm-19)")
@pytest.mark.parametrize("name", ["ecb+ctr32+cbc-sse", "ctr32-bitsliced"])
def test_assembled_for_aarch64_the_object_is_empty_but_for_the_stack_note(name: str, tmp_path: Path) -> None:
    src = write(SPECS[name], tmp_path)
    pre = tmp_path / "a64.s"
    pre.write_text(preprocess(src, "__aarch64__", "__ELF__"))
    obj = tmp_path / "a64.o"
    p = run([LLVM_MC, "-triple", "aarch64-linux-gnu", "-filetype=obj", str(pre), "-o", str(obj)])
    assert p.returncode == 0, p.stderr
    readelf = llvm_tool("llvm-readelf")
    if readelf:
        sections = run([readelf, "-SW", str(obj)]).stdout
        assert re.search(r"\.note\.GNU-stack\s+PROGBITS", sections), sections
        text = next(line for line in sections.splitlines() if " .text " in line)
        assert re.search(r"PROGBITS\s+\w+\s+\w+\s+000000 ", text), text  # size 0


@needs_cc
@pytest.mark.parametrize("name", SPECS)
def test_x86_64_elf_still_assembles_with_and_without_the_preprocessor(name: str, tmp_path: Path) -> None:
    """cc -c (preprocessed) and plain `as` (to which #if lines are comments) give the same code."""
    src = write(SPECS[name], tmp_path)
    objs = tmp_path / "cc.o", tmp_path / "as.o"
    assert run([CC, "-c", str(src), "-o", str(objs[0])]).returncode == 0
    if SPECS[name].abi == "win64":
        return  # its AESGEN_ELF/AESGEN_COFF macros need the preprocessor
    assert run(["as", str(src), "-o", str(objs[1])]).returncode == 0
    dumps = [run(["objdump", "-d", str(o)]).stdout.split("\n", 3)[3] for o in objs]
    assert dumps[0] == dumps[1] and "endbr64" in dumps[0]


@pytest.mark.parametrize("name", SPECS)
def test_the_only_preprocessor_directives_are_the_guards(name: str) -> None:
    """Comment lines reach the C preprocessor too: none may read as a directive."""
    asm = generate(SPECS[name]).asm
    directives = [line.strip() for line in asm.splitlines() if DIRECTIVE.match(line)]
    guard = "#if defined(__x86_64__) && " + ("(defined(__ELF__) || defined(_WIN32))" if SPECS[name].abi == "win64"
                                             else "defined(__ELF__)")
    expected = [guard, *(["#ifdef __ELF__", "#define AESGEN_ELF(...) __VA_ARGS__", "#define AESGEN_COFF(...)",
                          "#else", "#define AESGEN_ELF(...)", "#define AESGEN_COFF(...) __VA_ARGS__", "#endif",
                          "#ifdef __ELF__", "#endif"] if SPECS[name].abi == "win64" else []),
                "#endif", "#if defined(__ELF__)", "#endif"]
    assert directives == expected
