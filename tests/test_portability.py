"""What aesgen does on *this* CPU, as aesgen sees it (AESGEN_CPU_MASK applied).

Marked `portability`: `make test` runs them unmasked with the rest, then again under each
mask of aesgen.cpu.PORTABILITY_MASKS (a CPU with AVX2 + VAES and no AVX-512, one with AES-NI
and AVX but no VAES, one without AES-NI). Every assertion is relative to the view, so the same
test holds on a Zen 3, a Skylake or a VM without AES-NI.
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from _support import run_aesgen
from aesgen.cpu import MASK_ENV, flags, missing_features
from aesgen.spec import KernelSpec, required_features
from aesgen.target import native
from aesgen.verify.results import NOT_RUN_EXIT

pytestmark = pytest.mark.portability


def aesgen(*args: str) -> subprocess.CompletedProcess:
    return run_aesgen(*args, env={"COLUMNS": "200"})


def view() -> str:
    return os.environ.get(MASK_ENV, "") or "unmasked"


def test_list_works_and_agrees_with_the_view() -> None:
    p = aesgen("list")
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr
    for isa, width in (("avx512", 512), ("avx2", 256), ("sse", 128)):
        lacking = missing_features(required_features(isa, width, ("ecb",)))
        if lacking:
            assert f"this CPU lacks {' '.join(lacking)}" in p.stdout, (view(), isa)
    if not any(missing_features(required_features("avx512", 512, ("ecb",)))):
        assert f"ecb on avx512 512" not in p.stdout


def test_generate_defaults_to_native_and_the_file_runs_here(tmp_path: Path) -> None:
    p = aesgen("generate", "ctr32", "-o", str(tmp_path / "x.S"))
    assert p.returncode == 0, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "--target native" in lines[0], p.stderr  # said, and no 'cannot run' warning
    spec = KernelSpec.from_asm(tmp_path / "x.S")
    t = native()
    backend = t.backend_for(("ctr32",))
    assert (spec.backend, spec.isa) == (backend, t.isa_for(backend)), view()
    assert not missing_features(spec.features)
    v = aesgen("verify", str(tmp_path / "x.S"), "--quick")
    assert v.returncode == 0, v.stdout[-2000:]
    assert "NOT RUN" not in v.stdout and v.stdout.strip().splitlines()[-1].endswith(" 0 failed")


@pytest.mark.parametrize("isa,backend", [("avx512", "aesni"), ("avx2", "aesni"), ("avx", "aesni"),
                                         ("avx2", "bitsliced")])
def test_verify_says_what_did_not_run(isa: str, backend: str, tmp_path: Path) -> None:
    """A file this view cannot run: verify exits NOT_RUN_EXIT and its last line names the features;
    one it can run: exit 0, every check ran."""
    path = tmp_path / "k.S"
    g = aesgen("generate", "ecb", "--isa", isa, "--depth", "2" if backend == "aesni" else "1",
               "--backend", backend, "-o", str(path))
    assert g.returncode == 0, g.stderr
    lacking = missing_features(KernelSpec.from_asm(path).features)
    assert ("cannot run on this CPU" in g.stderr) == bool(lacking), g.stderr
    v = aesgen("verify", str(path), "--quick")
    last = v.stdout.strip().splitlines()[-1]
    if lacking:
        assert v.returncode == NOT_RUN_EXIT, v.stdout[-1500:]
        assert "checks NOT RUN: CPU lacks" in last and lacking[0] in last, last
        assert aesgen("verify", str(path), "--quick", "--allow-skips").returncode == 0
    else:
        assert v.returncode == 0, v.stdout[-1500:]
        assert "NOT RUN" not in v.stdout and last.endswith(" 0 failed"), last


def test_bench_refuses_what_cannot_run_here(tmp_path: Path) -> None:
    for isa in ("avx512", "avx2", "sse"):
        spec = KernelSpec(("ctr32",), isa, 128 if isa == "sse" else 256, 2)
        if missing_features(spec.features):
            p = aesgen("bench", "ctr32", "--isa", isa, "--width", str(spec.width), "--depth", "2",
                       "--sizes", "256", "--compare", "")
            assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
            assert "cannot run" in p.stderr
            return
    pytest.skip(f"this view ({view()}) runs every ISA: no refusal to see")


def test_explore_measures_what_runs_and_names_what_does_not(tmp_path: Path) -> None:
    out = tmp_path / "e.json"
    backend = native().backend_for(("ecb",))  # without AES-NI explore runs what does run here
    aesni = backend == "aesni"
    p = aesgen("explore", "ecb", "--widths", "128,256,512", "--depths", "1-2" if aesni else "1",
               "--sizes", "256,1024", "--budget", "0", "--json", str(out))
    import json

    assert p.returncode == 0, p.stderr
    points = json.loads(out.read_text())["points"]
    zmm = not missing_features(required_features("avx512", 512, ("ecb",), backend=backend))
    for pt in points:
        if pt["width"] == 512 and not zmm:
            assert pt["status"] != "measured", pt
        if pt["status"] == "unsupported":
            assert "this CPU lacks" in pt["reason"], pt
    assert any(pt["status"] == "measured" for pt in points), points


def test_tune_refuses_without_aesni_else_records_the_view(tmp_path: Path) -> None:
    if native().isa_for("aesni") is None:
        p = aesgen("tune", "ecb")
        assert p.returncode == 2 and "no AES-NI" in p.stderr, p.stderr
    else:
        pytest.skip(f"{view()}: tuning with AES-NI is timed by make demo, not the tests")


def test_export_smoke_test_passes_for_the_families_that_run_here(tmp_path: Path) -> None:
    out = tmp_path / "x"
    p = aesgen("export", "--target", "native", "--modes", "ecb,ctr32,cbc", "-o", str(out))
    assert p.returncode == 0, p.stderr
    m = subprocess.run(["make", "-s", "-C", str(out), "check"], capture_output=True, text=True)
    assert m.returncode == 0, m.stdout + m.stderr
    assert " 0 failed" in m.stdout
    for h in out.glob("*.S"):
        assert not missing_features(KernelSpec.from_asm(h).features), (view(), h.name)


def test_the_view_is_what_the_tests_run_under() -> None:
    """The portability passes really mask: the view lacks what the mask names."""
    mask = [f for f in os.environ.get(MASK_ENV, "").split(",") if f]
    assert not any(f in flags() for f in mask)
