"""The scheduler (aesgen.schedule): lockstep interleave of D groups, closing-op order, and its checks."""
from __future__ import annotations

import pytest

from aesgen.dsl import BuildError
from aesgen.ir import GroupBlock, Insn, KeyRef, Label, Mem, VReg
from aesgen.kernels import build_function
from aesgen.lower import Lowerer
from aesgen.schedule import check_order, flatten, interleave
from aesgen.spec import KernelSpec


def tag(name: str) -> Insn:
    """An instruction recognisable by its comment (no operands: check_order has nothing to say)."""
    return Insn("vzero", None, (), comment=name)


def names(insns: list[Insn]) -> list[str]:
    return [i.comment for i in insns]


def test_lockstep_round_by_round() -> None:
    g = GroupBlock([[tag(f"g{j}r{k}") for k in range(3)] for j in range(4)])
    assert names(interleave(g)) == [f"g{j}r{k}" for k in range(3) for j in range(4)]


def test_unequal_streams_keep_their_own_order() -> None:
    g = GroupBlock([[tag("a0"), tag("a1"), tag("a2")], [tag("b0")], [tag("c0"), tag("c1")]])
    assert names(interleave(g)) == ["a0", "b0", "c0", "a1", "c1", "a2"]


@pytest.mark.parametrize("order,want", [("ascending", ["f0x", "f0y", "f1x", "f1y", "f2x", "f2y"]),
                                        ("descending", ["f2x", "f2y", "f1x", "f1y", "f0x", "f0y"])])
def test_finals_one_group_at_a_time(order: str, want: list[str]) -> None:
    g = GroupBlock([[tag(f"s{j}")] for j in range(3)],
                   [[tag(f"f{j}x"), tag(f"f{j}y")] for j in range(3)], order)
    assert names(interleave(g)) == ["s0", "s1", "s2"] + want


def test_riders_are_spread_evenly_over_the_rounds_before_the_finals() -> None:
    rounds = [[tag(f"g{j}r{k}") for k in range(4)] for j in range(2)]
    riders = [tag(f"h{i}") for i in range(6)]
    g = GroupBlock(rounds, [[tag("f0")], [tag("f1")]], riders=riders)
    # After round k: ceil((k + 1) * 6 / 4) riders in all, in their own order; then the finals.
    assert names(interleave(g)) == ["g0r0", "g1r0", "h0", "h1", "g0r1", "g1r1", "h2",
                                    "g0r2", "g1r2", "h3", "h4", "g0r3", "g1r3", "h5", "f0", "f1"]


def test_riders_first_run_before_any_round() -> None:
    g = GroupBlock([[tag("a0"), tag("a1")]], riders=[tag("h0"), tag("h1")], riders_first=True)
    assert names(interleave(g)) == ["h0", "h1", "a0", "a1"]


def test_gcm_on_16_registers_falls_back_to_riders_first() -> None:
    from aesgen.pipeline import generate
    from aesgen.regalloc import RegisterPressure

    spec = KernelSpec(("gcm",), "avx", 128, 8)
    with pytest.raises(RegisterPressure):  # the spread schedule keeps too much alive at once
        from aesgen.pipeline import FunctionEmitter, _allocate_all
        _allocate_all(FunctionEmitter(spec, None), build_function(spec, "gcm_encrypt"))
    assert "gcm_encrypt" in generate(spec).asm  # ... so the compact variant is emitted


def test_flatten_replaces_group_blocks_in_place() -> None:
    head, tail = Label(".Lhead"), tag("after")
    items = [head, GroupBlock([[tag("a")], [tag("b")]]), tail]
    assert flatten(items)[0] is head and flatten(items)[-1] is tail
    assert names(flatten(items)[1:]) == ["a", "b", "after"]


# ---------------------------------------------------------------- check_order

def vr(n: int, pinned: bool = False) -> VReg:
    return VReg(n, "t", pinned)


def test_use_before_definition_is_rejected() -> None:
    a, b = vr(1), vr(2)
    ok = [Insn("vload", a, (Mem("rsi", 0),)), Insn("aesenc", b, (a, KeyRef(1)))]
    check_order(ok, "ok")
    with pytest.raises(BuildError, match="used before defined in here"):
        check_order(list(reversed(ok)), "here")


