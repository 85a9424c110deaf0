"""`aesgen bench`: time kernels against the peers in one process, report ratios.

The C harness (bench.c) alternates our kernel and each peer, one call per
message, and returns every sample; this module runs it round after round
(sampler.sample) until each median is known to ±2% or the budget ends, and
turns TSC ticks into GB/s, ticks per byte and ratios, each with its interval.
Nothing here asserts on speed: benchmarks report.
"""
from __future__ import annotations

import json
import os
import platform
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from aesgen.aesref import ROUNDS_BY_BITS
from aesgen.functions import TIMED_FUNCTIONS
from aesgen.kernels.otr import pipelined
from aesgen.kernels.xts_table import layout as xts_layout
from aesgen.mainloop import main_loop
from aesgen.pipeline import generate
from aesgen.spec import KernelSpec, mode_of
from aesgen.verify.build import build_shared

from . import peer_view
from .build import bench_binary
from .ceiling import Ceiling, Counts, probe_file, run_loops, sampled_ceiling
from .peer_libs import PEER_LIBS, built_library
from .sampler import Sampling, sample
from .stats import Interval, speeds_text, spread

SCHEMA = "aesgen-bench/1"
BUDGET = 20.0  # seconds of sampling for a whole `aesgen bench` run, shared by its functions
# Where the harness puts the output buffer: this many bytes past the input's offset within a 4 KiB
# page (bench.c place_buffers), for every implementation alike. With the output a little ahead of
# the input (malloc gave 192 B), a loop's next loads share their low 12 address bits with the
# stores it has just issued and wait on them (4 KiB aliasing); half a page keeps both directions
# far apart. docs/tuning.md, "Where the buffers sit", has what it changes; --out-offset varies it.
OUT_OFFSET = 2048
# The ops timed per mode: the records marked `timed` (every mode has an entry, maybe empty).
OPS_BY_MODE = TIMED_FUNCTIONS
# Tweak sequences alone: SIZE bytes = SIZE / 16 doublings, reported per block; no peer has them.
DOUBLING_OPS = ("gfdouble_le", "gfdouble_be")
# openssl-noaesni: OpenSSL's EVP with AES-NI masked off (its bsaes/vpaes code), run by the harness in a
# process of its own (bench_peer_process.c) and still sampled in turn with the others.
# boringssl, awslc: BoringSSL and AWS-LC as `make peers` builds them (peer_libs.py), loaded by the harness with
# dlopen(RTLD_DEEPBIND) beside OpenSSL (peers_dl.c); each size is timed only after their output equals ours.
PEERS = ("openssl", "ipsec-mb", "openssl-noaesni", *PEER_LIBS)
# The AES calls per 16-byte block that the AES bound of a function counts, where it is not plain ECB's one.
AEAD_BLOCK_CIPHER = {"ocb_encrypt": "OCB3", "ocb_decrypt": "OCB3", "otr_encrypt": "AES-OTR", "otr_decrypt": "AES-OTR"}
# 256-bit-block ops: AES rounds per 16 bytes whatever --key-bits (Rijndael-256: 14 rounds of two
# AESENC per 32-byte block, the same count per byte as AES-256; Simpira-256: 15 Feistel rounds of
# two AESENC on one half), and how the ceiling line names them.
WIDE_BLOCK_ROUNDS = {op: (14, "Rijndael-256: 2 x 14 AES rounds per 32-byte block")
                     for op in ("rijndael256_ecb_encrypt", "rijndael256_ecb_decrypt")} | \
                    {op: (15, "Simpira-256: 15 x 2 AES rounds per 32-byte block")
                     for op in ("simpira256_permute", "simpira256_inverse")}


