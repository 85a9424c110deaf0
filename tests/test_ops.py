"""The op table (aesgen.ops): every op the kernels and the passes write has one entry, and
the entry agrees with the instructions built, with iced-x86's own tables and with the
typed marks the later stages find.

Expected operand kinds, mnemonics and semantics come from iced-x86's OpCodeInfo and the
Intel SDM, not from the table under test.
"""
from __future__ import annotations

import random
import re
from functools import lru_cache

import iced_x86 as ix
import pytest

from aesgen import semantics
from aesgen.ir import Const, Insn, KeyRef, Label, Mark, MarkKind, Mem, Phys, VReg
from aesgen.kernels import build_functions
from aesgen.lower import Lowerer
from aesgen.ops import OPS, PORTS, SCALAR, VECTOR, Tied, commutative, info, tied
from aesgen.pipeline import generate
from aesgen.regalloc import allocate_path
from aesgen.schedule import flatten
from aesgen.simulate import Interpreter, Machine
from aesgen.spec import MODES, KernelSpec

MNEMONIC = {v: k for k, v in vars(ix.Mnemonic).items() if not k.startswith("_") and isinstance(v, int)}
GPRS = {
    "r64": {"rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rbp", "rsp", *(f"r{n}" for n in range(8, 16))},
    "r32": {"eax", "ebx", "ecx", "edx", "esi", "edi", "ebp", "esp", *(f"r{n}d" for n in range(8, 16))},
    "r8": {"al", "bl", "cl", "dl", *(f"r{n}b" for n in range(8, 16))},
}
OPERAND_KIND = {v: k for k, v in vars(ix.OpCodeOperandKind).items() if not k.startswith("_") and isinstance(v, int)}
# A scalar name's operand kind -> the iced operand kinds (by prefix) a form may have there.
ICED_KINDS = {"r64": ("R64_", "RAX"), "r32": ("R32_", "EAX"), "r8": ("R8_",), "m64": ("R64_OR_MEM", "MEM"),
              "m32": ("R32_OR_MEM", "MEM"), "m8": ("R8_OR_MEM", "MEM"), "m": ("MEM",), "imm": ("IMM",), "cl": ("CL",),
              "x": ("XMM_",), "k": ("K_",)}
SCALAR_NAME = re.compile(r"[a-z][a-z0-9]*(\.(r64|r32|r8|m64|m32|m8|m|imm|cl|x|k))*\Z")
# Configurations whose kernels, together, use every op the kernels write.
CONFIGS = [(isa, width, backend) for isa, width in (("sse", 128), ("avx", 128), ("avx2", 256), ("avx512", 512))
           for backend in ("aesni", "gfni", "bitsliced") if not (backend == "gfni" and isa == "sse")]


def _fits(kind: str, o) -> bool:
    kind = kind.rstrip("?")
    if kind in GPRS:
        return o in GPRS[kind]
    if kind in ("v", "x", "y"):
        return isinstance(o, (VReg, Phys))
    if kind in ("vm", "xm", "ym"):
        return isinstance(o, (VReg, Phys, KeyRef, Const, Mem))
    if kind[0] == "m":
        return isinstance(o, (Mem, Const))
    if kind == "k":
        return isinstance(o, str) and re.fullmatch(r"k[1-7]", o) is not None
    raise AssertionError(f"unknown operand kind {kind}")


def misfit(i: Insn) -> str | None:
    """Why `i` does not have the operands its op's entry lists (None: it does)."""
    kinds = [k for k in info(i.op).operands if k not in ("imm", "cl")]
    given = ([i.dst] if i.dst is not None else []) + list(i.srcs)
    required = [k for k in kinds if not k.endswith("?")]
    if not len(required) <= len(given) <= len(kinds):
        return f"{len(given)} operands, the entry lists {kinds}"
    bad = [(k, o) for k, o in zip(kinds, given) if not _fits(k, o)]
    if bad:
        return f"{bad[0][1]!r} is not a {bad[0][0]}"
    if ("imm" in info(i.op).operands) != (i.imm is not None):
        return f"immediate {i.imm!r}"
    return None


def _walk(items: list):
    for it in items:
        if hasattr(it, "streams"):
            for s in it.streams + it.finals + [it.riders]:
                yield from s
        else:
            yield it


@lru_cache(maxsize=None)
def kernels(isa: str, width: int, backend: str) -> tuple:
    """Every function of every mode that builds for the config: (spec, function)."""
    out = []
    # (gfni lowers the same AES-NI ops in every mode: two modes cover its ops, at a fraction of the time;
    # ghash the GF(2^128) products without clmul: ctmul on gfni (its GPR form on avx2; the matrices at
    # avx512/512, the default there), the bit-logical ones on bitsliced)
    modes = {"bitsliced": ("ecb", "ctr32", "cbc", "ghash"), "gfni": ("ecb", "ctr32", "ghash")}.get(backend, MODES)
    for mode in modes:
        gfmul = {("bitsliced", "ghash"): "bitsliced", ("gfni", "ghash"): "ctmul-gpr" if isa == "avx2" else ""}.get(
            (backend, mode), "")
        spec = KernelSpec((mode,), isa, width, 2 if backend != "bitsliced" else 1, backend=backend, gfmul=gfmul)
        try:
            out += [(spec, fn) for fn in build_functions(spec)]
        except Exception:  # a mode this ISA cannot build (said elsewhere, one line)
            continue
    return tuple(out)


