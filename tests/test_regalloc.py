"""Register allocation (aesgen.regalloc.allocate_path).

The main check, `check_allocation`, walks the allocated list with a symbolic
register file: every physical register holds the name of the value last
written to it, and every read must find the value the virtual program reads.
Two temporaries sharing a register while both are live, a clobbered round
key or pinned register, or a legacy copy that overwrites a source, all show
up as a wrong name.
"""
from __future__ import annotations

import pytest

from _support import ISA_WIDTHS, NREGS
from aesgen.dsl import BuildError
from aesgen.ir import SYSV_ARGS, Branch, Insn, KeyRef, Label, Mark, Mem, Phys, VReg
from aesgen.kernels import build_functions
from aesgen.lower import Lowerer
from aesgen.regalloc import RegisterPressure, allocate_path
from aesgen.schedule import flatten
from aesgen.spec import KernelSpec

# Legacy SSE forms that overwrite their first source (Intel SDM), and the commutative ones.
TIED = {"vxor", "paddd", "pshufb", "aesenc", "aesenclast", "aesdec", "aesdeclast", "pslldq",
        "punpcklqdq", "palignr"}
COMMUTATIVE = {"vxor", "paddd"}
KEY_BASE, STRIDE = "rdi", 16


def token_of(op, key_base: str, stride: int):
    if isinstance(op, VReg):
        return ("v", op.id)
    if isinstance(op, KeyRef):
        return ("key", op.index)
    return ("operand", repr(op))


