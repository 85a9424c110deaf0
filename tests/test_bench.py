"""Benchmark bookkeeping: the harness runs, the numbers add up, the JSON has its schema.

Nothing here asserts on speed.
"""
from __future__ import annotations

import json

import pytest

from aesgen.cpu import missing_features
from aesgen.pipeline import generate
from aesgen.spec import KernelSpec
from aesgen.verify.bench import BenchResult, Measurement, bench
from aesgen.verify.ceiling import ceiling_source

SPEC = KernelSpec(("ecb", "ctr32"), "avx", 128, 2)
pytestmark = pytest.mark.skipif(bool(missing_features(SPEC.features)),
                                reason=f"CPU lacks {' '.join(missing_features(SPEC.features))}")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = tmp_path_factory.mktemp("bench") / "k.S"
    path.write_text(generate(SPEC).asm)
    return bench(SPEC, path, ops=["ctr32_encrypt", "ecb_encrypt"], sizes=[64, 1024],
                 peers=("openssl", "ipsec-mb"), trials=3)


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
        assert set(m) == {"op", "size", "impl", "min_ticks", "median_ticks", "gbps", "ticks_per_byte"}
    for r in d["ratios"]:
        assert r["ratio"] == pytest.approx(tiny.ratio(r["op"], r["size"], r["vs"]))


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
    assert lat.count("vaesenc %zmm15, %zmm0, %zmm0") == 12  # one dependent chain
    tput = text.split("ceil_vaesenc_512_tput:", 1)[1].split(".size", 1)[0]
    assert len({line.split(",")[-1] for line in tput.splitlines() if "vaesenc" in line}) == 12