@dataclass
class Measurement:
    op: str
    size: int
    impl: str
    min_ticks: float
    median_ticks: float
    gbps: float  # from the median
    ticks_per_byte: float
    # median_ticks is the median of `rounds` round medians (sampler.sample); [ci_low_ticks, ci_high_ticks]
    # its order-statistics interval, covering it with `confidence` (0.95 from 6 rounds on);
    # gbps_halfwidth is half that interval in GB/s. min_ticks: the fastest single sample.
    ci_low_ticks: float = 0.0
    ci_high_ticks: float = 0.0
    rounds: int = 0
    confidence: float = 0.0
    gbps_halfwidth: float = 0.0
    # The round medians in two groups apart (stats.two_modes: a speed that depends on the process),
    # in GB/s: (slower, its rounds, faster, its rounds); None when they are one group.
    modes_gbps: tuple[float, int, float, int] | None = None

    def ticks(self) -> Interval:
        return Interval(self.ci_low_ticks, self.median_ticks, self.ci_high_ticks, self.rounds, self.confidence)

    def gbps_text(self) -> str:
        """The GB/s with its spread, marked ~ when the rounds fell in two speeds."""
        return spread(self.gbps, self.gbps_halfwidth, 2, self.rounds) + (" ~" if self.modes_gbps else "")

    def gbps_interval(self) -> Interval:
        return self.ticks().reciprocal(self.gbps * self.median_ticks)  # GB/s x ticks: the same for every tick count


def two_speeds(measurements: list[Measurement]) -> str:
    """One line naming the figures whose rounds (processes) fell in two groups, or ""."""
    both = [f"{m.op} {m.size} B ({m.impl}): {speeds_text(m.modes_gbps)}" for m in measurements if m.modes_gbps]
    return ("~ two speeds by process (round medians in two groups apart; the median and its interval "
            f"span both): {'; '.join(both)}") if both else ""


def measurement(op: str, size: int, impl: str, ticks: Interval, min_ticks: float, tsc_hz: float) -> Measurement:
    """One implementation at one size, from the interval of its median TSC ticks per call."""
    gbps = ticks.reciprocal(size * tsc_hz / 1e9)
    return Measurement(op, size, impl, min_ticks, ticks.median, gbps.median, ticks.median / size, ticks.low,
                       ticks.high, ticks.n, ticks.confidence, gbps.half_width)


@dataclass
class OpCeiling:
    """What the hardware allows one function, and why."""
    op: str
    gbps: float
    bytes_per_cycle: float  # per core cycle
    name: str  # what limits it: "clmul", "AES+CLMUL", "AES", "serial AES"
    basis: str  # how it was obtained, for the report line
    measured_together: bool = False  # a mix loop of the kernel's instructions, run on this CPU
    core_hz: float = 0.0  # the core clock from the add chain timed with the ceiling's loops


@dataclass
class Refusal:
    """A peer that returned an error for one message size (e.g. a length intel-ipsec-mb's job
    API does not take): it was not timed there, rather than timed on its early exit."""
    op: str
    size: int
    impl: str
    why: str