def check_allocation(items: list, alloc, *, nregs: int, legacy: bool, key_base: str = KEY_BASE,
                     stride: int = STRIDE) -> None:
    """Fail unless `alloc.insns` computes what `items` computes (see the module docstring)."""
    pinned = {o.id for it in items if isinstance(it, Insn) for o in (it.dst, *it.srcs)
              if isinstance(o, VReg) and o.pinned}
    regs: dict[int, tuple] = {}
    out, j = alloc.insns, 0

    def actual(a, virtual):
        if isinstance(a, Phys):
            assert 0 <= a.num < nregs
            return regs.get(a.num, ("undefined", a.num))
        if isinstance(a, Mem) and isinstance(virtual, KeyRef):   # a round key as a memory operand
            assert a.base == key_base and a.index is None and a.disp % stride == 0, a
            return ("key", a.disp // stride)
        return ("operand", repr(a))

    for it in items:
        # key loads the allocator adds (a vload_key the program itself does not have)
        while (j < len(out) and isinstance(out[j], Insn) and out[j].op == "vload_key"
               and not (isinstance(it, Insn) and it.op == "vload_key")):
            m = out[j].srcs[0]
            assert m.base == key_base and m.disp % stride == 0
            regs[out[j].dst.num] = ("key", m.disp // stride)
            j += 1
        if isinstance(it, (Label, Branch, Mark)):
            assert out[j] == it
            j += 1
            # another path may arrive at a label (and at a mark that ends a region like one):
            # only pinned values and keys survive
            if isinstance(it, Label) or isinstance(it, Mark) and not it.values_live_across:
                regs = {r: t for r, t in regs.items() if t[0] == "key" or t[1] in pinned}
            continue
        a = out[j]
        j += 1
        if a.op != it.op:   # the copy a two-operand form needs
            assert legacy and it.op in TIED and a.op == "vmov", (it, a)
            regs[a.dst.num] = actual(a.srcs[0], it.srcs[0])
            a = out[j]
            j += 1
        assert (a.op, a.imm, a.width, a.mask) == (it.op, it.imm, it.width, it.mask), (it, a)
        want = [token_of(s, key_base, stride) for s in it.srcs]
        got = [actual(s, v) for s, v in zip(a.srcs, it.srcs)]
        if got != want and it.op in COMMUTATIVE:
            got = [actual(s, v) for s, v in zip(a.srcs, reversed(it.srcs))][::-1]
        assert got == want, f"{it.op}: reads {got}, the program reads {want}"
        if legacy and it.op in TIED and isinstance(a.dst, Phys):
            assert isinstance(a.srcs[0], Phys) and a.srcs[0].num == a.dst.num, "legacy: dst is src1"
        if isinstance(it.dst, VReg):
            assert isinstance(a.dst, Phys)
            regs[a.dst.num] = ("v", it.dst.id)
        else:
            assert a.dst == it.dst
    assert j == len(out), "unexpected trailing instructions"


def alloc(items: list, nregs: int = 16, legacy: bool = False, width: int = 128):
    return allocate_path(items, nregs=nregs, legacy=legacy, key_base=KEY_BASE, key_stride=STRIDE,
                         width=width, what="test path")


def v(n: int, pinned: bool = False, role: str = "t") -> VReg:
    return VReg(n, role, pinned)


def aes_path(nr: int = 10, blocks: int = 1) -> list:
    """ECB-like: `blocks` independent blocks through nr rounds."""
    items: list = [Label(".Lpath")]
    xs = []
    for b in range(blocks):
        x = v(100 * b + 1)
        items.append(Insn("vload", x, (Mem("rsi", 16 * b),)))
        xs.append(x)
    for r in range(nr + 1):
        for b in range(blocks):
            op = "vxor" if r == 0 else "aesenclast" if r == nr else "aesenc"
            y = v(100 * b + r + 2)
            items.append(Insn(op, y, (xs[b], KeyRef(r))))
            xs[b] = y
    for b in range(blocks):
        items.append(Insn("vstore", Mem("rdx", 16 * b), (xs[b],)))
    items.append(Insn("ret"))
    return items


# ---------------------------------------------------------------- round keys

@pytest.mark.parametrize("legacy", (False, True))
def test_keys_pinned_when_they_fit(legacy: bool) -> None:
    items = aes_path(10, blocks=2)
    a = alloc(items, nregs=16, legacy=legacy)
    assert sorted(a.key_regs) == list(range(11)) and a.spilled_keys == []
    assert len(set(a.key_regs.values())) == 11
    loads = [i for i in a.insns if isinstance(i, Insn) and i.op == "vload_key"]
    assert {(i.dst.num, i.srcs[0].disp) for i in loads} == {(r, 16 * k) for k, r in a.key_regs.items()}
    assert a.insns[0] == Label(".Lpath") and all(i.op == "vload_key" for i in a.insns[1:12]), \
        "keys are loaded once, right after the path's entry label"
    assert not any(isinstance(s, Mem) for i in a.insns if isinstance(i, Insn) and i.op.startswith("aes")
                   for s in i.srcs)
    assert a.registers_used <= 16
    check_allocation(items, a, nregs=16, legacy=legacy)


def key_memory_operands(a) -> list[int]:
    """The round keys the allocated code reads as memory operands of its own instructions."""
    return [s.disp // STRIDE for i in a.insns if isinstance(i, Insn) and i.op != "vload_key"
            for s in i.srcs if isinstance(s, Mem) and s.base == KEY_BASE]


def key_loads(a) -> list[int]:
    return [i.srcs[0].disp // STRIDE for i in a.insns if isinstance(i, Insn) and i.op == "vload_key"]


@pytest.mark.parametrize("legacy", (False, True))
def test_spilled_keys_are_loaded_once_per_round_into_a_shared_register(legacy: bool) -> None:
    items = aes_path(14, blocks=4)   # 15 keys + 4 live blocks > 16
    a = alloc(items, nregs=16, legacy=legacy)
    assert a.spilled_keys and sorted(list(a.key_regs) + a.spilled_keys) == list(range(15))
    assert a.shared_key_loads
    # each spilled key: one load for the 4 blocks' round, read from a register by all of them
    assert sorted(key_loads(a)) == sorted(list(a.key_regs) + a.spilled_keys)
    assert key_memory_operands(a) == []
    for k in a.spilled_keys:
        users = [i for i in a.insns if isinstance(i, Insn) and i.comment == "" and i.op.startswith("aes")
                 and any(isinstance(s, Phys) and s.role == f"KEY{k}_" for s in i.srcs)]
        assert len(users) == 4 or (k == 0 and users == []), (k, users)
    check_allocation(items, a, nregs=16, legacy=legacy)


@pytest.mark.parametrize("legacy", (False, True))
def test_a_key_read_once_stays_a_memory_operand(legacy: bool) -> None:
    items = aes_path(14, blocks=1)
    a = alloc(items, nregs=1, legacy=legacy)   # the block alone: no register for a key
    assert a.key_regs == {} and len(a.spilled_keys) == 15
    assert key_loads(a) == [] and sorted(key_memory_operands(a)) == list(range(15))
    check_allocation(items, a, nregs=1, legacy=legacy)


@pytest.mark.parametrize("legacy", (False, True))
def test_keys_fall_back_to_memory_operands_when_no_register_is_left_for_them(legacy: bool) -> None:
    items = aes_path(14, blocks=4)
    tight = alloc(items, nregs=4, legacy=legacy)   # the 4 blocks fill the file: no room for a key
    assert tight.key_regs == {} and len(tight.spilled_keys) == 15 and not tight.shared_key_loads
    assert sorted(set(key_memory_operands(tight))) == list(range(15)) and key_loads(tight) == []
    for i in tight.insns:
        for s in (i.srcs if isinstance(i, Insn) else ()):
            if isinstance(s, Mem) and s.base == KEY_BASE:
                assert s.bits == 128 and s.disp % STRIDE == 0
    check_allocation(items, tight, nregs=4, legacy=legacy)


def test_register_pressure_when_impossible() -> None:
    xs = [v(n) for n in range(1, 18)]
    items = [Label(".L")] + [Insn("vload", x, (Mem("rsi", 16 * n),)) for n, x in enumerate(xs)]
    items += [Insn("vstore", Mem("rdx", 16 * n), (x,)) for n, x in enumerate(xs)]
    with pytest.raises(RegisterPressure, match=r"test path needs more than the 16 vector registers") as e:
        alloc(items, nregs=16)
    assert isinstance(e.value, BuildError)
    check_allocation(items, alloc(items, nregs=17), nregs=17, legacy=False)


def test_pinned_registers_take_the_top_of_the_file_for_the_whole_path() -> None:
    p, q = v(50, pinned=True, role="CTR_BASE"), v(51, pinned=True, role="CBC_CARRY")
    t1, t2, t3 = v(1), v(2), v(3)
    items = [Label(".La"), Insn("vload", p, (Mem("r8", 0),)), Insn("vload", q, (Mem("r8", 16),)),
             Label(".Lloop"), Insn("vxor", t1, (p, q)), Insn("paddd", p, (p, KeyRef(0))),
             Insn("vstore", Mem("rdx", 32), (t1,)),
             Insn("vload", t2, (Mem("rsi", 0),)), Insn("vxor", t3, (t2, q)), Insn("vstore", Mem("rdx", 0), (t3,)),
             Branch("ne", ".Lloop"), Insn("vstore", Mem("r8", 0), (p,)), Insn("ret")]
    for legacy in (False, True):
        a = alloc(items, nregs=16, legacy=legacy)
        pins = {i.dst.num for i in a.insns if isinstance(i, Insn) and isinstance(i.dst, Phys)
                and i.dst.role in ("CTR_BASE", "CBC_CARRY")}
        assert pins == {15, 14}
        temps = {i.dst.num for i in a.insns if isinstance(i, Insn) and isinstance(i.dst, Phys)
                 and i.dst.role == "t"}
        assert not temps & pins
        check_allocation(items, a, nregs=16, legacy=legacy)


def test_temporaries_do_not_cross_labels() -> None:
    t = v(1)
    items = [Insn("vload", t, (Mem("rsi", 0),)), Label(".Lx"), Insn("vstore", Mem("rdx", 0), (t,))]
    with pytest.raises(BuildError, match="crosses a label"):
        alloc(items)


# ---------------------------------------------------------------- legacy two-operand copies

def copies(a) -> list[Insn]:
    return [i for i in a.insns if isinstance(i, Insn) and i.op == "vmov"]


def test_no_copy_when_the_tied_source_dies() -> None:
    x, y = v(1), v(2)
    items = [Insn("vload", x, (Mem("rsi", 0),)), Insn("aesenc", y, (x, KeyRef(1))),
             Insn("vstore", Mem("rdx", 0), (y,))]
    a = alloc(items, legacy=True)
    assert copies(a) == []
    load, enc = [i for i in a.insns if i.op in ("vload", "aesenc")]
    assert enc.dst.num == enc.srcs[0].num == load.dst.num
    check_allocation(items, a, nregs=16, legacy=True)


def test_copy_when_the_tied_source_stays_live() -> None:
    x, y = v(1), v(2)
    items = [Insn("vload", x, (Mem("rsi", 0),)), Insn("aesenc", y, (x, KeyRef(1))),
             Insn("vstore", Mem("rdx", 0), (y,)), Insn("vstore", Mem("rdx", 16), (x,))]
    a = alloc(items, legacy=True)
    (c,) = copies(a)
    n = a.insns.index(c)
    enc = a.insns[n + 1]
    assert enc.op == "aesenc" and c.dst.num == enc.dst.num == enc.srcs[0].num
    assert c.srcs[0].num != c.dst.num, "copies x, which stays in its own register"
    check_allocation(items, a, nregs=16, legacy=True)
    # three-operand (VEX/EVEX) code never needs one
    b = alloc(items, legacy=False)
    assert copies(b) == []
    check_allocation(items, b, nregs=16, legacy=False)


def test_commutative_ops_tie_to_the_source_that_dies() -> None:
    x, y, z = v(1), v(2), v(3)
    items = [Insn("vload", x, (Mem("rsi", 0),)), Insn("vload", y, (Mem("rsi", 16),)),
             Insn("vxor", z, (x, y)),                 # x stays live, y dies: pxor y, x
             Insn("vstore", Mem("rdx", 0), (z,)), Insn("vstore", Mem("rdx", 16), (x,))]
    a = alloc(items, legacy=True)
    assert copies(a) == []
    check_allocation(items, a, nregs=16, legacy=True)


@pytest.mark.parametrize("roles", (("t", "t"), ("key", "blk")), ids=("same-role", "different-roles"))
@pytest.mark.parametrize("op,imm", [("punpcklqdq", None), ("palignr", 8), ("aesenc", None)])
def test_copy_never_overwrites_the_second_source(op: str, imm: int | None, roles: tuple[str, str]) -> None:
    a_, b_, t = v(1, role=roles[0]), v(2, role=roles[1]), v(3)
    items = [Insn("vload", a_, (Mem("rsi", 0),)), Insn("vload", b_, (Mem("rsi", 16),)),
             Insn(op, t, (a_, b_), imm=imm),
             Insn("vstore", Mem("rdx", 0), (t,)), Insn("vstore", Mem("rdx", 16), (a_,))]
    check_allocation(items, alloc(items, legacy=True), nregs=16, legacy=True)


@pytest.mark.parametrize("op", ("paddd", "vxor"))
def test_pinned_accumulator_plus_a_dying_temporary(op: str) -> None:
    p, t = v(50, pinned=True, role="ACC"), v(1)
    items = [Label(".La"), Insn("vload", p, (Mem("r8", 0),)), Insn("vload", t, (Mem("rsi", 0),)),
             Insn(op, p, (p, t)), Insn("vstore", Mem("r8", 0), (p,)), Insn("ret")]
    check_allocation(items, alloc(items, legacy=True), nregs=16, legacy=True)


def test_the_checker_catches_a_shared_register() -> None:
    """Self-test: corrupt a correct allocation (two live values in one register); the walk fails."""
    x, y = v(1), v(2)
    items = [Insn("vload", x, (Mem("rsi", 0),)), Insn("vload", y, (Mem("rsi", 16),)),
             Insn("vstore", Mem("rdx", 0), (x,)), Insn("vstore", Mem("rdx", 16), (y,))]
    a = alloc(items)
    check_allocation(items, a, nregs=16, legacy=False)
    lx, ly = a.insns[0], a.insns[1]
    assert lx.dst.num != ly.dst.num
    a.insns[1] = Insn("vload", Phys(lx.dst.num, "t"), ly.srcs)
    a.insns[3] = Insn("vstore", a.insns[3].dst, (Phys(lx.dst.num, "t"),))
    with pytest.raises(AssertionError):
        check_allocation(items, a, nregs=16, legacy=False)


# ---------------------------------------------------------------- real kernels

def kernel_paths(spec: KernelSpec):
    for fn in build_functions(spec):
        lw = Lowerer(spec, fn.width)
        key = dict(zip(fn.args, SYSV_ARGS)).get("key")
        for p in fn.paths:
            yield fn, p, flatten(lw.items(p.items)), key


def check_spec(spec: KernelSpec) -> list:
    nregs, legacy = NREGS[spec.isa], spec.isa == "sse"
    allocs = []
    for fn, p, items, key in kernel_paths(spec):
        a = allocate_path(items, nregs=nregs, legacy=legacy, key_base=key, key_stride=spec.key_stride,
                          width=fn.width, what=fn.name)
        check_allocation(items, a, nregs=nregs, legacy=legacy, key_base=key or "", stride=spec.key_stride)
        assert a.registers_used <= nregs
        allocs.append((fn.name, p.nr, a))
    return allocs


SAMPLE = [("sse", 128, 1), ("sse", 128, 8), ("avx", 128, 4), ("avx2", 256, 8), ("avx512", 128, 16),
          ("avx512", 256, 5), ("avx512", 512, 16)]


@pytest.mark.parametrize("isa,width,depth", SAMPLE)
def test_kernel_allocations_compute_the_program(isa: str, width: int, depth: int) -> None:
    modes = ("ecb", "ctr32", "cbc") if depth <= 12 or isa == "avx512" else ("ecb",)
    check_spec(KernelSpec(modes, isa, width, depth))


def test_kernel_keys_in_registers_or_memory() -> None:
    small = {(n, nr): a for n, nr, a in check_spec(KernelSpec(("ecb",), "sse", 128, 1))}
    assert small[("ecb_encrypt", 10)].spilled_keys == [] and len(small[("ecb_encrypt", 10)].key_regs) == 11
    big = {(n, nr): a for n, nr, a in check_spec(KernelSpec(("ecb",), "sse", 128, 16))}
    assert big[("ecb_encrypt", 14)].spilled_keys, "16 blocks in flight leave no room for 15 keys"
    wide = {(n, nr): a for n, nr, a in check_spec(KernelSpec(("ecb",), "avx512", 512, 8))}
    assert all(a.spilled_keys == [] for a in wide.values()), "32 registers hold every key"


@pytest.mark.full
@pytest.mark.parametrize("isa,width", ISA_WIDTHS)
def test_every_feasible_kernel_allocation(isa: str, width: int) -> None:
    for depth in range(1, 17):
        for mode in ("ecb", "ctr32", "cbc"):
            try:
                check_spec(KernelSpec((mode,), isa, width, depth))
            except RegisterPressure as e:
                assert f"{NREGS[isa]} vector registers" in str(e)


COUNTED = [KernelSpec(("ecb", "xts"), "sse", 128, 8), KernelSpec(("gcm",), "avx2", 256, 10),
           KernelSpec(("otr",), "avx", 128, 15), KernelSpec(("xts",), "avx2", 256, 13),
           KernelSpec(("ctr32",), "avx512", 512, 16)]


@pytest.mark.parametrize("spec", COUNTED, ids=lambda s: f"{'+'.join(s.modes)}-{s.isa}-{s.depth}")
def test_counting_agrees_with_allocating(spec: KernelSpec) -> None:
    """Depth searches only count (emit=False); what they decide must be what allocation does,
    including where a path does not fit (xts on avx2 at depth 13 does not)."""
    nregs, legacy = NREGS[spec.isa], spec.isa == "sse"
    for fn, p, items, key in kernel_paths(spec):
        got = {}
        for emit in (True, False):
            try:
                a = allocate_path(items, nregs=nregs, legacy=legacy, key_base=key, key_stride=spec.key_stride,
                                  width=fn.width, what=fn.name, emit=emit)
                got[emit] = (a.key_regs, a.spilled_keys, a.registers_used, a.shared_key_loads)
            except RegisterPressure as e:
                got[emit] = str(e)
        assert got[True] == got[False], (fn.name, p.nr)
