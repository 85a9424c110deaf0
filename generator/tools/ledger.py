"""`aesgen bench --all --record DIR`: the per-microarchitecture ledger, DIR/<cpu-signature>.md.

One file per CPU signature (vendor, family, model), rewritten by each recording run: every
mode this CPU runs (`--target native`) at 256 B, 1 KiB and 16 KiB against every peer present;
on a CPU with AVX-512, also the 16-register kernels that Zen 3 and Intel's client cores run
(`--isa avx2 --width 256`, `--isa avx --width 128`); the goals the project holds each to, met
or not; and, where no AVX2-only peer runs here, llvm-mca's model of the avx2 GCM loop beside
BoringSSL's. Figures are medians with their 95% intervals (docs/tuning.md); ratios come from
medians measured side by side in one process.
"""
from __future__ import annotations

import datetime
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from .. import __version__
from ..bench.peer_libs import PEER_LIBS
from ..bench.timing import BenchResult, two_speeds
from ..cpu import flags as cpu_flags
from ..functions import TIMED_FUNCTIONS
from ..mainloop import main_loop
from ..model import spec_for
from ..pipeline import generate
from ..spec import KernelSpec
from ..target import cpu_signature, load
from .explore import llvm_mca
from .files import require_writable, write_atomically
from .report import spread

SIZES = (256, 1024, 16384)
# Peers the ledger compares with; openssl-noaesni is the peer of the non-AES-NI backends only.
LEDGER_PEERS = ("openssl", "ipsec-mb", "boringssl", "awslc")
# The 16-register kernels' goals (issue 15): fraction of the AES ceiling of their width at 16 KiB.
REGISTER16_GOALS = {"ecb_encrypt": 0.95, "ecb_decrypt": 0.95, "ctr32_encrypt": 0.95, "cbc_decrypt": 0.95,
                    "xts_encrypt": 0.88, "xts_decrypt": 0.88, "ocb_encrypt": 0.88, "ocb_decrypt": 0.88,
                    "otr_encrypt": 0.85, "otr_decrypt": 0.85}
REGISTER16_MODES = ("ecb", "ctr32", "cbc", "xts", "ocb", "otr")
REGISTER16_CONFIGS = (("avx2", 256), ("avx", 128))
# GCM, native, against BoringSSL in the same process (AES-128 and AES-256): minimum ratio per size,
# for each direction the bench times.
GCM_GOALS = {"avx512": {16384: 1.10, 1024: 1.05, 256: 1.0}, "avx2": {16384: 1.25, 1024: 1.10, 256: 1.0}}
# And GCM at 16 KiB against the AES+CLMUL mix ceiling measured for the multiply variant chosen.
GCM_MIX_GOAL = 0.85


def gcm_peer_goals(isa: str) -> dict[str, tuple[str, dict[int, float]]]:
    return {op: ("boringssl", GCM_GOALS.get(isa, {})) for op in TIMED_FUNCTIONS["gcm"]}


def gcm_mix_goals() -> dict[str, float]:
    return {op: GCM_MIX_GOAL for op in TIMED_FUNCTIONS["gcm"]}

# AES-256-XTS, native on an AVX-512 CPU, against AWS-LC's AVX-512 XTS (it has no AES-128-XTS).
XTS_GOALS = {"avx512": {16384: 1.05, 4096: 1.05}}
AES256_MODES = ("gcm", "xts")
AES256_SIZES = (256, 1024, 4096, 16384)
# Flags worth a line of their own in the ledger (the whole set is in the file's last section).
KEY_FLAGS = ("aes", "pclmulqdq", "avx", "avx2", "vaes", "vpclmulqdq", "gfni", "avx512f", "avx512vl", "avx512bw",
             "avx512_vbmi", "avx512_vbmi2", "avx512_fp16", "amx_tile", "bmi2", "adx", "sha_ni")
BORINGSSL_AVX2_GCM = "deps/boringssl/gen/bcm/aes-gcm-avx2-x86_64-linux.S"


@dataclass
class Plan:
    """One section of a --all run, before it is timed."""
    title: str
    command: str
    spec: KernelSpec
    goals: dict[str, float] = field(default_factory=dict)  # op -> fraction of the ceiling at 16 KiB
    peer_goals: dict[str, tuple[str, dict[int, float]]] = field(default_factory=dict)  # op -> (peer, size -> ratio)
    key_bits: int | None = None  # None: the run's --key-bits
    sizes: tuple[int, ...] | None = None  # None: the run's --sizes
    cpu_mask: str | None = None  # the AESGEN_CPU_MASK the section is built and timed under (None: the run's)


