"""OCB3 (RFC 7253) authenticated encryption in the DSL.

    Offset_i = Offset_{i-1} ^ L_ntz(i),  C_i = Offset_i ^ E(P_i ^ Offset_i),  Checksum = XOR of P_i
    partial P_*: Pad = E(Offset_m ^ L_*), C_* = P_* ^ Pad, Checksum ^= P_* || 1 || 0...
    Tag = E(Checksum ^ Offset ^ L_$) ^ HASH(A),  HASH: the same offsets from 0, summing E(A_i ^ Offset_i)

The key (P_OCB_KEY_BYTES, spec.ocb_* offsets): the encryption schedule, the decryption schedule,
L_*, L_$, L_0..L_63, then two tables for batches of B = depth x lanes blocks (B a power of two):
  T_j = L_ntz(1) ^ ... ^ L_ntz(j) (T_0 = 0; lanes - 1 zero entries after T_{B-1} for unaligned loads)
  Q_k = T_{B-1} ^ L_k.
A batch covers blocks s+1 .. s+B with s a multiple of B: ntz(s + j) = ntz(j) for 0 < j < B, so
Offset_{s+j} = Offset_s ^ T_j, and only its last block depends on the (public) block index:
Offset_{s+B} = Offset_s ^ Q_ntz(s+B), the next batch's base. BASE holds Offset_s in every lane,
so each vector's offsets are BASE ^ (T loaded at its position; the last vector's top lane Q),
folded into round key 0 and the last round key. The step to the next base (a load, an XOR)
rides among the current batch's rounds. The blocks after the last whole batch (fewer than B)
are at positions 1.. of that base: they go one vector at a time with T loaded at their position,
the last few through an AVX-512 mask or, on AVX2, one xmm block. T_1 starts a cache line, so
a batch's vector loads of T do not split lines.

The nonce block (RFC 7253 4.2) is built in GPRs: the noncelen bytes shifted in one at a time
behind a 1 bit, the tag length in the top 7 bits; Stretch and its shift by `bottom` use shld by
cl: no branch or address depends on the nonce.

Code: a path per round count for the nonce and HASH (encryption schedule), one for the text
(the decryption schedule when decrypting), one for the partial block and the tag; values cross
paths through the frame. Secret-carrying GPRs are GCM's data GPRs (HI, LO, EXTRA below); SHIFT
holds `bottom`, the nonce's last 6 bits (declassified: the nonce is public); the others hold
public pointers, lengths and block counts.
"""
from __future__ import annotations

from aesgen.dsl import BuildError, FunctionBuilder, key
from aesgen.ir import XOR3, Const, Mem, Schedule, VReg
from aesgen.spec import line_up

from .aes import encrypt_rounds, expand_schedule, finish, key_size_paths
from . import gcm
from .frame import aligned
from .gcm import (AAD_LEN, BLOCK, BYTE, BYTES_HI, BYTES_LO, LEN, OUT, SCRATCH, TAG, TAG_PTR, TAGLEN, Gcm,
                  gather_partial, load_qwords, read_overlapping)
from .gfdouble import double_be
from .modes import byte_mask, group_counts, qword_mask_for_blocks
from .regs import RESULT, arg, r32
from .registry import describes

def _q(m: Mem, disp: int = 0) -> Mem:
    return Mem(m.base, m.disp + disp, bits=64)


# Frame: GCM's (kernels/gcm.py: its partial-block and tag slots, the saved out, len and AAD
# length, so its tag check, byte copies and argument errors serve here too), then an OCB area of
# secrets. Everything secret is wiped on return; the saved arguments are public (reloaded
# rsp-relative, the static check sees they are clean).
AREA = line_up(gcm.FRAME)
OFFSET, SUM, CHECKSUM, PAD = (Mem("rsp", AREA + 16 * k) for k in range(4))
FRAME = aligned(AREA + 64)
OUT_SAVE, LEN_SAVE, AADLEN_SAVE = gcm.SAVED_ARGS["out"], gcm.SAVED_ARGS["len"], _q(AAD_LEN)
# Register roles. The arguments (ocb_decrypt's are ocb_encrypt's) are in their SysV registers at
# entry; the stack arguments move to GCM's OUT, LEN, TAG_PTR and TAGLEN (kernels/gcm.py), which
# its tag check, byte copies and argument errors use; SCRATCH (GCM's too) is public scratch: a
# byte index, a table's address, a copy of a count.
OKEY, NONCE, NONCE_LEN, AAD_ARG, AADLEN_ARG, IN = (
    arg("ocb_encrypt", a) for a in ("okey", "nonce", "noncelen", "aad", "aadlen", "in"))
