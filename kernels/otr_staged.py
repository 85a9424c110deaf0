"""AES-OTR's whole chunks on 16-register ymm (avx2 with VAES): staged batches.

Each group's two Feistel rounds are 2 x nr dependent AES rounds, so the AES pipe needs many
groups in flight (8 at two vaesenc per cycle and latency 3-4), but a group that keeps its
offsets, its blocks or its outputs in registers leaves room for only 4 of them in 16. Here a
batch of g vector groups first goes through a straight-line stage that writes, per group, four
vectors to frame slots:

    X  = first blocks ^ first offset ^ round key 0    (the first round's whitened input)
    B  = second offset ^ round key 0                   (whitens the first round's output)
    K1 = second blocks ^ last round key                (the first round's last key)
    K2 = first blocks ^ last round key                 (the second round's last key)

(decrypting, the offsets swap: the first round takes L*_i), and the encrypting checksum of
the second blocks. Then the g groups run both rounds holding nothing but their AES state: the
state loads from X, the last rounds take K1 and K2 as memory operands, the first output's lanes
go straight to out (its blocks were read by the stage, so in == out is safe) before B
whitens it for the second round. The offsets come from the TweakStream as before, four
groups at a time (their registers are free during the stage). The slots are 32-byte
aligned: the batches drop rsp to it (docs/tuning.md: offsets from tables instead were
tried and measured slower encrypting).
"""
from __future__ import annotations

from aesgen.consts import bswap_mask
from aesgen.dsl import key
from aesgen.ir import Mem, VReg
from aesgen.spec import KernelSpec

from .frame import align32, unalign32
from .gfdouble import times_x_pow
from .modes import step, vector_loops

SLOTS = ("X", "B", "K1", "K2")
OFFSET_GROUPS = 4  # groups whose offsets are computed at once (2 x 4 + 1 vectors live)
# The batches drop rsp to 32-byte alignment (by 0 or 16), so the slots start 32 bytes on: above
# the frame's fixed slots either way.
LEAD = 32


def staged(spec: KernelSpec) -> bool:
    """Whether OTR's whole chunks run in staged batches: VAES on ymm with 16 registers (AES-NI).
    On xmm (--isa avx) the stage's slot traffic cost more than the deeper batches gained
    (measured 3% slower on a Sapphire Rapids-class VM), so xmm keeps the depth-4 groups."""
    return spec.isa == "avx2" and spec.width_for("otr") == 256 and spec.backend == "aesni"


def slot_bytes(depth: int, width: int) -> int:
    """Frame bytes the slots take, LEAD bytes on: a set for a batch of `depth` groups; with
    full batches a second set and their depth + 1 offset vectors."""
    vectors = len(SLOTS) * depth + (len(SLOTS) * depth + depth + 1 if full_batches(depth) else 0)
    return LEAD + vectors * width // 8


def full_batches(depth: int) -> bool:
    """Whether whole batches take FullBatches: when their offsets move on by whole bytes (x^(2D),
    2D a multiple of 8: a byte shift, 4 ops). At depth 6 (x^12: two qword shifts, a carry
    and 6 ops) it measured 51-56% of the ymm ceiling against 61% for the consecutive layout
    (family 6 model 207, 16 KiB); at depth 4 61-62% against 59-60%, at 8 62% against 60-62%,
    and llvm-mca-19 puts the depth-8 loop at 79% of the AES bound for alderlake, 66% for znver3,
    against 68% and 53% for the consecutive layout (the native choice here stays depth 6: at 1
    and 2 KiB depth 8 reads 39% and 48% against 44% and 53%)."""
    return depth > 1 and 2 * depth % 8 == 0


