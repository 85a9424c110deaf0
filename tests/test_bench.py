"""Benchmark bookkeeping: the harness runs, the numbers add up, the JSON has its schema.

Nothing here asserts on speed.
"""
from __future__ import annotations

import json
import os
import subprocess

import pytest

from aesgen.cpu import missing_features
from aesgen.pipeline import generate
from aesgen.spec import KernelSpec
from aesgen.bench import timing
from aesgen.bench.build import bench_binary
from aesgen.bench.timing import BenchResult, Measurement, OpCeiling, bench, ceiling_line, op_ceiling
from aesgen.verify.build import build_shared
from aesgen.bench.ceiling import (PER_ITERATION, Ceiling, InstructionCost, ceiling_source, mix_source,
                                   sampled_ceiling)

SPEC = KernelSpec(("ecb", "ctr32"), "avx", 128, 2)
pytestmark = pytest.mark.skipif(bool(missing_features(SPEC.features)),
                                reason=f"CPU lacks {' '.join(missing_features(SPEC.features))}")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = tmp_path_factory.mktemp("bench") / "k.S"
    path.write_text(generate(SPEC).asm)
    return bench(SPEC, path, ops=["ctr32_encrypt", "ecb_encrypt"], sizes=[64, 1024],
                 peers=("openssl", "ipsec-mb"), trials=3, budget=0)


def test_every_op_size_and_available_impl_is_measured(tiny):
    impls = ["aesgen"] + [p for p, info in tiny.peers.items() if not info.startswith("n/a")]
    for op in ("ctr32_encrypt", "ecb_encrypt"):
        for size in (64, 1024):
            for impl in impls:
                m = tiny.get(op, size, impl)
                assert m is not None, (op, size, impl)
                assert 0 < m.min_ticks <= m.median_ticks


def test_gbps_and_ticks_per_byte_follow_from_the_median(tiny):
    for m in tiny.measurements:
        assert m.gbps == pytest.approx(m.size / (m.median_ticks / tiny.tsc_hz) / 1e9)
        assert m.ticks_per_byte == pytest.approx(m.median_ticks / m.size)


def test_missing_peer_is_reported_not_raised(tiny):
    for info in tiny.peers.values():
        assert info and (info.startswith("n/a (") or "n/a" not in info)


def test_json_schema(tiny):
    d = json.loads(json.dumps(tiny.to_json()))
    assert d["schema"] == "aesgen-bench/1"
    assert {"spec", "key_bits", "tsc_hz", "peers", "measurements", "ratios", "ceilings", "machine"} <= set(d)
    for m in d["measurements"]:
        assert set(m) == {"op", "size", "impl", "min_ticks", "median_ticks", "gbps", "ticks_per_byte", "ci_low_ticks",
                          "ci_high_ticks", "rounds", "confidence", "gbps_halfwidth", "modes_gbps"}
        assert m["ci_low_ticks"] <= m["median_ticks"] <= m["ci_high_ticks"] and m["rounds"] == 1
    for r in d["ratios"]:
        assert r["ratio"] == pytest.approx(tiny.ratio(r["op"], r["size"], r["vs"]))
        assert r["ratio_halfwidth"] >= 0


def test_gcm_siv_is_timed_and_the_peers_without_it_say_why(tmp_path):
    spec = KernelSpec(("gcm-siv",), "avx", 128, 2)
    path = tmp_path / "k.S"
    path.write_text(generate(spec).asm)
    r = bench(spec, path, ops=["gcmsiv_encrypt"], sizes=[256], peers=("openssl", "ipsec-mb"), trials=3, budget=0)
    assert r.get("gcmsiv_encrypt", 256, "aesgen") is not None
    for peer in ("openssl", "ipsec-mb"):
        assert r.peers[peer].startswith("n/a (no AES-GCM-SIV"), r.peers[peer]
    refused = bench(spec, path, ops=["gcmsiv_encrypt"], sizes=[256], key_bits=192, trials=3, budget=0)
    assert refused.get("gcmsiv_encrypt", 256, "aesgen") is None  # AES-GCM-SIV has no 192-bit keys


def test_ratio_is_peer_time_over_ours():
    r = BenchResult(spec={}, key_bits=128, tsc_hz=1e9)
    r.measurements = [Measurement("ecb_encrypt", 64, "aesgen", 10, 20, 0, 0),
                      Measurement("ecb_encrypt", 64, "openssl", 30, 60, 0, 0)]
    assert r.ratio("ecb_encrypt", 64, "openssl") == pytest.approx(3.0)
    assert r.ratio("ecb_encrypt", 64, "ipsec-mb") is None