AAD_IN = "rbx"  # the AAD (AAD_ARG's register becomes SHIFT)
SHIFT = "rcx"  # bottom, the nonce's last 6 bits: shld takes a variable count in cl only
# The nonce block, Ktop and Offset_0 as big-endian halves (HI: bits 127..64), and a third
# 64-bit value (a nonce byte, the tag length field, Stretch bits 128..191): secrets, so in
# GCM's data GPRs, which never address memory or decide a branch.
HI, LO, EXTRA = BYTES_LO, BYTES_HI, BYTE
AAD_REST = "r8"  # bytes of a partial AAD block (public)
# Registers of a pass over whole blocks: blocks left, the block index s of BASE (Offset_s), 16 x
# the blocks done past it, 16 x ntz of the batch's last block index (the step's table index).
LEFT, BATCH_START, POS, STEP = "rsi", "rdx", "r8", "r10"
MASK_LEN = "r11"  # the tail mask's qword count
# ocb_set_key, beside its arguments (b.reg): public pointers and a loop count.
DECRYPT_SCHEDULE = "r10"  # where the decryption schedule goes
L_AT, Q_AT, ITERATIONS = "r10", "r9", "r11"  # the next L_i (read or written), Q_k; the loop's count


def ntz(j: int) -> int:
    return (j & -j).bit_length() - 1


def keep_table() -> Const:
    """16 bytes from 16 - r: r bytes 0xff, then zeros (the first r bytes of a block)."""
    return Const("ocb_keep", b"\xff" * 16 + bytes(16))


def pad_table() -> Const:
    """16 bytes from 16 - r: 0x80 at byte r (the 1 bit that pads a partial block)."""
    return Const("ocb_pad", bytes(16) + b"\x80" + bytes(15))


def fold_lanes(b: FunctionBuilder, v: VReg, width: int) -> VReg:
    """The XOR of a vector's lanes, as an xmm value."""
    lanes = width // 128
    while lanes > 1:
        lanes //= 2
        half = b.v("upper_half", v, width=128 * lanes, comment="fold the lanes")
        v = b.v("vxor", v, half, width=128 * lanes)
    return v


# ----------------------------------------------------------------------------- key setup
@describes("ocb_set_key")
def ocb_set_key_function(b: FunctionBuilder) -> None:
    """P_ocb_set_key(user_key, bits, okey): both schedules, L_* = E(0), the doublings and tables."""
    spec = b.spec
    user, out = b.reg["user_key"], b.reg["okey"]
    tables = b.label_name("tables")

    def expand(bits: int, nr: int) -> None:
        expand_schedule(b, bits, user, out, decrypt=False)
        b.s("lea.r64.m", DECRYPT_SCHEDULE, Mem(out, spec.key_bytes), comment="the decryption schedule")
        expand_schedule(b, bits, user, DECRYPT_SCHEDULE, decrypt=True)
        with b.at_width(128):
            z = b.v("vzero")
            star = encrypt_rounds(b, z, nr, key_at=lambda i: Mem(out, i * spec.key_stride))
            b.store(Mem(out, spec.ocb_l_offset), star, comment="L_* = E(0^128)")
        b.branch("jmp", tables)

    key_size_paths(b, expand=expand, then=lambda nr: None)
    b.single_path(None, lambda: _tables(b, out), tables)


