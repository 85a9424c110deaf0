"""Lowering (aesgen.lower.Lowerer): DSL vector ops to what each ISA family has.

The lane-crossing ops are checked against the instruction definitions of the
Intel SDM, emulated here on lists of 128-bit lanes, not against the simulator.
"""
from __future__ import annotations

import pytest

from _support import ISA_WIDTHS
from aesgen.ir import Branch, Const, GroupBlock, Insn, KeyRef, Label, Mem, VReg
from aesgen.ops import OPS
from aesgen.kernels import build_functions
from aesgen.lower import Lowerer
from aesgen.schedule import flatten
from aesgen.spec import KernelSpec

DSL_ONLY = {"prev_lanes", "top_lane", "widen"}


def spec(isa: str, width: int) -> KernelSpec:
    return KernelSpec(("ecb", "ctr32", "cbc"), isa, width, 2)


def fields(i: Insn) -> tuple:
    """What an instruction means (Insn compares by identity)."""
    return (i.op, i.dst, i.srcs, i.imm, i.width, i.mask, i.mask_elem)


def v(n: int, pinned: bool = False) -> VReg:
    return VReg(n, f"v{n}", pinned)


# ---------------------------------------------------------------- SDM models (lanes = 128-bit ints)

def qwords(lanes: list[int]) -> list[int]:
    return [(x >> (64 * h)) & (2**64 - 1) for x in lanes for h in (0, 1)]


