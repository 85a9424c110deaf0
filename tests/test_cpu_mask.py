"""AESGEN_CPU_MASK / aesgen --cpu-mask: the tool's view of the CPU, less named features and
everything that depends on them. These tests set the mask themselves (monkeypatch), so they
hold under any mask CI runs them with."""
from __future__ import annotations

import os
import subprocess

import pytest

from _support import run_aesgen
from aesgen import cpu
from aesgen.target import native

AVX512_HOST = frozenset({"aes", "ssse3", "avx", "avx2", "fma", "bmi2", "pclmulqdq", "vaes", "vpclmulqdq", "gfni",
                         "avx512f", "avx512bw", "avx512vl", "avx512vbmi", "avx512_vbmi2", "movbe"})


def test_masking_a_feature_masks_what_depends_on_it() -> None:
    assert cpu.closure(frozenset({"avx512f"}), AVX512_HOST) == {"avx512f", "avx512bw", "avx512vl", "avx512vbmi",
                                                                "avx512_vbmi2"}
    assert cpu.closure(frozenset({"aes"}), AVX512_HOST) == {"aes", "vaes"}
    assert cpu.closure(frozenset({"pclmulqdq"}), AVX512_HOST) == {"pclmulqdq", "vpclmulqdq"}
    # no AVX: no VEX encodings, so no AVX2, VAES, VPCLMULQDQ or AVX-512 either
    assert cpu.closure(frozenset({"avx"}), AVX512_HOST) >= {"avx2", "vaes", "vpclmulqdq", "avx512f", "avx512bw",
                                                            "fma"}
    assert "gfni" not in cpu.closure(frozenset({"avx512f"}), AVX512_HOST)


def test_the_view_is_the_host_less_the_mask(monkeypatch) -> None:
    monkeypatch.setattr(cpu, "host_flags", lambda: AVX512_HOST)
    monkeypatch.setenv(cpu.MASK_ENV, "")
    assert cpu.flags() == AVX512_HOST
    monkeypatch.setenv(cpu.MASK_ENV, "avx512f,gfni")
    assert cpu.flags() == AVX512_HOST - {"avx512f", "avx512bw", "avx512vl", "avx512vbmi", "avx512_vbmi2", "gfni"}
    assert cpu.missing_features(("aes", "avx512bw", "vaes")) == ("avx512bw",)
    assert cpu.mask_note() == f" ({cpu.MASK_ENV}=avx512f,gfni)"


@pytest.mark.parametrize("text", ["avx512", "AVX2", "avx2;aes", "vaes,,aes"])
def test_a_malformed_or_unknown_name_is_refused(text: str) -> None:
    with pytest.raises(cpu.MaskError, match=cpu.MASK_ENV):
        cpu.parse_mask(text)


@pytest.mark.parametrize("mask,isa,backend", [
    ("avx512f,gfni", "avx2", "aesni"),
    ("vaes,vpclmulqdq,gfni,avx512f", "avx", "aesni"),
    ("aes,pclmulqdq,gfni", "avx2", "bitsliced"),
])
def test_native_follows_the_mask(monkeypatch, mask: str, isa: str, backend: str) -> None:
    monkeypatch.setattr(cpu, "host_flags", lambda: AVX512_HOST)
    monkeypatch.setenv(cpu.MASK_ENV, mask)
    t = native()
    assert t.backend_for(("ctr32",)) == backend
    want = isa if backend == "aesni" else "avx512"  # bitsliced keeps AVX-512 when only AES-NI is masked
    assert t.isa_for(backend) == want
    assert t.vector_registers == (32 if "avx512f" in t.features else 16)


def aesgen(*args: str, mask: str | None = None) -> subprocess.CompletedProcess:
    return run_aesgen(*args, env=None if mask is None else {cpu.MASK_ENV: mask})


def test_a_bad_mask_is_one_line_and_exit_2() -> None:
    for p in (aesgen("list", mask="avx512"), aesgen("--cpu-mask", "sse9", "list")):
        assert p.returncode == 2
        assert p.stderr.count("\n") == 1 and "unknown CPU feature" in p.stderr


def test_the_global_option_sets_the_view() -> None:
    p = aesgen("--cpu-mask", "avx512f", "list", mask="")
    assert p.returncode == 0, p.stderr
    if "avx512f" in cpu.host_flags():
        assert "this CPU lacks" in p.stdout and "avx512f" in p.stdout
    assert f"{cpu.MASK_ENV}=avx512f" in p.stdout


def test_a_view_block_sets_the_mask_and_restores_it(monkeypatch) -> None:
    monkeypatch.setenv(cpu.MASK_ENV, "gfni")
    with cpu.view("avx512f,gfni"):
        assert "avx512f" not in cpu.flags() and "avx512bw" not in cpu.flags()
    assert cpu.mask() == cpu.closure(frozenset({"gfni"}), cpu.host_flags())
    monkeypatch.delenv(cpu.MASK_ENV)
    with pytest.raises(cpu.MaskError):
        with cpu.view("no_such_flag"):
            pass
    assert cpu.MASK_ENV not in os.environ  # refused before anything changed
    with cpu.view(None):
        assert cpu.mask() == frozenset()
