"""The port model: instruction classes, port bound, knees, rank correlation, explore --model."""
from __future__ import annotations

import math

import pytest
from click.testing import CliRunner

from aesgen.mainloop import main_loop
from aesgen.perfmodel import classify, knee, port_bound, port_table, predict, spearman
from aesgen.pipeline import generate
from aesgen.spec import KernelSpec, WIDTHS_BY_ISA
from aesgen.target import load, targets
from aesgen.tools.cli import main

OP = {"ecb": "ecb_encrypt", "ctr32": "ctr32_encrypt", "cbc": "cbc_decrypt"}


def loop_of(mode: str, isa: str, width: int, depth: int, **options) -> list[str]:
    spec = KernelSpec((mode,), isa, width, depth, **options)
    return main_loop(generate(spec).asm, OP.get(mode, f"{mode}_encrypt")).instructions


def test_memory_operand_round_key_adds_a_load():
    assert classify("vaesenc 0x100(%rdi),%ymm1,%ymm1").classes == ("aes", "load")
    assert classify("vaesenc %ymm13,%ymm1,%ymm1").classes == ("aes",)
    assert classify("vmovdqu %ymm4,0x20(%rdx)").classes == ("store",)
    assert classify("vmovdqu (%rsi),%ymm4").classes == ("load",)
    assert classify("vmovdqa %ymm3,%ymm15").classes == ("move",)
    assert classify("vperm2i128 $0x21,%ymm0,%ymm15,%ymm4").classes == ("lanes",)
    assert classify("vpclmullqlqdq %ymm1,%ymm0,%ymm2").classes == ("clmul",)


def test_sse_forms_read_their_destination():
    ins = classify("aesenc %xmm3,%xmm0")
    assert set(ins.sources) == {"v3", "v0"} and ins.dest == "v0"
    assert set(classify("vaesenc %xmm3,%xmm1,%xmm0").sources) == {"v3", "v1"}


def test_port_bound_spreads_over_shared_pipes():
    # two classes on {a, b} and one only on {b}: b cannot take more than its share
    demands = [(frozenset("ab"), 1.0, "x")] * 4 + [(frozenset("b"), 1.0, "y")] * 4
    load_, pipes, classes = port_bound(demands)
    assert load_ == 4.0 and pipes in (("a", "b"), ("b",))
    assert port_bound([(frozenset("b"), 1.0, "y")] * 6)[:2] == (6.0, ("b",))


def test_zen3_ecb_256_is_bound_by_the_aes_pipes():
    t = load("zen3")
    lat, tput = t.cost("vaesenc", 256)
    for depth in (4, 8):
        p = predict(t, loop_of("ecb", "avx2", 256, depth))
        assert p.bound == "ports" and p.busiest == ("FP0", "FP1") and "aes" in p.busiest_classes
        assert p.cycles == pytest.approx(depth * 10 * tput)  # 10 AES rounds per vector per iteration
    # the knee is reached by ceil(latency / throughput) at the latest
    by_depth = {d: d / predict(t, loop_of("ecb", "avx2", 256, d)).cycles for d in range(1, 9)}
    assert knee(by_depth) <= math.ceil(lat / tput)


def test_round_keys_in_memory_add_loads_on_16_registers():
    deep = predict(load("zen3"), loop_of("ecb", "avx2", 256, 8)).mix["load"]
    shallow = predict(load("zen3"), loop_of("ecb", "avx2", 256, 2)).mix["load"]
    assert shallow == 2 and deep > 8  # 8 input loads plus round keys read from memory


def test_sapphirerapids_zmm_aes_is_port_0_only():
    p = predict(load("sapphirerapids"), loop_of("ecb", "avx512", 512, 4))
    assert p.busiest == ("p0",) and p.cycles == pytest.approx(40)


def test_ctr_counter_is_a_one_cycle_recurrence():
    p = predict(load("sapphirerapids"), loop_of("ctr32", "avx2", 256, 1))
    assert p.recurrence == 1.0  # the step constant's load is off the chain


@pytest.mark.parametrize("name", sorted(targets()))
def test_every_target_has_a_port_table_for_the_block_modes(name):
    t = load(name)
    table = port_table(t)
    assert table.issue_width > 0 and table.reorder_buffer > 0
    assert all(entry.get("source") for entry in table.classes.values()), "every figure names its source"
    isa = t.isa_for("aesni")
    width = WIDTHS_BY_ISA[isa][-1]
    for mode in OP:
        assert predict(t, loop_of(mode, isa, width, 2)).cycles > 0


def test_knee_and_spearman():
    assert knee({1: 1.0, 2: 1.8, 3: 2.0, 4: 1.99}) == 3
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([1, 2, 2, 3], [1, 2, 3, 4]) == pytest.approx(0.9486833)
    assert spearman([1, 1, 1], [1, 2, 3]) is None


def test_explore_model_prints_both_columns_and_the_rank_correlation():
    r = CliRunner().invoke(main, ["explore", "ecb", "--target", "zen3", "--widths", "128,256", "--depths", "1-3",
                                  "--model"])
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    assert "port model vs llvm-mca" in text
    for heading in ("llvm-mca", "port model", "model bound"):
        assert heading in text
    assert "knee 256-bit: port model depth" in text
    assert "rank correlation (Spearman) of port model and llvm-mca bytes/cycle over 6 points: +" in text
