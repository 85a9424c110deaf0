"""aesgen hdl: the facts a round is wired from, the refusals, determinism, and the cores run in
Icarus Verilog against FIPS-197, the CAVP ECB KAT/MMT files and `cryptography` through an
independent testbench (tests/hdl/tb_core.v), and linted by Verilator -Wall.

The exhaustive sweep (architecture x S-box x key size x direction x key schedule) is `full`.
"""
from __future__ import annotations

import random
import re
import subprocess

import pytest
from rich.console import Console

from aesgen.hdl import HdlSpec, generate
from aesgen.hdl.sbox import circuit_module
from aesgen.hdl.synth import sbox_area, synthesize
from aesgen.tools import explore_hdl
from aesgen.hdl.structure import (backward_rules, column_matrix, forward_rules, key_words, rounds,
                                  row_permutation)
from aesgen.verify import vectors

from _hdl import ctr_cases, differential, known_answers, lint, missing, simulate
from _support import FIPS197_SBOX, expand_key, gmul, inv_mix_columns, run_aesgen

ICARUS = missing("iverilog", "vvp")
VERILATOR = missing("verilator")
needs_icarus = pytest.mark.skipif(ICARUS is not None, reason=ICARUS or "")
needs_verilator = pytest.mark.skipif(VERILATOR is not None, reason=VERILATOR or "")


def spec_of(bits: int, arch: str, sbox: str = "bp113", decrypt: bool = False, keys: str = "on-the-fly",
            prefix: str = "dut") -> HdlSpec:
    stages = 1
    if arch.startswith("pipelined-"):
        arch, stages = "pipelined", int(arch.rsplit("-", 1)[1])
    return HdlSpec(bits, arch, sbox, prefix, stages_per_round=stages, decrypt=decrypt, key_schedule=keys)


# -- the facts a round is wired from ---------------------------------------------------------------
def test_shift_rows_wiring_is_fips197() -> None:
    # FIPS-197 5.1.2: s'[r, c] = s[r, (c + r) mod 4]; byte 4c + r of a block is (row r, column c).
    assert row_permutation(False) == tuple(4 * ((c + r) % 4) + r for c in range(4) for r in range(4))
    assert row_permutation(True) == tuple(4 * ((c - r) % 4) + r for c in range(4) for r in range(4))


