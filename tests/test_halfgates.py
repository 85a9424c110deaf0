"""Half-gates garbling (kernels/halfgates.py, verify/halfgates.py) and garbled circuits end to end
(aesgen.garbling).

Expected values: AES from `cryptography`, integer arithmetic from Python, the AND gate's meaning
(an evaluated label is C0 ^ (a & b) * delta), and the paper's reference written in
verify/reference/halfgates.py; never the kernel's or the driver's own output.
"""
from __future__ import annotations

import json
import random

import pytest

from aesgen.garbling import driver
from aesgen.garbling.aes128 import aes128_circuit, xtime_sources
from aesgen.garbling.bristol import Bristol, BristolError, Gate, parse
from aesgen.garbling.builder import adder_circuit, multiplier_circuit
from aesgen.garbling.layers import levels
from aesgen.pipeline import generate
from aesgen.spec import KernelSpec
from aesgen.verify.reference import halfgates as ref

from _support import ecb_encrypt as ecb, require_cpu, run_aesgen, verify_generated

MODE = ("halfgates",)
# one config per ISA (the deepest that fits the register file: 4 hashes per gate vector)
PER_ISA = [("sse", 128, 2), ("avx", 128, 2), ("avx2", 256, 2), ("avx512", 512, 2)]
MORE = [("avx512", 256, 4), ("avx512", 512, 4), ("avx512", 128, 4), ("avx2", 256, 1)]


# ---------------------------------------------------------------- the reference, on its own

def test_reference_hash_is_pi_of_sigma_xor_tweak_xor_itself():
    """H(x, t) from its definition, with AES from cryptography: a FIPS-197 block as pi's input."""
    key, pt, ct = bytes(range(16)), bytes.fromhex("00112233445566778899aabbccddeeff"), \
        bytes.fromhex("69c4e0d86a7b0430d8cdb78070b4c55a")
    t = 0x0123456789
    # choose x with sigma(x) ^ t = pt: sigma^-1(s) = s[8:] || s[:8] ^ s[8:]
    s = ref.xor(pt, ref.tweak(t))
    x = s[8:] + ref.xor(s[:8], s[8:])
    assert ref.sigma(x) == s
    assert ref.hashes(key, [(x, t)]) == [ref.xor(ct, pt)]
    assert ref.tweak(t) == t.to_bytes(8, "little") + bytes(8)


def test_reference_garbling_evaluates_to_and():
    rng = random.Random(5)
    key, delta = rng.randbytes(16), bytes([rng.randrange(256) | 1]) + rng.randbytes(15)
    a0, b0 = [rng.randbytes(16) for _ in range(6)], [rng.randbytes(16) for _ in range(6)]
    tables, c0 = ref.garble(key, delta, a0, b0, 99)
    for va in (0, 1):
        for vb in (0, 1):
            a = [ref.xor(x, delta) if va else x for x in a0]
            b = [ref.xor(x, delta) if vb else x for x in b0]
            assert ref.evaluate(key, a, b, 99, tables) == [ref.xor(c, delta) if va & vb else c for c in c0]
    # a wrong tweak (gate id) does not evaluate to the right label
    assert ref.evaluate(key, a0, b0, 100, tables) != c0


# ---------------------------------------------------------------- kernels through the verifier

@pytest.mark.parametrize("isa,width,depth", PER_ISA)
def test_kernels_pass_the_verifier(tmp_path, isa, width, depth):
    verify_generated(tmp_path, KernelSpec(MODE, isa, width, depth), quick=True)


def test_win64_kernels_pass_the_verifier(tmp_path):
    verify_generated(tmp_path, KernelSpec(MODE, "avx2", 256, 2, abi="win64"), quick=True)


@pytest.mark.full
@pytest.mark.parametrize("isa,width,depth", PER_ISA + MORE)
def test_kernels_pass_the_full_verifier(tmp_path, isa, width, depth):
    verify_generated(tmp_path, KernelSpec(MODE, isa, width, depth))


