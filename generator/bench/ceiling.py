"""The machine's ceiling: throughput and latency of the instructions AES kernels live on.

A generated measurement file (not a product kernel): for vaesenc, vpclmulqdq
and vgf2p8affineinvqb at xmm/ymm/zmm, a loop of 12 independent chains
(throughput) and a loop of one dependent chain (latency); plus a chain of
`add` (1 cycle each) that converts TSC ticks into core cycles.

`aesgen bench` times these loops again in every sampling round, beside the
kernels (probe_file, sampled_ceiling): a bound measured minutes earlier, or at
another clock, is not the bound of the figure it is compared with.

A *mix* loop holds given numbers of vaesenc and vpclmulqdq (per width), spread
evenly over independent chains: it measures what a stitched loop such as GCM's
allows when the two instructions compete for the same pipes (on Zen 4 they do,
so the bound is near the sum of their costs, not the larger one).
"""
from __future__ import annotations

import json
import os
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path

from aesgen.cpu import flags as cpu_flags

from .build import bench_binary, build_so_from_text

CHAINS = 12
# Each loop iteration holds the chains UNROLL times: with one copy, the loop's own dec/jnz cost the
# ymm vaesenc loop 2% here (0.51 cycles against 0.50 unrolled), which kernels then "beat".
UNROLL = 4
PER_ITERATION = CHAINS * UNROLL  # instructions per loop iteration; bench.c divides by it
INSTRUCTIONS = {  # name -> (GAS mnemonic with operands {s} {d}, needs imm)
    "vaesenc": "vaesenc {s}, {d}, {d}",
    "vpclmulqdq": "vpclmulqdq $0x00, {s}, {d}, {d}",
    "vgf2p8affineinvqb": "vgf2p8affineinvqb $0x00, {s}, {d}, {d}",
}
# /proc/cpuinfo flags each (instruction, width) loop needs: VEX xmm forms need only the
# base extension and AVX; ymm needs the vector extension; zmm AVX-512 as well.
FEATURES = {
    ("vaesenc", 128): ("aes", "avx"), ("vaesenc", 256): ("vaes", "avx"), ("vaesenc", 512): ("vaes", "avx512f"),
    ("vpclmulqdq", 128): ("pclmulqdq", "avx"), ("vpclmulqdq", 256): ("vpclmulqdq", "avx"),
    ("vpclmulqdq", 512): ("vpclmulqdq", "avx512f"),
    ("vgf2p8affineinvqb", 128): ("gfni", "avx"), ("vgf2p8affineinvqb", 256): ("gfni", "avx"),
    ("vgf2p8affineinvqb", 512): ("gfni", "avx512f"),
}
KINDS = {128: "xmm", 256: "ymm", 512: "zmm"}
# The clock: a dependent chain of register-register adds, one cycle each. Not `add $1`:
# Golden Cove-class cores (Alder Lake, Sapphire Rapids) fold add-immediate chains at rename,
# measured here at 0.13 TSC ticks per add against 0.67 for `add %rdx, %rax`, which made
# the "core clock" 21 GHz and every cycle figure five times too large.
CLOCK_CHAIN = ["add %rdx, %rax"] * PER_ITERATION


def _loop(name: str, body: list[str], wide: bool) -> list[str]:
    lines = [f"\t.globl {name}", f"\t.type {name}, @function", f"{name}:", "\tendbr64", "1:"]
    lines += [f"\t{b}" for b in body]
    lines += ["\tdec %rdi", "\tjnz 1b"] + (["\tvzeroupper"] if wide else []) + ["\tret", f"\t.size {name}, .-{name}"]
    return lines


def clock_loop() -> list[str]:
    """`ceil_add_lat`: the add chain every measurement file carries to turn ticks into cycles."""
    return _loop("ceil_add_lat", CLOCK_CHAIN, False)