@dataclass
class BenchResult:
    spec: dict
    key_bits: int
    tsc_hz: float
    peers: dict[str, str] = field(default_factory=dict)  # name -> detail, or "n/a (why)"
    measurements: list[Measurement] = field(default_factory=list)
    ceilings: dict[str, float] = field(default_factory=dict)  # op -> GB/s the hardware allows
    machine: dict = field(default_factory=dict)
    core_hz: float = 0.0  # from the ceiling's add chain; 0 when no ceiling was measured
    ceiling_bounds: dict[str, OpCeiling] = field(default_factory=dict)  # op -> the ceiling's derivation
    op_peers: dict[str, dict[str, str]] = field(default_factory=dict)  # op -> peer -> detail or "n/a (why)"
    refused: list["Refusal"] = field(default_factory=list)  # sizes a peer would not run (not timed)
    sampling: str = ""  # how the sampling ended, per function (Sampling.describe)
    out_offset: int = OUT_OFFSET  # the output buffer's offset past the input's within a 4 KiB page

    def placement(self) -> str:
        """One line: where the harness put the buffers."""
        return (f"buffers: the output {self.out_offset} B past the input's offset within a 4 KiB page "
                f"(out - in = {self.out_offset} mod 4096; --out-offset)")

    def get(self, op: str, size: int, impl: str) -> Measurement | None:
        return next((m for m in self.measurements if (m.op, m.size, m.impl) == (op, size, impl)), None)

    def ratio(self, op: str, size: int, peer: str) -> float | None:
        """Our speed over the peer's (> 1: we are faster), from medians measured side by side."""
        ours, theirs = self.get(op, size, "aesgen"), self.get(op, size, peer)
        if not ours or not theirs:
            return None
        return theirs.median_ticks / ours.median_ticks

    def ratio_halfwidth(self, op: str, size: int, peer: str) -> float | None:
        """Half the range of the ratio over both intervals (their ends divided crosswise)."""
        ours, theirs = self.get(op, size, "aesgen"), self.get(op, size, peer)
        if not ours or not theirs or not (ours.ci_low_ticks and theirs.ci_low_ticks):
            return None  # a figure without an interval (not sampled in rounds)
        return (theirs.ci_high_ticks / ours.ci_low_ticks - theirs.ci_low_ticks / ours.ci_high_ticks) / 2

    def to_json(self) -> dict:
        d = asdict(self)
        d["schema"] = SCHEMA
        d["ratios"] = [
            {"op": m.op, "size": m.size, "vs": peer, "ratio": self.ratio(m.op, m.size, peer),
             "ratio_halfwidth": self.ratio_halfwidth(m.op, m.size, peer)}
            for m in self.measurements if m.impl == "aesgen"
            for peer in self.peers if self.get(m.op, m.size, peer)
        ]
        d["ceiling_fraction"] = [
            {"op": m.op, "size": m.size, "fraction": self.ceiling_fraction(m.op, m.size),
             "bytes_per_cycle": self.bytes_per_cycle(m.op, m.size)}
            for m in self.measurements if m.impl == "aesgen" and m.op in self.ceilings
        ]
        return d

    def ceiling_fraction(self, op: str, size: int) -> float | None:
        m = self.get(op, size, "aesgen")
        return m.gbps / self.ceilings[op] if m and op in self.ceilings else None

    def bytes_per_cycle(self, op: str, size: int, impl: str = "aesgen") -> float | None:
        """Bytes per core cycle, from the median ticks (None without the ceiling's clock)."""
        m = self.get(op, size, impl)
        bound = self.ceiling_bounds.get(op)
        core_hz = bound.core_hz if bound and bound.core_hz else self.core_hz
        return m.size / (m.median_ticks * core_hz / self.tsc_hz) if m and core_hz else None

    def cycles_per_block(self, op: str, size: int) -> float | None:
        """Core cycles per 16-byte block (for gfdouble: per doubling), from the median ticks."""
        per_cycle = self.bytes_per_cycle(op, size)
        return 16 / per_cycle if per_cycle else None


def machine_info() -> dict:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": model, "machine": platform.machine(), "cpus": os.cpu_count()}


def pin_cpu() -> int:
    """Pin to the last CPU we may run on (away from CPU 0's interrupts where possible)."""
    cpus = sorted(os.sched_getaffinity(0))
    return cpus[-1]