def from_qwords(q: list[int]) -> list[int]:
    return [q[2 * i] | (q[2 * i + 1] << 64) for i in range(len(q) // 2)]


def sdm_valignq(src1: list[int], src2: list[int], imm: int) -> list[int]:
    """VALIGNQ dst, src1, src2, imm8: (src1:src2) >> (imm8 * 64), low half (src2 is the low part)."""
    n = len(src1) * 2
    cat = qwords(src2) + qwords(src1)
    shift = imm & (n - 1)
    return from_qwords(cat[shift:shift + n])


def sdm_vperm2i128(src1: list[int], src2: list[int], imm: int) -> list[int]:
    """VPERM2I128: each half picks src1.lo / src1.hi / src2.lo / src2.hi by imm[1:0], imm[5:4]."""
    pick = [src1[0], src1[1], src2[0], src2[1]]
    return [0 if imm & 0x08 else pick[imm & 3], 0 if imm & 0x80 else pick[(imm >> 4) & 3]]


def sdm_vextracti128(src: list[int], imm: int) -> list[int]:
    """VEXTRACTI128 / VEXTRACTI32X4: lane imm of src (imm masked to the lane count)."""
    return [src[imm & (len(src) - 1)]]


def sdm_vinserti128(src1: list[int], src2: list[int], imm: int) -> list[int]:
    out = list(src1)
    out[imm & 1] = src2[0]
    return out


def sdm_vshufi32x4(src1: list[int], src2: list[int], imm: int) -> list[int]:
    """Lanes 0..n/2-1 from src1, the rest from src2, each chosen by a 1-bit (ymm) / 2-bit (zmm) field."""
    n = len(src1)
    bits = 1 if n == 2 else 2
    out = []
    for k in range(n):
        sel = (imm >> (bits * k)) & ((1 << bits) - 1)
        out.append((src1 if k < n // 2 else src2)[sel])
    return out


MACHINE = {"valignq": sdm_valignq, "vperm2i128": sdm_vperm2i128, "vshufi32x4": sdm_vshufi32x4,
           "vinserti128": sdm_vinserti128}


def run_lowered(insns: list[Insn], env: dict[int, list[int]], lanes: int) -> list[int]:
    """Execute lowered lane-crossing ops on lane lists; returns the last result."""
    out = None
    for i in insns:
        args = [env[s.id] for s in i.srcs]
        if i.op == "vextract128":
            out = sdm_vextracti128(args[0], i.imm)
        elif i.op == "vinserti128":
            out = sdm_vinserti128(args[0] + [0] * (lanes - len(args[0])), args[1], i.imm)
        else:
            out = MACHINE[i.op](*args, i.imm)
        env[i.dst.id] = out
    return out


LANE_VALUES = [0x0F0E0D0C0B0A09080706050403020100 + (k << 120) for k in range(1, 5)]
CARRY_VALUES = [0xAAAA0000 + k for k in range(1, 5)]


@pytest.mark.parametrize("isa,width", [("avx2", 256), ("avx512", 256), ("avx512", 512)])
def test_prev_lanes_lowering_means_previous_blocks(isa: str, width: int) -> None:
    """prev_lanes(cur, carried) = [carried's top lane, cur lanes 0..n-2] (the CBC chaining)."""
    lanes = width // 128
    cur, carried, dst = v(1), v(2), v(3)
    low = Lowerer(spec(isa, width), width).insn(Insn("prev_lanes", dst, (cur, carried), width=width))
    assert len(low) == 1 and low[0].op == ("valignq" if isa == "avx512" else "vperm2i128")
    assert low[0].dst is dst and low[0].width == width
    env = {1: LANE_VALUES[:lanes], 2: CARRY_VALUES[:lanes]}
    got = run_lowered(low, env, lanes)
    assert got == [CARRY_VALUES[lanes - 1]] + LANE_VALUES[:lanes - 1]


@pytest.mark.parametrize("width", (128, 512))
def test_prev_lanes_has_no_avx2_lowering_but_for_two_lanes(width: int) -> None:
    lw = Lowerer(KernelSpec(("cbc",), "avx2", 256, 1), 256)
    with pytest.raises(ValueError, match="prev_lanes"):
        lw.insn(Insn("prev_lanes", v(3), (v(1), v(2)), width=width))


@pytest.mark.parametrize("isa,width", [("avx2", 256), ("avx512", 256), ("avx512", 512)])
def test_top_lane_lowering(isa: str, width: int) -> None:
    lanes = width // 128
    low = Lowerer(spec(isa, width), width).insn(Insn("top_lane", v(2), (v(1),), width=128))
    assert [i.op for i in low] == ["vextract128"]
    assert low[0].width == width, "reads a register of the function's width"
    assert run_lowered(low, {1: LANE_VALUES[:lanes]}, lanes) == [LANE_VALUES[lanes - 1]]


@pytest.mark.parametrize("isa,width", [("avx2", 256), ("avx512", 256), ("avx512", 512)])
def test_widen_lowering_replicates_lane_0(isa: str, width: int) -> None:
    lanes = width // 128
    low = Lowerer(spec(isa, width), width).insn(Insn("widen", v(2), (v(1),), width=width))
    assert [i.op for i in low] == ["vshufi32x4" if isa == "avx512" else "vinserti128"]
    src = [LANE_VALUES[0]] + [0xDEAD] * (lanes - 1)   # upper lanes of the xmm source are garbage
    assert run_lowered(low, {1: src}, lanes) == [LANE_VALUES[0]] * lanes


def test_broadcast_at_128_bits_is_a_plain_load() -> None:
    m = Mem("r8", 0)
    i = Insn("vload_bcast", v(1), (m,), width=128, comment="c")
    low = Lowerer(spec("avx512", 128), 128).insn(i)
    assert len(low) == 1 and low[0].op == "vload" and low[0].srcs == (m,) and low[0].comment == "c"
    wide = Insn("vload_bcast", v(1), (m,), width=256)
    assert [fields(i) for i in Lowerer(spec("avx2", 256), 256).insn(wide)] == [fields(wide)]


def test_sse_arithmetic_memory_operands_become_explicit_loads() -> None:
    lw = Lowerer(spec("sse", 128), 128)
    m = Mem("rsi", 16)
    x = v(1)
    low = lw.insn(Insn("vxor", v(2), (x, m), width=128))
    assert [i.op for i in low] == ["vload", "vxor"]
    t = low[0].dst
    assert isinstance(t, VReg) and low[0].srcs == (m,) and low[1].srcs == (x, t)
    assert t.id >= 1_000_000, "fresh temporaries do not collide with the builder's ids"
    t2 = lw.insn(Insn("aesenc", v(3), (m, m), width=128))
    assert [i.op for i in t2] == ["vload", "vload", "aesenc"] and t2[0].dst.id != t2[1].dst.id != t.id
    # round keys (aligned schedule), constants (.rodata, aligned), loads and stores stay as they are
    for keep in (Insn("aesenc", v(4), (x, KeyRef(3)), width=128),
                 Insn("pshufb", v(4), (x, Const("bswap_x1", bytes(16))), width=128),
                 Insn("vload", v(4), (m,), width=128), Insn("vstore", m, (x,), width=128)):
        assert [fields(i) for i in lw.insn(keep)] == [fields(keep)]


@pytest.mark.parametrize("isa,width", [("avx", 128), ("avx2", 256), ("avx512", 512)])
def test_vex_and_evex_keep_memory_operands(isa: str, width: int) -> None:
    i = Insn("vxor", v(2), (v(1), Mem("rsi", 16)), width=width)
    assert [fields(x) for x in Lowerer(spec(isa, width), width).insn(i)] == [fields(i)]


def test_items_lower_group_streams_and_finals() -> None:
    lw = Lowerer(spec("sse", 128), 128)
    m = Mem("rsi", 0)
    g = GroupBlock([[Insn("vxor", v(1), (v(9, True), m))], [Insn("vxor", v(2), (v(9, True), m))]],
                   [[Insn("vstore", Mem("rdx", 0), (v(1),))], [Insn("vstore", Mem("rdx", 16), (v(2),))]],
                   "descending", "two groups")
    scalar = Insn("add.r64.imm", "rsi", imm=16)
    items = [Label(".La"), scalar, g, Branch("jmp", ".La")]
    out = lw.items(items)
    assert out[0] == Label(".La") and out[1] is scalar and out[3] == Branch("jmp", ".La")
    lg = out[2]
    assert isinstance(lg, GroupBlock) and lg.final_order == "descending" and lg.comment == "two groups"
    assert [[i.op for i in s] for s in lg.streams] == [["vload", "vxor"]] * 2
    assert [[fields(i) for i in f] for f in lg.finals] == [[fields(i) for i in f] for f in g.finals]


FAMILY = {"sse": 0, "avx": 1, "avx2": 1, "avx512": 2}


@pytest.mark.parametrize("isa,width", ISA_WIDTHS)
def test_lowered_kernels_use_only_target_instructions(isa: str, width: int) -> None:
    """After lowering, every vector op has a form in the target's encoding family."""
    sp = KernelSpec(("ecb", "ctr32", "cbc"), isa, width, 3)
    for fn in build_functions(sp):
        lw = Lowerer(sp, fn.width)
        items = flatten(lw.items(fn.entry)) + [x for p in fn.paths for x in flatten(lw.items(p.items))]
        for it in items:
            if not isinstance(it, Insn) or not OPS[it.op].vector:
                continue
            assert it.op not in DSL_ONLY, f"{fn.name}: {it.op} left after lowering"
            f = OPS[it.op].forms
            forms = (f.legacy, f.vex, f.evex)
            if isa == "avx512":
                assert forms[1] or forms[2], it.op
            else:
                assert forms[FAMILY[isa]] is not None, f"{fn.name}: {it.op} has no {isa} form"
            if it.op == "vload_bcast":
                assert it.width > 128
            if isa == "sse" and not it.op.startswith(("vload", "vstore")):
                assert not any(isinstance(s, Mem) for s in it.srcs), f"{fn.name}: unaligned-unsafe {it.op}"
            if isa in ("sse", "avx"):
                assert it.width == 128