def test_a_depth_the_registers_cannot_hold_is_refused():
    from aesgen.ir import BuildError
    with pytest.raises(BuildError, match="vector registers"):
        generate(KernelSpec(MODE, "avx2", 256, 4))


# ---------------------------------------------------------------- Bristol Fashion

def test_bristol_text_round_trip_and_format():
    c = adder_circuit(4)
    text = c.text()
    lines = text.splitlines()
    assert lines[0] == f"{len(c.gates)} {c.nwires}" and lines[1] == "2 4 4" and lines[2] == "1 4" and lines[3] == ""
    assert parse(text) == c
    assert all(line.endswith((" XOR", " AND", " INV", " EQW")) for line in lines[4:])


@pytest.mark.parametrize("text,why", [
    ("1 3\n2 1 1\n1 1\n\n2 1 0 1 1 XOR\n", "set twice"),
    ("1 3\n1 1\n1 1\n\n2 1 0 1 2 XOR\n", "not set before"),
    ("2 3\n2 1 1\n1 1\n\n2 1 0 1 2 XOR\n", "header says 2 gates"),
    ("1 3\n2 1 1\n1 1\n\n2 1 0 1 2 NAND\n", "NAND"),
])
def test_bristol_reader_refuses_malformed_files(text, why):
    with pytest.raises(BristolError, match=why):
        parse(text)


def test_bristol_evaluation_of_each_gate():
    c = Bristol(7, (1, 1), (4,), (Gate("XOR", (0, 1), 3), Gate("AND", (0, 1), 4), Gate("INV", (0,), 5),
                                  Gate("EQ", (1,), 2), Gate("EQW", (2,), 6)))
    for a in (0, 1):
        for b in (0, 1):
            assert c.evaluate(a, b) == [(a ^ b) | (a & b) << 1 | (1 - a) << 2 | 1 << 3]


def test_aes128_circuit_matches_cryptography():
    c = aes128_circuit()
    assert c.inputs == (128, 128) and c.outputs == (128,)
    assert c.and_count == 6400  # 200 S-boxes of 32 AND: the well-known Bristol AES-128's count too
    rng = random.Random(11)
    keys, pts = [rng.randbytes(16) for _ in range(64)], [rng.randbytes(16) for _ in range(64)]
    keys[0], pts[0] = bytes(range(16)), bytes.fromhex("00112233445566778899aabbccddeeff")  # FIPS-197 C.1
    out = c.evaluate_rows([[int.from_bytes(k, "little") for k in keys], [int.from_bytes(p, "little") for p in pts]])[0]
    assert out[0].to_bytes(16, "little") == bytes.fromhex("69c4e0d86a7b0430d8cdb78070b4c55a")
    assert [o.to_bytes(16, "little") for o in out] == [ecb(k, p) for k, p in zip(keys, pts)]
    assert parse(c.text()) == c


def test_xtime_is_multiplication_by_two():
    for x in range(256):
        got = sum((sum(x >> s & 1 for s in srcs) & 1) << t for t, srcs in enumerate(xtime_sources()))
        assert got == ((x << 1) ^ (0x11B if x & 0x80 else 0)) & 0xFF


@pytest.mark.parametrize("bits", [1, 2, 8, 64])
def test_adder_and_multiplier_circuits(bits):
    rng = random.Random(bits)
    add, mul = adder_circuit(bits), multiplier_circuit(min(bits, 16))
    for _ in range(40):
        x, y = rng.getrandbits(bits), rng.getrandbits(bits)
        assert add.evaluate(x, y) == [(x + y) % (1 << bits)]
        m = min(bits, 16)
        x, y = x % (1 << m), y % (1 << m)
        assert mul.evaluate(x, y) == [(x * y) % (1 << m)]
    assert add.and_count == bits - 1


