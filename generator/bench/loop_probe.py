"""A kernel's main loop timed by itself on this CPU: the hardware's answer where llvm-mca models.

The loop body (mainloop.main_loop) is copied into a counted loop of its own and run with its
pointers held still: every general-purpose register but rsp starts pointing into a buffer of
its own, RIP-relative constants into a block, rsp-relative slots into a fresh frame; the
loop's own bookkeeping (immediate add/sub/cmp/test, strides added from another register,
its jumps) is left out, and so are index registers (an OCB offset's ntz, a table position):
the operand keeps its base. What stays
is the body's instructions, their dependences and their memory operands, in the generator's
order. Every qword of the buffers, frame and constants holds the address of a scratch buffer,
so a pointer the body loads from memory (multi-key's key pointers) points somewhere valid;
AES, carry-less multiplies and logic take the same time on any data (the kernels are
constant-time), so the timing is the body's.

A second run keeps the body's immediate steps of the registers it addresses memory with, so
its loads and stores walk through STREAM bytes of fresh addresses (16 KiB, as the bench's
messages) and start over: the held-still body against the same body streaming shows what
moving through memory costs (store-to-load distances, cache lines, 4 KiB aliasing).

Variants drop one port class of instructions (perfmodel.classify: the classes of the op table)
to show what each costs on this core: a class whose removal saves more cycles than its
share of the issue ports is where the loop loses against the AES bound. A dropped instruction
leaves its destination stale; later readers still read a register, so the rest of the
dependences stay. This is a measurement file, never a product kernel.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from aesgen.ir import GPR64, SYSV_CALLEE_SAVED
from aesgen.mainloop import Loop
from aesgen.perfmodel import classify

from .build import build_so_from_text
from .ceiling import clock_loop, iteration_cycles, mix_loop, run_loops

REACH = 0x2000  # displacements reach +-8 KiB around a base register's pointer
STREAM = 0x4000  # bytes a streaming pointer walks before it starts over
BUFFER = 2 * REACH + STREAM  # bytes per base register: the pointer starts REACH in
FRAME = 0x2000  # rsp sits this far into a frame twice as big: slots above it (tables), a red zone below
CONSTANTS = 0x1000
SAVED = SYSV_CALLEE_SAVED  # the body may use any of them
GPRS = tuple(r for r in GPR64 if r != "rsp")  # each points into a buffer of its own
TRIALS = 3  # runs of every variant, alternating, each the harness's fastest of 101
_RIP = re.compile(r"[.\w]+\(%rip\)")
_BASE = re.compile(r"\(%(\w+)")
_STEP = re.compile(r"addq?\s+\$(?P<imm>(0x)?[0-9a-f]+),\s*%(?P<reg>\w+)")
_INDEXED = re.compile(r"\((%\w+),%\w+(,\d)?\)")
# pointer and count steps (immediate add/sub, a stride added from another register, lea of a
# register onto itself, an offset register zeroed) and the compares their jumps read; add/adc
# of a register to itself (a GPR doubling chain) stays
_BOOKKEEPING = re.compile(r"(add|sub)q?\s+\$-?(0x)?[0-9a-f]+,\s*%\w+|(cmp|test)q?\s+\S+,\s*%\w+"
                          r"|(add|sub)q?\s+%(?P<x>\w+),\s*%(?!(?P=x)\b)\w+|lea\s+-?(0x)?[0-9a-f]*\(%(?P<y>\w+)\),\s*%(?P=y)"
                          r"|xor[lq]?\s+%(?P<z>\w+),\s*%(?P=z)")


@dataclass(frozen=True)
class Variant:
    name: str
    dropped: str | None  # the port class left out, None: the body as generated
    instructions: int
    streaming: bool = False  # the pointers advance (reset every STREAM bytes)


@dataclass(frozen=True)
class ProbeResult:
    variants: list[tuple[Variant, list[float]]]  # cycles per iteration, one per trial
    bound: float | None  # the AES and CLMUL instructions alone, run together (ceiling mix)


def body_of(loop: Loop, streaming: bool = False) -> list[str]:
    """The loop's instructions without its bookkeeping (jumps, immediate pointer and count steps,
    the compare that ends it): what runs in the probe. `streaming`: the forward immediate steps
    of registers the body addresses memory with stay."""
    bases = {m.group(1) for ins in loop.instructions for m in _BASE.finditer(ins)} - {"rsp", "rip"}

    def kept(ins: str) -> bool:
        step = _STEP.fullmatch(ins)
        return streaming and step is not None and step.group("reg") in bases
    return [ins for ins in loop.instructions
            if not ins.startswith("j") and (kept(ins) or not _BOOKKEEPING.fullmatch(ins))]


def steps(body: list[str]) -> dict[str, int]:
    """The forward immediate step of each pointer the body advances."""
    return {m.group("reg"): int(m.group("imm"), 0) for m in map(_STEP.fullmatch, body) if m}


def port_class(ins: str) -> str:
    return classify(ins).classes[0]


def variants(body: list[str], streaming: list[str] | None = None) -> list[tuple[Variant, list[str]]]:
    """The body as generated (and streaming, if it advances pointers), then without each port
    class it has (AES's kept: it is what the loop is for), then the AES instructions alone."""
    classes = sorted({port_class(i) for i in body} - {"aes"})
    out = [(Variant("as generated", None, len(body)), body)]
    if streaming and steps(streaming):
        out.append((Variant(f"pointers advancing ({STREAM // 1024} KiB)", None, len(streaming), True), streaming))
    for c in classes:
        kept = [i for i in body if port_class(i) != c]
        out.append((Variant(f"without {c} ({len(body) - len(kept)})", c, len(kept)), kept))
    aes = [i for i in body if port_class(i) == "aes"]
    if aes and len(aes) < len(body):
        out.append((Variant("AES alone", "all but aes", len(aes)), aes))
    return out


def _wrapped(name: str, body: list[str], streaming: bool = False) -> list[str]:
    """`name(iterations)`: the body in a loop counted in memory (the body may use every register);
    streaming, the registers point back at their buffers' starts every STREAM bytes."""
    points = [f"\tlea probe_buf{k}+{REACH}(%rip), %{r}" for k, r in enumerate(GPRS)]
    restart = []  # streaming: iterations per STREAM bytes of the largest step, then the pointers again
    if streaming:
        restart = [f"\tmovq ${max(1, STREAM // max(steps(body).values()))}, probe_period(%rip)", *points]
    lines = [f"\t.globl {name}", f"\t.type {name}, @function", f"{name}:", "\tendbr64"]
    lines += [f"\tpush %{r}" for r in SAVED]
    lines += ["\tmov %rdi, probe_count(%rip)", "\tmov %rsp, probe_saved_rsp(%rip)",
              f"\tlea probe_frame+{FRAME}(%rip), %rsp"]
    lines += restart or points
    lines.append("1:")
    lines += ["\t" + _INDEXED.sub(r"(\1)", _RIP.sub("probe_constants(%rip)", ins)) for ins in body]
    if streaming:
        lines += ["\tdecq probe_period(%rip)", "\tjnz 2f", *restart, "2:"]
    lines += ["\tdecq probe_count(%rip)", "\tjnz 1b", "\tmov probe_saved_rsp(%rip), %rsp", "\tvzeroupper"]
    lines += [f"\tpop %{r}" for r in reversed(SAVED)]
    return lines + ["\tret", f"\t.size {name}, .-{name}"]


def source(loop: Loop) -> tuple[str, list[tuple[Variant, str]], str | None]:
    """The probe file: a function per variant, the cycle clock, and the loop's AES/CLMUL mix."""
    body = body_of(loop)
    text = ["\t.data", "\t.p2align 12"]
    for label, size in (("probe_frame", 2 * FRAME), ("probe_constants", CONSTANTS),
                        *((f"probe_buf{k}", BUFFER) for k in range(len(GPRS)))):
        text += [f"{label}:", f"\t.rept {size // 8}", f"\t.quad probe_scratch+{REACH}", "\t.endr"]
    text += ["\t.bss", "\t.p2align 12", f"probe_scratch: .zero {BUFFER}", "\t.p2align 6", "probe_count: .zero 8",
             "probe_period: .zero 8", "probe_saved_rsp: .zero 8", "\t.text"]
    names = []
    for k, (variant, lines) in enumerate(variants(body, body_of(loop, streaming=True))):
        text += _wrapped(f"probe_{k}", lines, variant.streaming)
        names.append((variant, f"probe_{k}"))
    counts = loop.unit_counts()
    mix = "probe_mix" if counts else None
    if mix:
        text += mix_loop(dict(counts), mix)
    text += clock_loop()
    text.append('\t.section .note.GNU-stack,"",@progbits')
    return "\n".join(text) + "\n", names, mix


def measure(loop: Loop) -> ProbeResult:
    """Cycles per iteration of every variant, TRIALS times in alternation, each beside the clock."""
    text, names, mix = source(loop)
    so = build_so_from_text(text, "loop-probe")
    order = [n for _, n in names] + ([mix] if mix else [])
    _, rows = run_loops(so, [x for n in order for x in ("ceil_add_lat", n)] * TRIALS)
    cycles: dict[str, list[float]] = {}
    for add, row in zip(rows[::2], rows[1::2]):
        cycles.setdefault(row["name"], []).append(iteration_cycles(add, row))
    return ProbeResult([(v, cycles[n]) for v, n in names], min(cycles[mix]) if mix else None)
