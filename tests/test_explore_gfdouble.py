"""`aesgen explore gfdouble` and `explore xts`: every method x width x depth is either timed or
listed with the reason it was not; the JSON and the plot are written. No timing assertions."""
from __future__ import annotations

import json
import shutil

import pytest
from click.testing import CliRunner

from aesgen.cpu import missing_features
from aesgen.doubling import refusal
from aesgen.spec import FEATURES_BY_ISA
from aesgen.tools import report
from aesgen.tools.cli import main
from aesgen.tools.explore_gfdouble import DoublingExploration, DoublingPoint, configs

has_avx512 = pytest.mark.skipif(bool(missing_features(FEATURES_BY_ISA["avx512"] + ("vpclmulqdq",))),
                                reason="CPU lacks AVX-512 with VPCLMULQDQ")


def run(*args):
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(report.console, "_width", 250)  # tables unwrapped, whatever the terminal
        return CliRunner().invoke(main, list(args))


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    d = tmp_path_factory.mktemp("explore-gfdouble")
    js, png = d / "g.json", d / "g.png"
    r = run("explore", "gfdouble", "--widths", "128,256", "--depths", "1", "--methods", "krovetz,ternlog,table",
            "--blocks", "32", "--json", str(js), "--plot", str(png))
    assert r.exit_code == 0, r.output
    return r.output, json.loads(js.read_text()), png


@has_avx512
def test_every_method_isa_and_width_is_a_point(tiny):
    _, d, _ = tiny
    assert d["schema"] == "aesgen-explore-gfdouble/1" and d["op"] == "gfdouble_le" and d["blocks"] == 32
    got = {(p["method"], p["isa"], p["width"], p["depth"]) for p in d["points"]}
    assert got == {(m, isa, w, 1) for isa, w, m in configs([128, 256], ("krovetz", "ternlog", "table"))}
    assert {(isa, w) for _, isa, w, _ in got} == {("sse", 128), ("avx", 128), ("avx512", 128),
                                                   ("avx2", 256), ("avx512", 256)}


@has_avx512
def test_refused_configs_carry_the_config_checks_reason(tiny):
    out, d, _ = tiny
    refused = [p for p in d["points"] if p["status"] == "refused"]
    # ternlog outside AVX-512; the table outside sse/avx at 128 bits
    assert {(p["method"], p["isa"], p["width"]) for p in refused} == {
        ("ternlog", "sse", 128), ("ternlog", "avx", 128), ("ternlog", "avx2", 256),
        ("table", "avx512", 128), ("table", "avx2", 256), ("table", "avx512", 256)}
    for p in refused:
        assert p["reason"] == refusal(p["method"], p["isa"], p["width"], True)
        assert p["cycles_per_doubling"] is None
    assert "ternlog needs AVX-512" in out and "works one xmm block at a time" in out


@has_avx512
def test_measured_points_have_cycles_and_the_best_is_constant_time(tiny):
    out, d, png = tiny
    measured = [p for p in d["points"] if p["status"] == "measured"]
    assert len(measured) == 5 * 3 - 6  # 5 ISA widths x 3 methods, minus the refused
    for p in measured:
        assert p["cycles_per_doubling"] > 0 and p["ticks_per_block"] > 0
        assert p["constant_time"] == (p["method"] != "table")
    assert set(d["best"]) == {"128", "256"}
    assert all(b["method"] != "table" for b in d["best"].values())
    assert "cycles per doubling, each method at its best depth" in out and "0.15 cycles/byte" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_best_skips_the_table_method_and_ties_go_to_the_smaller_depth():
    ex = DoublingExploration(blocks=16)
    ex.points = [DoublingPoint("table", "avx", 128, 1, "measured", cycles_per_doubling=1.0, constant_time=False),
                 DoublingPoint("krovetz", "avx", 128, 4, "measured", cycles_per_doubling=4.0),
                 DoublingPoint("krovetz", "avx", 128, 2, "measured", cycles_per_doubling=4.0),
                 DoublingPoint("ternlog", "sse", 128, 1, "refused", "needs AVX-512")]
    assert (ex.best(128).method, ex.best(128).depth) == ("krovetz", 2)
    assert ex.best_depth("table", "avx", 128).cycles_per_doubling == 1.0
    assert ex.best(256) is None
    assert ex.to_json()["best"] == {"128": {"method": "krovetz", "isa": "avx", "depth": 2,
                                            "cycles_per_doubling": 4.0}}


def test_explore_gfdouble_refuses_a_model_target_and_unknown_methods():
    r = run("explore", "gfdouble", "--target", "skylake")
    assert r.exit_code == 2 and "measures this CPU" in r.output
    r = run("explore", "gfdouble", "--methods", "krovetz,fast")
    assert r.exit_code == 2 and "choose from krovetz" in r.output
    r = run("explore", "gfdouble", "--widths", "384")
    assert r.exit_code == 2 and "runs at 128, 256, 512" in r.output
    r = run("explore", "ctr32", "--blocks", "8")
    assert r.exit_code == 2 and "--blocks" in r.output


@pytest.mark.skipif(not (shutil.which("llvm-mca-19") or shutil.which("llvm-mca")), reason="llvm-mca not installed")
def test_explore_xts_has_one_variant_per_doubling_method(tmp_path):
    js = tmp_path / "x.json"
    r = run("explore", "xts", "--target", "skylake", "--widths", "128", "--depths", "1,2",
            "--methods", "krovetz,ternlog", "--json", str(js))
    assert r.exit_code == 0, r.output
    d = json.loads(js.read_text())
    got = {(p["depth"], p["variant"]): p for p in d["points"]}
    assert set(got) == {(dp, m) for dp in (1, 2) for m in ("krovetz", "ternlog")}
    for (_, method), p in got.items():
        if method == "krovetz":
            assert p["status"] == "model" and p["model_bytes_per_cycle"] > 0
        else:  # skylake's ISA is avx: no vpternlogd
            assert p["status"] == "infeasible" and "needs AVX-512" in p["reason"]
    assert "doubling" in r.output and d["best"]["variant"] == "krovetz"


@has_avx512
def test_explore_xts_measures_gbps_at_the_short_size(tmp_path):
    js = tmp_path / "x.json"
    r = run("explore", "xts", "--widths", "512", "--depths", "2", "--methods", "batch",
            "--sizes", "256,4096", "--budget", "0", "--json", str(js))
    assert r.exit_code == 0, r.output
    (p,) = json.loads(js.read_text())["points"]
    assert p["status"] == "measured" and p["variant"] == "batch"
    assert p["bulk_gbps"] > 0 and p["gbps_by_size"]["256"] > 0 and p["cycles_by_size"]["256"] > 0
    assert "GB/s at 256 B" in r.output
