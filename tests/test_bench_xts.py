"""`aesgen bench` on XTS and the doubling sequences: the right ops, peers and ceilings.

Nothing here asserts on speed.
"""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from aesgen.bench.ceiling import Ceiling, InstructionCost
from aesgen.bench.timing import BenchResult, Measurement, op_ceiling
from aesgen.cpu import missing_features
from aesgen.spec import KernelSpec
from aesgen.tools import report
from aesgen.tools.cli import main

SPEC = KernelSpec(("xts", "gfdouble"), "avx512", 256, 2)
needs_cpu = pytest.mark.skipif(bool(missing_features(SPEC.features)),
                               reason=f"CPU lacks {' '.join(missing_features(SPEC.features))}")
XTS_OPS = ("xts_encrypt", "xts_decrypt")
DOUBLING_OPS = ("gfdouble_le", "gfdouble_be")


def bench_cli(tmp_path, *extra):
    js = tmp_path / "bench.json"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(report.console, "_width", 250)  # tables unwrapped, whatever the terminal
        r = CliRunner().invoke(main, ["bench", "xts,gfdouble", "--isa", "avx512", "--width", "256", "--depth", "2",
                                      "--sizes", "256,1024", "--trials", "3", "--budget", "0", "--json", str(js), *extra])
    assert r.exit_code == 0, r.output
    return r.output, json.loads(js.read_text())


@pytest.fixture(scope="module")
def aes128(tmp_path_factory):
    return bench_cli(tmp_path_factory.mktemp("bench-xts"))


@needs_cpu
def test_every_xts_and_doubling_op_is_measured(aes128):
    _, d = aes128
    ours = {(m["op"], m["size"]) for m in d["measurements"] if m["impl"] == "aesgen"}
    assert ours == {(op, size) for op in (*XTS_OPS, *DOUBLING_OPS) for size in (256, 1024)}


@needs_cpu
def test_xts_is_compared_with_openssl_and_doublings_with_nobody(aes128):
    _, d = aes128
    assert "no XTS" in d["peers"]["ipsec-mb"] and d["peers"]["ipsec-mb"].startswith("n/a")
    peer_ops = {m["op"] for m in d["measurements"] if m["impl"] != "aesgen"}
    assert not peer_ops & set(DOUBLING_OPS)
    if not d["peers"]["openssl"].startswith("n/a"):
        assert peer_ops == set(XTS_OPS)
        assert {(r["op"], r["vs"]) for r in d["ratios"]} == {(op, "openssl") for op in XTS_OPS}


@needs_cpu
def test_xts_has_the_aes_ceiling_and_doublings_none(aes128):
    out, d = aes128
    assert set(d["ceilings"]) == set(XTS_OPS)
    assert {c["op"] for c in d["ceiling_fraction"]} == set(XTS_OPS)
    assert "xts_encrypt 256x2 batch doubling, 1024 B:" in out and "of the AES ceiling" in out
    assert "cycles/block" in out and "of ceiling" in out


@needs_cpu
def test_openssl_has_no_192_bit_xts(tmp_path):
    _, d = bench_cli(tmp_path, "--key-bits", "192", "--sizes", "256")
    assert d["key_bits"] == 192
    assert d["peers"]["openssl"] == "n/a (OpenSSL has no AES-192-XTS)"
    assert {m["impl"] for m in d["measurements"]} == {"aesgen"}


def test_doubling_figures_are_per_block_of_core_cycles():
    r = BenchResult(spec={}, key_bits=128, tsc_hz=2e9, core_hz=3e9)
    # 4096 blocks (65536 B) in 8192 ticks = 12288 core cycles: 3 cycles per doubling.
    r.measurements = [Measurement("gfdouble_le", 65536, "aesgen", 8000, 8192, 0, 0)]
    assert r.cycles_per_block("gfdouble_le", 65536) == pytest.approx(3.0)
    assert r.cycles_per_block("gfdouble_be", 65536) is None


def test_xts_ceiling_is_the_aes_bound_at_the_mode_width():
    ceiling = Ceiling(tsc_hz=2e9, core_hz=3e9, costs=[InstructionCost("vaesenc", 512, 1.0, 4.0, 0.0),
                                                      InstructionCost("vaesenc", 256, 0.5, 4.0, 0.0)])
    spec = KernelSpec(("xts", "gfdouble"), "avx512", 512, 8)
    for op in XTS_OPS:
        c = op_ceiling(ceiling, spec, op, 256)
        assert c.name == "AES" and c.bytes_per_cycle == pytest.approx(64 / 14)
    narrow = KernelSpec(("xts",), "avx512", 512, 8, overrides=(("xts", 256, 4),))
    assert op_ceiling(ceiling, narrow, "xts_encrypt", 128).bytes_per_cycle == pytest.approx(32 / (10 * 0.5))
    assert all(op_ceiling(ceiling, spec, op, 128) is None for op in DOUBLING_OPS)


def test_ceiling_line_names_how_the_loop_makes_its_tweaks():
    from aesgen.spec import KernelSpec
    from aesgen.bench.timing import tweak_source

    zmm = KernelSpec(("xts", "otr"), "avx512", 512, 4, gfdouble="batch")
    assert tweak_source(zmm, "xts") == " tweaks doubled in GPRs into tables"
    assert tweak_source(zmm, "otr") == " pipelined, offsets doubled in GPRs into tables"
    ymm = KernelSpec(("xts", "otr"), "avx2", 256, 4, gfdouble="batch")
    assert tweak_source(ymm, "xts") == " tweaks doubled in GPRs into tables"
    assert tweak_source(ymm, "otr") == " batch doubling"
    assert tweak_source(KernelSpec(("xts",), "avx2", 256, 8, gfdouble="batch"), "xts") == " tweaks x^64 from tables"
    xmm = KernelSpec(("xts",), "avx", 128, 4, gfdouble="batch")
    assert tweak_source(xmm, "xts") == " batch doubling"
    assert tweak_source(zmm, "ctr32") == ""
