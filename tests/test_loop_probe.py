"""`aesgen probe`: a main loop's body timed by itself. What goes into the probe file is checked
here; the timings only for being numbers (tests never assert on speed)."""
from __future__ import annotations

import math
import os

from _support import require_cpu, run_aesgen
from aesgen.bench.loop_probe import GPRS, REACH, STREAM, body_of, measure, port_class, source, steps, variants
from aesgen.cpu import MASK_ENV
from aesgen.mainloop import Loop, main_loop
from aesgen.pipeline import generate
from aesgen.spec import KernelSpec

# a loop as mainloop finds it: label, pointer steps, a GPR doubling, the compare and jump that end it
LOOP = Loop(".Lx_loop4x_7", (
    ".Lx_loop4x_7:",
    "\tcmp $0x40,%rcx",
    "\tjb .Lx_end4x_8",
    "\tvmovdqu (%rsi),%xmm0",
    "\tvpxor .Lx_bswap(%rip),%xmm0,%xmm0",
    "\tvaesenc %xmm1,%xmm0,%xmm0",
    "\tvaesenclast 0x20(%rsp),%xmm0,%xmm0",
    "\tadd %rax,%rax",
    "\tadc %rbp,%rbp",
    "\tvmovdqu %xmm0,(%rdx)",
    "\tvpxor (%rdi,%r10,1),%xmm2,%xmm2",
    "\tadd %r9,%rdx",
    "\txor %eax,%eax",
    "\tadd $0x40,%rsi",
    "\tadd $0x40,%rdx",
    "\tsub $0x40,%rcx",
    "\tjmp .Lx_loop4x_7",
))


def test_the_body_keeps_the_work_and_drops_the_bookkeeping() -> None:
    body = body_of(LOOP)
    assert body == ["vmovdqu (%rsi),%xmm0", "vpxor .Lx_bswap(%rip),%xmm0,%xmm0", "vaesenc %xmm1,%xmm0,%xmm0",
                    "vaesenclast 0x20(%rsp),%xmm0,%xmm0", "add %rax,%rax", "adc %rbp,%rbp", "vmovdqu %xmm0,(%rdx)",
                    "vpxor (%rdi,%r10,1),%xmm2,%xmm2"]


def test_streaming_keeps_the_forward_steps_of_the_pointers_it_reads_and_writes_through() -> None:
    body = body_of(LOOP, streaming=True)
    assert body == body_of(LOOP)[:7] + ["vpxor (%rdi,%r10,1),%xmm2,%xmm2", "add $0x40,%rsi", "add $0x40,%rdx"]
    assert steps(body) == {"rsi": 0x40, "rdx": 0x40}  # not the count (rcx), not a stride from a register


def test_each_variant_drops_one_class_and_keeps_the_aes() -> None:
    body = body_of(LOOP)
    found = variants(body, body_of(LOOP, streaming=True))
    assert found[0][0].name == "as generated" and found[0][1] == body
    assert found[1][0].streaming and found[1][1] == body_of(LOOP, streaming=True)
    assert len(variants(body)) == len(found) - 1  # no streaming variant without steps
    found = [found[0], *found[2:]]
    dropped = {v.dropped for v, _ in found[1:-1]}
    assert dropped == {port_class(i) for i in body} - {"aes"}
    for v, lines in found[1:-1]:
        assert all(port_class(i) != v.dropped for i in lines)
        assert [i for i in lines if port_class(i) == "aes"] == [i for i in body if port_class(i) == "aes"]
        assert v.instructions == len(lines) < len(body)
    last, aes = found[-1]
    assert last.name == "AES alone" and aes == ["vaesenc %xmm1,%xmm0,%xmm0", "vaesenclast 0x20(%rsp),%xmm0,%xmm0"]


def test_the_probe_file_points_every_register_at_a_buffer_of_its_own() -> None:
    text, names, mix = source(LOOP)
    for reg in ("rdx", "rsi", "rax"):
        assert f"lea probe_buf{GPRS.index(reg)}+{REACH}(%rip), %{reg}" in text
    assert "rsp" not in GPRS and len(set(GPRS)) == 15
    assert ".Lx_bswap" not in text and "probe_constants(%rip)" in text  # constants: a block of their own
    held, streaming = text.split("probe_1:")[0], text.split("probe_1:")[1].split("probe_2:")[0]
    assert "add $0x40,%rsi" not in held and "add %r9,%rdx" not in text and "adc %rbp,%rbp" in text
    # streaming: the steps stay, and every STREAM bytes the pointers start over
    assert "add $0x40,%rsi" in streaming and f"movq ${STREAM // 0x40}, probe_period(%rip)" in streaming
    assert "vpxor (%rdi),%xmm2,%xmm2" in text  # the index register left out, the base kept
    assert [n for _, n in names] == [f"probe_{k}" for k in range(len(variants(body_of(LOOP))) + 1)]
    assert mix == "probe_mix"


def test_a_real_loop_runs_and_every_variant_gets_a_time() -> None:
    spec = KernelSpec(modes=("xts",), isa="avx", width=128, depth=4)
    require_cpu(spec)
    result = measure(main_loop(generate(spec).asm, "xts_encrypt"))
    assert result.bound is not None and result.bound > 0
    for variant, cycles in result.variants:
        assert len(cycles) == 3 and all(math.isfinite(c) and c > 0 for c in cycles), variant


def test_the_command_prints_a_table_per_function() -> None:
    spec = KernelSpec(modes=("ctr32",), isa="avx", width=128, depth=4)
    require_cpu(spec)
    r = run_aesgen("probe", "ctr32", "--isa", "avx", "--width", "128", "--depth", "4")
    assert r.returncode == 0, r.stderr
    assert "ctr32_encrypt main loop, AES-128, avx 128-bit: held still on" in r.stdout
    assert "AES alone" in r.stdout


def test_a_file_this_cpu_cannot_run_is_refused_in_one_line() -> None:
    r = run_aesgen("probe", "ctr32", "--isa", "avx", "--width", "128",
                   env={MASK_ENV: ",".join(filter(None, [os.environ.get(MASK_ENV, ""), "aes"]))})
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "lacks aes" in r.stderr
