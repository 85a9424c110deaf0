"""S-box circuits as data and their compilers: proofs on all 256 inputs, metrics, each pass's programs."""
from __future__ import annotations

import random
from dataclasses import replace
from functools import cache
from importlib.resources import files

import pytest
from click.testing import CliRunner

from aesgen.aesref import gf256_mul as gmul, inv_sbox, sbox
from aesgen.circuits import CIRCUIT_FILES, algebra, canright, load
from aesgen.circuits.allocate import AllocationError, Target, allocate, retable
from aesgen.circuits.compile import Compiled, compile_circuit, target_for
from aesgen.circuits.fuse import fuse_ternlog
from aesgen.circuits.linear import boyar_peralta, paar, xor_program
from aesgen.circuits.netlist import LUT_A, LUT_B, LUT_C, Circuit, CircuitError, Gate, lut3, parse
from aesgen.circuits.order import greedy_order, listed_order
from aesgen.circuits.program import Instr, Program, ProgramError, Reg, Slot, check_form, max_live_registers, \
    mismatches
from aesgen.tools.cli import main

CIRCUITS = tuple(CIRCUIT_FILES)
PASSES = ("three-operand", "two-operand", "ternlog")
REFERENCE = {"sbox_bp113": sbox, "inv_sbox_bp121": inv_sbox, "sbox_bp128_depth16": sbox,
             "sbox_canright": sbox, "inv_sbox_canright": inv_sbox}


@cache
def compiled(name: str, pass_name: str, registers: int) -> Compiled:
    return compile_circuit(load(name), target_for(pass_name, registers), tries=32)


# ---------------------------------------------------------------- the proofs
@pytest.mark.parametrize("name", CIRCUITS)
def test_circuit_equals_its_sbox_on_all_256_inputs(name: str) -> None:
    assert load(name).table() == REFERENCE[name]()


def test_sympy_derivation_agrees_with_the_model_and_the_circuits() -> None:
    # Two independent derivations (sympy polynomials and matrices; aesref's shift-and-add) agree,
    # and the circuits agree with both.
    assert algebra.sbox_table() == sbox() == load("sbox_bp113").table()
    assert algebra.inv_sbox_table() == inv_sbox() == load("inv_sbox_bp121").table()
    assert algebra.sbox_table()[0] == 0x63 and algebra.sbox_table()[1] == 0x7C  # FIPS-197 Figure 7


def test_sympy_affine_map_and_its_inverse() -> None:
    inverse, constant = algebra.inverse_affine()
    product = (algebra.affine_matrix() * inverse).applyfunc(lambda e: e % 2)
    assert product == product.eye(8)
    assert constant == 0x05  # A^-1 * 0x63: what the inverse S-box adds before its inversion
    assert algebra.field_inverse(0x53) == 0xCA  # FIPS-197 4.4's example


@pytest.mark.parametrize("name", CIRCUITS)
def test_changing_any_one_gate_breaks_the_proof(name: str) -> None:
    circuit = load(name)
    flip = {"XOR": "XNOR", "XNOR": "XOR", "AND": "OR", "OR": "AND"}
    for k, g in enumerate(circuit.gates):  # a NOT becomes a copy (an AND of its input with itself)
        changed = replace(g, op=flip[g.op]) if g.op in flip else replace(g, op="AND", ins=g.ins * 2)
        broken = replace(circuit, gates=circuit.gates[:k] + (changed,) + circuit.gates[k + 1:])
        assert broken.table() != REFERENCE[name](), f"changing {g.text()} went unnoticed"


# ---------------------------------------------------------------- metrics
def test_bp113_metrics_are_the_published_ones() -> None:
    m = load("sbox_bp113").metrics()
    assert (m.gates, m.nonlinear, m.depth) == (113, 32, 27)
    assert m.by_op == {"AND": 32, "XNOR": 4, "XOR": 77}


def test_depth16_metrics_are_the_published_ones() -> None:
    m = load("sbox_bp128_depth16").metrics()
    assert (m.gates, m.nonlinear, m.depth) == (128, 34, 16)
    assert m.by_op == {"AND": 34, "XNOR": 4, "XOR": 90}