def run_op(spec: KernelSpec, so: Path, op: str, sizes: list[int], peers: tuple[str, ...], key_bits: int,
           trials: int, cpu: int | None, tsc_hz: float | None = None,
           checked: dict[str, list[int]] | None = None, out_offset: int = OUT_OFFSET) -> tuple[float, dict[str, str],
                                                                 dict[tuple[int, str], list[float]], list["Refusal"]]:
    """One run of the harness (one turn of a round): the TSC rate, the peers' details, every
    (size, impl)'s samples in TSC ticks per call, and the sizes a peer refused. `tsc_hz`: the rate
    an earlier run measured, so this one skips the 50 ms calibration (most of a short run).
    `checked`: where to collect, per peer, the sizes whose output equalled ours (for a caller that
    runs the sizes apart); without it they are said in the peer's detail. `out_offset`: the output
    buffer's offset past the input's within a 4 KiB page (OUT_OFFSET)."""
    cmd = [str(bench_binary()), str(so), spec.prefix, op, str(key_bits), ",".join(map(str, sizes)),
           str(trials), ",".join(peers) or "-"]
    if cpu is not None:
        cmd.append(str(cpu))
    libs = {f"AESGEN_{name.upper()}_LIB": str(lib) for name in PEER_LIBS if (lib := built_library(name))}
    env = {**os.environ, **libs, **peer_view.environment(), "AESGEN_BENCH_OUT_OFFSET": str(out_offset),
           **({"AESGEN_BENCH_TSC_HZ": f"{tsc_hz:.0f}"} if tsc_hz else {})}
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    rows = [json.loads(line) for line in out.splitlines() if line.strip()]
    tsc = rows[0]["tsc_hz"]
    peer_info: dict[str, str] = {}
    samples: dict[tuple[int, str], list[float]] = {}
    refused: list[Refusal] = []
    says_checked = checked is None
    checked = {} if checked is None else checked  # peer -> sizes whose output equalled ours before timing
    for r in rows[1:]:
        if "na" in r:
            peer_info[r["impl"]] = f"n/a ({r['na']})"
        elif "refused" in r:  # one size the peer would not run (not timed); its other sizes stand
            refused.append(Refusal(op, r["size"], r["impl"], r["refused"]))
        elif "checked" in r:
            checked.setdefault(r["impl"], []).append(r["size"])
        elif "detail" in r:
            peer_info[r["impl"]] = r["detail"]
        else:
            if r["out_offset"] != out_offset:
                raise RuntimeError(f"the harness placed the output {r['out_offset']} B past the input, not {out_offset}")
            samples[(r["size"], r["impl"])] = r["samples"]
    for p in peers:
        peer_info.setdefault(p, "available")
        if not peer_info[p].startswith("n/a"):
            peer_info[p] += peer_view.describe(p)
    return tsc, with_checked(peer_info, checked) if says_checked else peer_info, samples, refused


def with_checked(peer_info: dict[str, str], checked: dict[str, list[int]]) -> dict[str, str]:
    """The peers' details, each saying at which sizes its output was cross-checked with ours."""
    return {p: detail + (f"; output equal to aesgen's at {', '.join(map(str, sorted(checked[p])))} B "
                         "(checked before timing)" if p in checked and not detail.startswith("n/a") else "")
            for p, detail in peer_info.items()}


# The sampler's configuration that times the ceiling's loops (bench.c --ceiling) in every round, beside
# the message sizes, so the bound is measured under the same conditions as the figures it bounds.
CEILING = "ceiling"


def sample_op(spec: KernelSpec, so: Path, op: str, sizes: list[int], peers: tuple[str, ...], key_bits: int,
              trials: int, cpu: int | None, budget: float, probe: tuple[Path, list[str]] | None = None,
              out_offset: int = OUT_OFFSET) -> tuple[float, dict[str, str], list[Measurement], list["Refusal"], Sampling, dict[str, float]]:
    """Harness runs, one per size (every implementation in turn within a run), until each median is
    known to ±2% or the budget ends; a measurement per size and implementation. With `probe` (a
    shared object and the loops to run), the ceiling's loops take a turn in every round too; their
    median ticks per instruction come back by loop name."""
    tsc_rates: list[float] = []
    info: dict[str, str] = {}
    refused: dict[tuple[int, str], Refusal] = {}

    def probe_turn() -> dict[tuple, list[float]]:
        _, rows = run_loops(probe[0], probe[1], cpu)
        return {(CEILING, r["name"]): r["samples"] for r in rows if "samples" in r}

    def one_round(order: list) -> dict:
        got: dict = {}
        for turn in order:
            if turn == CEILING:
                got[CEILING] = probe_turn()
                continue
            # Each size in a process of its own: timed after a short size in the same process, a
            # shallow loop's bulk figure read 3-7% low (docs/tuning.md, "How far to trust a figure").
            tsc, peer_info, samples, why = run_op(spec, so, op, [turn], peers, key_bits, trials, cpu,
                                                  tsc_rates[0] if tsc_rates else None, checked, out_offset)
            tsc_rates.append(tsc)
            for peer, detail in peer_info.items():  # the first round (sizes in order) tells each peer's story
                info.setdefault(peer, detail)
            refused.update({(r.size, r.impl): r for r in why})
            got[turn] = {key: xs for key, xs in samples.items() if key[0] == turn}
        return got

    checked: dict[str, list[int]] = {}
    got = sample([*sizes, CEILING] if probe else sizes, one_round, budget=budget)
    info = with_checked(info, {p: sorted(set(xs)) for p, xs in checked.items()})
    tsc = tsc_rates[0]  # one TSC rate for every figure
    keys = sorted((key for key in got.round_medians if key[0] != CEILING),
                  key=lambda key: (sizes.index(key[0]), key[1] != "aesgen"))
    ms = [measurement(op, size, impl, got.interval((size, impl)), got.minimum[(size, impl)], tsc)
          for size, impl in keys]
    for m in ms:
        if modes := got.modes((m.size, m.impl)):  # in ticks per call
            m.modes_gbps = modes.rates(m.size * tsc / 1e9)
    loops = {key[1]: got.interval(key).median for key in got.round_medians if key[0] == CEILING}
    return tsc, info, ms, list(refused.values()), got, loops