def test_ceiling_source_has_throughput_and_latency_loops():
    text, names = ceiling_source()
    for ins in ("vaesenc", "vpclmulqdq", "vgf2p8affineinvqb"):
        for w in (128, 256, 512):
            assert f"ceil_{ins}_{w}_tput" in names and f"ceil_{ins}_{w}_lat" in names
    assert "ceil_add_lat" in names
    lat = text.split("ceil_vaesenc_512_lat:", 1)[1].split(".size", 1)[0]
    assert lat.count("vaesenc %zmm15, %zmm0, %zmm0") == PER_ITERATION  # one dependent chain
    tput = text.split("ceil_vaesenc_512_tput:", 1)[1].split(".size", 1)[0]
    assert len({line.split(",")[-1] for line in tput.splitlines() if "vaesenc" in line}) == 12


# ---------------------------------------------------------------- ceiling arithmetic (no timing)

def fake_ceiling(mix_cycles: float | None = None) -> Ceiling:
    """Round costs, as if measured: a 3 GHz core whose TSC runs at 2 GHz."""
    costs = [InstructionCost("vaesenc", 512, 1.0, 4.0, 0.0), InstructionCost("vaesenc", 128, 0.5, 4.0, 0.0),
             InstructionCost("vpclmulqdq", 512, 2.0, 4.0, 0.0)]
    ceiling = Ceiling(tsc_hz=2e9, core_hz=3e9, costs=costs)
    ceiling.measure_mix = lambda counts: mix_cycles  # type: ignore[method-assign]
    return ceiling


@pytest.mark.parametrize("karatsuba,clmuls", [(False, 18), (True, 14)])
def test_hash_ceiling_counts_the_main_loop_clmuls(karatsuba, clmuls):
    spec = KernelSpec(("ghash", "polyval"), "avx512", 512, 4, karatsuba=karatsuba)
    for op in ("ghash", "polyval"):
        c = op_ceiling(fake_ceiling(), spec, op, 128, generate(spec).asm)
        # 256 bytes per iteration (4 zmm of 4 blocks); 4 or 3 products per zmm and 2 for the reduction.
        assert c.bytes_per_cycle == pytest.approx(256 / (clmuls * 2.0))
        assert c.gbps == pytest.approx(c.bytes_per_cycle * 3.0)
        assert c.name == "clmul" and not c.measured_together
        assert f"{clmuls} vpclmulqdq zmm" in c.basis


def test_gcm_ceiling_is_the_measured_mix_of_the_main_loop():
    spec = KernelSpec(("gcm",), "avx512", 512, 4)
    c = op_ceiling(fake_ceiling(mix_cycles=64.0), spec, "gcm_encrypt", 128, generate(spec).asm)
    assert c.bytes_per_cycle == pytest.approx(256 / 64.0)
    assert c.measured_together and c.name == "AES+CLMUL"
    assert "40 vaesenc zmm + 18 vpclmulqdq zmm" in c.basis and "alone: AES 40.0, CLMUL 36.0" in c.basis
    # A CPU that cannot run the mix loop has no GCM ceiling rather than a guessed one.
    assert op_ceiling(fake_ceiling(mix_cycles=None), spec, "gcm_encrypt", 128, generate(spec).asm) is None


def test_cipher_ceilings():
    spec = KernelSpec(("ctr32", "cbc"), "avx512", 512, 4)
    assert op_ceiling(fake_ceiling(), spec, "ctr32_encrypt", 128).bytes_per_cycle == pytest.approx(64 / 10)
    assert op_ceiling(fake_ceiling(), spec, "cbc_encrypt", 256).bytes_per_cycle == pytest.approx(16 / (14 * 4.0))
    assert op_ceiling(fake_ceiling(), KernelSpec(("ctr32",), "avx512", 256, 4), "ctr32_encrypt", 128) is None


def test_bytes_per_cycle_and_the_ceiling_line():
    spec = KernelSpec(("ghash",), "avx512", 512, 4, karatsuba=True)
    r = BenchResult(spec={}, key_bits=128, tsc_hz=2e9, core_hz=3e9)
    # 16384 bytes in 4096 ticks = 6144 core cycles: 2.67 B/cycle.
    r.measurements = [Measurement("ghash", 16384, "aesgen", 4000, 4096, 0, 0),
                      Measurement("ghash", 256, "aesgen", 100, 200, 0, 0)]
    r.ceiling_bounds = {"ghash": OpCeiling("ghash", 16.0, 16 / 3, "clmul", "basis")}
    assert r.bytes_per_cycle("ghash", 16384) == pytest.approx(16384 / 6144)
    assert ceiling_line(spec, r, "ghash") == ("ghash 512x4 karatsuba, 16384 B: 2.67 B/cycle = 50% of the clmul "
                                              "ceiling 5.33 B/cycle (basis)")
    assert ceiling_line(spec, r, "polyval") is None
    # Sampled in rounds, the line carries the figure's interval, in proportion, into both numbers.
    r.measurements[0] = Measurement("ghash", 16384, "aesgen", 4000, 4096, 4.0, 0.25, 4000, 4192, 8, 0.96, 0.1)
    assert ceiling_line(spec, r, "ghash").startswith(
        "ghash 512x4 karatsuba, 16384 B: 2.67 ±0.07 B/cycle = 50 ±1% of the clmul ceiling 5.33 B/cycle")