def test_canright_circuits_use_his_36_ands_and_say_their_counts() -> None:
    for name in ("sbox_canright", "inv_sbox_canright"):
        m = load(name).metrics()
        text = (files("aesgen.circuits") / "data" / CIRCUIT_FILES[name]).read_text()
        ops = ", ".join(f"{n} {op}" for op, n in m.by_op.items())
        assert m.nonlinear == m.by_op["AND"] == 36 and f"# {m.gates} gates ({ops}), depth {m.depth}." in text
        assert m.gates <= 140  # the bound Paar's XORs have reached; Canright's own count is 120


def test_canright_constructor_rewrites_the_data_files_byte_identically() -> None:
    data = files("aesgen.circuits") / "data"
    assert canright.texts() == {f: (data / f).read_text() for f, _ in canright.DATA_FILES.values()}


def test_canright_towers_are_normal_bases_and_every_one_inverts() -> None:
    towers = canright.towers()
    assert len(towers) == 16  # N in {W, W^2}, nu one of the 8 elements of GF(16) of trace 1
    for t in towers:
        w, z, y = t.w, t.z, t.y
        assert gmul(w, w) ^ w == 1 and w not in (0, 1)  # W^2 + W + 1 = 0
        assert canright.power(w, 2) ^ w == 1 and canright.power(z, 4) ^ z == 1 and canright.power(y, 16) ^ y == 1
        assert t.n in (w, gmul(w, w)) and canright.power(t.nu, 16) == t.nu
    for inverse in (False, True):  # the shipped tower is the cheapest, and the others compute it too
        assert canright.build(towers[3], inverse).table() == REFERENCE[f"{'inv_' if inverse else ''}sbox_canright"]()
    shipped = canright.best_tower()
    assert load("sbox_canright").gates == canright.build(shipped, False).gates


@pytest.mark.parametrize("columns", [3, 8, 10, 14])
def test_xor_programs_compute_every_row(columns: int) -> None:
    rng = random.Random(columns)
    rows = [rng.randrange(1, 1 << columns) for _ in range(12)] + [1 << (columns - 1)]
    programs = [paar(rows, columns, random.Random(1)), xor_program(rows, columns)]
    programs += [boyar_peralta(rows, columns)] if columns <= 10 else []
    for steps in programs:
        vectors = [1 << i for i in range(columns)]
        for a, b in steps:
            assert a < b < len(vectors)
            vectors.append(vectors[a] ^ vectors[b])
        assert set(rows) <= set(vectors) and len(steps) >= len(set(rows) - set(vectors[:columns]))
    assert len(xor_program(rows, columns)) == min(map(len, programs))


def test_inverse_metrics() -> None:
    m = load("inv_sbox_bp121").metrics()
    assert (m.gates, m.nonlinear, m.depth) == (121, 34, 21)
    assert m.by_op == {"AND": 34, "XNOR": 4, "XOR": 83}


# ---------------------------------------------------------------- the format
@pytest.mark.parametrize("name", CIRCUITS)
def test_text_round_trip(name: str) -> None:
    circuit = load(name)
    assert parse(circuit.text(header="a comment")) == circuit


@pytest.mark.parametrize("text, says", [
    ("circuit c\ninputs a b\noutputs y\ny = a XOR z\n", "'z' is not an input or an earlier gate"),
    ("circuit c\ninputs a b\noutputs y\ny = a XOR b\ny = a AND b\n", "assigned twice"),
    ("circuit c\ninputs a b\noutputs y\ny = a NAND b\n", "cannot read"),
    ("circuit c\ninputs a b\noutputs q\ny = a XOR b\n", "'q' is never computed"),
    ("circuit c\ninputs a b c\noutputs y\ny = LUT3 0x1ff a b c\n", "truth table"),
    ("inputs a\noutputs a\n", "needs `circuit NAME`"),
])
def test_malformed_circuits_are_refused_with_the_reason(text: str, says: str) -> None:
    with pytest.raises(CircuitError, match=says):
        parse(text)


