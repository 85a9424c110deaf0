"""The whole pipeline (aesgen.pipeline.generate) and the files it writes.

Golden files: tests/golden/NAME.S and NAME.h hold three small kernels. Set
AESGEN_UPDATE_GOLDEN=1 to rewrite them after an intended change to the output.
"""
from __future__ import annotations

import difflib
import importlib.metadata
import os
import re
import shlex
import shutil
from pathlib import Path

import pytest

import aesgen
from _support import C1_CIPHER, C1_KEY, C_PLAIN, ISA_WIDTHS, aesgen_command, run
from aesgen.pipeline import generate
from aesgen.spec import KernelSpec
from aesgen.declassify import MARK as DECLASSIFY_MARK

GOLDEN_DIR = Path(__file__).parent / "golden"
UPDATE = os.environ.get("AESGEN_UPDATE_GOLDEN") == "1"
GOLDEN = {
    "ecb_sse_128x1": KernelSpec(("ecb",), "sse", 128, 1),
    "ctr32_avx_128x2": KernelSpec(("ctr32",), "avx", 128, 2),
    "cbc_avx512_512x1": KernelSpec(("cbc",), "avx512", 512, 1),
}
CC = shutil.which(os.environ.get("CC", "cc"))
needs_cc = pytest.mark.skipif(CC is None, reason="no C compiler (cc) on PATH")
needs_binutils = pytest.mark.skipif(not (shutil.which("readelf") and shutil.which("objdump")),
                                    reason="readelf/objdump (binutils) not on PATH")


def all_modes(isa: str, width: int, depth: int = 2) -> KernelSpec:
    return KernelSpec(("ecb", "ctr32", "cbc"), isa, width, depth)


def write_kernel(spec: KernelSpec, folder: Path, name: str = "k") -> Path:
    g = generate(spec, f"{name}.S")
    path = folder / f"{name}.S"
    path.write_text(g.asm, encoding="utf-8")
    path.with_suffix(".h").write_text(g.header, encoding="utf-8")
    return path


# ---------------------------------------------------------------- determinism

@pytest.mark.parametrize("isa,width", ISA_WIDTHS)
def test_generate_is_deterministic(isa: str, width: int) -> None:
    a, b = generate(all_modes(isa, width, 3), "x.S"), generate(all_modes(isa, width, 3), "x.S")
    assert a.asm == b.asm and a.header == b.header
    assert [str(i) for i in a.instructions] == [str(i) for i in b.instructions]


def test_cli_generate_twice_is_byte_identical(tmp_path: Path) -> None:
    """Two processes with different hash seeds: same .S and .h bytes, and the same as the library's."""
    outs = []
    for n, seed in enumerate(("0", "12345")):
        d = tmp_path / f"run{n}"
        d.mkdir()
        env = {**os.environ, "PYTHONHASHSEED": seed}
        p = run(aesgen_command() + ["generate", "ecb,ctr32,cbc", "--isa", "avx512", "--width", "256",
                                    "--depth", "3", "-o", str(d / "aes.S")], env=env)
        assert p.returncode == 0, p.stderr
        outs.append(((d / "aes.S").read_bytes(), (d / "aes.h").read_bytes()))
    assert outs[0] == outs[1]
    lib = generate(KernelSpec(("ecb", "ctr32", "cbc"), "avx512", 256, 3), "aes.S")
    assert outs[0] == (lib.asm.encode(), lib.header.encode())


# ---------------------------------------------------------------- golden files

@pytest.mark.parametrize("name", sorted(GOLDEN))
@pytest.mark.parametrize("suffix", (".S", ".h"))
def test_golden(name: str, suffix: str) -> None:
    g = generate(GOLDEN[name], f"{name}.S")
    text = g.asm if suffix == ".S" else g.header
    path = GOLDEN_DIR / f"{name}{suffix}"
    if UPDATE:
        GOLDEN_DIR.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return
    assert path.exists(), f"{path} missing: run AESGEN_UPDATE_GOLDEN=1 pytest {__file__}"
    want = path.read_text(encoding="utf-8")
    if text != want:
        diff = "".join(list(difflib.unified_diff(want.splitlines(True), text.splitlines(True),
                                                 str(path), "generated"))[:60])
        pytest.fail(f"{path.name} differs from the generator's output (if intended, regenerate with "
                    f"AESGEN_UPDATE_GOLDEN=1):\n{diff}")