def bench(spec: KernelSpec, asm_path: Path, *, ops: list[str], sizes: list[int], peers: tuple[str, ...] = (),
          key_bits: int = 128, trials: int = 31, ceiling: Ceiling | None = None,
          cpu: int | None = None, budget: float = BUDGET, out_offset: int = OUT_OFFSET) -> BenchResult:
    """`budget`: seconds of sampling for all `ops`, shared out equally (0: one round each). With
    `ceiling` (its first measurement: which loops this CPU runs), every op's bound is timed again in
    the same rounds as the op, and that is the bound reported."""
    so = build_shared(asm_path)
    asm = asm_path.read_text() if ceiling is not None else ""
    result = BenchResult(spec=json.loads(spec.to_json()), key_bits=key_bits, tsc_hz=0.0, machine=machine_info(),
                         out_offset=out_offset)
    cpu = pin_cpu() if cpu is None else cpu
    start, lines = time.monotonic(), []
    for k, op in enumerate(ops):
        op_sizes = [n for n in sizes if n % 32 == 0] if op in WIDE_BLOCK_ROUNDS else sizes  # whole 32-byte blocks
        if not op_sizes:
            continue
        share = max(0.0, budget - (time.monotonic() - start)) / (len(ops) - k)
        mixes = [counts] if ceiling is not None and (counts := mix_counts(spec, op, key_bits, asm)) else []
        probe = probe_file(mixes) if ceiling is not None and op not in DOUBLING_OPS else None
        tsc, info, ms, refused, got, loops = sample_op(spec, so, op, op_sizes, () if op in DOUBLING_OPS else peers,
                                                       key_bits, trials, cpu, share, probe, out_offset)
        lines.append(f"{op}: {got.describe('message sizes' + (' and the ceiling' if probe else ''))}")
        result.refused.extend(refused)
        if result.tsc_hz and tsc != result.tsc_hz:  # one TSC rate for the whole result
            ms = [measurement(m.op, m.size, m.impl, m.ticks(), m.min_ticks, result.tsc_hz) for m in ms]
        result.tsc_hz = result.tsc_hz or tsc
        result.op_peers[op] = dict(info)
        for peer, detail in info.items():  # a peer that runs some op keeps its description
            if peer not in result.peers or result.peers[peer].startswith("n/a"):
                result.peers[peer] = detail
        result.measurements.extend(ms)
        if loops:
            bound = op_ceiling(sampled_ceiling(result.tsc_hz, loops, mixes), spec, op, key_bits, asm)
            if bound is not None:
                result.ceiling_bounds[op] = bound
                result.ceilings[op] = bound.gbps
    result.sampling = "; ".join(lines)
    merge_unavailable_reasons(result)
    if ceiling is not None:
        result.core_hz = ceiling.core_hz
    return result


