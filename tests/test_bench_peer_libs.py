"""The peers `make peers` builds (BoringSSL, AWS-LC): n/a until built, refused when their output
differs from ours, timed beside the others when built.

Nothing here asserts on speed: only which peers, rows, reasons and checks are reported.
"""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from aesgen.bench.peer_libs import PEER_LIBS, built_library
from aesgen.bench.timing import BenchResult, Measurement
from aesgen.spec import KernelSpec
from aesgen.tools import report
from aesgen.tools.cli import main
from aesgen.verify.build import compiler
from _support import require_cpu

# AES-NI + PCLMULQDQ on xmm: a file nearly every x86-64 CPU runs.
GCM_XTS = KernelSpec(("gcm", "xts", "gcm-siv"), "avx", 128, 4)
LIB_PEERS = ",".join(PEER_LIBS)
NOT_BUILT = "n/a (not built: run make peers)"

# A stand-in libcrypto whose AES-GCM AEAD "seals" to zeros and rejects every message it opens: the
# harness must refuse to time it, either way.
WRONG_AEAD = r"""
#include <stddef.h>
#include <stdint.h>
#include <string.h>
static int aead;
const void *EVP_aead_aes_128_gcm(void) { return &aead; }
void *EVP_AEAD_CTX_new(const void *a, const uint8_t *k, size_t kl, size_t tl) { return (void *)a; }
int EVP_AEAD_CTX_seal_scatter(const void *ctx, uint8_t *out, uint8_t *tag, size_t *tag_len, size_t max_tag,
                              const uint8_t *nonce, size_t nl, const uint8_t *in, size_t len,
                              const uint8_t *extra, size_t el, const uint8_t *ad, size_t al) {
    memset(out, 0, len);
    memset(tag, 0, 16);
    *tag_len = 16;
    return 1;
}
int EVP_AEAD_CTX_open_gather(const void *ctx, uint8_t *out, const uint8_t *nonce, size_t nl, const uint8_t *in,
                             size_t len, const uint8_t *tag, size_t tl, const uint8_t *ad, size_t al) {
    return 0;
}
"""


def bench_json(tmp_path: Path, modes: str, *extra: str) -> tuple[str, dict]:
    js = tmp_path / "bench.json"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(report.console, "_width", 300)  # tables unwrapped, whatever the terminal
        r = CliRunner().invoke(main, ["bench", modes, "--isa", GCM_XTS.isa, "--width", str(GCM_XTS.width),
                                      "--depth", str(GCM_XTS.depth), "--trials", "3", "--no-verify", "--budget", "0",
                                      "--sizes", "256,1024", "--json", str(js), *extra])
    assert r.exit_code == 0, r.output
    return r.output, json.loads(js.read_text())


def impls_measured(d: dict, op: str) -> set[str]:
    return {m["impl"] for m in d["measurements"] if m["op"] == op}


def test_bench_help_lists_the_library_peers():
    out = CliRunner().invoke(main, ["bench", "--help"]).output
    assert "boringssl" in out and "awslc" in out and "make peers" in out


def test_an_unbuilt_peer_reads_not_built(tmp_path, monkeypatch):
    require_cpu(GCM_XTS)
    monkeypatch.setenv("AESGEN_PEERS_DIR", str(tmp_path / "none"))
    out, d = bench_json(tmp_path, "gcm", "--compare", f"openssl,{LIB_PEERS}")
    for peer in PEER_LIBS:
        assert d["peers"][peer] == NOT_BUILT
        assert f"{peer}: {NOT_BUILT}" in out
    assert impls_measured(d, "gcm_encrypt") <= {"aesgen", "openssl"} and "aesgen" in impls_measured(d, "gcm_encrypt")