def test_golden_files_are_real_kernels() -> None:
    """The goldens are what their own header says: the spec line names their config."""
    if UPDATE:
        pytest.skip("regenerating")
    for name, spec in GOLDEN.items():
        assert KernelSpec.from_asm(GOLDEN_DIR / f"{name}.S") == spec


# ---------------------------------------------------------------- provenance header

def header_field(asm: str, label: str) -> str:
    m = re.search(rf"^# {label}:\s+(.*)$", asm, re.M)
    assert m, f"no '# {label}:' line"
    return m.group(1)


@pytest.mark.parametrize("spec", [GOLDEN["ecb_sse_128x1"], all_modes("avx2", 256, 4),
                                  KernelSpec(("ctr32", "cbc"), "avx512", 512, 7, prefix="my_aes"),
                                  KernelSpec(("ecb", "cbc"), "avx512", 512, 8, overrides=(("cbc", 256, 2),))],
                         ids=lambda s: s.prefix)
def test_provenance_header(spec: KernelSpec, tmp_path: Path) -> None:
    path = write_kernel(spec, tmp_path, "prov")
    asm, h = path.read_text(), path.with_suffix(".h").read_text()
    version = importlib.metadata.version("aesgen")
    assert version == aesgen.__version__
    assert f"# Generated by aesgen {version}." in asm and f"Generated by aesgen {version}." in h
    assert header_field(asm, "ISA").startswith(f"{spec.isa}:")
    assert header_field(asm, "Width").startswith(f"{spec.width} bits")
    assert header_field(asm, "Depth").startswith(f"{spec.depth} independent")
    assert header_field(asm, "Requires").split(" (")[0].split() == list(spec.features)
    assert f"ISA {spec.isa}, width {spec.width}, depth {spec.depth}" in h
    # the spec line round-trips
    assert KernelSpec.from_asm(path) == spec
    # the exact regenerate command, run as written, reproduces both files byte for byte
    m = re.search(r"regenerate with\n#\s+(aesgen generate .*)$", asm, re.M)
    assert m, "no regenerate command"
    command = m.group(1)
    assert f"regenerate with\n *   {command}\n" in h
    fresh = tmp_path / "again"
    fresh.mkdir()
    p = run(aesgen_command() + shlex.split(command)[1:], cwd=fresh)
    assert p.returncode == 0, p.stderr
    assert (fresh / "prov.S").read_bytes() == path.read_bytes()
    assert (fresh / "prov.h").read_bytes() == path.with_suffix(".h").read_bytes()


# ---------------------------------------------------------------- sections, notes, symbols

def function_bodies(asm: str, spec: KernelSpec) -> dict[str, list[str]]:
    """Instruction lines (comments and directives dropped) of each exported function."""
    bodies: dict[str, list[str]] = {}
    current = None
    for line in asm.splitlines():
        name = line[:-1] if line.endswith(":") and not line.startswith((".", "\t", "#")) else None
        if name is not None and DECLASSIFY_MARK in name:  # a local symbol inside the function
            continue
        if name is not None:
            current = name
            bodies[current] = []
            continue
        if current is None:
            continue
        if line.strip() == ".cfi_endproc":
            current = None
            continue
        text = line.split("#", 1)[0].strip()
        if text and not text.startswith(".") and not text.endswith(":"):
            bodies[current].append(text)
    assert set(bodies) == {spec.symbol(f) for f in spec.functions}
    return bodies


@pytest.mark.parametrize("isa,width", ISA_WIDTHS)
def test_sections_and_symbols_in_the_text(isa: str, width: int) -> None:
    spec = all_modes(isa, width)
    asm = generate(spec).asm
    assert '.section .note.GNU-stack,"",%progbits' in asm
    assert ".section .note.gnu.property" in asm
    for f in spec.functions:
        s = spec.symbol(f)
        assert asm.count(f"\t.globl {s}\n") == 1
        assert f"\t.type {s}, @function\n" in asm and f"\t.size {s}, .-{s}\n" in asm
    for name, body in function_bodies(asm, spec).items():
        assert body[0] == "endbr64", f"{name} starts with {body[0]}"


