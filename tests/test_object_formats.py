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

from _support import require_cpu, run
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


def write(spec: KernelSpec, folder: Path, name: str = "k") -> Path:
    path = folder / f"{name}.S"
    g = generate(spec, path.name)
    path.write_text(g.asm)
    path.with_suffix(".h").write_text(g.header)
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


# ---------------------------------------------------------------- --hidden

HIDDEN_LIB_C = r"""
/* A library that uses the hidden kernels itself and exports only its own function. */
#include <string.h>
#include "k.h"

int library_selftest(void) {  /* FIPS-197 C.1 through the hidden functions: 0 if right */
    static const unsigned char key[16] = {0x00,0x01,0x02,0x03,0x04,0x05,0x06,0x07,0x08,0x09,0x0a,0x0b,0x0c,0x0d,0x0e,0x0f};
    static const unsigned char pt[16] = {0x00,0x11,0x22,0x33,0x44,0x55,0x66,0x77,0x88,0x99,0xaa,0xbb,0xcc,0xdd,0xee,0xff};
    static const unsigned char ct[16] = {0x69,0xc4,0xe0,0xd8,0x6a,0x7b,0x04,0x30,0xd8,0xcd,0xb7,0x80,0x70,0xb4,0xc5,0x5a};
    static _Alignas(64) unsigned char ks[P_KEY_BYTES];
    unsigned char out[16];
    if (!P_cpu_supported()) return 2;
    if (P_set_encrypt_key(key, 128, ks) != 0) return 3;
    P_ecb_encrypt(ks, pt, out, 1);
    return memcmp(out, ct, 16) != 0;
}
"""


def defined_dynamic_symbols(lib: Path) -> set[str]:
    p = run(["nm", "-D", "--defined-only", str(lib)])
    assert p.returncode == 0, p.stderr
    return {line.split()[-1] for line in p.stdout.splitlines() if line.strip()}


@needs_cc
@pytest.mark.parametrize("abi", ["sysv", "win64"])
def test_hidden_symbols_are_not_exported_from_a_shared_object(abi: str, tmp_path: Path) -> None:
    plain = KernelSpec(("ecb", "ctr32"), "avx2", 256, 2, abi=abi)
    hidden = KernelSpec(("ecb", "ctr32"), "avx2", 256, 2, abi=abi, hidden=True)
    symbols = {plain.symbol(f) for f in plain.functions}
    for spec, exported in ((plain, symbols), (hidden, set())):
        folder = tmp_path / ("hidden" if spec.hidden else "plain")
        folder.mkdir()
        src = write(spec, folder)
        lib = folder / "libk.so"
        assert run([CC, "-shared", "-fPIC", "-o", str(lib), str(src)]).returncode == 0
        assert defined_dynamic_symbols(lib) & symbols == exported
        dyn = run(["readelf", "--dyn-syms", "-W", str(lib)]).stdout
        assert all((s in dyn) == bool(exported) for s in symbols)
        obj = folder / "k.o"
        assert run([CC, "-c", "-o", str(obj), str(src)]).returncode == 0
        table = run(["readelf", "-sW", str(obj)]).stdout
        rows = [line.split() for line in table.splitlines() if line.split()[-1:] and line.split()[-1] in symbols]
        assert len(rows) == len(symbols) and all(r[4] == "GLOBAL" for r in rows)
        assert {r[5] for r in rows} == {"HIDDEN" if spec.hidden else "DEFAULT"}


