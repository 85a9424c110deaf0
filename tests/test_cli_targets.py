"""CLI paths of the targets issue: --target, explore as a model, tuned files."""
from __future__ import annotations

import json
import os
import shutil

import pytest
from click.testing import CliRunner

from aesgen.cpu import MASK_ENV
from aesgen.spec import KernelSpec
from aesgen.target import cpu_signature
from aesgen.tools.cli import main


def run(*args, env=None):
    return CliRunner().invoke(main, list(args), env=env)


def test_generate_for_skylake_is_aesni_avx_without_vaes(tmp_path):
    out = tmp_path / "x.S"
    r = run("generate", "ctr32", "--target", "skylake", "-o", str(out))
    assert r.exit_code == 0, r.output
    spec = KernelSpec.from_asm(out)
    assert (spec.isa, spec.width) == ("avx", 128)
    assert "vaes" not in spec.features
    text = out.read_text()
    assert "%ymm" not in text and "%zmm" not in text
    assert "vaesenc %xmm" in text


def test_target_refuses_flags_it_lacks(tmp_path):
    r = run("generate", "ctr32", "--target", "skylake", "--isa", "avx512", "-o", str(tmp_path / "x.S"))
    assert r.exit_code == 2
    assert "skylake" in r.output and "avx512" in r.output
    assert not list(tmp_path.iterdir())


def test_target_and_per_mode_exclude_each_other(tmp_path):
    r = run("generate", "ecb", "--target", "zen5", "--per-mode", "ecb=256x4", "-o", str(tmp_path / "x.S"))
    assert r.exit_code == 2


def test_per_mode_regenerate_command_is_exact(tmp_path):
    out = tmp_path / "p.S"
    r = run("generate", "ecb,cbc", "--isa", "avx512", "--width", "512", "--depth", "6",
            "--per-mode", "cbc=256x3", "-o", str(out))
    assert r.exit_code == 0, r.output
    spec = KernelSpec.from_asm(out)
    assert spec.overrides == (("cbc", 256, 3),)
    cmd = next(line for line in out.read_text().splitlines() if line.startswith("#   aesgen generate"))
    again = tmp_path / "again.S"
    argv = cmd.split()[2:]
    argv[argv.index("-o") + 1] = str(again)
    assert run(*argv).exit_code == 0
    assert again.read_text().replace("again.S", "p.S") == out.read_text()


@pytest.mark.skipif(not (shutil.which("llvm-mca-19") or shutil.which("llvm-mca")), reason="llvm-mca not installed")
def test_explore_for_another_target_is_a_labelled_model(tmp_path):
    js = tmp_path / "e.json"
    r = run("explore", "ctr32", "--target", "skylake", "--widths", "128", "--depths", "1-3", "--json", str(js))
    assert r.exit_code == 0, r.output
    assert "MODEL" in r.output and "llvm-mca" in r.output
    d = json.loads(js.read_text())
    assert d["schema"] == "aesgen-explore/2" and d["measured"] is False
    assert [p["status"] for p in d["points"]] == ["model"] * 3
    assert all(p["model_cycles_per_iteration"] > 0 and p["bulk_gbps"] is None for p in d["points"])
    assert d["predicted_knee"] == {"128": 4}


@pytest.mark.skipif(not (shutil.which("llvm-mca-19") or shutil.which("llvm-mca")), reason="llvm-mca not installed")
def test_explore_isa_builds_every_width_for_it(tmp_path):
    """--isa avx2 on an AVX-512 target: the 16-register kernels at 256 bits, 512 bits refused."""
    js = tmp_path / "e.json"
    r = run("explore", "ctr32", "--target", "zen4", "--isa", "avx2", "--widths", "256,512", "--depths", "2",
            "--json", str(js))
    assert r.exit_code == 0, r.output
    assert "256-bit: avx2" in r.output
    d = json.loads(js.read_text())
    assert d["isa_by_width"] == {"256": "avx2", "512": "avx2"}
    status = {p["width"]: (p["status"], p["reason"]) for p in d["points"]}
    assert status[256][0] == "model"
    assert status[512] == ("infeasible", "avx2 has no 512-bit registers")
    bad = run("explore", "ctr32", "--isa", "avx3")
    assert bad.exit_code == 2 and "unknown --isa 'avx3'" in bad.output