@pytest.mark.parametrize("isa,width", [(i, w) for i, w in ISA_WIDTHS if w > 128])
def test_vzeroupper_before_every_return_in_wide_files(isa: str, width: int) -> None:
    spec = all_modes(isa, width, 3)
    checked = set()
    for name, body in function_bodies(generate(spec).asm, spec).items():
        vector_seen = False
        for n, ins in enumerate(body):
            if re.search(r"%[xyz]mm\d", ins):
                vector_seen = True
            if ins == "ret" and vector_seen:
                assert body[n - 1] == "vzeroupper", f"{name}: ret #{n} after vector code without vzeroupper"
                checked.add(name)
    # every function but cpu_supported returns after vector code at least once
    assert checked == {spec.symbol(f) for f in spec.functions if f != "cpu_supported"}


@needs_cc
@needs_binutils
@pytest.mark.parametrize("isa,width", [("sse", 128), ("avx2", 256), ("avx512", 512)])
def test_object_notes_stack_and_entries(isa: str, width: int, tmp_path: Path) -> None:
    spec = all_modes(isa, width)
    src = write_kernel(spec, tmp_path)
    obj, so = tmp_path / "k.o", tmp_path / "k.so"
    for cmd in ([CC, "-c", str(src), "-o", str(obj)], [CC, "-shared", "-fPIC", "-o", str(so), str(src)]):
        p = run(cmd)
        assert p.returncode == 0, p.stderr
    notes = run(["readelf", "-nW", str(obj)]).stdout
    assert re.search(r"x86 feature: IBT, SHSTK", notes), notes
    sections = run(["readelf", "-SW", str(obj)]).stdout
    stack = next(l for l in sections.splitlines() if ".note.GNU-stack" in l)
    assert " X " not in stack.split(".note.GNU-stack", 1)[1]
    segs = run(["readelf", "-lW", str(so)]).stdout
    gnu_stack = next(l for l in segs.splitlines() if "GNU_STACK" in l)
    assert re.search(r"\bRW\b", gnu_stack) and "RWE" not in gnu_stack, gnu_stack
    # disassembly: every exported function starts with endbr64
    dis = run(["objdump", "-d", "--no-show-raw-insn", str(obj)]).stdout
    firsts = [(s, op) for s, op in re.findall(r"^[0-9a-f]+ <(\w+)>:\n\s+[0-9a-f]+:\s+(\S+)", dis, re.M)
              if DECLASSIFY_MARK not in s]
    assert {s for s, _ in firsts} == {spec.symbol(f) for f in spec.functions}
    assert all(op == "endbr64" for _, op in firsts), firsts


# ---------------------------------------------------------------- linking from C through the header

def c_program(spec: KernelSpec) -> str:
    P = spec.prefix
    arr = lambda b: "{" + ", ".join(f"0x{x:02x}" for x in b) + "}"  # noqa: E731
    ctr_after = C_PLAIN[:12] + (int.from_bytes(C_PLAIN[12:], "big") + 1).to_bytes(4, "big")
    body = []
    if "ecb" in spec.modes:
        body.append(f"""
    {P}_ecb_encrypt(ks, pt, out, 1);
    if (memcmp(out, ct, 16)) return 20;
    {P}_ecb_decrypt(dks, ct, out, 1);
    if (memcmp(out, pt, 16)) return 21;""")
    if "ctr32" in spec.modes:
        body.append(f"""
    uint8_t ctr[16], zero[16] = {{0}};
    memcpy(ctr, pt, 16);                  /* keystream block 0 = AES(pt) = ct */
    {P}_ctr32_encrypt(ks, zero, out, 16, ctr);
    if (memcmp(out, ct, 16)) return 30;
    if (memcmp(ctr, ctr_after, 16)) return 31;""")
    if "cbc" in spec.modes:
        body.append(f"""
    uint8_t iv[16] = {{0}};
    {P}_cbc_encrypt(ks, pt, out, 1, iv);
    if (memcmp(out, ct, 16) || memcmp(iv, ct, 16)) return 40;
    memset(iv, 0, 16);
    {P}_cbc_decrypt(dks, ct, out, 1, iv);
    if (memcmp(out, pt, 16) || memcmp(iv, ct, 16)) return 41;""")
    return f"""/* FIPS-197 Appendix C.1 through the generated header. */
#include <stdalign.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "k.h"

static const uint8_t key[16] = {arr(C1_KEY)};
static const uint8_t pt[16] = {arr(C_PLAIN)};
static const uint8_t ct[16] = {arr(C1_CIPHER)};
static const uint8_t ctr_after[16] = {arr(ctr_after)};
static alignas(64) uint8_t ks[{P}_KEY_BYTES];
static alignas(64) uint8_t dks[{P}_KEY_BYTES];
static alignas(64) uint8_t scratch[{P}_KEY_BYTES];

int main(void) {{
    uint8_t out[16];
    (void)ctr_after;
    if (sizeof ks < 16 * 11 + 4) return 9;
    if ({P}_cpu_supported() != 1) return 10;
    if ({P}_set_encrypt_key(key, 128, ks) != 0) return 11;
    if ({P}_set_decrypt_key(key, 128, dks) != 0) return 12;
    if ({P}_set_encrypt_key(key, 100, scratch) != -1) return 13;
    {"".join(body)}
    puts("C.1 ok");
    return 0;
}}
"""


