"""The list scheduler (`--schedule list`): the order it keeps, what it moves, and kernels built
with it verified like any other.

Nothing here asserts on speed.
"""
from __future__ import annotations

from dataclasses import replace

import pytest

from aesgen.ir import GroupBlock, Insn, KeyRef, Mem, VReg
from aesgen.list_schedule import dependences, list_schedule, target_costs
from aesgen.pipeline import generate
from aesgen.schedule import interleave
from aesgen.spec import KernelSpec
from aesgen.target import load, targets
from _support import run_aesgen, verify_generated

COSTS = target_costs(load("alderlake"))


def v(n: int, pinned: bool = False) -> VReg:
    return VReg(n, "t", pinned)


def test_stores_keep_their_order_with_every_memory_access_and_scalars_stay_in_order():
    order = [Insn("vload", v(1), (Mem("rsi", 0),)), Insn("vstore", Mem("rdi", 0), (v(1),)),
             Insn("vload", v(2), (Mem("rsi", 16),)), Insn("vload", v(3), (Mem("rsi", 32),)),
             Insn("add.r64.imm", "rsi", ("rsi",), imm=16), Insn("vload", v(4), (Mem("rsi", 0),)),
             Insn("add.r64.imm", "rdi", ("rdi",), imm=16)]
    preds = dependences(order)
    assert preds[1] == {0}  # the store reads v1 and follows the load before it
    assert preds[2] == {1} and preds[3] == {1}  # loads do not pass the store (in == out may alias)...
    assert 2 not in preds[3]  # ...but not each other
    assert preds[4] == {0, 2, 3}  # rsi is rewritten after every load that addresses with it
    assert preds[5] == {1, 4}  # this load uses the new rsi
    assert 4 in preds[6]  # scalar ops (and their flags) stay in order


def test_a_long_rider_chain_starts_before_the_rounds_that_do_not_need_it_first():
    """Lockstep spreads riders evenly; the list scheduler starts the longest chain first."""
    streams = [[Insn("aesenc", v(10 * g + k + 1), (v(10 * g + k), KeyRef(k)), width=256)
                for k in range(1, 9)] for g in range(2)]
    chain = [Insn("clmul", v(100 + k), (v(99 + k), v(99 + k)), imm=0, width=256) for k in range(1, 13)]
    block = GroupBlock(streams, riders=chain, comment="test")
    lockstep = interleave(block)
    listed = list_schedule(block, COSTS, registers=12)
    assert sorted(map(id, listed)) == sorted(map(id, lockstep)) and listed != lockstep
    first_clmul = lambda insns: next(n for n, i in enumerate(insns) if i.op == "clmul")
    assert first_clmul(listed) < first_clmul(lockstep)


GCM_XTS_OCB = KernelSpec(("ctr32", "gcm", "xts", "ocb"), "avx2", 256, 4)


def test_a_list_scheduled_file_verifies(tmp_path):
    spec = replace(GCM_XTS_OCB, schedule="alderlake")
    verify_generated(tmp_path, spec, quick=True)
    asm = generate(spec).asm
    assert "--schedule list:alderlake" in asm  # the regenerate command says how it was ordered
    assert asm == generate(spec).asm  # deterministic
    assert asm.split("# ISA:")[1] != generate(GCM_XTS_OCB).asm.split("# ISA:")[1]  # not lockstep's order


@pytest.mark.parametrize("args,message", [
    (("--schedule", "list"), "give --target, or list:TARGET"),
    (("--schedule", "list:nosuch"), "unknown target 'nosuch'"),
    (("--schedule", "sideways"), "choose lockstep, list (with --target) or list:TARGET"),
])
def test_a_list_schedule_without_a_port_table_is_refused(tmp_path, args, message):
    r = run_aesgen("generate", "ctr32", "--isa", "avx2", "--width", "256", *args, "-o", str(tmp_path / "k.S"))
    assert r.returncode == 2 and message in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "k.S").exists()


@pytest.mark.parametrize("name", sorted(targets()))
def test_every_target_has_costs_for_the_scheduler(name):
    """`--schedule list:TARGET` for any target: a port class whose instruction the target lacks
    (Zen 3 has no GFNI) is left out, not an error; AES and logic are always there."""
    costs = target_costs(load(name))
    assert costs.of("aes", 128)[0], name
    assert costs.of("logic", 128)[0], name