@pytest.mark.skipif(not (shutil.which("llvm-mca-19") or shutil.which("llvm-mca")), reason="llvm-mca not installed")
def test_explore_gcm_model_has_k_products_and_infeasible_points(tmp_path):
    from aesgen.model import max_depth

    js = tmp_path / "g.json"
    # Skylake has 16 registers: GCM fits up to some depth m, not at m + 1 (a point, not a crash).
    m = max_depth("avx", 128, "gcm")
    r = run("explore", "gcm", "--target", "skylake", "--widths", "128", "--depths", f"{m}-{m + 1}",
            "--json", str(js))
    assert r.exit_code == 0, r.output
    d = json.loads(js.read_text())
    assert d["schema"] == "aesgen-explore/2" and d["mode"] == "gcm" and d["measured"] is False
    got = {(p["width"], p["depth"], p["variant"]): p for p in d["points"]}
    assert set(got) == {(128, dp, v) for dp in (m, m + 1) for v in ("schoolbook", "karatsuba")}
    for (w, dp, _), p in got.items():
        assert p["k"] == w // 128 * dp
        if dp == m:
            assert p["status"] == "model" and p["model_bytes_per_cycle"] > 0
        else:
            assert p["status"] == "infeasible" and p["reason"]
    assert d["best"]["width"] == 128 and d["best"]["depth"] == m and d["best"]["k"] == m
    assert f"best: 128-bit at depth {m} (k = {m})" in r.output


def test_explore_json_of_measured_gcm_points():
    from aesgen.tools.explore import Exploration, Point

    ex = Exploration("gcm", "native", True, 16384, 256, short_sizes=[256, 1024])
    ex.points = [Point(512, 4, "measured", bulk_gbps=9.0, short_cycles=700.0, variant="schoolbook", k=16,
                       cycles_by_size={"256": 700.0, "1024": 1500.0}),
                 Point(512, 4, "measured", bulk_gbps=9.5, short_cycles=650.0, variant="karatsuba", k=16,
                       cycles_by_size={"256": 650.0, "1024": 1400.0}),
                 Point(128, 16, "infeasible", "out of vector registers", variant="karatsuba", k=16)]
    d = json.loads(json.dumps(ex.to_json()))
    assert d["schema"] == "aesgen-explore/2" and d["short_sizes"] == [256, 1024] and d["short_size"] == 256
    assert d["best"] == {"width": 512, "depth": 4, "variant": "karatsuba", "k": 16}
    assert d["points"][0]["cycles_by_size"] == {"256": 700.0, "1024": 1500.0}
    assert d["points"][2]["bulk_gbps"] is None and d["points"][2]["reason"] == "out of vector registers"


def test_tuned_generation_uses_the_saved_result(tmp_path):
    vendor, family, model, name = cpu_signature()
    pick = lambda w, d: {"width": w, "depth": d, "gbps": 1.0, "cycles": 1.0}  # noqa: E731
    data = {"schema": "aesgen-tune/1", "cpu": name, "signature": [vendor, family, model], "isa": "avx2",
            "cpu_mask": os.environ.get(MASK_ENV, ""),
            "modes": {"ctr32": {"mode": "ctr32", "bulk": pick(256, 6), "short": pick(256, 2), "candidates": []},
                      "ecb": {"mode": "ecb", "bulk": pick(256, 8), "short": pick(256, 1), "candidates": []}}}
    (tmp_path / "tuned-native.json").write_text(json.dumps(data))
    env = {"AESGEN_TUNE_DIR": str(tmp_path)}
    for profile, depths in (("bulk", {"ctr32": 6, "ecb": 8}), ("short", {"ctr32": 2, "ecb": 1})):
        out = tmp_path / f"{profile}.S"
        r = run("generate", "ctr32,ecb", "--target", "native", "--tuned", "--profile", profile, "-o", str(out),
                env=env)
        assert r.exit_code == 0, r.output
        spec = KernelSpec.from_asm(out)
        assert {m: spec.depth_for(m) for m in depths} == depths
    r = run("generate", "cbc", "--target", "native", "--tuned", "-o", str(tmp_path / "c.S"), env=env)
    assert r.exit_code == 2 and "aesgen tune cbc" in r.output