def test_a_peer_whose_output_differs_is_not_timed(tmp_path, monkeypatch):
    require_cpu(GCM_XTS)
    lib = PEER_LIBS["boringssl"]
    monkeypatch.setenv("AESGEN_PEERS_DIR", str(tmp_path))
    src = tmp_path / "wrong_aead.c"
    src.write_text(WRONG_AEAD)
    lib.folder.mkdir(parents=True)
    subprocess.run([compiler(), "-shared", "-fPIC", "-o", str(lib.library), str(src)], check=True)
    assert built_library("boringssl") == lib.library
    _, d = bench_json(tmp_path, "gcm", "--compare", "boringssl")
    assert d["op_peers"]["gcm_encrypt"]["boringssl"] == \
        "n/a (cross-check failed: output differs from aesgen's at 256 bytes)"
    assert d["op_peers"]["gcm_decrypt"]["boringssl"] == "n/a (cross-check failed: rejected the valid 256-byte message)"
    assert impls_measured(d, "gcm_encrypt") == impls_measured(d, "gcm_decrypt") == {"aesgen"}


def test_a_peer_refused_from_some_size_on_keeps_its_column_for_the_sizes_it_passed(capsys, monkeypatch):
    monkeypatch.setattr(report.console, "_width", 300)
    refused = "n/a (cross-check failed: output differs from aesgen's at 4096 bytes)"
    result = BenchResult(spec={}, key_bits=128, tsc_hz=2e9, peers={"awslc": refused, "boringssl": refused})
    result.measurements = [Measurement("gcm_encrypt", 256, impl, 100.0, 100.0, 5.12, 0.39)
                           for impl in ("aesgen", "awslc")]
    result.measurements.append(Measurement("gcm_encrypt", 4096, "aesgen", 900.0, 900.0, 9.1, 0.22))
    report.print_bench(GCM_XTS, result)
    out = capsys.readouterr().out
    assert "awslc GB/s" in out and f"awslc: {refused}" in out
    assert "boringssl GB/s" not in out  # measured nowhere: no column


@pytest.fixture(scope="module")
def built_peers(tmp_path_factory):
    unbuilt = [name for name in PEER_LIBS if built_library(name) is None]
    if unbuilt:
        pytest.skip(f"{', '.join(unbuilt)} not built (run make peers)")
    require_cpu(GCM_XTS)
    return bench_json(tmp_path_factory.mktemp("bench-peer-libs"), "gcm,xts,gcm-siv", "--key-bits", "256",
                      "--compare", LIB_PEERS)


@pytest.mark.parametrize("op", ["gcm_encrypt", "gcm_decrypt"])
def test_built_peers_time_aes256_gcm_after_their_output_matched(built_peers, op):
    _, d = built_peers
    assert impls_measured(d, op) == {"aesgen", *PEER_LIBS}
    for peer in PEER_LIBS:
        detail = d["op_peers"][op][peer]
        assert "EVP_AEAD" in detail and "GCM path" in detail
        assert detail.endswith("output equal to aesgen's at 256, 1024 B (checked before timing)")
        assert {r["size"] for r in d["ratios"] if r["op"] == op and r["vs"] == peer} == {256, 1024}


def test_built_peers_time_aes256_gcm_siv_after_output_and_tag_matched(built_peers):
    _, d = built_peers
    assert impls_measured(d, "gcmsiv_encrypt") == {"aesgen", *PEER_LIBS}
    for peer in PEER_LIBS:
        detail = d["op_peers"]["gcmsiv_encrypt"][peer]
        assert "EVP_AEAD" in detail
        assert detail.endswith("output equal to aesgen's at 256, 1024 B (checked before timing)")


def test_built_awslc_times_aes256_xts_and_boringssl_says_why_not(built_peers):
    out, d = built_peers
    for op in ("xts_encrypt", "xts_decrypt"):
        assert impls_measured(d, op) == {"aesgen", "awslc"}
        assert d["op_peers"][op]["awslc"].endswith("output equal to aesgen's at 256, 1024 B (checked before timing)")
        assert d["op_peers"][op]["boringssl"].startswith("n/a (BoringSSL's AES-XTS is in libdecrepit")
    assert "boringssl for xts_encrypt, xts_decrypt: n/a (BoringSSL's AES-XTS is in libdecrepit" in out