def test_mix_source_spreads_independent_chains():
    text = mix_source({("vaesenc", 512): 40, ("vpclmulqdq", 512): 14})
    body = text.split("ceil_mix:", 1)[1].split("dec %rdi", 1)[0]
    aes = [ln.split(",")[-1].strip() for ln in body.splitlines() if "vaesenc" in ln]
    clmul = [ln.split(",")[-1].strip() for ln in body.splitlines() if "vpclmulqdq" in ln]
    assert len(aes) == 40 and len(clmul) == 14
    assert not set(aes) & set(clmul) and len(set(aes)) == 10 and len(set(clmul)) == 5
    # Spread out: no run of more than 40/14 + 1 AES instructions between two multiplies.
    kinds = "".join("c" if "vpclmulqdq" in ln else "a" for ln in body.splitlines() if "%zmm" in ln)
    assert max(len(run) for run in kinds.split("c")) <= 4
    assert "ceil_add_lat:" in text  # the clock is calibrated in the same file


def test_a_peer_that_runs_one_op_keeps_its_description(monkeypatch, tmp_path):
    """ipsec-mb has GHASH but no POLYVAL: benching both must not hide its GHASH figures."""
    import aesgen.bench.timing as bench_mod

    infos = iter([{"ipsec-mb": "intel-ipsec-mb (fake)"}, {"ipsec-mb": "n/a (no POLYVAL)"}])
    monkeypatch.setattr(bench_mod, "build_shared", lambda p: p)
    monkeypatch.setattr(bench_mod, "run_op", lambda *a, **k: (1e9, next(infos), {}, []))
    result = bench(SPEC, tmp_path / "k.S", ops=["ghash", "polyval"], sizes=[64], peers=("ipsec-mb",), cpu=0)
    assert result.peers == {"ipsec-mb": "intel-ipsec-mb (fake)"}


def test_the_sampled_ceiling_is_built_from_the_loops_median_ticks():
    """Ticks per instruction as the harness reports them: an add chain at 0.5 ticks per cycle (a
    2 GHz TSC, a 4 GHz core), zmm vaesenc at 1 cycle, a mix loop iteration of 30 cycles."""
    mix = {("vaesenc", 512): 30, ("vpclmulqdq", 512): 14}
    ticks = {"ceil_add_lat": 0.5, "ceil_vaesenc_512_tput": 0.5, "ceil_vaesenc_512_lat": 1.5,
             "ceil_mix0": 30 * 0.5 / PER_ITERATION}
    c = sampled_ceiling(2e9, ticks, [mix])
    assert c.core_hz == pytest.approx(4e9)
    assert c.cost("vaesenc", 512).throughput_cycles == pytest.approx(1.0)
    assert c.cost("vaesenc", 512).latency_cycles == pytest.approx(3.0)
    assert c.cost("vaesenc", 256) is None  # not timed: no bound from it
    assert c.measure_mix(mix) == pytest.approx(30.0)
    assert c.measure_mix({("vaesenc", 512): 40}) is None  # only the mixes that were timed
    bound = op_ceiling(c, KernelSpec(("ctr32",), "avx512", 512, 4), "ctr32_encrypt", 128)
    assert bound.bytes_per_cycle == pytest.approx(6.4) and bound.core_hz == pytest.approx(4e9)


def test_bench_times_the_ceiling_in_every_round(monkeypatch, tmp_path):
    """The bound reported is the one timed beside the kernel, round after round, not the
    measurement bench started from."""
    import aesgen.bench.timing as bench_mod

    calls = []
    monkeypatch.setattr(bench_mod, "build_shared", lambda p: p)
    monkeypatch.setattr(bench_mod, "run_op", lambda *a, **k: (
        calls.append("kernel") or (2e9, {}, {(s, "aesgen"): [1000.0] * 3 for s in a[4]}, [])))
    monkeypatch.setattr(bench_mod, "probe_file", lambda mixes: ("probe.so", ["ceil_add_lat", "ceil_vaesenc_128_tput"]))
    monkeypatch.setattr(bench_mod, "run_loops", lambda so, names, cpu: (
        calls.append("probe") or (2e9, [{"name": "ceil_add_lat", "samples": [0.5] * 3},
                                        {"name": "ceil_vaesenc_128_tput", "samples": [0.25] * 3},
                                        {"name": "ceil_vaesenc_128_lat", "samples": [1.5] * 3}])))
    start = Ceiling(tsc_hz=2e9, core_hz=9e9, costs=[InstructionCost("vaesenc", 128, 9.0, 9.0, 9.0)])
    path = tmp_path / "k.S"
    path.write_text("")
    result = bench(SPEC, path, ops=["ecb_encrypt"], sizes=[1024], ceiling=start, cpu=0, budget=0)
    assert calls == ["kernel", "probe"]  # one round: the kernel's sizes, then the ceiling's loops
    bound = result.ceiling_bounds["ecb_encrypt"]
    assert bound.bytes_per_cycle == pytest.approx(16 / (10 * 0.5))  # from the sampled 0.5 cycles, not 9
    assert bound.core_hz == pytest.approx(4e9)
    assert "and the ceiling sampled in turn" in result.sampling


