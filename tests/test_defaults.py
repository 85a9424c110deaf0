"""Defaults that must hold between files (issue 13): a default prefix carries the mode set, so
two generated files link into one program and both headers' prototypes stay visible."""
from __future__ import annotations

import subprocess
from pathlib import Path

from _support import run_aesgen
from aesgen.spec import KernelSpec, default_prefix


def aesgen(*args: str) -> subprocess.CompletedProcess:
    return run_aesgen(*args)


def test_default_prefix_names_the_mode_set_in_a_fixed_order() -> None:
    assert default_prefix("aesgen_native", ("ctr32", "ecb")) == "aesgen_native_ecb_ctr32"
    assert default_prefix("aesgen_native", ("gcm-siv",)) == "aesgen_native_gcmsiv"
    assert KernelSpec(("cbc", "ecb"), "avx2", 256, 4).prefix == "aesgen_aesni_avx2_256x4_ecb_cbc"
    assert KernelSpec(("ecb",), "avx2", 256, 4).prefix != KernelSpec(("ctr32",), "avx2", 256, 4).prefix


def test_two_default_files_link_into_one_program(tmp_path: Path) -> None:
    """Was: both `--target native` files got the prefix aesgen_native ('multiple definition' at
    link time) and one include guard (the second header's prototypes vanished). Built only,
    not run, so it holds on any CPU."""
    for name, args in (("a", ("ecb", "--target", "native")), ("b", ("ctr32", "--target", "native")),
                       ("c", ("ecb", "--isa", "avx2")), ("d", ("cbc", "--isa", "avx2"))):
        p = aesgen("generate", *args, "-o", str(tmp_path / f"{name}.S"))
        assert p.returncode == 0, p.stderr
    prefixes = {n: KernelSpec.from_asm(tmp_path / f"{n}.S").prefix for n in "abcd"}
    assert len(set(prefixes.values())) == 4, prefixes
    calls = "\n".join(f"    {prefixes[n]}_set_encrypt_key(key, 128, sched);" for n in "abcd")
    (tmp_path / "main.c").write_text(
        '#include "a.h"\n#include "b.h"\n#include "c.h"\n#include "d.h"\n'
        "static unsigned char key[16], sched[4096] __attribute__((aligned(64)));\n"
        f"int main(void) {{\n{calls}\n    return 0;\n}}\n")
    build = subprocess.run(["cc", "-Wall", "-Werror", "-o", str(tmp_path / "prog"), str(tmp_path / "main.c"),
                            *(str(tmp_path / f"{n}.S") for n in "abcd")], capture_output=True, text=True)
    assert build.returncode == 0, build.stderr


def test_the_include_guard_follows_the_prefix_exactly(tmp_path: Path) -> None:
    for prefix in ("mine", "MINE"):
        p = aesgen("generate", "ecb", "--isa", "avx2", "--prefix", prefix, "-o", str(tmp_path / f"{prefix}.S"))
        assert p.returncode == 0, p.stderr
    guards = {(tmp_path / f"{p}.h").read_text().split("#ifndef ", 1)[1].split()[0] for p in ("mine", "MINE")}
    assert len(guards) == 2, guards