@needs_cc
@pytest.mark.parametrize("spec", [GOLDEN["ecb_sse_128x1"], GOLDEN["ctr32_avx_128x2"], GOLDEN["cbc_avx512_512x1"],
                                  all_modes("avx2", 256, 4), all_modes("avx512", 256, 8)],
                         ids=lambda s: f"{'+'.join(s.modes)}-{s.isa}-{s.width}x{s.depth}")
def test_links_into_a_c_program_through_the_header(spec: KernelSpec, tmp_path: Path) -> None:
    src = write_kernel(spec, tmp_path)
    p = run([CC, "-shared", "-fPIC", "-o", str(tmp_path / "k.so"), str(src)])
    assert p.returncode == 0, p.stderr
    main_c = tmp_path / "main.c"
    main_c.write_text(c_program(spec))
    exe = tmp_path / "main"
    p = run([CC, "-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic", "-I", str(tmp_path), "-o", str(exe),
             str(main_c), str(tmp_path / "k.so"), f"-Wl,-rpath,{tmp_path}"])
    assert p.returncode == 0, p.stderr
    p = run([str(exe)])
    assert p.returncode == 0, f"exit {p.returncode} (see the return codes in main.c)"
    assert p.stdout.strip() == "C.1 ok"
    cxx = shutil.which("c++") or shutil.which("g++")
    if cxx:   # the header is usable from C++ too (extern "C")
        cpp = tmp_path / "use.cpp"
        cpp.write_text(f'#include "k.h"\nint main() {{ return {spec.prefix}_cpu_supported() == 1 ? 0 : 1; }}\n')
        p = run([cxx, "-Wall", "-Werror", "-I", str(tmp_path), "-o", str(tmp_path / "usecpp"), str(cpp),
                 str(tmp_path / "k.so"), f"-Wl,-rpath,{tmp_path}"])
        assert p.returncode == 0, p.stderr
        assert run([str(tmp_path / "usecpp")]).returncode == 0


@pytest.mark.parametrize("spec", [KernelSpec(("ecb", "ctr32", "cbc", "xts", "ocb", "otr"), "avx2", 256, 8),
                                  KernelSpec(("ctr32", "gcm", "xts"), "avx512", 512, 4)])
