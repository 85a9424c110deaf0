"""The DSL builder (aesgen.dsl.FunctionBuilder) and the IR it produces."""
from __future__ import annotations

import pytest

from _support import ISA_WIDTHS
from aesgen.dsl import BuildError, FunctionBuilder, key
from aesgen.ir import SYSV_ARGS, Branch, GroupBlock, Insn, KeyRef, Label, Mem, VReg
from aesgen.kernels import build_function, build_functions
from aesgen.simulate import Machine, call
from aesgen.spec import KernelSpec

SPEC = KernelSpec(("ecb", "ctr32", "cbc"), "avx512", 512, 4)


def builder(spec: KernelSpec = SPEC, name: str = "ecb_encrypt",
            args: tuple[str, ...] = ("key", "in", "out", "nblocks")) -> FunctionBuilder:
    return FunctionBuilder(spec, name, args)


def walk(items: list):
    """Every item, with GroupBlock streams and finals expanded."""
    for it in items:
        if isinstance(it, GroupBlock):
            for s in it.streams + it.finals:
                yield from s
        else:
            yield it


def all_items(fn) -> list:
    return list(walk(fn.entry)) + [it for p in fn.paths for it in walk(p.items)]


# ---------------------------------------------------------------- basics

def test_arguments_map_to_sysv_registers() -> None:
    b = builder()
    assert b.reg == {"key": "rdi", "in": "rsi", "out": "rdx", "nblocks": "rcx"}
    assert SYSV_ARGS == ("rdi", "rsi", "rdx", "rcx", "r8", "r9")
    # Arguments 7.. come from the stack: after n pushes, at rsp + 8 (return address) + 8n.
    seven = FunctionBuilder(SPEC, "f", tuple("abcdefgh"))
    assert "g" not in seven.reg
    assert seven.stack_arg("g") == Mem("rsp", 8, bits=64)
    assert seven.stack_arg("h", pushed=2) == Mem("rsp", 32, bits=64)
    with pytest.raises(BuildError, match="register argument"):
        seven.stack_arg("a")


def test_vector_ops_make_fresh_temporaries_at_the_builder_width() -> None:
    b = builder()
    x = b.v("vload", Mem("rsi", 0), role="blk")
    y = b.v("vxor", x, key(0))
    assert isinstance(x, VReg) and isinstance(y, VReg) and x is not y and x.id != y.id
    assert not x.pinned and x.role == "blk"
    ins = b.fn.entry
    assert [i.op for i in ins] == ["vload", "vxor"]
    assert ins[1].dst is y and ins[1].srcs == (x, KeyRef(0)) and ins[1].width == 512
    # dst= writes an existing register instead of making one
    z = b.v("aesenc", y, key(1), dst=y)
    assert z is y and ins[2].dst is y
    b.store(Mem("rdx", 0), y)
    assert ins[3].op == "vstore" and ins[3].dst == Mem("rdx", 0) and ins[3].srcs == (y,)


def test_at_width_is_scoped_and_restored_on_error() -> None:
    b = builder()
    with b.at_width(128):
        b.v("vzero")
    b.v("vzero")
    assert [i.width for i in b.fn.entry] == [128, 512]
    with pytest.raises(RuntimeError):
        with b.at_width(256):
            raise RuntimeError
    assert b.width == 512


def test_pinned_registers() -> None:
    b = builder()
    p, q = b.pinned("CTR_BASE"), b.pinned("CBC_CARRY")
    t = b.v("vzero")
    assert p.pinned and q.pinned and not t.pinned
    assert len({p.id, q.id, t.id}) == 3
    assert (p.role, q.role) == ("CTR_BASE", "CBC_CARRY")


def test_mode_functions_take_their_width_and_depth_from_the_spec() -> None:
    spec = KernelSpec(("ecb", "cbc"), "avx512", 512, 8, overrides=(("cbc", 256, 2),))
    assert FunctionBuilder(spec, "ecb_encrypt", ("key",)).width == 512
    b = FunctionBuilder(spec, "cbc_decrypt", ("key",))
    assert (b.width, b.depth, b.lanes) == (256, 2, 2)
    k = FunctionBuilder(spec, "set_encrypt_key", ("user_key", "bits", "key"))
    assert (k.width, k.depth) == (512, 8)


# ---------------------------------------------------------------- groups and finals

def test_groups_replicate_one_stream_per_group() -> None:
    b = builder()
    seen = []

    def block(j: int) -> None:
        seen.append(j)
        x = b.v("vload", Mem("rsi", 64 * j))
        x = b.v("aesenc", x, key(1))
        b.store(Mem("rdx", 64 * j), x)

    b.s("cmp.r64.imm", "rcx", imm=4)
    b.groups(3, block, comment="three groups")
    b.s("ret")
    assert seen == [0, 1, 2]
    entry = b.fn.entry
    assert isinstance(entry[0], Insn) and isinstance(entry[1], GroupBlock) and entry[2].op == "ret"
    g = entry[1]
    assert len(g.streams) == 3 and g.finals == [[], [], []]
    assert g.final_order == "ascending" and g.comment == "three groups"
    for j, s in enumerate(g.streams):
        assert [i.op for i in s] == ["vload", "aesenc", "vstore"]
        assert s[0].srcs[0].disp == 64 * j and s[2].dst.disp == 64 * j
    # streams are independent: no stream reads another's values
    defined = [{i.dst.id for i in s if isinstance(i.dst, VReg)} for s in g.streams]
    for j, s in enumerate(g.streams):
        reads = {v.id for i in s for v in i.vregs_read()}
        assert reads <= defined[j]


