"""Unwind information (generator/unwind.py): interrupted anywhere in a kernel, as a profiler's
signal does, libgcc's unwinder walks back to the kernel's caller through the file's CFI
(tests/unwind_probe.c). Kernels with a frame and pushes (GCM), with align32's variable drop
(XTS's 32-byte tables, CFA as a DWARF expression), the bitsliced frame (CTR) and bitsliced
GCM's and GCM-SIV's chains of paths handing state over in their frames. Negative
self-test: the same GCM file with the frame allocation's directive removed does not unwind."""
from __future__ import annotations

import ctypes
import multiprocessing
import re
import tempfile
from pathlib import Path

import pytest

from aesgen.dsl import BuildError
from aesgen.ir import Branch, Insn, Label
from aesgen.pipeline import generate
from aesgen.spec import KernelSpec
from aesgen.unwind import Unwind
from aesgen.verify.build import build_shared

from _support import aligned_address as at, aligned_buffer, require_cpu

PROBE_SOURCE = Path(__file__).with_name("unwind_probe.c")
SIZE = 65536  # bytes a call: XTS's tables from 2 KiB, most ticks in the main loops
SAMPLES = 200  # ticks inside the kernel
SECONDS = 20.0  # CPU time at most per probe


def aead_buffers(lib, p: str, set_key: str, keep: list) -> tuple[int, int, int, int]:
    """An AEAD's key (set), a zero 12-byte nonce, the data (in place) and the tag: addresses."""
    key, data, tag, nonce = aligned_buffer(65536), aligned_buffer(SIZE), aligned_buffer(16), bytes(12)
    keep += [key, data, tag, nonce]
    assert getattr(lib, f"{p}_{set_key}")(bytes(range(16)), 128, ctypes.c_void_p(at(key))) == 0
    return at(key), ctypes.cast(nonce, ctypes.c_void_p).value, at(data), at(tag)


def setup_gcm(lib, p: str, keep: list) -> tuple[str, list[int]]:
    key, iv, data, tag = aead_buffers(lib, p, "gcm_set_key", keep)
    return "gcm_encrypt", [key, iv, 12, 0, 0, data, data, SIZE, tag, 16]


def setup_siv(lib, p: str, keep: list) -> tuple[str, list[int]]:
    key, nonce, data, tag = aead_buffers(lib, p, "gcmsiv_set_key", keep)
    return "gcmsiv_encrypt", [key, nonce, 0, 0, data, data, SIZE, tag]


def setup_xts(lib, p: str, keep: list) -> tuple[str, list[int]]:
    key, data, tweak = aligned_buffer(65536), aligned_buffer(SIZE), aligned_buffer(16)
    keep += [key, data, tweak]
    assert getattr(lib, f"{p}_xts_set_key")(bytes(16), bytes(range(16)), 128, ctypes.c_void_p(at(key)), 1) == 0
    return "xts_encrypt", [at(key), at(data), at(data), SIZE, at(tweak)]


def setup_ctr(lib, p: str, keep: list) -> tuple[str, list[int]]:
    key, data, ctr = aligned_buffer(65536), aligned_buffer(SIZE), aligned_buffer(16)
    keep += [key, data, ctr]
    assert getattr(lib, f"{p}_set_encrypt_key")(bytes(16), 128, ctypes.c_void_p(at(key))) == 0
    return "ctr32_encrypt", [at(key), at(data), at(data), SIZE, at(ctr)]


CASES = {
    "gcm frame and pushes": (KernelSpec(("gcm",), "avx2", 256, 8), setup_gcm),
    "xts align32": (KernelSpec(("xts",), "avx2", 256, 8), setup_xts),
    "bitsliced ctr frame": (KernelSpec(("ctr32",), "avx2", 256, 1, backend="bitsliced"), setup_ctr),
    "bitsliced gcm chained paths": (KernelSpec(("gcm",), "avx2", 256, 1, backend="bitsliced"), setup_gcm),
    "bitsliced gcm-siv chained paths": (KernelSpec(("gcm-siv",), "avx2", 256, 1, backend="bitsliced"), setup_siv),
}