# ---------------------------------------------------------------- the entries themselves

def test_scalar_ops_are_named_mnemonic_then_operand_kinds() -> None:
    assert len(OPS) == len(VECTOR) + len(SCALAR), "one entry per name"
    for op in OPS.values():
        if not op.vector:
            assert SCALAR_NAME.match(op.name), op.name
            assert op.operands == tuple(op.name.split(".")[1:])
        assert op.port in PORTS, op.name
        assert "." not in op.name or not op.vector


def test_scalar_forms_are_the_named_instruction() -> None:
    """Each form is an iced Code of the op's mnemonic whose operands have the kinds in the name."""
    for op in (o for o in OPS.values() if not o.vector):
        f = op.forms
        forms = [c for c in (f.legacy, f.vex, f.imm8, f.acc, f.by_one) if c]
        assert forms, op.name
        for name in forms:
            ci = ix.OpCodeInfo(getattr(ix.Code, name))
            assert MNEMONIC[ci.mnemonic].lower() in (op.mnemonic, "v" + op.mnemonic), (op.name, name)
            got = [OPERAND_KIND[ci.op_kind(k)] for k in range(ci.op_count)]
            assert len(got) == len(op.operands), (op.name, name, got)
            for kind, iced in zip(op.operands, got):
                assert iced.startswith(ICED_KINDS[kind]), (op.name, name, kind, iced)


def test_vector_entries_agree_with_what_lowering_and_encoding_need() -> None:
    for op in (o for o in OPS.values() if o.vector):
        f = op.forms
        if f.legacy and op.tied is Tied.LEGACY:  # the legacy form has one register operand fewer
            explicit = ix.OpCodeInfo(getattr(ix.Code, f.legacy.format(R="XMM", W=128))).op_count
            assert explicit == len(op.operands) - 1, (op.name, f.legacy)
        elif f.legacy and op.name != "vzero":
            explicit = ix.OpCodeInfo(getattr(ix.Code, f.legacy.format(R="XMM", W=128))).op_count
            assert explicit == len(op.operands), (op.name, f.legacy)
        if op.tied is Tied.ALWAYS:  # every form overwrites its first source: one operand fewer
            for form in (x for x in (f.legacy, f.vex, f.evex) if x):
                n = ix.OpCodeInfo(getattr(ix.Code, form.format(R="ZMM", W=512))).op_count
                assert n == len(op.operands) - 1, (op.name, form)
        if op.memory == "write":
            assert op.operands[0] == "m" and op.port == "store", op.name
        if op.memory == "read":
            assert op.operands[1] == "m" and op.port == "load", op.name
        if op.commutative:
            assert op.semantics is not None and op.operands[1:] == ("v", "vm"), op.name


def test_commutative_entries_commute_in_their_semantics() -> None:
    rng = random.Random(3)
    for op in (o for o in OPS.values() if o.commutative or o.commutative_imm):
        lane = op.semantics.lane  # type: ignore[union-attr]
        for _ in range(50):
            a, b, c = (rng.getrandbits(128) for _ in range(3))
            if op.commutative:
                assert lane(a, b, None) == lane(b, a, None), op.name
            for imm in op.commutative_imm:
                assert lane(a, b, c, imm) == lane(c, a, b, imm) == lane(b, c, a, imm), op.name
                assert commutative(Insn(op.name, None, (), imm=imm))
    assert not commutative(Insn("ternlog", None, (), imm=0xE8)), "the majority function is not symmetric that way"


def test_scalar_semantics_the_table_added_follow_the_sdm() -> None:
    """xor.r32.m32, xor.r32.imm, ror.r32.imm, por and pandn had no simulator meaning before the table."""
    m = Machine(KernelSpec(("ecb",), "avx", 128, 1))
    it = Interpreter.__new__(Interpreter)
    it.m = m
    addr = m.alloc((0x0F0F0F0F).to_bytes(4, "little"))
    m.put("rbx", 0x11223344_FFFF0000)
    m.put("rdi", addr)
    OPS["xor.r32.m32"].semantics(it, Insn("xor.r32.m32", "ebx", (Mem("rdi", 0, bits=32),)))
    assert m.get("rbx") == 0xF0F00F0F, "a 32-bit result zero-extends"
    OPS["xor.r32.imm"].semantics(it, Insn("xor.r32.imm", "ebx", imm=0xFF))
    assert m.get("ebx") == 0xF0F00FF0
    OPS["ror.r32.imm"].semantics(it, Insn("ror.r32.imm", "ebx", imm=8))
    assert m.get("ebx") == 0xF0F0F00F
    a, b = 0x0123456789ABCDEF_FEDCBA9876543210, 0xFFFF0000FFFF0000_00FF00FF00FF00FF
    assert semantics.por(a, b, None) == a | b
    assert semantics.pandn(a, b, None) == ~a & b & (1 << 128) - 1