@needs_cc
def test_a_library_calls_its_hidden_kernels_and_exports_only_its_own_function(tmp_path: Path) -> None:
    spec = KernelSpec(("ecb",), "avx2", 256, 2, hidden=True, prefix="P")
    src = write(spec, tmp_path)
    (tmp_path / "lib.c").write_text(HIDDEN_LIB_C)
    lib = tmp_path / "libuser.so"
    p = run([CC, "-std=c11", "-shared", "-fPIC", f"-I{tmp_path}", "-o", str(lib), str(tmp_path / "lib.c"), str(src)])
    assert p.returncode == 0, p.stderr
    assert defined_dynamic_symbols(lib) & {"library_selftest", "P_ecb_encrypt"} == {"library_selftest"}
    main = tmp_path / "main.c"
    main.write_text("int library_selftest(void);\nint main(void) { return library_selftest(); }\n")
    p = run([CC, "-o", str(tmp_path / "main"), str(main), str(lib), f"-Wl,-rpath,{tmp_path}"])
    assert p.returncode == 0, p.stderr
    assert run([str(tmp_path / "main")]).returncode == 0
    # a program cannot reach the kernels themselves through the library
    main.write_text('#include "k.h"\nint main(void) { return P_cpu_supported(); }\n')
    p = run([CC, f"-I{tmp_path}", "-o", str(tmp_path / "direct"), str(main), str(lib), f"-Wl,-rpath,{tmp_path}"])
    assert p.returncode != 0 and "P_cpu_supported" in p.stderr


@needs_cc
def test_win64_hidden_is_elf_only(tmp_path: Path) -> None:
    """COFF has no visibility: the COFF flavour of a --hidden win64 file carries no .hidden."""
    spec = KernelSpec(("ecb",), "avx2", 256, 2, abi="win64", hidden=True)
    src = write(spec, tmp_path)
    elf = preprocess(src, "__x86_64__", "__ELF__")
    coff = preprocess(src, "__x86_64__", "_WIN32")
    hidden = [line for line in code_lines(elf) if line.startswith(".hidden ")]
    assert hidden == [f".hidden {spec.symbol(f)}" for f in spec.functions]
    assert ".hidden" not in "\n".join(code_lines(coff)) and ".seh_proc" in coff


def test_hidden_is_recorded_and_regenerates(tmp_path: Path) -> None:
    out = tmp_path / "k.S"
    from _support import aesgen_command
    p = run(aesgen_command() + ["generate", "ecb", "--isa", "sse", "--depth", "1", "--hidden", "-o", str(out)])
    assert p.returncode == 0, p.stderr
    spec = KernelSpec.from_asm(out)
    assert spec.hidden and '"hidden":true' in out.read_text() and "--hidden" in out.read_text().splitlines()[3]
    assert generate(spec, "k.S").asm == out.read_text()
    assert "The symbols are hidden" in (tmp_path / "k.h").read_text()


@needs_cc
def test_verify_runs_on_hidden_files_and_the_visibility_check_can_fail(tmp_path: Path) -> None:
    from dataclasses import replace

    from aesgen.verify import verify_kernel, visibility
    from aesgen.verify.build import build_shared

    spec = KernelSpec(("ecb", "ctr32"), "avx2", 256, 2, hidden=True)
    require_cpu(spec)
    src = write(spec, tmp_path)
    results = verify_kernel(src, spec, quick=True)
    assert [f"{r.name}: {r.detail}" for r in results if r.status == "fail"] == []
    names = {r.name: r for r in results}
    assert names["visibility"].status == "pass" and "hidden" in names["visibility"].detail
    kat = [r for r in results if r.name.startswith("kat ecb_encrypt")]
    assert kat and all(r.status == "pass" for r in kat)  # the functions ran, found in .symtab
    # the check holds a plain file to --hidden and fails it, and a hidden one to the default
    plain = write(replace(spec, hidden=False), tmp_path, "plain")
    assert visibility.check(spec, build_shared(plain)).status == "fail"
    assert visibility.check(replace(spec, hidden=False), build_shared(src)).status == "fail"


# ---------------------------------------------------------------- --format macho

LLVM_NM = llvm_tool("llvm-nm")
needs_llvm_mc = pytest.mark.skipif(LLVM_MC is None or LLVM_NM is None,
                                   reason="needs llvm-mc and llvm-nm (apt: llvm-19) to assemble for macOS")