def _probe_here(so: Path, probe_so: Path, prefix: str, setup, conn) -> None:
    lib, probe_lib = ctypes.CDLL(str(so)), ctypes.CDLL(str(probe_so))
    keep: list = []
    name, args = setup(lib, prefix, keep)
    fn = ctypes.cast(getattr(lib, f"{prefix}_{name}"), ctypes.c_void_p)
    argv = (ctypes.c_long * 10)(*args)
    out = (ctypes.c_long * 2)()
    probe_lib.unwind_probe(fn, argv, SAMPLES, ctypes.c_double(SECONDS), out)
    conn.send((out[0], out[1]))


def probe(spec: KernelSpec, setup, edit=lambda asm: asm) -> tuple[int, int] | str:
    """(ticks inside the kernel, those whose unwinding reached the caller), or how the probe's
    process died: an unwinder led astray by wrong rules can fault. Run in a child process."""
    require_cpu(spec)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "kernel.S"
        path.write_text(edit(generate(spec).asm))
        so = build_shared(path)
    ctx = multiprocessing.get_context("fork")
    ours, theirs = ctx.Pipe()
    child = ctx.Process(target=_probe_here, args=(so, build_shared(PROBE_SOURCE), spec.prefix, setup, theirs))
    child.start()
    got = ours.recv() if ours.poll(SECONDS + 30) else None
    child.join(5)
    return got if got is not None else f"the probe's process ended with code {child.exitcode}"


@pytest.mark.parametrize("case", CASES)
def test_every_interrupt_inside_a_kernel_unwinds_to_its_caller(case: str) -> None:
    got = probe(*CASES[case])
    assert not isinstance(got, str), got
    inside, reached = got
    assert inside >= SAMPLES // 2, f"only {inside} ticks landed in the kernel"
    assert reached == inside, f"{inside - reached} of {inside} interrupts did not unwind to the caller"


def test_a_frame_without_its_directive_does_not_unwind() -> None:
    """Self-test: drop the CFA update after each `sub $n, %rsp`; interrupts in the body then
    read a wrong return address (or the unwinder faults on it)."""
    def lose_frame(asm: str) -> str:
        return re.sub(r"(\tsub \$0x[0-9a-f]+,%rsp[^\n]*\n)\t\.cfi_def_cfa_offset \d+\n", r"\1", asm)

    spec, setup = CASES["gcm frame and pushes"]
    assert lose_frame(generate(spec).asm) != generate(spec).asm
    got = probe(spec, setup, lose_frame)
    if not isinstance(got, str):  # else the unwinder faulted: it did not get back either
        inside, reached = got
        assert inside >= SAMPLES // 2 and reached < inside // 2


def test_unwind_rules_follow_rsp_and_labels() -> None:
    """The CFA follows pushes and frame moves; a label reached only by a branch (an exit path
    after another's ret) gets the rule and the saved registers of the branch, stated again."""
    u = Unwind("t")
    lines = []
    for it in [Insn("push.r64", "rbx"), Insn("sub.r64.imm", "rsp", imm=16), Branch("e", "other"),
               Insn("add.r64.imm", "rsp", imm=16), Insn("pop.r64", "rbx"), Insn("ret"), Label("other"),
               Insn("sub.r64.r64", "rsp", ("r10",)), Insn("add.r64.r64", "rsp", ("r10",))]:
        lines.append(u.item(it))
    assert lines[:2] == [[".cfi_def_cfa_offset 16", ".cfi_offset %rbx, -16"], [".cfi_def_cfa_offset 32"]]
    assert lines[3:6] == [[".cfi_def_cfa_offset 16"], [".cfi_def_cfa_offset 8", ".cfi_restore %rbx"], []]
    assert lines[6] == [".cfi_def_cfa_offset 32", ".cfi_offset %rbx, -16"]
    # rsp + 32 + r10: DW_CFA_def_cfa_expression, DW_OP_breg7 32, DW_OP_breg10 0, DW_OP_plus
    assert lines[7] == [".cfi_escape 0x0f, 0x05, 0x77, 0x20, 0x7a, 0x00, 0x22"]
    assert lines[8] == [".cfi_def_cfa %rsp, 32"]


def test_unwind_refuses_a_label_reached_with_two_stacks() -> None:
    u = Unwind("t")
    u.item(Branch("e", "join"))
    u.item(Insn("sub.r64.imm", "rsp", imm=8))
    with pytest.raises(BuildError, match="differs on the ways into join"):
        u.item(Label("join"))