def test_bench_times_each_size_in_a_run_of_its_own(monkeypatch, tmp_path):
    """A figure must not depend on the sizes timed before it in the same process; the sizes a peer's
    output was checked at are gathered over the runs."""
    import aesgen.bench.timing as bench_mod

    runs = []

    def run_op(spec, so, op, sizes, peers, key_bits, trials, cpu, tsc_hz, checked, out_offset):
        runs.append(list(sizes))
        checked.setdefault("openssl", []).extend(sizes)  # filled as the harness would
        return 2e9, {"openssl": "OpenSSL (fake)"}, {(s, i): [1000.0] * 3 for s in sizes for i in ("aesgen", "openssl")}, []

    monkeypatch.setattr(bench_mod, "build_shared", lambda p: p)
    monkeypatch.setattr(bench_mod, "run_op", run_op)
    path = tmp_path / "k.S"
    path.write_text("")
    result = bench(SPEC, path, ops=["ecb_encrypt"], sizes=[256, 16384], peers=("openssl",), cpu=0, budget=0)
    assert sorted(map(tuple, runs)) == [(256,), (16384,)]
    assert result.peers["openssl"].endswith("output equal to aesgen's at 256, 16384 B (checked before timing)")


def test_the_harness_puts_the_output_where_it_is_told(tmp_path):
    """Each timed row carries the offset the buffers really had (out - in mod 4096), and run_op
    checks it against the one asked for: the default and another, for us and a peer."""
    path = tmp_path / "k.S"
    path.write_text(generate(SPEC).asm)
    so = build_shared(path)
    for offset in (timing.OUT_OFFSET, 192):
        _, _, samples, _ = timing.run_op(SPEC, so, "ecb_encrypt", [1024], ("openssl",), 128, 3, None,
                                         out_offset=offset)
        assert (1024, "aesgen") in samples and (1024, "openssl") in samples


def test_the_harness_refuses_to_run_without_a_placement(tmp_path):
    """No AESGEN_BENCH_OUT_OFFSET, or one past the page: exit 2 and a line saying what it wants,
    not buffers wherever malloc puts them."""
    path = tmp_path / "k.S"
    path.write_text(generate(SPEC).asm)
    so = build_shared(path)
    cmd = [str(bench_binary()), str(so), SPEC.prefix, "ecb_encrypt", "128", "1024", "3", "-"]
    env = {k: v for k, v in os.environ.items() if k != "AESGEN_BENCH_OUT_OFFSET"}
    for extra in ({}, {"AESGEN_BENCH_OUT_OFFSET": "4096"}, {"AESGEN_BENCH_OUT_OFFSET": "2k"},
                  {"AESGEN_BENCH_OUT_OFFSET": ""}, {"AESGEN_BENCH_OUT_OFFSET": "-1"}):
        r = subprocess.run(cmd, capture_output=True, text=True, env={**env, **extra})
        assert r.returncode == 2 and "AESGEN_BENCH_OUT_OFFSET" in r.stderr and not r.stdout


def test_run_op_rejects_a_harness_that_placed_the_output_elsewhere(monkeypatch):
    rows = ['{"meta": true, "op": "ecb_encrypt", "key_bits": 128, "tsc_hz": 2600000000, "trials": 3}',
            '{"impl": "aesgen", "size": 64, "min_ticks": 70, "median_ticks": 73, "reps": 1, "out_offset": 192, '
            '"samples": [70, 73, 74]}']
    monkeypatch.setattr(timing, "bench_binary", lambda: "bench")
    monkeypatch.setattr(subprocess, "run",
                        lambda *a, **k: subprocess.CompletedProcess(a, 0, stdout="\n".join(rows), stderr=""))
    with pytest.raises(RuntimeError, match="192 B past the input, not 2048"):
        timing.run_op(SPEC, "k.so", "ecb_encrypt", [64], (), 128, 3, None)


def test_the_placement_is_reported_and_recorded(tiny):
    assert tiny.out_offset == timing.OUT_OFFSET
    assert f"{timing.OUT_OFFSET} mod 4096" in tiny.placement()
    assert tiny.to_json()["out_offset"] == timing.OUT_OFFSET