def test_final_moves_the_rest_of_a_group_to_its_closing_ops() -> None:
    b = builder()

    def block(j: int) -> None:
        x = b.v("vload", Mem("rsi", 64 * j))
        x = b.v("aesenc", x, key(1))
        b.final()
        y = b.v("aesenclast", x, key(2))
        b.store(Mem("rdx", 64 * j), y)

    b.groups(2, block, final_order="descending")
    b.s("ret")
    g = b.fn.entry[0]
    assert [[i.op for i in s] for s in g.streams] == [["vload", "aesenc"]] * 2
    assert [[i.op for i in f] for f in g.finals] == [["aesenclast", "vstore"]] * 2
    assert g.final_order == "descending"
    assert b.fn.entry[1].op == "ret", "ops after groups() go back to the enclosing list"


# ---------------------------------------------------------------- key_paths

def test_key_paths_builds_three_paths() -> None:
    b = builder()
    got = []

    def body(nr: int) -> None:
        got.append(nr)
        b.v("vxor", b.v("vload", Mem("rsi", 0)), key(nr))
        b.s("ret")

    b.key_paths("key", body)
    fn = b.fn
    assert got == [10, 12, 14]
    assert [p.nr for p in fn.paths] == [10, 12, 14]
    first = fn.entry[0]
    assert first.op == "mov.r32.m32" and first.srcs[0] == Mem("rdi", SPEC.rounds_offset, bits=32)
    targets = [it.target for it in fn.entry if isinstance(it, Branch)]
    heads = [p.items[0] for p in fn.paths]
    assert all(isinstance(h, Label) for h in heads)
    assert targets == [h.name for h in heads], "entry dispatches 10, 12, then 14 by fallthrough jmp"
    assert [it.cond for it in fn.entry if isinstance(it, Branch)] == ["e", "e", "jmp"]
    assert [it.imm for it in fn.entry if isinstance(it, Insn) and it.op == "cmp.r32.imm"] == [10, 12]
    for p in fn.paths:
        assert KeyRef(p.nr) in [s for it in p.items if isinstance(it, Insn) for s in it.srcs]


@pytest.mark.parametrize("nr", (10, 12, 14))
def test_key_paths_dispatch_on_the_stored_round_count(nr: int) -> None:
    """Run the dispatch: each round count reaches its own path (and only it)."""
    spec = KernelSpec(("ecb",), "avx", 128, 1)
    b = FunctionBuilder(spec, "ecb_encrypt", ("key", "out"))
    b.key_paths("key", lambda n: (b.s("mov.m32.imm", Mem("rsi", 0, bits=32), imm=n), b.s("ret")))
    m = Machine(spec)
    sched, out = m.alloc(spec.key_bytes), m.alloc(4)
    m.write(sched + spec.rounds_offset, nr.to_bytes(4, "little"))
    call(m, b.fn, sched, out)
    assert int.from_bytes(m.read(out, 4), "little") == nr


# ---------------------------------------------------------------- labels

def test_label_names_are_unique_and_local() -> None:
    b = builder()
    names = [b.label_name("loop") for _ in range(5)] + [b.label_name("done")]
    assert len(set(names)) == len(names)
    assert all(n.startswith(".L") and SPEC.prefix in n and "ecb_encrypt" in n for n in names)


@pytest.mark.parametrize("isa,width", ISA_WIDTHS)
def test_every_label_in_a_file_is_defined_once_and_every_branch_resolves(isa: str, width: int) -> None:
    spec = KernelSpec(("ecb", "ctr32", "cbc"), isa, width, 4)
    defined: list[str] = []
    for fn in build_functions(spec):
        items = all_items(fn)
        mine = [it.name for it in items if isinstance(it, Label)]
        defined += mine
        for it in items:
            if isinstance(it, Branch):
                assert it.target in mine, f"{fn.name}: branch to {it.target} outside the function"
        assert all(n.startswith(f".L{spec.prefix}_{fn.name}_") for n in mine)
    assert len(defined) == len(set(defined))


# ---------------------------------------------------------------- kernels built with the DSL

@pytest.mark.parametrize("depth", (1, 3))
def test_kernel_group_structure(depth: int) -> None:
    spec = KernelSpec(("ecb", "ctr32", "cbc"), "avx512", 256, depth)

    def blocks(name: str) -> list[GroupBlock]:
        fn = build_function(spec, name)
        return [it for p in fn.paths for it in p.items if isinstance(it, GroupBlock)]

    ecb = blocks("ecb_encrypt")
    assert max(len(g.streams) for g in ecb) == depth
    assert all(not any(g.finals) for g in ecb), "ECB groups have no closing ops"
    ctr = blocks("ctr32_encrypt")
    assert all(all(f and f[-1].op == "vstore" for f in g.finals) for g in ctr)
    assert all(any(i.op == "aesenclast" for i in f) for g in ctr for f in g.finals)
    assert all(g.final_order == "descending" for g in blocks("cbc_decrypt"))
    # three key paths per data function, one per round count, each with round keys up to nr
    for name in ("ecb_encrypt", "ecb_decrypt", "ctr32_encrypt", "cbc_encrypt", "cbc_decrypt"):
        fn = build_function(spec, name)
        assert [p.nr for p in fn.paths] == [10, 12, 14]
        for p in fn.paths:
            keys = {s.index for it in walk(p.items) if isinstance(it, Insn) for s in it.srcs
                    if isinstance(s, KeyRef)}
            assert keys == set(range(p.nr + 1)), (name, p.nr)