def test_levels_order_is_topological_and_ids_are_dense():
    c = aes128_circuit()
    lv = levels(c)
    done = set(range(sum(c.inputs)))
    ids = []
    for k in lv.order:
        g = c.gates[k]
        assert set(g.ins) <= done
        done.add(g.out)
        if g.op == "AND":
            ids.append(lv.and_id[k])
    assert ids == list(range(6400)) and sum(lv.layer_sizes) == 6400


# ---------------------------------------------------------------- garbling circuits end to end

def _kernel(isa, width, depth):
    spec = KernelSpec(MODE, isa, width, depth)
    require_cpu(spec)
    return driver.HalfGatesKernel(spec, bytes(range(16)))


@pytest.mark.parametrize("isa,width,depth", [("sse", 128, 1), ("avx", 128, 2), ("avx2", 256, 2), ("avx512", 512, 2)])
def test_aes128_circuit_garbles_and_evaluates(isa, width, depth):
    """Tables identical for every batch size and both techniques (fixed seed); every run's evaluation
    decodes to cryptography's AES."""
    k = _kernel(isa, width, depth)
    p = driver.Prepared.of(aes128_circuit())
    first = driver.garble(k, p, 7, "static", 1)
    assert first.calls == 6400  # the unbatched baseline: a kernel call per AND gate
    rng = random.Random(isa)
    lanes = width // 128
    for technique in driver.TECHNIQUES:
        for batch in (1, 3, lanes * depth, 64, 4096):
            g = driver.garble(k, p, 7, technique, batch)
            assert (g.tables, g.outputs0, g.inputs0) == (first.tables, first.outputs0, first.inputs0), (technique, batch)
            if technique == "static":  # whole batches as inputs are ready, the rest at the layer's end
                assert g.calls == sum(-(-len(s.ands) // batch) for s in p.by_technique["static"].segments), batch
            key, pt = rng.randbytes(16), rng.randbytes(16)
            out = driver.evaluate(k, p, g, [int.from_bytes(key, "little"), int.from_bytes(pt, "little")], technique,
                                  batch)
            assert out[0].to_bytes(16, "little") == ecb(key, pt), (technique, batch)
    assert driver.garble(k, p, 8, "static", 64).tables != first.tables  # the seed matters
    with pytest.raises(ValueError):
        driver.garble(k, p, 7, "static", 0)


def test_garbled_tables_match_the_reference_gate_by_gate():
    """The driver's first AND layer against the paper's reference on the same labels."""
    k = _kernel("avx2", 256, 2)
    c = adder_circuit(8)
    p = driver.Prepared.of(c)
    g = driver.garble(k, p, 3, "static", 5)
    lv = p.levels
    first = [kk for kk in lv.order if c.gates[kk].op == "AND" and lv.and_id[kk] == 0][0]
    a, b = c.gates[first].ins  # layer 1: both inputs are circuit inputs
    tables, _ = ref.garble(bytes(range(16)), g.delta, [g.inputs0[16 * a:16 * a + 16]], [g.inputs0[16 * b:16 * b + 16]], 0)
    assert g.tables[:32] == tables[0]


@pytest.mark.parametrize("circuit,bits", [(adder_circuit, 64), (multiplier_circuit, 16)])
def test_arithmetic_circuits_garble_and_evaluate(circuit, bits):
    k = _kernel("avx2", 256, 2)
    p = driver.Prepared.of(circuit(bits))
    rng = random.Random(bits)
    want_tables = None
    for technique, batch in (("static", 1), ("static", 7), ("dynamic", 1), ("dynamic", 100)):
        g = driver.garble(k, p, 1, technique, batch)
        want_tables = want_tables or g.tables
        assert g.tables == want_tables
        x, y = rng.getrandbits(bits), rng.getrandbits(bits)
        want = (x + y if circuit is adder_circuit else x * y) % (1 << bits)
        assert driver.evaluate(k, p, g, [x, y], technique, batch) == [want]


def _folding_circuit() -> Bristol:
    """What the static program folds and keeps: a XOR read once (folded), INV twice (delta cancels),
    x ^ x (zero), EQW, a wire two gates read, a XOR chain of more than MAX_TERMS terms, outputs that
    are an input, a constant zero and a wire a later gate reads."""
    g = [Gate("XOR", (0, 1), 8), Gate("XOR", (8, 2), 9), Gate("INV", (9,), 10), Gate("INV", (10,), 11),
         Gate("XOR", (3, 3), 12), Gate("EQW", (11,), 13), Gate("XOR", (13, 12), 14), Gate("AND", (14, 4), 15),
         Gate("XOR", (15, 5), 16), Gate("AND", (16, 14), 17), Gate("INV", (17,), 18), Gate("XOR", (0, 1), 19)]
    g += [Gate("XOR", (17 + i, i), 18 + i) for i in range(2, 8)]  # 19 .. 25: the parity of wires 0..7
    g += [Gate("XOR", (25, 15), 26), Gate("XOR", (26, 16), 27), Gate("AND", (27, 18), 28), Gate("EQW", (28,), 29),
          Gate("XOR", (12, 11), 30), Gate("INV", (14,), 31), Gate("EQW", (0,), 32)]
    return Bristol(33, (4, 4), (4,), tuple(g))


def test_static_program_folds_linear_gates_like_gate_by_gate():
    """The compiled static technique against the gate-by-gate dynamic one (same tables and output
    0-labels) and against plain evaluation, on every input."""
    from aesgen.garbling.program import MAX_TERMS, steps
    c = _folding_circuit()
    p = driver.Prepared.of(c)
    sums = [ins for kind, _, ins in steps(c, p.levels) if kind == "sum"]
    # folded: fewer sums than linear gates; a sum joins two of at most MAX_TERMS terms each
    assert len(sums) < sum(g.op != "AND" for g in c.gates) and MAX_TERMS < max(map(len, sums)) <= 2 * MAX_TERMS
    k = _kernel("avx2", 256, 2)
    want = driver.garble(k, p, 4, "dynamic", 1)
    for batch in (1, 2, 64):
        g = driver.garble(k, p, 4, "static", batch)
        assert (g.tables, g.outputs0) == (want.tables, want.outputs0)
        for x in range(16):
            for y in range(16):
                assert driver.evaluate(k, p, g, [x, y], "static", batch) == c.evaluate(x, y), (batch, x, y)


# ---------------------------------------------------------------- aesgen bench halfgates

def test_bench_halfgates_prints_every_row(tmp_path):
    """Structure, not timing: the kernel rows (both input forms, garbling and evaluating, every width
    and depth that fits), the circuit rows (both techniques, batch 1 to a layer), figures positive."""
    spec = KernelSpec(MODE, "avx", 128, 1)  # AES-NI and AVX: what most x86-64 CPUs run
    require_cpu(spec)
    out = tmp_path / "hg.json"
    proc = run_aesgen("bench", "halfgates", "--isa", "avx", "--width", "128", "--depth", "1", "--trials", "1",
                      "--no-verify", "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(out.read_text())["rows"]
    kernels = [(r["what"], r["config"]) for r in rows if "kernel" in r["what"]]
    assert sorted(kernels) == sorted((f"{w} kernel{form}", f"avx 128x{d}") for w in ("garble", "eval")
                                     for form in ("", ", by offset") for d in (1, 2))  # depth 4: 16 registers
    circuit = [(r["what"], r["batch"]) for r in rows if "AES-128" in r["what"]]
    assert sorted(circuit) == sorted((f"{w} AES-128 {t}", b) for w in ("garble", "eval") for t in driver.TECHNIQUES
                                     for b in ("1", "4", "8", "layer"))  # a group of 1 gate: batch 1 once
    assert all(r["mands_per_s"] > 0 and r["cycles_per_and"] > 0 for r in rows)
    assert "garble AES-128 static: batch" in proc.stdout
