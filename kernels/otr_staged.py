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
whitens it for the second round.

Offsets. Short messages take them from the TweakStream, four groups at a time (their
registers are free during the stage). From TABLES_FROM batches on, whole batches read them
from FAR rotating tables of big-endian offsets, D vectors each (the D L chunks' L_i), with
one more block after the last table: a copy of the first table's first offset. A group's
L*_i = L_i ^ L_(i+1) is its vector XORed with the same table read 16 bytes on (a load, no
lane shuffle); so the stage takes t = L_i ^ round key 0, X = first blocks ^ t and B = t ^
L_(i+1) (decrypting, the other way round). A batch's rounds carry the table three batches
on: each vector of the one two on, times x^(D L) (gfdouble.times_x_bytes_be: five vector
ops, no byte reversal). Per vector of chunks the offsets then take 7 vector ops where the
stream's doubling, byte reversal and lane shuffles took 12; on the Sapphire Rapids-class
VM decrypting ran 8% faster at 16 KiB, encrypting the same (docs/tuning.md has what was
ruled out). Tables two batches ahead: the load spanning two tables' stores is never
waiting on them.
"""
from __future__ import annotations

from aesgen.consts import bswap_mask
from aesgen.dsl import key
from aesgen.ir import Mem, VReg
from aesgen.spec import KernelSpec

from .frame import align32, unalign32
from .gfdouble import times_x_bytes_be
from .modes import vector_loops

SLOTS = ("X", "B", "K1", "K2")
OFFSET_GROUPS = 4  # groups whose offsets are computed at once (2 x 4 + 1 vectors live)
FAR = 4  # offset tables in rotation: a batch reads one (and the next one's first offset)
# batches of whole chunks: shorter messages keep the stream's offsets. Filling the first
# tables cost 4% at 2 KiB (both ways); at 4 KiB the tables paid when decrypting (10%)
TABLES_FROM = 6
# Where the tables are used the slots start 32 bytes on: the table loop drops rsp to 32-byte
# alignment (by 0 or 16, kept in ALIGN), and its slots then stay above the frame's fixed ones.
LEAD = 32
ALIGN = "r10"  # public: the drop (the Otr's INDEX scratch, unused while the tables run)


def staged(spec: KernelSpec) -> bool:
    """Whether OTR's whole chunks run in staged batches: VAES on ymm with 16 registers (AES-NI).
    On xmm (--isa avx) the stage's slot traffic cost more than the deeper batches gained
    (measured 3% slower on a Sapphire Rapids-class VM), so xmm keeps the depth-4 groups."""
    return spec.isa == "avx2" and spec.width_for("otr") == 256 and spec.backend == "aesni"


def far_bytes(depth: int, lanes: int) -> int:
    """The x^(8m) step between a table and the next (m bytes), or 0: no tables. A batch's
    chunks must be whole bytes of doublings, and their top bytes times 0x87 fit a qword."""
    chunks = depth * lanes
    return chunks // 8 if lanes > 1 and chunks % 8 == 0 and chunks // 8 <= 7 else 0


def slot_bytes(depth: int, width: int) -> int:
    """Frame bytes the slots of a batch of `depth` groups take (after LEAD bytes where the
    tables are used): what the epilogue wipes."""
    lead = LEAD if far_bytes(depth, width // 128) else 0
    return lead + len(SLOTS) * depth * width // 8


def table_bytes(depth: int, width: int) -> int:
    """Frame bytes after the slots: the offset tables and the block after them, in whole
    vectors (wiped where the table loop ends, so shorter messages do not pay for it)."""
    vb = width // 8
    return FAR * depth * vb + vb if far_bytes(depth, width // 128) else 0


def sizes(depth: int) -> tuple[int, ...]:
    """Batch sizes, largest first: the depth, then halvings down to one group."""
    out = [depth]
    while out[-1] > 1:
        out.append(out[-1] // 2)
    return tuple(out)


class StagedChunks:
    """Whole chunks of an Otr (kernels/otr.py) in staged batches; slots at rsp + `base`."""

    def __init__(self, otr, base: int) -> None:
        self.o, self.b = otr, otr.b
        self.m = far_bytes(self.b.depth, self.b.lanes)
        self.base = base + (LEAD if self.m else 0)
        self.vb = self.b.width // 8
        self.tables = self.base + len(SLOTS) * self.b.depth * self.vb

    def slot(self, j: int, name: str) -> Mem:
        return Mem("rsp", self.base + (len(SLOTS) * j + SLOTS.index(name)) * self.vb)

    def entry(self, t: int, j: int, at: int = 0) -> Mem:
        """Vector j of offset table t (byte `at` of it; table FAR is the block after them)."""
        return Mem("rsp", self.tables + (t * self.b.depth + j) * self.vb + at)

    def run(self, nr: int, offsets, total: VReg) -> None:
        o, b = self.o, self.b
        if self.m:
            self.table_batches(nr, offsets, total)
        vector_loops(b, o.count, 32 * b.lanes, (o.inp, o.outp), lambda g: self.batch(nr, g, offsets, total),
                     stride=32 * b.lanes, sizes=sizes(b.depth))

    def table_batches(self, nr: int, offsets, total: VReg) -> None:
        """Whole batches with their offsets from the tables, while a batch is left; after them
        the stream restarts from the next table's first vector. The loop is unrolled once per
        table."""
        o, b, D = self.o, self.b, self.b.depth
        batch = 32 * b.lanes * D
        skip, top, done = b.label_name("few_batches"), b.label_name("table_batch"), b.label_name("tables_done")
        b.s("cmp.r64.imm", o.count, imm=TABLES_FROM * batch)
        b.branch("b", skip)
        # 32-byte aligned: with rsp 16 mod 32 half the slot and table accesses split a cache
        # line, and the loop ran 7% slower
        align32(b, ALIGN)
        for j, le in enumerate(offsets.vectors(D)):
            self.put(0, j, b.v("pshufb", le, bswap_mask(b.lanes), role="ofs", comment="L_i"))
        for t in range(1, FAR - 1):
            self.derive(t - 1, t)
        exits = [b.label_name(f"after_table{t}") for t in range(FAR - 1)]
        b.label(top)
        for t in range(FAR):
            for j in range(D):
                self.stage_tabled(nr, t, j, total)
            b.groups(D, lambda j: self.rounds(nr, j, total), comment=f"{D} groups of {b.lanes} chunks, both rounds",
                     riders=lambda t=t: self.derive((t + 2) % FAR, (t + 3) % FAR))
            for p in (o.inp, o.outp):
                b.s("add.r64.imm", p, imm=batch)
            b.s("sub.r64.imm", o.count, imm=batch)
            b.s("cmp.r64.imm", o.count, imm=batch)
            b.branch("b" if t < FAR - 1 else "ae", exits[t] if t < FAR - 1 else top)
        for t in [FAR - 1, *range(FAR - 1)]:  # after table t the next chunk's offset heads table t + 1
            if t < FAR - 1:
                b.label(exits[t])
            be = b.v("vload", self.entry((t + 1) % FAR, 0), role="ofs", comment="the next chunks' offsets")
            b.assign(offsets.current, b.v("pshufb", be, bswap_mask(b.lanes)), comment="byte-reversed")
            if t != FAR - 2:
                b.branch("jmp", done)
        b.label(done)
        z = b.v("vzero")
        for off in range(0, table_bytes(D, b.width), self.vb):
            b.store(Mem("rsp", self.tables + off), z, comment="wipe the offset tables")
        unalign32(b, ALIGN)
        b.label(skip)

    def put(self, t: int, j: int, v: VReg) -> None:
        """Vector j of table t (table 0's first block also after the last table)."""
        b = self.b
        b.store(self.entry(t, j), v, comment=f"offsets of group {j}")
        if t == 0 and j == 0:
            b.store(self.entry(FAR, 0), v, width=128, comment="and after the last table")

    def derive(self, src: int, dst: int) -> None:
        """Table dst from table src: the same groups D L chunks on."""
        b = self.b
        for j in range(b.depth):
            v = b.v("vload", self.entry(src, j), role="ofs", comment=f"offsets of group {j}")
            self.put(dst, j, times_x_bytes_be(b, v, self.m))

    def stage_tabled(self, nr: int, t: int, j: int, total: VReg) -> None:
        """The stage of group j from table t: L_i is the table's vector, L_(i+1) the same 16 bytes on."""
        o, b = self.o, self.b
        tk = b.v("vxor", b.v("vload", self.entry(t, j), role="ofs", comment="L_i"), key(0), role="ofs",
                 comment="L_i ^ round key 0")
        nxt = self.entry(t, j, 16)
        first = o.dealt(32 * b.lanes * j, 0)
        if o.decrypt:
            x = o.xor3(first, tk, nxt, comment="round 1: block ^ L*_i ^ round key 0")
            bk = tk
        else:
            x = b.v("vxor", first, tk, comment="round 1: block ^ L_i ^ round key 0")
            bk = b.v("vxor", tk, nxt, comment="round 2's offset L*_i ^ round key 0")
        self.stage_slots(nr, j, first, x, bk, total)

    def batch(self, nr: int, g: int, offsets, total: VReg) -> None:
        b = self.b
        for h in range(0, g, OFFSET_GROUPS):
            n = min(OFFSET_GROUPS, g - h)
            ofs = self.o.chunk_offsets(offsets.vectors(n), offsets.current)
            for j in range(n):
                self.stage(nr, h + j, ofs[j], total)
        b.groups(g, lambda j: self.rounds(nr, j, total), comment=f"{g} group(s) of {b.lanes} chunk(s), both rounds")

    def stage(self, nr: int, j: int, ofs: tuple[VReg, VReg], total: VReg) -> None:
        o, b = self.o, self.b
        o1, o2 = (ofs[1], ofs[0]) if o.decrypt else ofs
        first = o.dealt(32 * b.lanes * j, 0)
        x = o.xor3(first, o1, key(0), comment="round 1: block ^ offset ^ round key 0")
        self.stage_slots(nr, j, first, x, b.v("vxor", o2, key(0), comment="round 2's offset ^ round key 0"), total)

    def stage_slots(self, nr: int, j: int, first: VReg, x: VReg, bk: VReg, total: VReg) -> None:
        """Group j's four slots from its first blocks, X and B; the checksum of the second blocks."""
        o, b = self.o, self.b
        b.store(self.slot(j, "X"), x)
        b.store(self.slot(j, "K2"), o.last_key(nr, first))
        second = o.dealt(32 * b.lanes * j, 1)
        o.checksum_plain(total, second, None)
        b.store(self.slot(j, "K1"), b.v("vxor", second, key(nr), comment="second block folded into the last round key"))
        b.store(self.slot(j, "B"), bk)

    def rounds(self, nr: int, j: int, total: VReg) -> None:
        o, b = self.o, self.b
        off = 32 * b.lanes * j
        x = o.middle_rounds(nr, b.v("vload", self.slot(j, "X"), role="blk"))
        y1 = b.v("aesenclast", x, self.slot(j, "K1"), comment=f"round {nr}: first output block")
        store_lanes(b, o.outp, off, y1)
        x = o.middle_rounds(nr, b.v("vxor", y1, self.slot(j, "B"), comment="round 2: block ^ offset ^ round key 0"))
        b.final()
        y2 = b.v("aesenclast", x, self.slot(j, "K2"), comment=f"round {nr}: second output block")
        if o.decrypt:
            b.v("vxor", total, y2, dst=total, comment="checksum of even plaintext blocks")
        store_lanes(b, o.outp, off + 16, y2)


def store_lanes(b, outp: str, off: int, v: VReg) -> None:
    """Lane k of v (chunk k of a group) to outp + off + 32 k: no lane shuffle."""
    if b.lanes == 1:
        b.store(Mem(outp, off), v)
        return
    for k in range(b.lanes):
        b.store(Mem(outp, off + 32 * k), v, op="vstore_lane", imm=k, comment=f"chunk {k}'s block")