def mix_counts(spec: KernelSpec, op: str, key_bits: int, asm: str) -> Counts:
    """GCM's bound is a loop of its main loop's vaesenc and vpclmulqdq run together: their counts
    (empty for the other functions)."""
    return dict(main_loop(asm, op, key_bits).unit_counts()) if mode_of(op) == "gcm" else {}


def merge_unavailable_reasons(result: BenchResult) -> None:
    """A peer that ran no op at all reads n/a with every op's reason, once each, in op order."""
    for peer, info in result.peers.items():
        if info.startswith("n/a ("):
            reasons = dict.fromkeys(v[len("n/a ("):-1] for per_op in result.op_peers.values()
                                    if (v := per_op.get(peer, "")).startswith("n/a ("))
            result.peers[peer] = f"n/a ({'; '.join(reasons)})" if reasons else info


def unavailable_by_op(result: BenchResult) -> list[tuple[str, list[str], str]]:
    """(peer, ops, "n/a (why)") for the ops a peer could not run where it ran others, or where its
    reason differs from op to op; grouped by peer and reason, in op order."""
    groups: dict[tuple[str, str], list[str]] = {}
    for op, per_op in result.op_peers.items():
        for peer, info in per_op.items():
            if info.startswith("n/a") and info != result.peers.get(peer):
                groups.setdefault((peer, info), []).append(op)
    return [(peer, ops, info) for (peer, info), ops in groups.items()]


HASH_OPS = ("ghash", "polyval")
REGISTER_KINDS = {128: "xmm", 256: "ymm", 512: "zmm"}


def describe_counts(counts: dict[tuple[str, int], int]) -> str:
    """'40 vaesenc zmm + 18 vpclmulqdq zmm'"""
    return " + ".join(f"{n} {ins} {REGISTER_KINDS[w]}" for (ins, w), n in sorted(counts.items()))


def clmul_ceiling_cycles(counts: dict[tuple[str, int], int], ceiling: Ceiling) -> float | None:
    """Core cycles the carry-less multiplies of a loop need at their measured reciprocal throughput."""
    return ceiling.alone_cycles({k: n for k, n in counts.items() if k[0] == "vpclmulqdq"})