def sizes(depth: int) -> tuple[int, ...]:
    """Batch sizes, largest first: the depth, then halvings down to one group."""
    out = [depth]
    while out[-1] > 1:
        out.append(out[-1] // 2)
    return tuple(out)


class StagedChunks:
    """Whole chunks of an Otr (kernels/otr.py) in staged batches; slots at rsp + LEAD + `base`;
    `align`: a public scratch register unused while the batches run (it keeps rsp's drop)."""

    def __init__(self, otr, base: int, align: str) -> None:
        self.o, self.b, self.base, self.align = otr, otr.b, base + LEAD, align

    def slot(self, j: int, name: str) -> Mem:
        vb = self.b.width // 8
        return Mem("rsp", self.base + (len(SLOTS) * j + SLOTS.index(name)) * vb)

    def run(self, nr: int, offsets, total: VReg) -> None:
        o, b = self.o, self.b
        # 32-byte aligned: with rsp 16 mod 32 half the slot accesses split a cache line
        align32(b, self.align)
        rest = sizes(b.depth)
        if full_batches(b.depth):
            FullBatches(self).run(nr, offsets, total)
            rest = rest[1:]
        vector_loops(b, o.count, 32 * b.lanes, (o.inp, o.outp), lambda g: self.batch(nr, g, offsets, total),
                     stride=32 * b.lanes, sizes=rest)
        unalign32(b, self.align)

    def batch(self, nr: int, g: int, offsets, total: VReg) -> None:
        b = self.b
        for h in range(0, g, OFFSET_GROUPS):
            n = min(OFFSET_GROUPS, g - h)
            ofs = self.o.chunk_offsets(offsets.vectors(n), offsets.current)
            for j in range(n):
                self.stage(nr, h + j, ofs[j], total)
        b.groups(g, lambda j: self.rounds(nr, j, total), comment=f"{g} group(s) of {b.lanes} chunk(s), both rounds")

    def stage(self, nr: int, j: int, ofs: tuple[VReg, VReg], total: VReg) -> None:
        o1, o2 = (ofs[1], ofs[0]) if self.o.decrypt else ofs
        off = 32 * self.b.lanes * j
        self.fill(nr, self.slot, j, lambda p: self.o.dealt(off, p), o1, o2, total, folded=False)

    def fill(self, nr: int, slot, j: int, blocks, o1: VReg, o2: VReg, total: VReg, folded: bool) -> None:
        """Group j's four slots (`slot(j, name)`) from its blocks (`blocks(p)`: the first, p = 0,
        or second blocks) and the offsets of its two rounds; `folded`: they hold round key 0."""
        o, b = self.o, self.b
        first = blocks(0)
        x = b.v("vxor", first, o1, comment="round 1: block ^ offset ^ round key 0") if folded else \
            o.xor3(first, o1, key(0), comment="round 1: block ^ offset ^ round key 0")
        b.store(slot(j, "X"), x)
        b.store(slot(j, "K2"), o.last_key(nr, first))
        second = blocks(1)
        o.checksum_plain(total, second, None)
        b.store(slot(j, "K1"), b.v("vxor", second, key(nr), comment="second block folded into the last round key"))
        b.store(slot(j, "B"), o2 if folded else b.v("vxor", o2, key(0), comment="round 2's offset ^ round key 0"),
                comment="round 2's offset ^ round key 0" if folded else "")

    def rounds(self, nr: int, j: int, total: VReg, off: int | None = None, lane_step: int = 32,
               slot=None) -> None:
        """Group j's two Feistel rounds from its slots (`slot(j, name)`, default self.slot); its
        chunks' outputs at outp + `off` (default: the group's place in a batch of consecutive
        chunks), lane k `lane_step` k on."""
        o, b = self.o, self.b
        off = 32 * b.lanes * j if off is None else off
        slot = slot or self.slot
        x = o.middle_rounds(nr, b.v("vload", slot(j, "X"), role="blk"))
        y1 = b.v("aesenclast", x, slot(j, "K1"), comment=f"round {nr}: first output block")
        store_lanes(b, o.outp, off, y1, lane_step)
        x = o.middle_rounds(nr, b.v("vxor", y1, slot(j, "B"), comment="round 2: block ^ offset ^ round key 0"))
        b.final()
        y2 = b.v("aesenclast", x, slot(j, "K2"), comment=f"round {nr}: second output block")
        if o.decrypt:
            b.v("vxor", total, y2, dst=total, comment="checksum of even plaintext blocks")
        store_lanes(b, o.outp, off + 16, y2, lane_step)


class FullBatches:
    """The batches of 2 D chunks (D = depth groups) while whole ones are left, lanes holding
    chunks i and i + D (not i and i + 1), each batch's stage riding on the rounds of the batch
    before.

    Then group j's second offsets are L*_i = L_i ^ L_(i+1) = its offset vector XOR group j +
    1's, with no lane shuffle, and each of the D + 1 offset vectors [L_i, L_(i+D)] (byte-
    reversed, in frame slots) is the one of the batch before times x^(2D): a byte shift, the
    bytes shifted out carry-less times 0x87, an XOR (times_x_pow; 4 ops at depth 8), no chain
    between vectors. Round key 0 is folded into each offset once (A = L_i ^ K0, and
    B = A ^ L_(i+1) = L*_i ^ K0). Per group, beside its 20 AES rounds: 4.5 ops for its offset
    vector, its byte reversal, A, B, two lane inserts for the blocks, X, K1, K2, the checksum
    and the second round's whitening. The stage of batch t + 1 (its slots, set (t + 1) mod 2)
    is spread over batch t's rounds (GroupBlock riders): staged first and run after, the
    stage's ~150 ops had nothing to overlap with. Smaller batches, after these, take the
    consecutive layout; the stream of offsets picks up where these end."""

    def __init__(self, staged: StagedChunks) -> None:
        self.s, self.o, self.b = staged, staged.o, staged.b
        self.set_bytes = len(SLOTS) * self.b.depth * self.b.width // 8
        self.at = staged.base + 2 * self.set_bytes
        self.batch_bytes = 2 * self.b.depth * 32

    def offset(self, j: int) -> Mem:
        """Offset vector j: [L_(i+j), L_(i+j+D)] for the batch's first chunk i, byte-reversed."""
        return Mem("rsp", self.at + j * self.b.width // 8)

    def slots(self, k: int):
        """Slot set k's slot(j, name)."""
        def slot(j: int, name: str) -> Mem:
            return Mem("rsp", self.s.base + k * self.set_bytes + (len(SLOTS) * j + SLOTS.index(name)) * self.b.width // 8)
        return slot

    def run(self, nr: int, offsets, total: VReg) -> None:
        o, b, D, B = self.o, self.b, self.b.depth, self.batch_bytes
        skip, done = b.label_name("full_batches_done"), b.label_name("full_last_done")
        top, last = b.label_name("full_pair"), [b.label_name("full_last0_"), b.label_name("full_last1_")]
        b.s("cmp.r64.imm", o.count, imm=B, comment="a whole batch of chunks i and i + D?")
        b.branch("b", skip)
        cur = offsets.current  # [L_i, L_(i+1)] byte-reversed
        v0 = b.v("deal_lanes", cur, times_x_pow(b, cur, D), imm=0, role="ofs", comment=f"[L_i, L_(i+{D})]")
        b.store(self.offset(0), v0, comment="offset vector 0")
        for j in range(1, D + 1):
            b.store(self.offset(j), times_x_pow(b, v0, j), comment=f"offset vector {j}: [L_(i+{j}), L_(i+{j + D})]")
        self.stage_all(nr, 0, 0, total)
        b.label(top)
        for k in (0, 1):  # batch t's rounds from set k, batch t + 1's stage into the other
            b.s("cmp.r64.imm", o.count, imm=2 * B, comment="is the next batch whole too?")
            b.branch("b", last[k])
            self.rounds(nr, k, total, f"{D} group(s) of chunks i and i + {D}, both rounds; the next batch's stage rides",
                        riders=lambda k=k: self.stage_all(nr, 1 - k, B, total))
        b.branch("jmp", top)
        for k in (1, 0):
            b.label(last[k])
            self.rounds(nr, k, total, f"the last whole batch: {D} group(s), both rounds")
            if k:
                b.branch("jmp", done)
        b.label(done)
        first = b.v("vload", self.offset(0), role="ofs")
        b.assign(cur, b.v("insert_lane", first, self.offset(1), imm=1, comment="[L_i, L_(i+1)] for the chunks left"),
                 comment="the stream goes on from the next chunk")
        b.label(skip)

    def rounds(self, nr: int, k: int, total: VReg, comment: str, riders=None) -> None:
        """The batch in slot set k through both rounds (`riders`: the next batch's stage), then
        the pointers and the count a batch on."""
        b, o, D = self.b, self.o, self.b.depth
        b.groups(D, lambda j: self.s.rounds(nr, j, total, off=32 * j, lane_step=32 * D, slot=self.slots(k)),
                 comment=comment, riders=riders)
        step(b, o.count, 32 * b.lanes, (o.inp, o.outp), D, stride=32 * b.lanes)

    def stage_all(self, nr: int, k: int, at: int, total: VReg) -> None:
        """The batch at inp + `at` into slot set k: its offsets (the vectors move a batch on),
        its blocks folded into X, K1, K2, and the checksum."""
        b, D = self.b, self.b.depth
        swap = bswap_mask(b.lanes)
        a = None
        for j in range(D + 1):
            v = b.v("vload", self.offset(j), role="ofs")
            b.store(self.offset(j), times_x_pow(b, v, 2 * D), comment=f"offset vector {j}, a batch on")
            be = b.v("pshufb", v, swap, role="ofs", comment=f"L_i, L_(i+{D})")
            if a is not None:
                self.stage(nr, k, at, j - 1, a, be, total)
            a = b.v("vxor", be, key(0), role="ofs", comment="L_i ^ round key 0")

    def stage(self, nr: int, k: int, at: int, j: int, a: VReg, following: VReg, total: VReg) -> None:
        """Group j's slots (StagedChunks.stage's, for chunks j and j + D of the batch)."""
        bb = self.b.v("vxor", a, following, role="ofs", comment="L*_i ^ round key 0 = L_i ^ L_(i+1) ^ round key 0")
        o1, o2 = (bb, a) if self.o.decrypt else (a, bb)
        self.s.fill(nr, self.slots(k), j, lambda p: self.dealt(at, j, p), o1, o2, total, folded=True)

    def dealt(self, at: int, j: int, p: int) -> VReg:
        """The first (p = 0) or second (1) blocks of chunks j and j + D of the batch at inp + at."""
        b, D = self.b, self.b.depth
        with b.at_width(128):
            v = b.v("vload", Mem(self.o.inp, at + 32 * j + 16 * p), role="blk")
        return b.v("insert_lane", v, Mem(self.o.inp, at + 32 * (j + D) + 16 * p), imm=1, role="blk",
                   comment=f"{'first' if p == 0 else 'second'} blocks of chunks i and i + {D}")


def store_lanes(b, outp: str, off: int, v: VReg, lane_step: int = 32) -> None:
    """Lane k of v (chunk k of a group) to outp + off + `lane_step` k: no lane shuffle."""
    if b.lanes == 1:
        b.store(Mem(outp, off), v)
        return
    for k in range(b.lanes):
        b.store(Mem(outp, off + lane_step * k), v, op="vstore_lane", imm=k, comment=f"chunk {k}'s block")