APPLE = ("__x86_64__", "__APPLE__", "__MACH__")
MACHO_SPECS = {
    "ecb+ctr32+cbc-sse": KernelSpec(("ecb", "ctr32", "cbc"), "sse", 128, 2, object_format="macho"),
    "ecb+ctr32+cbc-avx512-hidden": KernelSpec(("ecb", "ctr32", "cbc"), "avx512", 512, 4, object_format="macho",
                                              hidden=True),
    "gcm-avx2": KernelSpec(("gcm",), "avx2", 256, 2, object_format="macho"),
    "gcm+gcm-siv-avx512": KernelSpec(("gcm", "gcm-siv"), "avx512", 512, 2, object_format="macho"),
    "xts-avx-no-red-zone": KernelSpec(("xts", "ctr32"), "avx", 128, 2, object_format="macho", no_red_zone=True),
    "ocb+otr+mpc-avx512": KernelSpec(("ocb", "otr", "multikey", "fixed-key-hash", "cbc-multi"), "avx512", 256, 2,
                                     object_format="macho"),
    "rijndael256+simpira-avx2": KernelSpec(("rijndael256", "simpira"), "avx2", 256, 2, object_format="macho"),
    "ecb+ctr32+cbc-bitsliced": KernelSpec(("ecb", "ctr32", "cbc"), "avx512", 512, 2, backend="bitsliced",
                                          object_format="macho"),
    "ctr32-gfni": KernelSpec(("ctr32", "ghash"), "avx512", 512, 2, backend="gfni", object_format="macho"),
}


def nm_macho(obj: Path) -> dict[str, str]:
    """llvm-nm -m: symbol -> '(__TEXT,__text) external' and the like."""
    p = run([LLVM_NM, "-m", str(obj)])
    assert p.returncode == 0, p.stderr
    return {line.split()[-1]: " ".join(line.split()[1:-1]) for line in p.stdout.splitlines() if line.strip()}


@needs_cc
@needs_llvm_mc
@pytest.mark.parametrize("name", MACHO_SPECS)
def test_macho_files_assemble_for_macos_with_underscored_globals(name: str, tmp_path: Path) -> None:
    spec = MACHO_SPECS[name]
    src = write(spec, tmp_path)
    pre = tmp_path / "k.s"
    pre.write_text(preprocess(src, *APPLE))
    obj = tmp_path / "k.o"
    p = run([LLVM_MC, "-triple", "x86_64-apple-macosx", "-filetype=obj", str(pre), "-o", str(obj)])
    assert p.returncode == 0, p.stderr[:3000]
    symbols = nm_macho(obj)
    kind = "(__TEXT,__text) private external" if spec.hidden else "(__TEXT,__text) external"
    assert {s: k for s, k in symbols.items() if k.endswith("external")} == \
        {f"_{spec.symbol(f)}": kind for f in spec.functions}
    assert not any("undefined" in k for k in symbols.values())
    # llvm-objdump agrees that it is Mach-O x86-64 with a __const section for the constants
    objdump = llvm_tool("llvm-objdump")
    if objdump:
        headers = run([objdump, "--macho", "-h", str(obj)]).stdout
        assert "__text" in headers and "__const" in headers


@pytest.mark.parametrize("name", MACHO_SPECS)
def test_macho_text_has_no_elf_directives(name: str) -> None:
    spec = MACHO_SPECS[name]
    asm = generate(spec).asm
    code = asm.split("#if defined(__x86_64__) && defined(__APPLE__)\n", 1)[1].split("\n#endif\n", 1)[0]
    for elf_only in ("\t.type", "\t.size", ".note", ".rodata", "@function", "@progbits", ".hidden", "\n.L"):
        assert elf_only not in code, elf_only
    assert "\t.section __TEXT,__const\n" in code
    for f in spec.functions:
        sym = f"_{spec.symbol(f)}"
        assert f"\t.globl {sym}\n" in code and f"\n{sym}:\n" in code
        assert (f"\t.private_extern {sym}\n" in code) == spec.hidden


