"""Instruction counts of every compiler pass for the shipped circuits (what `aesgen circuits` prints)."""
from __future__ import annotations

from dataclasses import dataclass

from . import CIRCUIT_FILES, load
from .compile import DEFAULT_TRIES, Compiled, compile_circuit, target_for
from .netlist import Metrics

# Käsper–Schwabe (CHES 2009), one bitsliced S-box layer in two-operand SSE: the baseline to beat.
KASPER_SCHWABE = {"xor": 93, "and/or": 35, "mov": 35, "total": 163}


@dataclass(frozen=True)
class Row:
    circuit: str
    registers: int
    metrics: Metrics
    three_operand: Compiled
    two_operand: Compiled
    ternlog: Compiled


def report_rows(registers: tuple[int, ...] = (32, 16), tries: int = DEFAULT_TRIES,
                names: tuple[str, ...] = tuple(CIRCUIT_FILES)) -> list[Row]:
    rows = []
    for name in names:
        circuit = load(name)
        for n in registers:
            passes = {p: compile_circuit(circuit, target_for(p, n), tries) for p in
                      ("three-operand", "two-operand", "ternlog")}
            rows.append(Row(name, n, circuit.metrics(), passes["three-operand"], passes["two-operand"],
                            passes["ternlog"]))
    return rows


def spill_note(c: Compiled) -> str:
    """', 11 spill' — stores plus reloads; spilled values are otherwise read as memory operands."""
    return f", {c.spills()} spill" if c.spills() else ""


def three_operand_cell(c: Compiled) -> str:
    counts = c.program.counts()
    return f"{len(c.program.instrs)} ({counts['not']} not{spill_note(c)})"


def two_operand_cell(c: Compiled) -> str:
    counts = c.program.counts()
    and_or = counts["and"] + counts["or"] + counts["andn"]
    return f"{len(c.program.instrs)} ({counts['xor']} xor, {and_or} and/or, {counts['not']} not, " \
           f"{counts['mov']} mov{spill_note(c)})"


def ternlog_cell(c: Compiled) -> str:
    counts = c.program.counts()
    return f"{len(c.program.instrs)} ({counts['ternlog']} ternlog, {counts['mov']} mov{spill_note(c)})"