@dataclass
class Section:
    plan: Plan
    result: BenchResult


def plans(native: KernelSpec, modes: tuple[str, ...], native_aes256: KernelSpec) -> list[Plan]:
    """Every mode native runs; AES-256 GCM and XTS against the peers' best code; on an AVX-512
    CPU the 16-register kernels (`register16`: specs made by the caller, which owns the options)."""
    isa = native.isa
    out = [Plan("--target native, every mode", f"aesgen bench {','.join(modes)} --target native", native,
                {**{op: g for op, g in REGISTER16_GOALS.items() if isa != "avx512"}, **gcm_mix_goals()},
                gcm_peer_goals(isa))]
    xts = {op: ("awslc", XTS_GOALS[isa]) for op in ("xts_encrypt", "xts_decrypt") if isa in XTS_GOALS}
    out.append(Plan("AES-256: GCM and XTS", f"aesgen bench {','.join(AES256_MODES)} --target native --key-bits 256 "
                    f"--sizes {','.join(map(str, AES256_SIZES))}", native_aes256, gcm_mix_goals(),
                    {**gcm_peer_goals(isa), **xts}, 256, AES256_SIZES))
    return out


def avx2_view_plans(spec: KernelSpec, mask: str) -> list[Plan]:
    """On an AVX-512 CPU: GCM as an AVX2-only CPU runs it (the mask hides AVX-512 from aesgen and
    from the peers, so BoringSSL runs its VAES-AVX2 code), against the AVX2-only goals; `spec`
    is --target native under that mask. The same cores' ports, not a Zen 3's or an Alder Lake's."""
    return [Plan(f"AVX2 view: GCM AES-{bits} as an AVX2-only CPU runs it (AESGEN_CPU_MASK={mask})",
                 f"AESGEN_CPU_MASK={mask} aesgen bench gcm --target native --key-bits {bits}", spec, gcm_mix_goals(),
                 gcm_peer_goals("avx2"), bits, None, mask) for bits in (128, 256)]


@dataclass
class Machine:
    vendor: str
    family: int
    model: int
    name: str
    modelled_as: str
    flags: tuple[str, ...]

    @property
    def signature(self) -> str:
        """The file name's stem: vendor-family-model (hex as CPUID gives them)."""
        return f"{self.vendor}-{self.family:x}-{self.model:x}".lower()


def this_machine() -> Machine:
    vendor, family, model, name = cpu_signature()
    return Machine(vendor, family, model, name, load("native").modelled_as or "", tuple(sorted(cpu_flags())))


def register16_specs(native_isa: str) -> list[tuple[str, str, int]]:
    """(title, isa, width) of the 16-register sections: run where native is AVX-512 (elsewhere
    native already is one of them)."""
    if native_isa != "avx512":
        return []
    return [(f"16-register kernels: --target native --isa {isa} --width {width}", isa, width)
            for isa, width in REGISTER16_CONFIGS]


# ----------------------------------------------------------------------------- llvm-mca model
def boringssl_avx2_gcm_loop() -> str | None:
    """BoringSSL's AES-128 path through its 4x-vector VAES+VPCLMULQDQ ymm encryption loop (128 B per
    iteration): the loop from its label to the key-size branch, then from the AES-128 entry on,
    without labels and branches. None when `make peers` has not unpacked BoringSSL."""
    path = PEER_LIBS["boringssl"].folder / "src" / BORINGSSL_AVX2_GCM
    if not path.is_file():
        return None
    lines = path.read_text().splitlines()
    start = lines.index(".Lcrypt_loop_4x__func1:")
    key_branch = next(i for i in range(start, len(lines)) if lines[i].strip().startswith("cmpl\t$24"))
    aes128 = lines.index(".Laes128__func1:")
    end = next(i for i in range(aes128, len(lines)) if "ja\t.Lcrypt_loop_4x__func1" in lines[i])
    body = lines[start + 1:key_branch] + lines[aes128 + 1:end]
    keep = [ln.split("//")[0].rstrip() for ln in body]
    return "\n".join(ln for ln in keep if ln.strip() and not ln.strip().startswith((".", "j", "cmp", "prefetch")))


