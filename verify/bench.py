"""`aesgen bench`: time kernels against the peers in one process, report ratios.

The C harness (bench.c) alternates our kernel and each peer, one call per
message, min and median over many trials; this module builds it, runs it,
and turns TSC ticks into GB/s, ticks per byte and ratios. Nothing here
asserts on speed: benchmarks report.
"""
from __future__ import annotations

import json
import os
import platform
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path

from aesgen.spec import KernelSpec

from .bench_build import bench_binary
from .build import build_shared
from .ceiling import Ceiling

SCHEMA = "aesgen-bench/1"
OPS_BY_MODE = {"ecb": ("ecb_encrypt", "ecb_decrypt"), "ctr32": ("ctr32_encrypt",),
               "cbc": ("cbc_encrypt", "cbc_decrypt"), "ghash": ("ghash",), "polyval": ("polyval",),
               "gcm": ("gcm_encrypt",)}
PEERS = ("openssl", "ipsec-mb")
ROUNDS = {128: 10, 192: 12, 256: 14}


@dataclass
class Measurement:
    op: str
    size: int
    impl: str
    min_ticks: float
    median_ticks: float
    gbps: float  # from the median
    ticks_per_byte: float


@dataclass
class BenchResult:
    spec: dict
    key_bits: int
    tsc_hz: float
    peers: dict[str, str] = field(default_factory=dict)  # name -> detail, or "n/a (why)"
    measurements: list[Measurement] = field(default_factory=list)
    ceilings: dict[str, float] = field(default_factory=dict)  # op -> GB/s the hardware allows
    machine: dict = field(default_factory=dict)

    def get(self, op: str, size: int, impl: str) -> Measurement | None:
        return next((m for m in self.measurements if (m.op, m.size, m.impl) == (op, size, impl)), None)

    def ratio(self, op: str, size: int, peer: str) -> float | None:
        """Our speed over the peer's (> 1: we are faster), from medians measured side by side."""
        ours, theirs = self.get(op, size, "aesgen"), self.get(op, size, peer)
        if not ours or not theirs:
            return None
        return theirs.median_ticks / ours.median_ticks

    def to_json(self) -> dict:
        d = asdict(self)
        d["schema"] = SCHEMA
        d["ratios"] = [
            {"op": m.op, "size": m.size, "vs": peer, "ratio": self.ratio(m.op, m.size, peer)}
            for m in self.measurements if m.impl == "aesgen"
            for peer in self.peers if self.get(m.op, m.size, peer)
        ]
        d["ceiling_fraction"] = [
            {"op": m.op, "size": m.size, "fraction": self.ceiling_fraction(m.op, m.size)}
            for m in self.measurements if m.impl == "aesgen" and m.op in self.ceilings
        ]
        return d

    def ceiling_fraction(self, op: str, size: int) -> float | None:
        m = self.get(op, size, "aesgen")
        return m.gbps / self.ceilings[op] if m and op in self.ceilings else None


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
           trials: int, cpu: int | None) -> tuple[float, dict[str, str], list[Measurement]]:
    cmd = [str(bench_binary()), str(so), spec.prefix, op, str(key_bits), ",".join(map(str, sizes)),
           str(trials), ",".join(peers) or "-"]
    if cpu is not None:
        cmd.append(str(cpu))
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    rows = [json.loads(line) for line in out.splitlines() if line.strip()]
    tsc = rows[0]["tsc_hz"]
    peer_info: dict[str, str] = {}
    measurements = []
    for r in rows[1:]:
        if "na" in r:
            peer_info[r["impl"]] = f"n/a ({r['na']})"
        elif "detail" in r:
            peer_info[r["impl"]] = r["detail"]
        else:
            med = r["median_ticks"]
            measurements.append(Measurement(op, r["size"], r["impl"], r["min_ticks"], med,
                                            r["size"] / (med / tsc) / 1e9, med / r["size"]))
    for p in peers:
        peer_info.setdefault(p, "available")
    return tsc, peer_info, measurements


def bench(spec: KernelSpec, asm_path: Path, *, ops: list[str], sizes: list[int], peers: tuple[str, ...] = (),
          key_bits: int = 128, trials: int = 31, ceiling: Ceiling | None = None,
          cpu: int | None = None) -> BenchResult:
    so = build_shared(asm_path)
    result = BenchResult(spec=json.loads(spec.to_json()), key_bits=key_bits, tsc_hz=0.0, machine=machine_info())
    cpu = pin_cpu() if cpu is None else cpu
    for op in ops:
        tsc, info, ms = run_op(spec, so, op, sizes, peers, key_bits, trials, cpu)
        result.tsc_hz = result.tsc_hz or tsc  # one TSC rate for the whole result
        result.peers.update(info)
        for m in ms:
            m.gbps = m.size / (m.median_ticks / result.tsc_hz) / 1e9
        result.measurements.extend(ms)
    if ceiling is not None:
        limits = {op: op_ceiling(ceiling, spec, op, key_bits) for op in ops}
        result.ceilings = {op: v for op, v in limits.items() if v is not None}
    return result


def op_ceiling(ceiling: Ceiling, spec: KernelSpec, op: str, key_bits: int) -> float | None:
    """GB/s the hardware allows: vaesenc throughput at the mode's width, or for the serial
    CBC encryption the latency bound (rounds x vaesenc latency per block). None when the
    CPU cannot run the loops that measure it."""
    try:
        return _op_ceiling(ceiling, spec, op, key_bits)
    except AttributeError:  # a cost the ceiling could not measure on this CPU
        return None


def _op_ceiling(ceiling: Ceiling, spec: KernelSpec, op: str, key_bits: int) -> float:
    rounds = ROUNDS[key_bits]
    if op in ("ghash", "polyval"):
        # Carry-less multiplies per block: 4 (schoolbook) or 3 (Karatsuba), reductions aside.
        width = spec.width_for(op)
        cost = ceiling.cost("vpclmulqdq", width)
        per_block = 3 if spec.karatsuba else 4
        return 16 * (width // 128) / (per_block * cost.throughput_cycles / ceiling.core_hz) / 1e9
    if op == "cbc_encrypt":
        cost = ceiling.cost("vaesenc", 128)
        return 16 / (rounds * cost.latency_cycles / ceiling.core_hz) / 1e9
    mode = op.split("_")[0]
    if op == "gcm_encrypt":  # AES and GHASH run on different units: the slower one bounds GCM
        clmul = ceiling.cost("vpclmulqdq", spec.width_for(mode))
        per_block = 3 if spec.karatsuba else 4
        hash_gbps = 16 * (spec.width_for(mode) // 128) / (per_block * clmul.throughput_cycles / ceiling.core_hz) / 1e9
        return min(ceiling.aes_gbps(spec.width_for(mode), rounds), hash_gbps)
    return ceiling.aes_gbps(spec.width_for(mode), rounds)
