"""The peers share aesgen's CPU view: AESGEN_CPU_MASK reaches OpenSSL/BoringSSL/AWS-LC as
OPENSSL_ia32cap and intel-ipsec-mb as the architecture it is initialised for.

Nothing here asserts on speed.
"""
from __future__ import annotations

import pytest

from aesgen.bench import peer_view
from aesgen.bench.peer_libs import built_library
from aesgen.cpu import MASK_ENV, host_flags
from _support import require_cpu
from test_bench_peer_libs import GCM_XTS, bench_json


def test_ia32cap_clears_the_masked_cpuid_bits():
    # AVX512F, AVX512BW, AVX512VL: CPUID.7 EBX bits 16, 30, 31 (the second value's low half).
    assert peer_view.ia32cap(frozenset({"avx512f", "avx512bw", "avx512vl"})) == "~0x0:~0xc0010000"
    # AES-NI and PCLMULQDQ: CPUID.1 ECX bits 25 and 1 (the first value's high half).
    assert peer_view.ia32cap(frozenset({"aes", "pclmulqdq"})) == "~0x200000200000000:~0x0"
    # VAES, VPCLMULQDQ, GFNI: CPUID.7 ECX bits 9, 10, 8 (the second value's high half).
    assert peer_view.ia32cap(frozenset({"vaes", "vpclmulqdq", "gfni"})) == "~0x0:~0x70000000000"
    assert peer_view.ia32cap(frozenset({"not_a_cpuid_flag"})) is None


def test_ipsec_arch_is_the_richest_the_view_allows():
    avx2 = frozenset({"sse4_1", "avx", "avx2", "aes", "pclmulqdq"})
    assert peer_view.ipsec_arch(avx2) == "avx2"
    assert peer_view.ipsec_arch(avx2 | {"avx512f", "avx512dq", "avx512bw", "avx512vl"}) == "avx512"
    assert peer_view.ipsec_arch(avx2 - {"avx2"}) == "avx"
    assert peer_view.ipsec_arch(avx2 - {"aes"}) == "noaesni"


def test_no_mask_no_environment(monkeypatch):
    monkeypatch.delenv(MASK_ENV, raising=False)
    assert peer_view.environment() == {} and peer_view.describe("boringssl") == ""



@pytest.mark.skipif(built_library("boringssl") is None, reason="boringssl not built (run make peers)")
@pytest.mark.skipif(not {"avx512bw", "avx512vl"} <= host_flags(), reason="CPU lacks avx512bw avx512vl: "
                    "BoringSSL takes its AVX2 path unmasked, so the mask would show nothing")
def test_under_an_avx2_view_boringssl_runs_its_avx2_gcm(tmp_path, monkeypatch):
    require_cpu(GCM_XTS)
    monkeypatch.delenv(MASK_ENV, raising=False)
    _, plain = bench_json(tmp_path, "gcm", "--compare", "boringssl,ipsec-mb")
    assert "VAES AVX-512 (zmm) GCM path" in plain["op_peers"]["gcm_encrypt"]["boringssl"]  # the view matters
    monkeypatch.setenv(MASK_ENV, "avx512f,gfni")
    _, masked = bench_json(tmp_path, "gcm", "--compare", "boringssl,ipsec-mb")
    boring = masked["op_peers"]["gcm_encrypt"]["boringssl"]
    assert "VAES AVX2 (ymm) GCM path" in boring and "OPENSSL_ia32cap=~0x0:~0x" in boring
    assert boring.endswith("(checked before timing)")  # and its output still equals ours
    ipsec = masked["op_peers"]["gcm_encrypt"].get("ipsec-mb", "")
    assert ipsec.startswith("n/a") or "avx2 path" in ipsec