def _tables(b: FunctionBuilder, out: str) -> None:
    spec = b.spec
    method = "ternlog" if spec.isa == "avx512" else "krovetz"
    lo, B = spec.ocb_l_offset, spec.ocb_batch_blocks
    lanes = spec.width_for("ocb") // 128

    def l_at(k: int) -> Mem:
        return Mem(out, lo + 32 + 16 * k)

    def loop(body, count: int, stem: str) -> None:
        top = b.label_name(stem)
        b.s("mov.r64.imm", ITERATIONS, imm=count)
        b.label(top)
        body()
        b.s("sub.r64.imm", ITERATIONS, imm=1)
        b.branch("ne", top)

    with b.at_width(128):
        cur = b.pinned("L")
        b.v("vload", Mem(out, lo), dst=cur)
        b.assign(cur, double_be(b, cur, method, 128))
        b.store(Mem(out, lo + 16), cur, comment="L_$ = double(L_*)")
        b.s("lea.r64.m", L_AT, l_at(0))

        def next_l() -> None:
            b.assign(cur, double_be(b, cur, method, 128))
            b.store(Mem(L_AT, 0), cur, comment="L_i = double(L_{i-1})")
            b.s("add.r64.imm", L_AT, imm=16)

        loop(next_l, 64, "l_")
        t = b.v("vzero")
        b.store(Mem(out, spec.ocb_table_offset), t, comment="T_0 = 0")
        for j in range(1, B):
            t = b.v("vxor", t, l_at(ntz(j)), comment=f"T_{j} = T_{j - 1} ^ L_{ntz(j)}")
            b.store(Mem(out, spec.ocb_table_offset + 16 * j), t)
        last = b.pinned("T_LAST")
        b.assign(last, t)
        zero = b.v("vzero")
        for j in range(B, B + lanes - 1):
            b.store(Mem(out, spec.ocb_table_offset + 16 * j), zero, comment="padding for unaligned loads")
        b.s("lea.r64.m", L_AT, l_at(0))
        b.s("lea.r64.m", Q_AT, Mem(out, spec.ocb_step_offset))

        def next_q() -> None:
            b.store(Mem(Q_AT, 0), b.v("vxor", last, Mem(L_AT, 0)), comment="Q_k = T_{B-1} ^ L_k")
            b.s("add.r64.imm", L_AT, imm=16)
            b.s("add.r64.imm", Q_AT, imm=16)

        loop(next_q, 64, "q_")
    b.s("xor.r32.r32", r32(RESULT), r32(RESULT))
    finish(b)