@needs_cc
@pytest.mark.parametrize("name", ["ecb+ctr32+cbc-sse", "gcm-avx2"])
def test_a_macho_file_is_empty_for_linux_and_elsewhere(name: str, tmp_path: Path) -> None:
    src = write(MACHO_SPECS[name], tmp_path)
    assert code_lines(preprocess(src, "__x86_64__", "__ELF__")) == ['.section .note.GNU-stack,"",%progbits']
    assert code_lines(preprocess(src, "__aarch64__", "__APPLE__", "__MACH__")) == []
    assert "endbr64" in code_lines(preprocess(src, *APPLE))


def test_the_macho_header_is_the_elf_header() -> None:
    """C names have no underscore: the .h is the same but for the regenerate command it quotes."""
    for name, spec in MACHO_SPECS.items():
        from dataclasses import replace

        macho, elf = generate(spec, "k.S").header, generate(replace(spec, object_format="elf"), "k.S").header
        assert macho.replace(" --format macho", "") == elf, name


def test_format_is_recorded_and_win64_macho_is_refused(tmp_path: Path) -> None:
    from _support import aesgen_command

    out = tmp_path / "k.S"
    p = run(aesgen_command() + ["generate", "ecb", "--isa", "sse", "--depth", "1", "--format", "macho", "-o", str(out)])
    assert p.returncode == 0, p.stderr
    spec = KernelSpec.from_asm(out)
    assert spec.object_format == "macho" and '"object_format":"macho"' in out.read_text()
    assert "--format macho" in out.read_text().splitlines()[3] and generate(spec, "k.S").asm == out.read_text()
    assert '"object_format"' not in generate(KernelSpec(("ecb",), "sse", 128, 1)).asm  # ELF files as before
    p = run(aesgen_command() + ["generate", "ecb", "--abi", "win64", "--format", "macho", "-o", str(tmp_path / "w.S")])
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and "--format macho" in p.stderr
    assert sorted(x.name for x in tmp_path.iterdir()) == ["k.S", "k.h"]


@needs_cc
@needs_llvm_mc
def test_verify_a_macho_file(tmp_path: Path) -> None:
    """Its own checks (assemble, symbols, round trip of __text), then every check on its ELF twin."""
    from aesgen.verify import verify_kernel

    spec = MACHO_SPECS["xts-avx-no-red-zone"]
    src = write(spec, tmp_path)
    results = verify_kernel(src, spec, quick=True)
    assert [f"{r.name}: {r.detail}" for r in results if r.status == "fail"] == []
    by_name = {r.name: r for r in results}
    for name in ("macho assemble", "macho symbols", "macho roundtrip", "roundtrip", "red zone"):
        assert by_name[name].status == "pass", name
    assert any(r.name.startswith("kat xts_encrypt") and r.status == "pass" for r in results)


@needs_cc
@needs_llvm_mc
def test_the_macho_checks_can_fail(tmp_path: Path) -> None:
    from aesgen.verify import macho

    spec = MACHO_SPECS["ecb+ctr32+cbc-sse"]
    src = write(spec, tmp_path)
    assert [r.status for r in macho.check(spec, src)] == ["pass"] * 3
    text = src.read_text()
    changed = tmp_path / "changed.S"
    changed.write_text(text.replace("aesenclast", "aesenc", 1))  # one instruction differs
    roundtrip = {r.name: r for r in macho.check(spec, changed)}["macho roundtrip"]
    assert roundtrip.status == "fail" and "aesenc" in roundtrip.detail
    sym = f"_{spec.symbol('ecb_decrypt')}"
    changed.write_text(text.replace(f"\t.globl {sym}\n", ""))  # a function no longer global
    symbols = {r.name: r for r in macho.check(spec, changed)}["macho symbols"]
    assert symbols.status == "fail" and sym in symbols.detail
    changed.write_text(text.replace("\t.section __TEXT,__const", "\t.section .rodata"))  # ELF spelling
    assert macho.check(spec, changed)[0].status == "fail"