def test_lut3_follows_vpternlogd() -> None:
    assert lut3(0x96, LUT_A, LUT_B, LUT_C, 0xFF) == 0x96  # the patterns reproduce any table
    assert lut3(0x96, 0b1100, 0b1010, 0b0110, 0xF) == 0b1100 ^ 0b1010 ^ 0b0110
    assert lut3(0xE8, 0b1100, 0b1010, 0b0110, 0xF) == 0b1110  # majority
    assert lut3(0xCA, 0b1100, 0b1010, 0b0110, 0xF) == 0b1010 & 0b1100 | 0b0110 & ~0b1100 & 0xF  # a ? b : c
    c = parse("circuit c\ninputs a b c\noutputs m n\nm = LUT3 0xe8 a b c\nn = NOT m\n")
    assert c.table() == tuple((0b10 if bin(x).count("1") >= 2 else 0b01) for x in range(8))
    assert c.metrics().nonlinear == 1 and not Gate("x", "LUT3", ("a", "b", "c"), 0x69).is_nonlinear()


# ---------------------------------------------------------------- the compilers
@pytest.mark.parametrize("registers", [16, 32])
@pytest.mark.parametrize("pass_name", PASSES)
@pytest.mark.parametrize("name", CIRCUITS)
def test_each_pass_computes_the_circuit_within_the_register_file(name: str, pass_name: str, registers: int) -> None:
    c = compiled(name, pass_name, registers)
    program = c.program
    check_form(program)
    assert mismatches(program, load(name)) == []
    assert all(r.n < registers for i in program.instrs for r in (i.dst, *i.srcs) if isinstance(r, Reg))
    assert max_live_registers(program) <= registers
    counts = program.counts()
    assert program.operands == (2 if pass_name == "two-operand" else 3)
    assert (counts["ternlog"] > 0) == (pass_name == "ternlog")
    assert counts["mov"] == 0 or pass_name != "three-operand"  # separate destinations never copy
    if registers == 32:
        assert c.spills() == 0


def test_instruction_counts_against_kasper_schwabe() -> None:
    # The figures the report prints (docs/architecture.md); regressions show up here first.
    assert len(compiled("sbox_bp113", "three-operand", 32).program.instrs) == 117  # 113 gates + 4 NOT
    assert len(compiled("sbox_bp113", "two-operand", 16).program.instrs) <= 163  # Käsper–Schwabe's count
    assert len(compiled("sbox_bp113", "two-operand", 32).program.instrs) <= 145
    assert len(compiled("sbox_bp113", "ternlog", 32).program.instrs) <= 85


def test_two_operand_programs_tie_the_destination() -> None:
    program = compiled("sbox_bp113", "two-operand", 16).program
    logic = [i for i in program.instrs if i.op in ("xor", "and", "or", "not")]
    assert logic and all(i.dst == i.srcs[0] for i in logic)


def test_a_corrupted_program_fails_verification() -> None:
    program = compiled("sbox_bp113", "two-operand", 16).program
    k = next(n for n, i in enumerate(program.instrs) if i.op == "and")
    bad = replace(program, instrs=program.instrs[:k] + (replace(program.instrs[k], op="or"),) + program.instrs[k + 1:])
    assert mismatches(bad, load("sbox_bp113"))


@pytest.mark.parametrize("instr, says", [
    (Instr("xor", Reg(2), (Reg(0), Reg(1))), "destination must be the first source"),
    (Instr("xor", Reg(0), (Reg(0), Reg(16))), "register outside"),
    (Instr("xor", Reg(0), (Slot(0), Reg(1))), "memory operand"),
    (Instr("xor", Reg(0), (Reg(0), Reg(5))), "read before it is written"),
])
def test_the_interpreter_refuses_what_sse_cannot_encode(instr: Instr, says: str) -> None:
    program = Program(2, 16, (instr,), {"a": Reg(0), "b": Reg(1)}, {"y": Reg(0)})
    with pytest.raises(ProgramError, match=says):
        mismatches(program, parse("circuit c\ninputs a b\noutputs y\ny = a XOR b\n"))


