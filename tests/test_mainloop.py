"""The main-loop finder: the loop llvm-mca models and the bench ceiling counts.

The loop is found without its label name (the longest loop on the AES-128 path);
these tests check it is the one the generator meant, by name and by content.
"""
from __future__ import annotations

import pytest

from aesgen.dsl import BuildError
from aesgen.mainloop import loops, main_loop
from aesgen.pipeline import generate
from aesgen.spec import KernelSpec
from aesgen.tools.explore import main_loop_text

# (isa, width, depth): a zmm, a ymm and an xmm file, one of them with 16 registers.
CONFIGS = [("avx512", 512, 4), ("avx512", 256, 3), ("avx", 128, 2)]


def clmuls(depth: int, karatsuba: bool) -> int:
    """Carry-less multiplies per main-loop iteration: per vector of blocks 4 (schoolbook) or
    3 (Karatsuba) products, and 2 for the one reduction of the k = lanes x depth blocks."""
    return (3 if karatsuba else 4) * depth + 2


@pytest.mark.parametrize("isa,width,depth", CONFIGS)
@pytest.mark.parametrize("karatsuba", [False, True])
def test_gcm_main_loop_is_the_stitched_ctr_loop(isa, width, depth, karatsuba):
    asm = generate(KernelSpec(("gcm",), isa, width, depth, karatsuba=karatsuba)).asm
    for function in ("gcm_encrypt", "gcm_decrypt"):
        loop = main_loop(asm, function)
        assert f"_{function}_loop{depth}x_" in loop.label
        # 10 AES-128 rounds per vector of blocks, and GHASH's products stitched in.
        assert dict(loop.unit_counts()) == {("vaesenc", width): 10 * depth,
                                            ("vpclmulqdq", width): clmuls(depth, karatsuba)}
        # One iteration advances by 16 x lanes x depth bytes.
        assert f"add ${16 * width // 128 * depth:#x}," in loop.text()


@pytest.mark.parametrize("karatsuba", [False, True])
def test_hash_main_loops_hold_the_aggregated_products(karatsuba):
    asm = generate(KernelSpec(("ghash", "polyval"), "avx512", 512, 4, karatsuba=karatsuba)).asm
    for function in ("ghash", "polyval"):
        loop = main_loop(asm, function)
        assert f"_{function}_hash_loop" in loop.label
        assert dict(loop.unit_counts()) == {("vpclmulqdq", 512): clmuls(4, karatsuba)}


def test_other_key_sizes_have_their_own_path():
    asm = generate(KernelSpec(("gcm",), "avx512", 256, 2)).asm
    for bits, rounds in ((128, 10), (192, 12), (256, 14)):
        loop = main_loop(asm, "gcm_encrypt", bits)
        assert loop.unit_counts()[("vaesenc", 256)] == rounds * 2


@pytest.mark.parametrize("bits,rounds", [(128, 10), (256, 14)])
def test_passes_after_a_second_dispatch_are_on_the_path(bits, rounds):
    """OCB's text pass and GCM-SIV's CTR pass come after a second dispatch on the round count
    (the AAD's and POLYVAL's loops before it): the main loop is the pass that writes the
    output, with its AES rounds, not the hashing loop before it."""
    asm = generate(KernelSpec(("ocb", "gcm-siv"), "avx2", 256, 4)).asm
    for function in ("ocb_encrypt", "ocb_decrypt", "gcmsiv_encrypt", "gcmsiv_decrypt"):
        loop = main_loop(asm, function, bits)
        stores = [i for i in loop.instructions if i.startswith("vmovdqu %ymm") and "(" in i.rsplit(",", 1)[-1]]
        assert len(stores) == 4, (function, bits)
        assert loop.unit_counts()[("vaesenc", 256)] == rounds * 4, (function, bits)


@pytest.mark.parametrize("mode,function", [("ecb", "ecb_encrypt"), ("ctr32", "ctr32_encrypt"),
                                           ("cbc", "cbc_decrypt")])
def test_cipher_main_loops_keep_their_depth_loop(mode, function):
    asm = generate(KernelSpec((mode,), "avx512", 256, 5)).asm
    assert f"_{function}_loop5x_" in main_loop(asm, function).label


def test_llvm_mca_text_has_no_comments_and_ends_with_the_jump_back():
    asm = generate(KernelSpec(("gcm",), "avx512", 512, 2)).asm
    text = main_loop_text(asm, "gcm_encrypt")
    lines = text.splitlines()
    assert "#" not in text
    assert lines[0].endswith(":") and lines[-1].split()[-1] == lines[0][:-1]


TOY = """\
f_x:
\tmov %rdi, %rax
.Lf_x_short1:
\tadd $1, %rax
\tjne .Lf_x_short1
.Lf_x_long2:            # the loop the finder must take
\tadd $1, %rax
\tadd $2, %rax
.Lf_x_inner3:
\tjb .Lf_x_out4
\tjmp .Lf_x_long2
.Lf_x_out4:
\tret
\t.size f_x, .-f_x
g_y:
\tret
"""


def test_loops_are_labels_with_a_later_jump_back():
    found = {lp.label: len(lp.instructions) for lp in loops(TOY)}
    assert found == {".Lf_x_short1": 2, ".Lf_x_long2": 4}
    assert main_loop(TOY, "x").label == ".Lf_x_long2"
    with pytest.raises(BuildError, match="no main loop in y"):
        main_loop(TOY, "y")
    with pytest.raises(BuildError, match="no function z"):
        main_loop(TOY, "z")