@pytest.mark.parametrize("decrypt", [False, True])
def test_mix_columns_matrix_is_fips197(decrypt: bool) -> None:
    rows = column_matrix(decrypt)
    rng = random.Random(5)
    for _ in range(64):
        col = [rng.randrange(256) for _ in range(4)]
        bits = [col[i // 8] >> (i % 8) & 1 for i in range(32)]
        got = bytes(sum((sum(bits[i] for i in rows[8 * r + b]) & 1) << b for b in range(8)) for r in range(4))
        if decrypt:
            want = inv_mix_columns(bytes(col) + bytes(12))[:4]
        else:
            want = bytes(gmul(col[r], 2) ^ gmul(col[(r + 1) % 4], 3) ^ col[(r + 2) % 4] ^ col[(r + 3) % 4]
                         for r in range(4))
        assert got == want


def run_rules(rules, window: list[bytes], backward: bool) -> list[bytes]:
    """A key step on words (independent S-box table), as the keystep module wires it."""
    nk = len(window)
    new: dict[int, bytes] = {}

    def at(q: int) -> bytes:
        if backward and q < 0:
            return new[q + 4]
        if not backward and q >= nk:
            return new[q - nk]
        return window[q]

    for r in rules:
        t = at(r.src)
        if r.kind == "rotsub":
            t = t[1:] + t[:1]
        if r.kind != "plain":
            t = bytes(FIPS197_SBOX[b] for b in t)
            t = bytes([t[0] ^ r.rcon]) + t[1:]
        new[r.p] = bytes(a ^ b for a, b in zip(at(r.base), t))
    words = [new[p] for p in range(4)]
    return words + window[:nk - 4] if backward else window[4:] + words


@pytest.mark.parametrize("bits", [128, 192, 256])
def test_key_windows_walk_the_fips197_schedule_both_ways(bits: int) -> None:
    key = random.Random(bits).randbytes(bits // 8)
    nk, nr = key_words(bits), rounds(bits)
    schedule = expand_key(key)
    window = [key[4 * i:4 * i + 4] for i in range(nk)]
    windows = [window]
    for j in range(nr):
        window = run_rules(forward_rules(j, nk), window, backward=False)
        windows.append(window)
    assert [b"".join(w[:4]) for w in windows] == schedule
    for j in range(nr, 0, -1):
        window = run_rules(backward_rules(j, nk), window, backward=True)
        assert window == windows[j - 1]


# -- the command: refusals and determinism ---------------------------------------------------------
@pytest.mark.parametrize("args,why", [
    (["--arch", "unrolled-3"], "K must divide the 10 rounds"),
    (["--arch", "pipelined", "--stages-per-round", "3"], "--stages-per-round 3"),
    (["--arch", "iterative", "--stages-per-round", "2"], "pipelined only"),
    (["--sbox", "nosuch"], "--sbox nosuch"),
    (["--prefix", "9x"], "Verilog identifier"),
    (["--arch", "bitserial"], "--arch bitserial"),
])
def test_refusals_are_one_line_exit_2_and_write_nothing(tmp_path, args: list[str], why: str) -> None:
    out = tmp_path / "rtl"
    r = run_aesgen("hdl", *args, "-o", str(out))
    assert r.returncode == 2
    assert why in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not out.exists()


def test_output_is_deterministic_with_a_provenance_header(tmp_path) -> None:
    args = ["hdl", "--bits", "192", "--arch", "pipelined", "--stages-per-round", "2", "--sbox", "bp113",
            "--decrypt", "--prefix", "p", "-o"]
    first, second = tmp_path / "a", tmp_path / "b"
    assert run_aesgen(*args, str(first)).returncode == 0
    assert run_aesgen(*args, str(second), cwd=tmp_path).returncode == 0
    names = sorted(p.name for p in first.iterdir())
    assert names == sorted(p.name for p in second.iterdir())
    assert {"p_core.v", "tb_p.v", "p_sbox.v", "p_inv_sbox.v"} <= set(names)
    for name in names:
        a = (first / name).read_text()
        assert a.replace(str(first), "DIR") == (second / name).read_text().replace(str(second), "DIR")
        assert "Generated by aesgen" in a and f"--prefix p -o {first}" in a
    spec = spec_of(128, "iterative", "table")
    smoke = vectors.FIPS197_APPENDIX_C[128]
    assert generate(spec, smoke) == generate(spec, smoke)


def test_the_interface_is_the_fixed_one(tmp_path) -> None:
    text = generate(spec_of(256, "iterative"), vectors.FIPS197_APPENDIX_C[256])["dut_core.v"]
    ports = re.search(r"module dut_core \((.*?)\);", text, re.S).group(1)
    assert [" ".join(p.split()) for p in ports.split(",")] == [
        "input wire clk", "input wire rst_n", "input wire key_load", "input wire [255:0] key",
        "input wire in_valid", "output wire in_ready", "input wire [127:0] in_block",
        "output wire out_valid", "input wire out_ready", "output wire [127:0] out_block"]


# -- simulation ------------------------------------------------------------------------------------
def check_core(spec: HdlSpec, tmp_path, seed: int = 1, kinds: tuple[str, ...] = vectors.CAVP_KINDS) -> None:
    cases = known_answers(spec.bits, spec.decrypt, kinds) + differential(spec.bits, spec.decrypt, 3, 16, seed)
    out = simulate(spec, cases, tmp_path, seed=seed)
    assert f"PASS {len(cases)} in" in out, out[-2000:]


# make test: iterative and pipelined AES-128 and AES-256 with a circuit S-box, and one decryption
# core. A pipeline drains before each new key, so its quick run leaves out VarKey (a key a case);
# the sweep runs every file on every architecture.
QUICK = [(128, "iterative", "bp113", False), (256, "iterative", "bp113", False),
         (128, "pipelined-1", "bp113", False), (256, "pipelined-1", "bp113", False),
         (128, "iterative", "bp113", True), (128, "iterative", "canright", False), (128, "iterative", "canright", True)]


@needs_icarus
@pytest.mark.parametrize("bits,arch,sbox,decrypt", QUICK)
def test_core_answers_kats_and_cryptography(tmp_path, bits: int, arch: str, sbox: str, decrypt: bool) -> None:
    kinds = tuple(k for k in vectors.CAVP_KINDS if k != "VarKey" or not arch.startswith("pipelined"))
    check_core(spec_of(bits, arch, sbox, decrypt), tmp_path, kinds=kinds)


@needs_icarus
@pytest.mark.parametrize("arch", ["iterative", "unrolled-2", "pipelined-1", "pipelined-2"])
def test_clocks_per_block(tmp_path, arch: str) -> None:
    """With no gaps and no back-pressure a core takes a block every clocks_per_block clocks."""
    spec = spec_of(128, arch, "table")
    n = 24
    out = simulate(spec, differential(128, False, 1, n, 3), tmp_path, gap=0, stall=0)
    clocks = int(re.search(r"PASS \d+ in (\d+) clocks", out).group(1))
    assert clocks == spec.latency() + (n - 1) * spec.clocks_per_block()


@needs_icarus
def test_smoke_testbench_passes(tmp_path) -> None:
    assert run_aesgen("hdl", "--bits", "192", "--sbox", "bp113", "--prefix", "s", "-o", str(tmp_path)).returncode == 0
    sources = sorted(str(p) for p in tmp_path.glob("*.v"))
    subprocess.run(["iverilog", "-g2005", "-s", "tb_s", "-o", str(tmp_path / "sim"), *sources], check=True)
    out = subprocess.run(["vvp", "-n", str(tmp_path / "sim")], capture_output=True, text=True, check=True).stdout
    assert out.startswith("PASS s_core: dda97ca4864cdfe06eaf70a0ec0d7191")


LINTED = [(128, "iterative", "bp113", False, "on-the-fly"), (256, "iterative", "bp113", False, "on-the-fly"),
          (128, "pipelined-1", "bp113", False, "on-the-fly"), (256, "pipelined-1", "bp113", False, "on-the-fly"),
          (192, "unrolled-3", "table", True, "on-the-fly"), (192, "pipelined-2", "table", True, "loaded"),
          (256, "iterative", "table", True, "loaded"), (128, "unrolled-10", "bp113", False, "loaded"),
          (128, "iterative", "canright", True, "on-the-fly")]


@needs_verilator
@pytest.mark.parametrize("bits,arch,sbox,decrypt,keys", LINTED)
def test_verilator_lint_is_clean(tmp_path, bits: int, arch: str, sbox: str, decrypt: bool, keys: str) -> None:
    r = lint(spec_of(bits, arch, sbox, decrypt, keys), tmp_path)
    assert r.returncode == 0 and r.stderr == "" and r.stdout == "", r.stderr + r.stdout


# -- the exhaustive sweep (make test-full) -----------------------------------------------------------
SWEEP = [(bits, arch, sbox, decrypt, keys) for bits in (128, 192, 256)
         for arch in ("iterative", "unrolled-2", "pipelined-1", "pipelined-2") for sbox in ("bp113", "canright", "table")
         for decrypt in (False, True) for keys in ("on-the-fly", "loaded")]


@pytest.mark.full
@needs_icarus
@pytest.mark.parametrize("bits,arch,sbox,decrypt,keys", SWEEP)
def test_sweep_answers(tmp_path, bits: int, arch: str, sbox: str, decrypt: bool, keys: str) -> None:
    check_core(spec_of(bits, arch, sbox, decrypt, keys), tmp_path, seed=bits)


@pytest.mark.full
@needs_verilator
@pytest.mark.parametrize("bits,arch,sbox,decrypt,keys", SWEEP)
def test_sweep_lint(tmp_path, bits: int, arch: str, sbox: str, decrypt: bool, keys: str) -> None:
    r = lint(spec_of(bits, arch, sbox, decrypt, keys), tmp_path)
    assert r.returncode == 0 and r.stderr == "" and r.stdout == "", r.stderr + r.stdout


# -- the CTR wrapper -------------------------------------------------------------------------------
@needs_icarus
@pytest.mark.parametrize("bits,arch", [(128, "iterative"), (256, "pipelined-1")])
def test_ctr_wrapper_answers_rfc3686_and_cryptography(tmp_path, bits: int, arch: str) -> None:
    spec = HdlSpec(bits, arch.split("-")[0], "table", "w", ctr=True)
    cases = ctr_cases(bits, seed=bits)
    out = simulate(spec, cases, tmp_path)
    assert f"PASS {len(cases)} in" in out, out[-2000:]


@needs_verilator
def test_ctr_wrapper_lint_is_clean(tmp_path) -> None:
    r = lint(HdlSpec(192, "pipelined", "bp113", "w", stages_per_round=2, ctr=True), tmp_path, top="w_ctr")
    assert r.returncode == 0 and r.stderr == "" and r.stdout == "", r.stderr + r.stdout


# -- the area report -------------------------------------------------------------------------------
needs_yosys = pytest.mark.skipif(missing("yosys") is not None, reason=missing("yosys") or "")


@needs_yosys
def test_report_counts_the_state_and_key_registers() -> None:
    spec = spec_of(128, "iterative", "table")
    (six,) = synthesize(spec, generate(spec, vectors.FIPS197_APPENDIX_C[128]), ("lut6",))
    # 128 state + 128 stored key + 128 key window flip-flops, and a handful of control bits
    assert six.flow == "lut6" and 384 <= six.ffs < 400 and six.luts > 16 * 8 and six.depth >= 2


@needs_yosys
def test_report_has_an_ecp5_flow() -> None:
    spec = spec_of(128, "iterative", "canright")
    (five,) = synthesize(spec, generate(spec, vectors.FIPS197_APPENDIX_C[128]), ("ecp5",))
    # the 384 flip-flops of the state and the two key registers at least; LUT4s for 20 S-boxes
    assert five.flow == "ecp5" and five.ffs >= 384 and five.luts > 20 * 8 and five.fmax_mhz is None


def test_explore_table_shows_ecp5_only_when_run() -> None:
    base = dict(arch="iterative", sbox="canright", luts6=1, ffs=2, depth6=3, ice40_luts=4, ice40_brams=0,
                fmax_mhz=None, blocks_per_clock=1 / 11, note="")
    for ecp5 in (None, 1234):
        table, _ = explore_hdl.tables([explore_hdl.Point(**base, ecp5_luts=ecp5)], [], 128)
        console = Console(width=400, record=True)
        console.print(table)
        text = console.export_text()
        assert ("ECP5 LUT4" in text) == ("1,234" in text) == (ecp5 is not None)
        seed = next(line for line in text.splitlines() if "seed study" in line)
        assert seed.split("│")[-2].strip() == "1,183,080"  # its last cell under the last column


@needs_yosys
def test_sbox_area_of_a_circuit() -> None:
    six, four = sbox_area("s", circuit_module("s", "sbox_bp113"))
    assert six.ffs == four.ffs == 0 and 8 <= six.luts < four.luts and six.depth < four.depth