def test_ternlog_is_tied_in_every_form() -> None:
    program = Program(3, 32, (Instr("ternlog", Reg(3), (Reg(0), Reg(1), Reg(2)), 0x96),), {}, {})
    with pytest.raises(ProgramError, match="first source"):
        check_form(program)


@pytest.mark.parametrize("name", CIRCUITS)
def test_fusion_keeps_the_function_and_saves_gates(name: str) -> None:
    circuit = load(name)
    fused = fuse_ternlog(circuit)
    assert fused.table() == circuit.table()
    bound = 4 / 5 if "canright" in name else 3 / 4  # Paar's shared XORs leave fewer gates to fuse
    assert len(fused.gates) < len(circuit.gates) * bound
    assert all(g.op in ("LUT3", "XOR", "AND", "OR") for g in fused.gates)


def test_retable_matches_evaluation_under_permutation_and_repetition() -> None:
    rng = random.Random(5)
    values = {"a": 0b11110000, "b": 0b11001100, "c": 0b10101010}
    cases = [(("a", "b", "c"), list(p)) for p in ("abc", "acb", "bac", "bca", "cab", "cba")]
    cases += [(("a", "b", "a"), list(p)) for p in ("aab", "aba", "baa", "abb", "bba")]  # two distinct values
    for old, new in cases:
        for _ in range(40):
            table = rng.randrange(256)
            want = lut3(table, *(values[v] for v in old), 0xFF)
            assert lut3(retable(table, old, new), *(values[v] for v in new), 0xFF) == want, (old, new, table)


def test_every_gate_order_gives_a_correct_program() -> None:
    circuit = load("inv_sbox_bp121")
    for order in (listed_order(circuit), greedy_order(circuit), greedy_order(circuit, 3)):
        for target in (Target("sse", 2, 9), Target("avx", 3, 9)):
            assert mismatches(allocate(circuit, order, target), circuit) == []


def test_too_few_registers_and_missing_ternlog_are_refused() -> None:
    circuit = load("sbox_bp113")
    with pytest.raises(AllocationError, match="8 inputs do not fit"):
        allocate(circuit, listed_order(circuit), Target("sse", 2, 7))
    fused = fuse_ternlog(circuit)
    with pytest.raises(AllocationError, match="no 3-input gates"):
        allocate(fused, listed_order(fused), Target("avx2", 3, 16))


def test_compilation_is_deterministic() -> None:
    a = compile_circuit(load("sbox_bp113"), target_for("two-operand", 16), tries=4)
    b = compile_circuit(load("sbox_bp113"), target_for("two-operand", 16), tries=4)
    assert a.program == b.program and a.order == b.order


def test_cli_circuits_table() -> None:
    r = CliRunner().invoke(main, ["circuits", "--tries", "2", "--registers", "16", "--listing", "ternlog"],
                           terminal_width=200)
    assert r.exit_code == 0, r.output
    assert "sbox_bp113" in r.output and "inv_sbox_bp121" in r.output and "163" in r.output
    assert "ternlog" in r.output and "# sbox_bp113, ternlog, 16 registers" in r.output


def test_cli_circuits_refuses_too_few_registers() -> None:
    r = CliRunner().invoke(main, ["circuits", "--registers", "4"])
    assert r.exit_code == 2 and "at least 8 registers" in r.output


def test_a_circuit_with_a_lut_and_not_compiles_everywhere() -> None:
    circuit = Circuit("mix", ("a", "b", "c"), ("m", "n"), (
        Gate("m", "LUT3", ("a", "b", "c"), 0xE8), Gate("x", "XNOR", ("a", "m")), Gate("n", "NOT", ("x",))))
    for pass_name in PASSES:
        if pass_name != "ternlog":
            with pytest.raises(AllocationError):
                compile_circuit(circuit, target_for(pass_name, 8), tries=1)
            continue
        assert mismatches(compile_circuit(circuit, target_for(pass_name, 8), tries=1).program, circuit) == []