def op_ceiling(ceiling: Ceiling, spec: KernelSpec, op: str, key_bits: int, asm: str | None = None) -> OpCeiling | None:
    """What the hardware allows `op`. Ciphers (XTS too: its tweaks ride beside the AES rounds):
    vaesenc throughput at the mode's width, or for the serial CBC encryption the latency bound. GHASH/POLYVAL: the carry-less multiplies of the
    generated main loop (products and reductions, counted) at vpclmulqdq's throughput. GCM: a
    loop holding the main loop's vaesenc and vpclmulqdq, measured (they may share pipes).
    None when the CPU cannot run the loops that measure it."""
    if op in DOUBLING_OPS:  # no AES: cycles per doubling are the figure, not a fraction of a bound
        return None
    mode = mode_of(op) or spec.modes[0]
    width, depth = spec.width_for(mode), spec.depth_for(mode)
    core = ceiling.core_hz
    def done(bytes_per_cycle: float, name: str, basis: str, together: bool = False) -> OpCeiling:
        return OpCeiling(op, bytes_per_cycle * core / 1e9, bytes_per_cycle, name, basis, together, core)

    if op in HASH_OPS or mode_of(op) == "gcm":
        if asm is None:
            asm = generate(spec).asm
        counts = dict(main_loop(asm, op, key_bits).unit_counts())
        per_iteration = 16 * (width // 128) * depth
        clmul = clmul_ceiling_cycles(counts, ceiling)
        if not clmul:  # None: not measurable here; 0: no carry-less multiply (--gfmul ctmul, bitsliced)
            return None
        if op in HASH_OPS:
            return done(per_iteration / clmul, "clmul",
                        f"main loop per {per_iteration} B: {describe_counts(counts)} at their measured throughput, "
                        f"{clmul:.1f} cycles")
        together = ceiling.measure_mix(counts)
        aes = ceiling.alone_cycles({k: n for k, n in counts.items() if k[0] == "vaesenc"})
        if together is None or aes is None:
            return None
        return done(per_iteration / together, "AES+CLMUL",
                    f"main loop per {per_iteration} B: {describe_counts(counts)}, run together {together:.1f} cycles "
                    f"(alone: AES {aes:.1f}, CLMUL {clmul:.1f})", together=True)
    rounds, wide = WIDE_BLOCK_ROUNDS.get(op, (ROUNDS_BY_BITS[key_bits], ""))
    # A file without AES-NI (--backend gfni, ...) is held to the AES-NI bound of its width, and says so.
    aes, other = ("AES", "") if spec.backend == "aesni" else \
        ("AES-NI", f"; the {spec.backend} backend runs no vaesenc, this is what AES-NI allows at its width")
    if op == "cbc_encrypt":
        cost = ceiling.cost("vaesenc", 128)
        if cost is None:
            return None
        return done(16 / (rounds * cost.latency_cycles), f"serial {aes}",
                    f"{rounds} x vaesenc latency {cost.latency_cycles:.2f} cycles per 16 B{other}")
    cost = ceiling.cost("vaesenc", width)
    if cost is None:
        return None
    per_block = f"{AEAD_BLOCK_CIPHER[op]}: one AES call per 16-byte block, " if op in AEAD_BLOCK_CIPHER else \
        f"{wide}, " if wide else ""
    return done(16 * (width // 128) / (rounds * cost.throughput_cycles), aes,
                f"{per_block}{rounds} x vaesenc {REGISTER_KINDS[width]} at {cost.throughput_cycles:.2f} cycles per "
                f"{16 * (width // 128)} B{other}")


def tweak_source(spec: KernelSpec, mode: str, key_bits: int | None = None) -> str:
    """How the file's XTS tweaks / OTR offsets are made in the main loop (of the key size measured;
    None: of the one the XTS tables serve, if any)."""
    width, depth = spec.width_for(mode), spec.depth_for(mode)
    nr = ROUNDS_BY_BITS[key_bits] if key_bits else None
    if mode == "xts" and (tables := xts_layout(spec, width, depth, nr)):
        return " tweaks x^64 from tables" if tables.far else " tweaks doubled in GPRs into tables"
    if mode == "otr" and pipelined(spec, depth):
        return " pipelined, offsets doubled in GPRs into tables"
    return f" {spec.gfdouble} doubling" if mode in ("xts", "otr") else ""


def ceiling_line(spec: KernelSpec, result: BenchResult, op: str) -> str | None:
    """'ghash 512x4 karatsuba, 16384 B: 4.10 B/cycle = 78% of the clmul ceiling 5.30 B/cycle (...)',
    at the largest size measured."""
    c = result.ceiling_bounds.get(op)
    sizes = [m.size for m in result.measurements if m.op == op and m.impl == "aesgen"]
    if c is None or not sizes:
        return None
    size = max(sizes)
    got = result.bytes_per_cycle(op, size)
    mode = mode_of(op) or spec.modes[0]
    products = (" karatsuba" if spec.karatsuba else " schoolbook") if mode in ("ghash", "polyval", "gcm") \
        else tweak_source(spec, mode, result.key_bits)
    kind = "measured " if c.measured_together else ""
    m = result.get(op, size, "aesgen")
    if m.rounds:  # the figure's interval carries over in proportion (the bound is a median too)
        rel = m.gbps_halfwidth / m.gbps
        frac = got / c.bytes_per_cycle
        figure = (f"{spread(got, got * rel, 2, m.rounds)} B/cycle = "
                  f"{spread(100 * frac, 100 * frac * rel, 0, m.rounds)}%")
    else:
        figure = f"{got:.2f} B/cycle = {got / c.bytes_per_cycle:.0%}"
    return (f"{op} {spec.width_for(mode)}x{spec.depth_for(mode)}{products}, {size} B: {figure} of the "
            f"{kind}{c.name} ceiling {c.bytes_per_cycle:.2f} B/cycle ({c.basis})")