# ----------------------------------------------------------------------------- passes over whole blocks
class OffsetPass:
    """HASH (kind "hash": the sum of enciphered blocks) or the text ("encrypt"/"decrypt": out
    and the checksum) over LEFT whole blocks at src, with OCB offsets from `start` (a frame slot;
    None: zero). Leaves src/dst past the blocks, the last block's offset in OFFSET-like `offset_to`
    and the folded sum/checksum in `acc_to`.

    A batch covers blocks s+1 .. s+B (s a multiple of B, BASE = Offset_s): block s+j has offset
    BASE ^ T_j for j < B, and the last, s+B, Offset_{s+B} = BASE ^ Q_ntz(s+B), which is also the
    next batch's BASE. So the last vector's offsets are T's with Q in the top lane (one load and
    one lane insert a batch), the step to the next BASE rides among the rounds, and the blocks
    after the last whole batch (fewer than B) are at positions 1.. of the BASE the loop left: no
    head before the batches and no step after them, so a message of whole batches (256 B at
    B = 16) is whole batches only."""

    def __init__(self, b: FunctionBuilder, nr: int, kind: str, src: str, dst: str | None) -> None:
        self.b, self.nr, self.kind, self.src, self.dst = b, nr, kind, src, dst
        self.okey = b.fn.key_base or OKEY
        self.L, self.B = b.lanes, b.spec.ocb_batch_blocks
        self.table = b.spec.ocb_table_offset + 16  # T_1: position p's offset is T_p at table + 16(p - 1)

    def run(self, start: Mem | None, offset_to: Mem, acc_to: Mem) -> None:
        b, L, B, D = self.b, self.L, self.B, self.b.depth
        self.base = b.pinned("OFFSET_BASE")
        self.whiten = b.pinned("OFFSET_K0")
        self.last = b.pinned("OFFSET_KN") if self.kind != "hash" else None
        self.acc = b.pinned("SUM" if self.kind == "hash" else "CHECKSUM")
        if start is None:
            b.v("vzero", dst=self.base)
        else:  # two 8-byte loads, as offset_zero stored it: a 16-byte load would wait for the stores
            offset = load_qwords(b, start)
            if L > 1:
                b.v("widen", offset, dst=self.base, comment="Offset_0 in every lane")
            else:
                b.assign(self.base, offset, comment="Offset_0")
        b.v("vzero", dst=self.acc)
        self.rekey()
        b.s("xor.r32.r32", r32(POS), r32(POS), comment="16 x the blocks done past BASE's block")
        b.s("xor.r32.r32", r32(BATCH_START), r32(BATCH_START), comment="BATCH_START: BASE's block index s")
        top, tail = b.label_name(f"batch{B}_"), b.label_name("batches_done")
        b.label(top)
        b.s("cmp.r64.imm", LEFT, imm=B)
        b.branch("b", tail)
        b.s("add.r64.imm", BATCH_START, imm=B)
        b.s("bsf.r64.r64", STEP, BATCH_START, comment="ntz of the batch's last block index")
        b.s("shl.r64.imm", STEP, imm=4)
        top_lane = self.last_offsets()

        def vector(j: int) -> None:
            delta = top_lane if j == D - 1 else Mem(self.okey, self.table + 16 * L * j)
            self.vector(Mem(self.src, 16 * L * j), delta, Mem(self.dst, 16 * L * j) if self.dst else None)

        # The step to the next batch rides among the rounds (riders never touch the registers the
        # groups read): its load -> xor chain would otherwise stall the next batch's start.
        b.groups(D, vector, comment=f"{D} vector(s) of {L} block(s)", riders=self.next_base)
        self.rekey()
        self.advance(16 * B)
        b.s("sub.r64.imm", LEFT, imm=B)
        b.branch("jmp", top)
        b.label(tail)
        self.some_blocks(LEFT)
        width = b.width
        with b.at_width(128):
            off = b.v("vxor", self.base, Mem(self.okey, self.table - 16, index=POS),
                      comment="the last block's offset")
            b.store(offset_to, off)
            b.store(acc_to, fold_lanes(b, self.acc, width))

    def last_offsets(self) -> VReg:
        """The batch's last vector of offset deltas: T_(B-L+1) .. T_(B-1), then Q_ntz(s+B) in the
        top lane (the whole vector with one lane)."""
        b, L, B = self.b, self.L, self.B
        q = Mem(self.okey, self.b.spec.ocb_step_offset, index=STEP)
        if L == 1:
            return b.v("vload", q, comment="Q_ntz: the last block's offset delta")
        t = b.v("vload", Mem(self.okey, self.table + 16 * (B - L)), comment="T of the last vector")
        return b.v("insert_lane", t, q, imm=L - 1, comment="Q_ntz in the top lane: the last block")

    def rekey(self) -> None:
        """Round key 0 and the last round key with the batch's base offset folded in."""
        b = self.b
        b.v("vxor", self.base, key(0), dst=self.whiten, comment="Offset_s ^ round key 0")
        if self.last is not None:
            b.v("vxor", self.base, key(self.nr), dst=self.last, comment="Offset_s ^ last round key")

    def next_base(self) -> None:
        """BASE = Offset_{s+B} = Offset_s ^ Q_ntz(s+B) (STEP: 16 ntz, of the public block index)."""
        b = self.b
        q = b.v("vload_bcast", Mem(self.okey, b.spec.ocb_step_offset, index=STEP), comment="Q_ntz")
        b.v("vxor", self.base, q, dst=self.base, comment="Offset of the batch's last block")

    def advance(self, nbytes: int | str) -> None:
        b = self.b
        for p in (self.src, self.dst):
            if p:
                if isinstance(nbytes, int):
                    b.s("add.r64.imm", p, imm=nbytes)
                else:
                    b.s("add.r64.r64", p, nbytes)

    def some_blocks(self, count: str) -> None:
        """count (< B) blocks from position POS/16 + 1: whole vectors in interleaved groups of
        D/2, D/4, .. 1 (modes.group_counts; fewer than D vectors: each at most once), then
        the rest."""
        b, L = self.b, self.L
        out = b.label_name("some_done")

        def group(g: int, width: int | None = None, mask: str | None = None) -> None:
            def one(j: int) -> None:
                delta = Mem(self.okey, self.table + 16 * L * j, index=POS)
                self.vector(Mem(self.src, 16 * L * j), delta, Mem(self.dst, 16 * L * j) if self.dst else None,
                            width=width, mask=mask)
            b.groups(g, one, comment=f"{g} vector(s) at their batch positions")

        for g in group_counts(b.depth)[1:]:  # depth 1: fewer than one vector, none
            fewer = b.label_name(f"fewer_than_{g}")
            b.s("cmp.r64.imm", count, imm=g * L)
            b.branch("b", fewer)
            group(g)
            self.advance(16 * L * g)
            b.s("add.r64.imm", POS, imm=16 * L * g)
            b.s("sub.r64.imm", count, imm=g * L)
            b.label(fewer)
        if L > 1:
            b.s("test.r64.r64", count, count)
            b.branch("e", out)
            if b.spec.isa == "avx512":
                group(1, mask=qword_mask_for_blocks(b, count, scratch=MASK_LEN))
            else:  # VAES ymm without AVX-512: one block is left
                group(1, width=128)
            b.s("shl.r64.imm", count, imm=4)
            self.advance(count)
            b.s("add.r64.r64", POS, count)
        b.label(out)

    def vector(self, at: Mem, delta: Mem, to: Mem | None, width: int | None = None,
               mask: str | None = None) -> None:
        """One vector of blocks: offsets BASE ^ delta; rounds; store or sum; into the accumulator."""
        b, nr = self.b, self.nr
        decrypt = self.kind == "decrypt"
        x = b.v("vload", at, width=width, mask=mask, role="blk")
        if self.kind == "encrypt":  # the plaintext into the checksum while it is in a register
            b.v("vxor", self.acc, x, dst=self.acc)
        if b.spec.isa == "avx512":
            y = b.v("ternlog", x, self.whiten, delta, imm=XOR3, width=width, comment="block ^ offset ^ round key 0")
        else:
            y = b.v("vxor", b.v("vxor", x, self.whiten, width=width), delta, width=width,
                    comment="block ^ offset ^ round key 0")
        op = "aesdec" if decrypt else "aesenc"
        for r in range(1, nr):
            y = b.v(op, y, key(r), width=width, comment=f"round {r}")
        b.final()
        if self.kind == "hash":
            y = b.v("aesenclast", y, key(nr), width=width, comment=f"round {nr} (last)")
            part = y
        else:
            k = b.v("vxor", self.last, delta, width=width, comment="offset folded into the last round key")
            y = b.v("aesdeclast" if decrypt else "aesenclast", y, k, width=width, comment=f"round {nr} (last)")
            part = y if decrypt else None  # decrypting, the plaintext is the output
        if part is not None:
            if mask:
                part = b.v("vmov", y, mask=mask, comment="only the blocks that exist")
            # an xmm block's upper lanes are zero (VEX/EVEX writes): it can join a wide accumulator
            b.v("vxor", self.acc, part, dst=self.acc)
        if to is not None:
            b.store(to, y, width=width, mask=mask)