def test_pinned_and_outside_values_are_not_local() -> None:
    p, outside, t = vr(1, pinned=True), vr(2), vr(3)
    # p is written later in the block (loop-carried), `outside` is never written here
    check_order([Insn("vxor", t, (p, outside)), Insn("paddd", p, (p, KeyRef(0)))], "loop body")


def test_interleave_checks_its_result() -> None:
    """A stream that reads another group's value before that group wrote it cannot be interleaved."""
    a, b = vr(1), vr(2)
    g = GroupBlock([[Insn("vxor", a, (b, KeyRef(0)))], [tag("pad"), Insn("vload", b, (Mem("rsi", 0),))]])
    with pytest.raises(BuildError, match="used before defined"):
        interleave(g)


@pytest.mark.parametrize("store,load,overlap", [
    (Mem("rdx", 0), Mem("rsi", 0), True),          # in == out: different bases may alias
    (Mem("rdx", 0), Mem("rsi", 8), True),          # partial overlap
    (Mem("rdx", 16), Mem("rsi", 0), False),        # adjacent, disjoint
    (Mem("rdx", 0), Mem("rsi", 16), False),
    (Mem("rdx", 0, bits=512), Mem("rsi", 48), True),   # a wide store covers it
])
def test_load_after_an_overlapping_store_is_rejected(store: Mem, load: Mem, overlap: bool) -> None:
    x, y = vr(1), vr(2)
    insns = [Insn("vload", x, (Mem("rsi", 64),)), Insn("vstore", store, (x,)), Insn("vload", y, (load,))]
    if overlap:
        with pytest.raises(BuildError, match="load after an overlapping store"):
            check_order(insns, "g")
    else:
        check_order(insns, "g")
    # a load before the store is always fine
    check_order([insns[0], insns[2], insns[1]], "g")


def test_red_zone_stores_do_not_count() -> None:
    x, y = vr(1), vr(2)
    check_order([Insn("vload", x, (Mem("rsi", 0),)), Insn("vstore", Mem("rsp", -16), (x,)),
                 Insn("vload", y, (Mem("rsi", -16),))], "red zone")


def test_memory_source_of_arithmetic_after_an_overlapping_store_is_rejected() -> None:
    x, y = vr(1), vr(2)
    insns = [Insn("vload", x, (Mem("rsi", 64),)), Insn("vstore", Mem("rdx", 0), (x,)),
             Insn("vxor", y, (x, Mem("rsi", 0)))]
    with pytest.raises(BuildError, match="overlapping store"):
        check_order(insns, "g")


# ---------------------------------------------------------------- real kernels

def group_blocks(spec: KernelSpec, name: str) -> list[GroupBlock]:
    fn = build_function(spec, name)
    lw = Lowerer(spec, fn.width)
    return [g for p in fn.paths for g in lw.items(p.items) if isinstance(g, GroupBlock)]


@pytest.mark.parametrize("isa,width", [("sse", 128), ("avx2", 256), ("avx512", 512)])
def test_kernel_groups_interleave_round_by_round(isa: str, width: int) -> None:
    depth = 4
    spec = KernelSpec(("ecb",), isa, width, depth)
    g = next(g for g in group_blocks(spec, "ecb_encrypt") if len(g.streams) == depth)
    out = interleave(g)
    pos = {id(i): n for n, i in enumerate(out)}
    n = len(g.streams[0])
    assert all(len(s) == n for s in g.streams)
    for k in range(n):
        for j in range(depth):
            assert pos[id(g.streams[j][k])] == k * depth + j
    aes = [i for i in out if i.op.startswith("aesenc")]
    # 9 full rounds + the last for AES-128: every group's round r before any group's round r+1
    assert [i.op for i in aes[:depth]] == ["aesenc"] * depth


@pytest.mark.parametrize("isa,width", [("sse", 128), ("avx2", 256), ("avx512", 512)])
def test_cbc_decrypt_needs_descending_finals_in_place(isa: str, width: int) -> None:
    """Group j reloads ciphertext below its own output; ascending order would read plaintext."""
    spec = KernelSpec(("cbc",), isa, width, 4)
    blocks = [g for g in group_blocks(spec, "cbc_decrypt") if len(g.streams) == 4]
    assert blocks
    for g in blocks:
        assert g.final_order == "descending"
        interleave(g)
        with pytest.raises(BuildError, match="overlapping store"):
            interleave(GroupBlock(g.streams, g.finals, "ascending", g.comment))