def test_every_constant_starts_on_its_own_alignment(spec):
    """Each constant is aligned to its size (at most a cache line): a ymm constant that followed
    an xmm one sat 16 bytes off, so its every load split two lines (CTR32 lost 4% on Golden Cove).
    Offsets are counted from the emitted rows and alignment directives, as the assembler lays
    them out from the section's 64-byte aligned start."""
    rodata = generate(spec).asm.split("\t.section .rodata\n", 1)[1].split("\t.section .note", 1)[0]
    offset, placed = 0, []  # [label, start, bytes]
    for line in rodata.splitlines():
        if m := re.fullmatch(r"\t\.p2align (\d+)", line):
            offset = -(-offset // (1 << int(m.group(1)))) * (1 << int(m.group(1)))
        elif m := re.fullmatch(r"(\.L\w+):", line):
            placed.append([m.group(1), offset, 0])
        elif line.startswith("\t.byte ") and placed:
            n = len(line.split(","))
            placed[-1][2] += n
            offset += n
    sizes = {size for _, _, size in placed}
    assert {16, 32} <= sizes or {16, 64} <= sizes, sizes  # mixed sizes: the case that went wrong
    for label, start, size in placed:
        assert start % min(64, 1 << (size.bit_length() - 1)) == 0, f"{label}: {size} bytes at offset {start}"


def _vector_load_bytes(mnemonic: str, operands: str) -> int | None:
    """Bytes a RIP-relative vector operand reads: the register width, or the broadcast's source."""
    if "broadcast" in mnemonic:
        sizes = {"i128": 16, "i32x4": 16, "i64x2": 16, "f128": 16, "i32x8": 32, "i64x4": 32, "ss": 4, "sd": 8,
                 "b": 1, "w": 2, "d": 4, "q": 8}
        return next((n for suffix, n in sizes.items() if mnemonic.endswith(suffix)), None)
    for reg, n in (("%zmm", 64), ("%ymm", 32), ("%xmm", 16)):
        if reg in operands:
            return None if mnemonic.startswith(("vmovq", "vmovd", "movq", "movd", "vpinsr", "pinsr")) else n
    return None


@pytest.mark.parametrize("args", [
    ("ecb,ctr32,cbc,ghash,polyval,gcm,gcm-siv,xts,ocb,otr,rijndael256,simpira,multikey,fixed-key-hash,cbc-multi",
     "--isa", "avx512", "--width", "512"),
    ("ecb,ctr32,cbc,ghash,gcm,xts,ocb,otr", "--isa", "avx2", "--width", "256"),
    ("ecb,ctr32,cbc,ghash,gcm,xts,ocb,otr", "--isa", "avx", "--width", "128"),
    ("ecb,ctr32,cbc,gcm", "--backend", "bitsliced", "--isa", "avx2", "--width", "256"),
])
def test_no_vector_load_of_a_constant_splits_a_cache_line(tmp_path, args):
    """Every RIP-relative vector operand of the linked code, as objdump resolves it, lies within
    one 64-byte line. Before constants were aligned to their size, a file of every mode had 1,732
    that did not (a zmm byte-swap mask at 16 mod 64 split on every load; AES-256 GCM at 16 KiB ran
    4% slower for it)."""
    if not (shutil.which("objdump") and shutil.which(os.environ.get("CC", "cc"))):
        pytest.skip("needs objdump and a C compiler (binutils, gcc)")
    asm = tmp_path / "k.S"
    run(aesgen_command() + ["generate", args[0], *args[1:], "--prefix", "lint", "-o", str(asm)])
    lib = tmp_path / "k.so"
    run([os.environ.get("CC", "cc"), "-shared", "-o", str(lib), str(asm)])
    dump = run(["objdump", "-d", "--no-show-raw-insn", str(lib)]).stdout
    split, seen = [], 0
    for line in dump.splitlines():
        m = re.search(r"^\s*[0-9a-f]+:\s+(\S+)\s+(.*\(%rip\).*?)#\s*([0-9a-f]+)", line)
        if not m or (n := _vector_load_bytes(m.group(1), m.group(2))) is None:
            continue
        seen += 1
        if int(m.group(3), 16) % 64 + n > 64:
            split.append(line.strip())
    assert seen > 20, "no RIP-relative vector operands found: the parse is wrong"
    assert not split, f"{len(split)} split loads, e.g. {split[:3]}"


def test_loop_heads_and_only_they_start_on_a_32_byte_boundary():
    from aesgen.ir import Branch, Label
    from aesgen.pipeline import LOOP_ALIGN, loop_heads
    items = [Label("top"), Branch("b", "out"), Label("skip"), Branch("jmp", "top"), Label("out")]
    assert loop_heads(items) == {"top"}  # "out" and "skip" are reached forward only
    asm = generate(KernelSpec(("ecb",), "avx", 128, 4)).asm.splitlines()
    aligned = [asm[i + 1] for i, line in enumerate(asm) if line == f"\t.p2align {LOOP_ALIGN}"]
    loops = {line.split()[-1] for line in asm if line.strip().startswith("j") and "loop" in line}
    assert aligned and {a.rstrip(":") for a in aligned if a.startswith(".L")} >= loops