# ----------------------------------------------------------------------------- encrypt / decrypt
class Ocb(Gcm):
    def __init__(self, b: FunctionBuilder, decrypt: bool) -> None:
        super().__init__(b, decrypt)
        self.frame = FRAME
        B = b.spec.ocb_batch_blocks
        if B & (B - 1):
            raise BuildError(f"OCB needs a power-of-two batch (depth x lanes = {B}): its batches "
                             "align with the offsets' ntz pattern; use depth 1, 2, 4, 8 or 16")
        self.text_label = {nr: b.key_section_label("text", nr) for nr in (10, 12, 14)}
        self.tag_label = {nr: b.key_section_label("tag", nr) for nr in (10, 12, 14)}
        self.bad, self.exit = b.label_name("bad_args"), b.label_name("exit")

    def function(self) -> None:
        b, spec = self.b, self.spec
        self.entry()
        b.key_paths("okey", self.prelude, scratch=r32(SCRATCH))  # EXTRA (rax) carries data bytes
        text_keys = Schedule(OKEY, spec.key_bytes, spec.key_stride, aligned=True) if self.decrypt else None
        for nr in (10, 12, 14):
            b.single_path(nr, lambda nr=nr: self.text(nr), self.text_label[nr], text_keys)
        for nr in (10, 12, 14):
            b.single_path(nr, lambda nr=nr: self.tag(nr), self.tag_label[nr])
        b.single_path(None, self.epilogue)

    def entry(self) -> None:
        b = self.b
        self.take_stack_args()
        b.s("mov.r64.r64", AAD_IN, AAD_ARG, comment="aad (rcx becomes the Stretch shift count)")
        for slot, reg in ((OUT_SAVE, OUT), (LEN_SAVE, LEN), (AADLEN_SAVE, AADLEN_ARG)):
            b.s("mov.m64.r64", slot, reg)
        b.s("cmp.r64.imm", NONCE_LEN, imm=1, comment="nonce length 1..15")
        b.branch("b", self.bad)
        b.s("cmp.r64.imm", NONCE_LEN, imm=15)
        b.branch("a", self.bad)
        self.refuse_tag_length(1)

    # -- path 1: the nonce and HASH(A) ------------------------------------------
    def prelude(self, nr: int) -> None:
        b = self.b
        self.offset_zero(nr)
        b.s("mov.r64.m64", LEFT, AADLEN_SAVE)
        b.s("shr.r64.imm", LEFT, imm=4, comment="whole AAD blocks")
        OffsetPass(b, nr, "hash", AAD_IN, None).run(None, PAD, SUM)
        skip = b.label_name("aad_whole")
        b.s("mov.r64.m64", AAD_REST, AADLEN_SAVE)
        b.s("and.r64.imm", AAD_REST, imm=15, comment="bytes of a partial AAD block")
        b.branch("e", skip)
        with b.at_width(128):
            # first: no value may live across its gather loop
            a = self.padded(self.load_partial(AAD_IN, AAD_REST), AAD_REST)
            off = b.v("vxor", b.v("vload", PAD), self.l_star(), comment="Offset_* = Offset_m ^ L_*")
            s = encrypt_rounds(b, b.v("vxor", a, off), nr)
            b.store(SUM, b.v("vxor", s, b.v("vload", SUM)), comment="Sum ^= E(A_* || 1 0.. ^ Offset_*)")
        b.label(skip)
        b.branch("jmp", self.text_label[nr])

    def offset_zero(self, nr: int) -> None:
        """OFFSET = Offset_0 from the nonce (NONCE, NONCE_LEN bytes) and the tag length (TAGLEN)."""
        b = self.b
        self.nonce_bits()
        b.s("mov.r64.r64", EXTRA, TAGLEN)
        b.s("and.r64.imm", EXTRA, imm=15)
        b.s("shl.r64.imm", EXTRA, imm=60, comment="TAGLEN mod 128 (bits) in the top 7 bits")
        b.s("or.r64.r64", HI, EXTRA)
        # bottom comes from the nonce alone (public): declassified, it is a clean shift count
        b.declassify_mark("nonce_bits")
        b.s("mov.r64.r64", SHIFT, LO)
        b.s("and.r64.imm", SHIFT, imm=63, comment="bottom: the last 6 bits")
        b.s("and.r64.imm", LO, imm=-64, comment="Top: the rest")
        self.store_be(BLOCK, HI, LO)
        with b.at_width(128):
            b.store(BLOCK, encrypt_rounds(b, load_qwords(b, BLOCK), nr), comment="Ktop = E(Top)")
        b.s("mov.r64.m64", HI, _q(BLOCK))
        b.s("mov.r64.m64", LO, _q(BLOCK, 8))
        b.s("bswap.r64", HI)
        b.s("bswap.r64", LO)
        b.s("mov.r64.r64", EXTRA, HI)
        b.s("shld.r64.r64.imm", EXTRA, LO, imm=8, comment="Ktop bits 8..71")
        b.s("xor.r64.r64", EXTRA, HI, comment="Stretch bits 128..191 = Ktop[0..63] ^ Ktop[8..71]")
        b.s("shld.r64.r64.cl", HI, LO, comment="Offset_0 = Stretch bits bottom..bottom+127")
        b.s("shld.r64.r64.cl", LO, EXTRA)
        self.store_be(OFFSET, HI, LO)

    def nonce_bits(self) -> None:
        """HI:LO = 1 || N, big-endian: the NONCE_LEN (1..15, public) nonce bytes with the 1 bit
        above them; no byte past them read. With BMI2, 4..15 bytes are two overlapping loads
        (read_overlapping) and the 1 bit goes in after; fewer, or without BMI2, byte by byte
        behind it. The byte loop's shld chain took about 40 cycles for a 12-byte nonce: 19% of
        a 256-byte OCB encryption here."""
        b = self.b
        done, bytewise = b.label_name("nonce_read"), b.label_name("nonce_byte")
        if "bmi2" in b.spec.features:
            loaded, low = b.label_name("nonce_loaded"), b.label_name("nonce_marker_low")
            read_overlapping(b, NONCE, NONCE_LEN, SCRATCH, LO, HI, EXTRA, loaded, bytewise, big_endian=True)
            b.label(loaded)
            b.s("mov.r64.r64", SCRATCH, NONCE_LEN)
            b.s("shl.r64.imm", SCRATCH, imm=3)
            b.s("mov.r32.imm", r32(EXTRA), imm=1)
            b.s("shlx.r64.r64.r64", EXTRA, EXTRA, SCRATCH, comment="the 1 bit before N: bit 8 len mod 64")
            b.s("cmp.r64.imm", NONCE_LEN, imm=8)
            b.branch("b", low)
            b.s("or.r64.r64", HI, EXTRA, comment="of bits 127..64")
            b.branch("jmp", done)
            b.label(low)
            b.s("or.r64.r64", LO, EXTRA)
            b.branch("jmp", done)
        b.label(bytewise)
        top = b.label_name("nonce_next")
        b.s("xor.r32.r32", r32(HI), r32(HI), comment="Nonce bits 127..64 (big-endian)")
        b.s("mov.r32.imm", r32(LO), imm=1, comment="bits 63..0: the 1 bit before N")
        b.s("xor.r32.r32", r32(SCRATCH), r32(SCRATCH))
        b.label(top)
        b.s("shld.r64.r64.imm", HI, LO, imm=8, comment="Nonce <<= 8 (128 bits)")
        b.s("shl.r64.imm", LO, imm=8)
        b.s("movzx.r32.m8", r32(EXTRA), Mem(NONCE, 0, index=SCRATCH, bits=8))
        b.s("or.r64.r64", LO, EXTRA, comment="next nonce byte")
        b.s("add.r64.imm", SCRATCH, imm=1)
        b.s("cmp.r64.r64", SCRATCH, NONCE_LEN)
        b.branch("b", top)
        b.label(done)

    def store_be(self, slot: Mem, hi: str, lo: str) -> None:
        """A 128-bit big-endian value held as two GPR halves, to a frame slot."""
        b = self.b
        for reg, off in ((hi, 0), (lo, 8)):
            b.s("bswap.r64", reg)
            b.s("mov.m64.r64", _q(slot, off), reg)

    def l_star(self) -> Mem:
        return Mem(OKEY, self.spec.ocb_l_offset)

    # -- partial blocks ---------------------------------------------------------
    def load_partial(self, src: str, count: str) -> VReg:
        """The count (1..15) bytes at src, zero-padded (xmm); no byte past them is read."""
        b = self.b
        if self.spec.isa == "avx512":
            return b.v("vload", Mem(src, 0), width=128, mask=byte_mask(b, count), mask_elem="b")
        b.s("mov.r64.r64", SCRATCH, count)
        gather_partial(b, src, SCRATCH, BLOCK)
        return load_qwords(b, BLOCK)

    def store_partial(self, dst: str, count: str, v: VReg) -> None:
        """The first count bytes of v to dst (the TAG slot is free until the tag)."""
        b = self.b
        if self.spec.isa == "avx512":
            b.store(Mem(dst, 0), v, width=128, mask=byte_mask(b, count), mask_elem="b")
            return
        b.store(TAG, v, width=128)
        self.copy_bytes_out(dst, count)

    def table_at(self, table: Const, count: str) -> Mem:
        """16 bytes of a 32-byte table from 16 - count."""
        b = self.b
        b.s("lea.r64.m", SCRATCH, table)
        b.s("sub.r64.r64", SCRATCH, count)
        return Mem(SCRATCH, 16)

    def padded(self, v: VReg, count: str) -> VReg:
        """v (zero past count bytes) || 1 0..: the 0x80 byte at count."""
        return self.b.v("vxor", v, self.table_at(pad_table(), count), width=128, comment="|| 1 0..")

    # -- path 2: the text ---------------------------------------------------------
    def text(self, nr: int) -> None:
        b = self.b
        b.s("mov.r64.r64", LEFT, LEN)
        b.s("shr.r64.imm", LEFT, imm=4, comment="whole blocks")
        OffsetPass(b, nr, "decrypt" if self.decrypt else "encrypt", IN, OUT).run(OFFSET, OFFSET, CHECKSUM)
        b.branch("jmp", self.tag_label[nr])

    # -- path 3: the partial block, the tag -----------------------------------------
    def tag(self, nr: int) -> None:
        b = self.b
        whole = b.label_name("text_whole")
        b.s("and.r64.imm", LEN, imm=15, comment="bytes of a partial block (public)")
        b.branch("e", whole)
        with b.at_width(128):
            x = self.load_partial(IN, LEN)  # first: no value may live across its gather loop
            off = b.v("vxor", b.v("vload", OFFSET), self.l_star(), comment="Offset_* = Offset_m ^ L_*")
            b.store(OFFSET, off)
            pad = encrypt_rounds(b, off, nr)
            y = b.v("vxor", x, pad, comment="text ^ Pad")
            if self.decrypt:
                y = b.v("pand", y, self.table_at(keep_table(), LEN), comment="the plaintext's bytes only")
            p = self.padded(y if self.decrypt else x, LEN)
            b.store(CHECKSUM, b.v("vxor", p, b.v("vload", CHECKSUM)), comment="Checksum ^= P_* || 1 0..")
            self.store_partial(OUT, LEN, y)
        b.label(whole)
        with b.at_width(128):
            t = b.v("vxor", b.v("vload", CHECKSUM), b.v("vload", OFFSET))
            t = b.v("vxor", t, Mem(OKEY, self.spec.ocb_l_offset + 16), comment="^ L_$")
            t = encrypt_rounds(b, t, nr)
            tag = b.v("vxor", t, b.v("vload", SUM), comment="Tag = E(Checksum ^ Offset ^ L_$) ^ HASH(A)")
            if self.decrypt or self.spec.isa != "avx512":
                b.store(TAG, tag)
            else:
                b.store(Mem(TAG_PTR, 0), tag, mask=byte_mask(b, TAGLEN), mask_elem="b", comment="taglen bytes")
        if self.decrypt:
            self._check_tag()
        else:
            if self.spec.isa != "avx512":
                self.tag_out()
            b.s("xor.r32.r32", r32(RESULT), r32(RESULT))
        self._wipe()
        b.branch("jmp", self.exit)

    def _wipe(self) -> None:
        b = self.b
        with b.at_width(128):
            z = b.v("vzero")
            for slot in (BLOCK, TAG, OFFSET, SUM, CHECKSUM, PAD):
                b.store(slot, z)

    def epilogue(self, label: bool = True) -> None:
        self.bad_args()
        super().epilogue(label)


@describes("ocb_encrypt", decrypt=False)
@describes("ocb_decrypt", decrypt=True)
def ocb_function(b: FunctionBuilder, decrypt: bool) -> None:
    Ocb(b, decrypt).function()
