"""`aesgen bench` for OCB and OTR, the openssl-noaesni peer, and `explore --backend`.

Nothing here asserts on speed: only which ops, peers, reasons, ratios and labels are reported.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from aesgen.bench.ceiling import Ceiling, InstructionCost
from aesgen.bench.timing import BenchResult, op_ceiling, unavailable_by_op
from aesgen.cpu import missing_features
from aesgen.spec import KernelSpec
from aesgen.tools import report
from aesgen.tools.cli import main

AEAD = KernelSpec(("ocb", "otr"), "avx512", 256, 2)
GFNI = KernelSpec(("ctr32",), "avx512", 512, 1, backend="gfni")
NO_OTR = "n/a (no AES-OTR in OpenSSL / intel-ipsec-mb)"
AEAD_OPS = ("ocb_encrypt", "ocb_decrypt", "otr_encrypt", "otr_decrypt")
ALL_PEERS = "openssl,ipsec-mb,openssl-noaesni"


def needs(spec: KernelSpec):
    lacking = missing_features(spec.features)
    return pytest.mark.skipif(bool(lacking), reason=f"CPU lacks {' '.join(lacking)}")


def run_cli(*args: str) -> str:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(report.console, "_width", 300)  # tables unwrapped, whatever the terminal
        r = CliRunner().invoke(main, list(args))
    assert r.exit_code == 0, r.output
    return r.output


def bench_json(tmp_path: Path, modes: str, spec: KernelSpec, *extra: str) -> tuple[str, dict]:
    js = tmp_path / "bench.json"
    out = run_cli("bench", modes, "--isa", spec.isa, "--width", str(spec.width), "--depth", str(spec.depth),
                  "--backend", spec.backend, "--trials", "3", "--budget", "0", "--no-verify", "--json", str(js), *extra)
    return out, json.loads(js.read_text())


@pytest.fixture(scope="module")
def aead(tmp_path_factory):
    return bench_json(tmp_path_factory.mktemp("bench-aead"), "ocb,otr", AEAD, "--sizes", "256", "--compare", ALL_PEERS)


@needs(AEAD)
def test_ocb_and_otr_ops_are_all_measured(aead):
    _, d = aead
    assert {(m["op"], m["size"]) for m in d["measurements"] if m["impl"] == "aesgen"} == {(op, 256) for op in AEAD_OPS}


@needs(AEAD)
def test_otr_has_no_peer_anywhere_and_says_why(aead):
    out, d = aead
    for op in ("otr_encrypt", "otr_decrypt"):
        assert d["op_peers"][op] == {"openssl": NO_OTR, "ipsec-mb": NO_OTR, "openssl-noaesni": NO_OTR}
        assert {m["impl"] for m in d["measurements"] if m["op"] == op} == {"aesgen"}
    assert f"openssl for otr_encrypt, otr_decrypt: {NO_OTR}" in out


@needs(AEAD)
def test_ocb_is_compared_with_both_openssls_and_not_ipsec_mb(aead):
    _, d = aead
    for op in ("ocb_encrypt", "ocb_decrypt"):
        ipsec = d["op_peers"][op]["ipsec-mb"]
        assert ipsec.startswith("n/a (no OCB in intel-ipsec-mb") or ipsec.startswith("n/a (built without")
        for peer in ("openssl", "openssl-noaesni"):
            if d["op_peers"][op][peer].startswith("n/a"):
                continue  # no libcrypto on this machine: reported, not raised
            assert {r["vs"] for r in d["ratios"] if r["op"] == op} >= {peer}
    assert "AES-NI and PCLMULQDQ masked" in d["peers"]["openssl-noaesni"] or \
        d["peers"]["openssl-noaesni"].startswith("n/a")
    # ipsec-mb ran nothing: its line names both reasons, once each
    assert d["peers"]["ipsec-mb"].count("AES-OTR") == 1 and "OCB" in d["peers"]["ipsec-mb"]


@needs(AEAD)
def test_the_decryptions_accepted_their_valid_messages(aead):
    _, d = aead
    assert not any("rejected" in info for per_op in d["op_peers"].values() for info in per_op.values())


@needs(AEAD)
def test_ocb_and_otr_ceilings_are_one_aes_call_per_block(aead):
    out, d = aead
    assert set(d["ceilings"]) == set(AEAD_OPS)
    for op in AEAD_OPS:
        bound = d["ceiling_bounds"][op]
        assert bound["name"] == "AES" and "one AES call per 16-byte block" in bound["basis"]
    assert "ocb_encrypt 256x2, 256 B:" in out and "(OCB3: one AES call per 16-byte block" in out
    assert "(AES-OTR: one AES call per 16-byte block" in out


@needs(GFNI)
def test_openssl_noaesni_gives_a_ratio_for_a_gfni_file(tmp_path):
    out, d = bench_json(tmp_path, "ctr32", GFNI, "--sizes", "1024", "--compare", "openssl-noaesni")
    if d["peers"]["openssl-noaesni"].startswith("n/a"):
        pytest.skip(d["peers"]["openssl-noaesni"])
    assert set(d["peers"]) == {"openssl-noaesni"}  # "openssl" alone is not asked for
    assert {m["impl"] for m in d["measurements"]} == {"aesgen", "openssl-noaesni"}
    (ratio,) = d["ratios"]
    assert ratio["vs"] == "openssl-noaesni" and ratio["ratio"] > 0
    assert "x openssl-noaesni" in out and "of AES-NI ceiling" in out
    assert d["ceiling_bounds"]["ctr32_encrypt"]["name"] == "AES-NI"
    assert "of the AES-NI ceiling" in out and "the gfni backend runs no vaesenc" in out


GCM_XMM = KernelSpec(("gcm",), "avx", 128, 4)


@needs(GCM_XMM)
def test_gcm_decryption_is_timed_beside_each_peers_decryption_of_the_same_valid_message(tmp_path):
    """Each peer decrypts (and checks the tag of) the message aesgen's encryption made; none
    rejected it, and both directions share the measured AES+CLMUL ceiling of their loops."""
    _, d = bench_json(tmp_path, "gcm", GCM_XMM, "--sizes", "256", "--compare", ALL_PEERS)
    for op in ("gcm_encrypt", "gcm_decrypt"):
        assert "aesgen" in {m["impl"] for m in d["measurements"] if m["op"] == op}
        for peer, info in d["op_peers"][op].items():
            assert "rejected" not in info, (op, peer, info)
            if not info.startswith("n/a"):
                assert {r["vs"] for r in d["ratios"] if r["op"] == op} >= {peer}
    decrypting = {m["impl"] for m in d["measurements"] if m["op"] == "gcm_decrypt"}
    assert decrypting == {m["impl"] for m in d["measurements"] if m["op"] == "gcm_encrypt"}
    if "gcm_decrypt" in d["ceiling_bounds"]:
        assert d["ceiling_bounds"]["gcm_decrypt"]["name"] == "AES+CLMUL"


def test_a_file_without_aes_ni_is_held_to_the_aes_ni_ceiling_of_its_width():
    ceiling = Ceiling(tsc_hz=2e9, core_hz=3e9, costs=[InstructionCost("vaesenc", 512, 1.0, 4.0, 0.0),
                                                      InstructionCost("vaesenc", 128, 0.5, 4.0, 0.0)])
    aesni = op_ceiling(ceiling, KernelSpec(("ctr32", "cbc"), "avx512", 512, 4), "ctr32_encrypt", 128)
    gfni = op_ceiling(ceiling, KernelSpec(("ctr32", "cbc"), "avx512", 512, 4, backend="gfni"), "ctr32_encrypt", 128)
    assert aesni.name == "AES" and gfni.name == "AES-NI"
    assert gfni.bytes_per_cycle == pytest.approx(aesni.bytes_per_cycle) == pytest.approx(64 / 10)
    serial = op_ceiling(ceiling, KernelSpec(("cbc",), "avx512", 512, 4, backend="gfni"), "cbc_encrypt", 128)
    assert serial.name == "serial AES-NI"


def test_per_op_reasons_are_grouped_and_merged():
    r = BenchResult(spec={}, key_bits=128, tsc_hz=1e9)
    r.peers = {"openssl": "OpenSSL 3", "ipsec-mb": "n/a (b)"}
    r.op_peers = {"x_encrypt": {"openssl": "OpenSSL 3", "ipsec-mb": "n/a (a)"},
                  "y_encrypt": {"openssl": "n/a (b)", "ipsec-mb": "n/a (b)"},
                  "y_decrypt": {"openssl": "n/a (b)", "ipsec-mb": "n/a (b)"}}
    from aesgen.bench.timing import merge_unavailable_reasons
    merge_unavailable_reasons(r)
    assert r.peers == {"openssl": "OpenSSL 3", "ipsec-mb": "n/a (a; b)"}
    assert unavailable_by_op(r) == [("ipsec-mb", ["x_encrypt"], "n/a (a)"),
                                    ("openssl", ["y_encrypt", "y_decrypt"], "n/a (b)"),
                                    ("ipsec-mb", ["y_encrypt", "y_decrypt"], "n/a (b)")]


@needs(GFNI)
def test_explore_passes_the_backend_and_lists_what_does_not_fit(tmp_path):
    js = tmp_path / "explore.json"
    out = run_cli("explore", "ctr32", "--backend", "gfni", "--widths", "512", "--depths", "1,16",
                  "--sizes", "256,1024", "--budget", "0", "--json", str(js))
    d = json.loads(js.read_text())
    assert d["schema"] == "aesgen-explore/2" and d["backend"] == "gfni" and d["measured"] is True
    fits, too_deep = d["points"]
    assert (fits["depth"], fits["status"]) == (1, "measured") and fits["bulk_gbps"] > 0
    assert too_deep["status"] == "infeasible" and "vector registers" in too_deep["reason"]
    assert d["predicted_knee"] == {}  # vaesenc's knee says nothing about GFNI rounds
    assert "explore ctr32, gfni backend" in out


def test_explore_refuses_an_unknown_backend():
    r = CliRunner().invoke(main, ["explore", "ctr32", "--backend", "nosuch"])
    assert r.exit_code == 2 and "unknown backend 'nosuch'" in r.output


def test_a_size_a_peer_refuses_is_reported_not_timed(monkeypatch):
    """intel-ipsec-mb's job API takes no 64 KiB ECB message: the peer returns at once, and was
    once reported at 1454 GB/s. A refused size now has no measurement and a line saying why."""
    import subprocess

    from aesgen.bench import timing as bench_mod

    lines = ['{"meta": true, "op": "ecb_encrypt", "key_bits": 128, "tsc_hz": 2600000000, "trials": 3}',
             '{"impl": "aesgen", "size": 65536, "min_ticks": 7000, "median_ticks": 7300, "reps": 1, '
             f'"out_offset": {bench_mod.OUT_OFFSET}, "samples": [7000, 7300, 7400]}}',
             '{"impl": "ipsec-mb", "size": 65536, "refused": "job status 4, not completed"}']
    monkeypatch.setattr(bench_mod, "bench_binary", lambda: "bench")
    monkeypatch.setattr(subprocess, "run",
                        lambda *a, **k: subprocess.CompletedProcess(a, 0, stdout="\n".join(lines), stderr=""))
    spec = KernelSpec(("ecb",), "avx512", 512, 4)
    _, info, samples, refused = bench_mod.run_op(spec, "k.so", "ecb_encrypt", [65536], ("ipsec-mb",), 128, 3, None)
    assert samples == {(65536, "aesgen"): [7000, 7300, 7400]} and info["ipsec-mb"] == "available"
    assert [(r.impl, r.size, r.why) for r in refused] == [("ipsec-mb", 65536, "job status 4, not completed")]


@needs(GFNI)
def test_openssl_noaesni_gcm_says_its_ghash_is_table_based(tmp_path):
    out, d = bench_json(tmp_path, "gcm", GFNI, "--sizes", "1024", "--compare", "openssl-noaesni")
    if d["peers"]["openssl-noaesni"].startswith("n/a"):
        pytest.skip(d["peers"]["openssl-noaesni"])
    assert "~0x200000200000000" in d["peers"]["openssl-noaesni"]  # CPUID.1:ECX bits 25 and 1 cleared
    assert "table-based" in d["peers"]["openssl-noaesni"]
    assert {r["vs"] for r in d["ratios"] if r["op"] == "gcm_encrypt"} == {"openssl-noaesni"}