def test_a_tuning_under_another_cpu_view_is_not_used(tmp_path):
    """A tuning measured under one AESGEN_CPU_MASK says nothing about another view."""
    vendor, family, model, name = cpu_signature()
    pick = {"width": 256, "depth": 4, "gbps": 1.0, "cycles": 1.0}
    data = {"schema": "aesgen-tune/1", "cpu": name, "signature": [vendor, family, model], "isa": "avx2",
            "cpu_mask": os.environ.get(MASK_ENV, "") + ",vaes",
            "modes": {"ecb": {"mode": "ecb", "bulk": pick, "short": pick, "candidates": []}}}
    (tmp_path / "tuned-native.json").write_text(json.dumps(data))
    r = run("generate", "ecb", "--target", "native", "--tuned", "-o", str(tmp_path / "x.S"),
            env={"AESGEN_TUNE_DIR": str(tmp_path)})
    assert r.exit_code == 2 and "aesgen tune" in r.output and MASK_ENV in r.output, r.output


def test_tuned_needs_a_tune_result(tmp_path):
    r = run("generate", "ecb", "--target", "native", "--tuned", "-o", str(tmp_path / "x.S"),
            env={"AESGEN_TUNE_DIR": str(tmp_path / "none")})
    assert r.exit_code == 2 and "aesgen tune" in r.output


def test_explore_table_gives_an_infeasible_reason_its_own_column(monkeypatch):
    from rich.console import Console

    from aesgen.tools import report
    from aesgen.tools.explore import Exploration, Point

    monkeypatch.setattr(report, "console", Console(width=200, highlight=False))

    ex = Exploration("ctr32", "native", True, 16384, 256, short_sizes=[256])
    ex.points = [Point(512, 4, "measured", bulk_gbps=9.0, short_cycles=700.0, cycles_by_size={"256": 700.0}),
                 Point(128, 16, "infeasible", "out of vector registers")]
    with report.console.capture() as cap:
        report.print_exploration(ex)
    lines = cap.get().splitlines()
    header = next(line for line in lines if "bulk GB/s" in line)
    row = next(line for line in lines if "infeasible" in line)
    assert "reason" in header
    assert row.index("out of vector") >= header.index("reason")


def test_explore_measures_the_later_modes_and_refuses_to_model_them(tmp_path):
    from aesgen.tools.explore import MODELLED_MODES, OP_FOR_MODE
    from aesgen.bench.timing import OPS_BY_MODE

    assert all(op in OPS_BY_MODE[mode] for mode, op in OP_FOR_MODE.items())  # each explored op is a bench op
    js = tmp_path / "simpira.json"
    r = run("explore", "simpira", "--widths", "128", "--depths", "1", "--sizes", "256,1024", "--budget", "0", "--json", str(js))
    assert r.exit_code == 0, r.output
    point, = json.loads(js.read_text())["points"]
    assert point["status"] == "measured" and point["bulk_gbps"] > 0
    assert "simpira" not in MODELLED_MODES
    r = run("explore", "cbc-multi", "--target", "zen4", "--widths", "512", "--depths", "4")
    assert r.exit_code == 2 and "no model" in r.output