# ---------------------------------------------------------------- against what the kernels build

@pytest.mark.parametrize("isa,width,backend", CONFIGS)
def test_every_instruction_built_has_the_operands_its_entry_lists(isa: str, width: int, backend: str) -> None:
    for spec, fn in kernels(isa, width, backend):
        for it in _walk(fn.entry + [x for p in fn.paths for x in p.items]):
            if isinstance(it, Insn):
                assert misfit(it) is None, f"{fn.name}: {it.op} {misfit(it)}"
                if it.op != "ret" and backend != "bitsliced":
                    assert info(it.op).semantics is not None, f"{fn.name}: {it.op} cannot be simulated"


@pytest.mark.parametrize("isa,width,backend", CONFIGS)
def test_lowered_and_allocated_instructions_fit_their_entries(isa: str, width: int, backend: str) -> None:
    for spec, fn in kernels(isa, width, backend):
        lower = Lowerer(spec, fn.width)
        for path in fn.paths:
            items = flatten(lower.items(path.items))
            for it in items:
                if isinstance(it, Insn):
                    assert misfit(it) is None, f"{fn.name}: lowered {it.op} {misfit(it)}"
            keys = path.schedule
            try:
                alloc = allocate_path(items, nregs=32 if isa == "avx512" else 16, legacy=isa == "sse",
                                      key_base=keys.base if keys else fn.key_base,
                                      key_stride=keys.stride if keys else spec.key_stride, width=fn.width, what=fn.name)
            except Exception:  # the spread schedule does not fit: the pipeline rebuilds it compact
                continue
            for it in alloc.insns:
                if isinstance(it, Insn):
                    assert misfit(it) is None, f"{fn.name}: allocated {it.op} {misfit(it)}"
                    if tied(it.op, legacy=isa == "sse"):
                        assert it.srcs[0].num == it.dst.num, f"{fn.name}: {it.op} not tied"


def test_every_op_in_the_table_is_used_or_said_why() -> None:
    used: set[str] = set()
    for config in CONFIGS:
        for spec, fn in kernels(*config):
            lower = Lowerer(spec, fn.width)
            for items in [fn.entry] + [p.items for p in fn.paths]:
                used |= {it.op for it in _walk(items) if isinstance(it, Insn)}
                used |= {it.op for it in flatten(lower.items(items)) if isinstance(it, Insn)}
    # Added by the pipeline (endbr64) or win64's wrapper (push/pop, its moves); the Aoki table
    # doubling (movmskpd, only with --allow-table-lookups); or for circuits the shipped ones do not
    # need (docs/architecture.md: por, pandn).
    unused = set(OPS) - used - {"endbr64", "push.r64", "pop.r64", "mov.r64.m64", "movmskpd.r32.x", "por", "pandn"}
    assert not unused, f"ops nothing writes: {sorted(unused)}"


# ---------------------------------------------------------------- typed marks

def test_declassify_marks_are_typed_items_not_labels() -> None:
    spec = KernelSpec(("gcm", "cbc-multi"), "avx512", 512, 2)
    marks = []
    for fn in build_functions(spec):
        items = list(_walk(fn.entry + [x for p in fn.paths for x in p.items]))
        assert not any(isinstance(it, Label) and "ct_declassify" in it.name for it in items), fn.name
        marks += [(fn.name, it) for it in items if isinstance(it, Mark)]
    assert {name for name, _ in marks} >= {"gcm_decrypt", "cbc_encrypt_multi"}
    assert all(m.kind is MarkKind.DECLASSIFY and "_ct_declassify" in m.symbol for _, m in marks)
    assert {m.values_live_across for name, m in marks if name == "cbc_encrypt_multi"} == {True}
    assert {m.values_live_across for name, m in marks if name == "gcm_decrypt"} == {False}
    asm = generate(spec).asm
    for _, m in marks:
        assert f"\n{m.symbol}:\n" in asm, "emitted as the local symbol the static check reads"


def test_a_pass_through_mark_keeps_values_live_and_any_other_ends_the_region() -> None:
    x, y = VReg(1, "x"), VReg(2, "y")

    def items(mark: Mark) -> list:
        return [Insn("vload", x, (Mem("rsi", 0),)), mark, Insn("vxor", y, (x, x)), Insn("vstore", Mem("rdx", 0), (y,))]

    live = Mark(MarkKind.DECLASSIFY, "p_ct_declassify_caller_pointer_1", values_live_across=True)
    out = allocate_path(items(live), nregs=16, legacy=False, key_base="rdi", key_stride=16, width=128, what="t")
    assert live in out.insns
    with pytest.raises(Exception, match="crosses a label"):
        allocate_path(items(Mark(MarkKind.DECLASSIFY, "p_ct_declassify_verdict_1")), nregs=16, legacy=False,
                      key_base="rdi", key_stride=16, width=128, what="t")