def ceiling_source() -> tuple[str, list[str]]:
    lines = ["\t.text"]
    names = []
    for ins, pattern in INSTRUCTIONS.items():
        for width, kind in KINDS.items():
            src = f"%{kind}15"
            tput = [pattern.format(s=src, d=f"%{kind}{r}") for r in range(CHAINS)] * UNROLL
            lat = [pattern.format(s=src, d=f"%{kind}0")] * PER_ITERATION
            for mode, body in (("tput", tput), ("lat", lat)):
                name = f"ceil_{ins}_{width}_{mode}"
                names.append(name)
                lines += _loop(name, body, width > 128)
    lines += clock_loop()
    names.append("ceil_add_lat")
    lines.append('\t.section .note.GNU-stack,"",@progbits')
    return "\n".join(lines) + "\n", names


# Chain registers of each unit in a mix loop (register 15 is the shared source).
MIX_CHAINS = {"vaesenc": range(0, 10), "vpclmulqdq": range(10, 15)}
MIX_REPEATS = 9
Counts = dict[tuple[str, int], int]  # (instruction, width) -> how many per loop iteration


def mix_loop(counts: Counts, name: str) -> list[str]:
    """One loop with counts[(instruction, width)] of each instruction, spread evenly through the
    body, each unit's instructions round-robin over its own independent chains."""
    slots = sorted(((i + 0.5) / n, ins, width) for (ins, width), n in counts.items() for i in range(n))
    turn = dict.fromkeys(MIX_CHAINS, 0)
    body = []
    for _, ins, width in slots:
        chains = MIX_CHAINS[ins]
        reg = chains[turn[ins] % len(chains)]
        turn[ins] += 1
        body.append(INSTRUCTIONS[ins].format(s=f"%{KINDS[width]}15", d=f"%{KINDS[width]}{reg}"))
    return _loop(name, body, any(w > 128 for _, w in counts))


def mix_source(counts: Counts, name: str = "ceil_mix") -> str:
    lines = ["\t.text", *mix_loop(counts, name), *clock_loop(),
             '\t.section .note.GNU-stack,"",@progbits']
    return "\n".join(lines) + "\n"


def runs_here(counts: Counts) -> bool:
    have = cpu_flags()
    return bool(counts) and all(f in have for key in counts for f in FEATURES[key])


def mix_key(counts: Counts) -> tuple:
    return tuple(sorted(counts.items()))