def mca_rows() -> list[tuple[str, str, float, int]]:
    """(loop, -mcpu, cycles per iteration, bytes per iteration) for our avx2 GCM loop and BoringSSL's."""
    rows = []
    ours = spec_for(load("zen3"), ("gcm",))
    ours_loop = main_loop(generate(ours).asm, "gcm_encrypt").text()
    per_ours = 16 * (ours.width // 128) * ours.depth
    theirs = boringssl_avx2_gcm_loop()
    for mcpu in ("znver3", "alderlake"):
        rows.append((f"aesgen gcm_encrypt avx2 {ours.width}x{ours.depth} "
                     f"({'karatsuba' if ours.karatsuba else 'schoolbook'})", mcpu, llvm_mca(ours_loop, mcpu), per_ours))
        if theirs is not None:
            rows.append(("BoringSSL aes_gcm_enc_update_vaes_avx2 (4 ymm, AES-128 path)", mcpu,
                         llvm_mca(theirs, mcpu), 128))
    return rows


# ----------------------------------------------------------------------------- rendering
def best_peer(result: BenchResult, op: str, size: int) -> tuple[str, float, float] | None:
    """(peer, its GB/s, our ratio to it) for the fastest peer measured at this op and size."""
    found = [(m.gbps, m.impl) for m in result.measurements
             if m.op == op and m.size == size and m.impl != "aesgen"]
    if not found:
        return None
    gbps, peer = max(found)
    return peer, gbps, result.ratio(op, size, peer) or 0.0


def section_table(s: Section) -> list[str]:
    r = s.result
    rows = ["| op | bytes | aesgen GB/s | best peer | peer GB/s | x peer | % of ceiling |",
            "|---|---:|---:|---|---:|---:|---:|"]
    for m in r.measurements:
        if m.impl != "aesgen":
            continue
        peer = best_peer(r, m.op, m.size)
        frac = r.ceiling_fraction(m.op, m.size)
        rel = m.gbps_halfwidth / m.gbps if m.gbps else 0.0
        half = r.ratio_halfwidth(m.op, m.size, peer[0]) if peer else None
        ratio = (spread(peer[2], half, 2, m.rounds) if half is not None else f"{peer[2]:.2f}") if peer else "n/a"
        rows.append(f"| {m.op} | {m.size} | {m.gbps_text()} | "
                    f"{peer[0] if peer else 'none'} | {f'{peer[1]:.2f}' if peer else 'n/a'} | {ratio} | "
                    f"{spread(100 * frac, 100 * frac * rel, 0, m.rounds) + '%' if frac else ''} |")
    return rows


def goal_lines(s: Section) -> list[str]:
    out = []
    for op, goal in s.plan.goals.items():
        frac = s.result.ceiling_fraction(op, max(SIZES))
        if frac is None:
            continue
        out.append(f"- {op} AES-{s.result.key_bits} at {max(SIZES)} B: {100 * frac:.1f}% of the ceiling, goal >= {100 * goal:.0f}%: "
                   f"**{'met' if frac >= goal else 'not met'}**")
    return out


def peer_goal_lines(s: Section) -> list[str]:
    """Each peer goal of the section: our ratio to that peer, side by side, at each size."""
    out = []
    bits = s.result.key_bits
    for op, (peer, goals) in s.plan.peer_goals.items():
        if op not in {m.op for m in s.result.measurements}:
            continue
        for size, goal in goals.items():
            what = f"- {op} AES-{bits} vs {peer} at {size} B"
            ratio = s.result.ratio(op, size, peer)
            if ratio is None:
                out.append(f"{what}: not measured ({peer}: {s.result.peers.get(peer, 'not compared')})")
                continue
            half = s.result.ratio_halfwidth(op, size, peer)
            rounds = next((m.rounds for m in s.result.measurements if (m.op, m.size) == (op, size)), 0)
            figure = spread(ratio, half, 2, rounds) if half is not None else f"{ratio:.2f}"
            line = f"{what}: {figure.replace(' ', 'x ', 1)}, goal >= {goal:.2f}x: **{'met' if ratio >= goal else 'not met'}**"
            out.append(line + (out_of_reach(s, op, size, peer, ratio, goal) if ratio < goal else ""))
    return out


def out_of_reach(s: Section, op: str, size: int, peer: str, ratio: float, goal: float) -> str:
    """A not-met peer goal's context: where the peer runs against the ceiling measured here, and
    whether the goal asks for more than that ceiling (a peer already within it, the goal beyond
    it: no kernel with the same instruction mix can meet it on this CPU)."""
    ours = s.result.ceiling_fraction(op, size)
    if not ours:
        return ""
    theirs = ours / ratio  # the ceiling is the same for both; the ratio is ours over theirs
    needed = goal * theirs
    verdict = ", above the ceiling: out of reach on this CPU" if needed > 1 >= theirs else ""
    return (f" ({peer} at {100 * theirs:.0f}% of the ceiling here, aesgen at {100 * ours:.0f}%: "
            f"{goal:.2f}x needs {100 * needed:.0f}%{verdict})")


def render(machine: Machine, sections: list[Section], command: str, date: str, commit: str,
           mca: list[tuple[str, str, float, int]]) -> str:
    key = [f for f in KEY_FLAGS if f in machine.flags]
    first = sections[0].result
    out = [f"# aesgen on {machine.name}", "",
           f"- CPU signature: {machine.vendor} family {machine.family} (0x{machine.family:x}) "
           f"model {machine.model} (0x{machine.model:x}); modelled as `{machine.modelled_as}`",
           f"- Features: {' '.join(key)}",
           f"- Recorded {date} with aesgen {commit}: `{command}`",
           f"- TSC {first.tsc_hz / 1e9:.2f} GHz, core ~{first.core_hz / 1e9:.2f} GHz "
           "(from the ceiling's add chain); one call per message, each message size in a process of its own "
           "with every implementation in turn; figures are medians ± half their 95% interval (docs/tuning.md); "
           "ratios > 1: aesgen faster.",
           f"- {first.placement()}.",
           ""]
    for s in sections:
        spec = s.plan.spec
        out += [f"## {s.plan.title}", "", f"`{s.plan.command}` — AES-{s.result.key_bits}, file `{spec.prefix}`"
                f" ({spec.isa}, {spec.width}-bit x {spec.depth}"
                f"{''.join(f'; {m} {w}x{d}' for m, w, d in spec.overrides)})", ""]
        out += section_table(s) + [""]
        out += [f"- {line}", ""] if (line := two_speeds(s.result.measurements)) else []
        out += [f"- {p}: {d}" for p, d in s.result.peers.items()] + [""]
        ceilings = [f"- {op}: {c.name} ceiling {c.bytes_per_cycle:.2f} B/cycle ({c.basis})"
                    for op, c in s.result.ceiling_bounds.items()]
        out += ["Ceilings measured here:", ""] + ceilings + [""] if ceilings else []
        goals = goal_lines(s) + peer_goal_lines(s)
        out += ["Goals:", ""] + goals + [""] if goals else []
    if mca:
        out += ["## Model: the avx2 GCM loop on AVX2-only cores (llvm-mca)", "",
                "No AVX2-only peer path runs on this CPU (BoringSSL takes its AVX-512 code here), so "
                "llvm-mca's models stand in: cycles per loop iteration (llvm-mca -iterations=200).", "",
                "| loop | -mcpu | cycles/iteration | bytes/iteration | bytes/cycle |", "|---|---|---:|---:|---:|"]
        out += [f"| {loop} | {mcpu} | {cyc:.1f} | {per} | {per / cyc:.2f} |" for loop, mcpu, cyc, per in mca]
        out += [""]
    out += ["## All CPU flags", "", " ".join(machine.flags), ""]
    return "\n".join(out)


def record(directory: Path, machine: Machine, sections: list[Section], command: str,
           mca: list[tuple[str, str, float, int]]) -> Path:
    date = datetime.date.today().isoformat()
    text = render(machine, sections, command, date, git_commit(), mca)
    path = directory / f"{machine.signature}.md"
    require_writable(path, create_folder=True)
    write_atomically({path: text})
    return path


def git_commit() -> str:
    """The checkout's commit (with -dirty), or the package version outside a checkout."""
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=here, capture_output=True,
                             text=True, check=True).stdout.strip()
        return re.sub(r"[^\w.-]", "", out) or "unknown"
    except (OSError, subprocess.CalledProcessError):
        return __version__