@dataclass
class InstructionCost:
    instruction: str
    width: int
    throughput_cycles: float  # reciprocal throughput, core cycles
    latency_cycles: float
    throughput_ticks: float

    def aes_bytes_per_tick(self, rounds: int = 10) -> float:
        return 16 * (self.width // 128) / (rounds * self.throughput_ticks)


@dataclass
class Ceiling:
    tsc_hz: float
    core_hz: float
    costs: list[InstructionCost]

    def cost(self, instruction: str, width: int) -> InstructionCost | None:
        return next((c for c in self.costs if c.instruction == instruction and c.width == width), None)

    def aes_gbps(self, width: int, rounds: int = 10) -> float:
        c = self.cost("vaesenc", width)
        return c.aes_bytes_per_tick(rounds) * self.tsc_hz / 1e9 if c else float("nan")

    def to_dict(self) -> dict:
        d = asdict(self)
        d["aes128_gbps"] = {str(w): self.aes_gbps(w) for w in KINDS}
        return d

    def alone_cycles(self, counts: dict[tuple[str, int], int]) -> float | None:
        """Core cycles the instructions need from their own reciprocal throughputs, each unit
        as if alone (None if a cost was not measured on this CPU)."""
        costs = [(self.cost(ins, width), n) for (ins, width), n in counts.items()]
        return None if any(c is None for c, _ in costs) else sum(c.throughput_cycles * n for c, n in costs)

    def measure_mix(self, counts: Counts) -> float | None:
        """Core cycles one iteration of a mix loop (see mix_source) takes, measured; None when
        this CPU lacks an instruction of the mix."""
        if not runs_here(counts):
            return None
        so = build_so_from_text(mix_source(counts), "ceiling-mix")
        # MIX_REPEATS runs in one process, each next to a run of the 1-cycle add chain, so the
        # clock is calibrated at the same moment; the fastest pair counts. On a shared machine
        # a neighbour or a clock change can slow one burst of trials down twofold.
        names = ["ceil_add_lat", "ceil_mix"] * MIX_REPEATS
        _, rows = run_loops(so, names)
        return min(iteration_cycles(add, mix) for add, mix in zip(rows[::2], rows[1::2]))


@dataclass
class SampledCeiling(Ceiling):
    """The ceiling loops timed in the same rounds as the kernels they bound (medians of the round
    medians), so the bound and the figure see the same clock: a core that runs faster or slower
    for a while (turbo, a vector-width licence, a neighbour) moves both alike."""
    mix_cycles: dict[tuple, float] = field(default_factory=dict)  # mix_key(counts) -> cycles per iteration

    def measure_mix(self, counts: Counts) -> float | None:
        return self.mix_cycles.get(mix_key(counts))


def iteration_cycles(clock: dict, row: dict) -> float:
    """Core cycles one iteration of a loop takes, from its harness row and the clock's beside it: the
    harness divides each loop's ticks by PER_ITERATION, and the clock's add takes one cycle."""
    return row["min_ticks"] * PER_ITERATION / clock["min_ticks"]


def run_loops(so: Path, names: list[str], cpu: int | None = None) -> tuple[float, list[dict]]:
    """One harness run of the named loops (pinned to `cpu` if given): the TSC rate and a row per
    name (min_ticks, median_ticks, samples: ticks per loop iteration / PER_ITERATION)."""
    pin = (lambda: os.sched_setaffinity(0, {cpu})) if cpu is not None else None
    out = subprocess.run([str(bench_binary()), "--ceiling", str(so), *names], check=True,
                         capture_output=True, text=True, preexec_fn=pin).stdout
    rows = [json.loads(line) for line in out.splitlines() if line.strip()]
    return rows[0]["tsc_hz"], rows[1:]


def probe_file(mixes: list[Counts]) -> tuple[Path, list[str]]:
    """The ceiling loops this CPU can run and a mix loop per entry of `mixes` (named mix_name(i)),
    in one shared object: what `aesgen bench` times in every round beside the kernels."""
    text, names = ceiling_source()
    have = cpu_flags()
    runnable = [n for n in names if n == "ceil_add_lat" or all(f in have for f in _needs(n))]
    extra = []
    for i, counts in enumerate(mixes):
        if runs_here(counts):
            extra += mix_loop(counts, mix_name(i))
            runnable.append(mix_name(i))
    text = text.replace('\t.section .note.GNU-stack', "\n".join(extra) + '\n\t.section .note.GNU-stack') if extra else text
    return build_so_from_text(text, "ceiling-probe"), runnable


def mix_name(i: int) -> str:
    return f"ceil_mix{i}"


def sampled_ceiling(tsc_hz: float, ticks: dict[str, float], mixes: list[Counts]) -> SampledCeiling:
    """The ceiling from the loops' median ticks per instruction over the rounds of a bench run."""
    ticks_per_cycle = ticks["ceil_add_lat"]
    mix_cycles = {mix_key(c): ticks[mix_name(i)] * PER_ITERATION / ticks_per_cycle
                  for i, c in enumerate(mixes) if mix_name(i) in ticks}
    return SampledCeiling(tsc_hz, tsc_hz / ticks_per_cycle, _costs(ticks), mix_cycles)


def _costs(ticks: dict[str, float]) -> list[InstructionCost]:
    """Each instruction's costs from ticks per instruction of its loops (the add chain's ticks are
    one core cycle)."""
    ticks_per_cycle = ticks["ceil_add_lat"]
    costs = []
    for ins in INSTRUCTIONS:
        for width in KINDS:
            t, l = ticks.get(f"ceil_{ins}_{width}_tput"), ticks.get(f"ceil_{ins}_{width}_lat")
            if t and l:
                costs.append(InstructionCost(ins, width, t / ticks_per_cycle, l / ticks_per_cycle, t))
    return costs


def _needs(name: str) -> tuple[str, ...]:
    _, ins, width, _ = name.split("_")
    return FEATURES[(ins, int(width))]


def measure(cpu: int | None = None) -> Ceiling:
    """One run of every ceiling loop this CPU has, each at its fastest of 15 trials."""
    so, names = probe_file([])
    tsc, rows = run_loops(so, names, cpu)
    ticks = {r["name"]: r["min_ticks"] for r in rows if "na" not in r}
    return Ceiling(tsc, tsc / ticks["ceil_add_lat"], _costs(ticks))
