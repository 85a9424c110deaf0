"""AES-OTR's whole chunks on 16 xmm registers (--isa avx): offsets from GPR tables.

Doubling the offsets in vectors costs shifts, carry-less multiplies, byte reversals and lane
moves on the ports vaesenc needs (Intel p0/p1/p5). Here general-purpose registers (integer
ALUs, store ports) fill a table per batch of chunks, entry i the chunk's

    A_i = L_i ^ K    (le: bit k the coefficient of x^k; K = round key 0 byte-reversed)

by one chain: A_(i+1) = 2 A_i ^ 3K (2 L_i ^ 2K ^ K). The stage byte-reverses each entry once
(one vpshufb, shared by the two groups that read it) into L_i ^ k0 (big-endian, k0 round key
0); then L*_i ^ k0 = L_i ^ L_(i+1) ^ k0 = A_i ^ A_(i+1) ^ k0 (the table read one entry on).
Reversing in the vector unit costs one shuffle an entry; in the chain it cost a copy and a
bswap a qword (movbe is not in every AVX CPU), and the loop is bound by the uops it issues.

A batch (half the depth in groups) is first staged: per group, four frame slots

    X  = first blocks ^ first offset ^ k0      K1 = second blocks ^ last round key
    O2 = second offset ^ k0                    K2 = first blocks ^ last round key

(decrypting, the offsets swap: the first round takes L*_i), and the encrypting checksum. Then
the batches are software-pipelined: one batch's first rounds run beside the previous batch's
second rounds, each group holding nothing but its AES state (the first round's result goes
back to X for the next iteration), so depth D keeps D chains of one Feistel round each in
flight with no stall between batches.

Two tables alternate, as do two slot sets: batch k reads table k mod 2 in its stage and its
groups' riders refill it for batch k + 2 (a vector load spanning recent 8-byte stores cannot
be forwarded: two batches on, they are done). The chain is two batches ahead, so the tables
start from two straight fills, and the loop runs from two batches on; fewer chunks go to the
smaller loops after it.
"""
from __future__ import annotations

from aesgen.consts import bswap_mask
from aesgen.dsl import key
from aesgen.ir import Mem, VReg
from aesgen.spec import KernelSpec

from .gfdouble import double, gpr_double
from .otr_staged import store_lanes
from .regs import r32

# The chain (le: bit k the coefficient of x^k) and its scratch: the only GPRs that hold
# data in the OTR functions (the static check's data registers).
LO, HI, T = "rax", "rbp", "r11"
SLOTS = ("X", "K1", "K2", "O2")


def tabled(spec: KernelSpec) -> bool:
    """Whether OTR's whole chunks come from GPR offset tables: xmm with AES-NI on 16 registers
    (--isa avx; measured on a Sapphire Rapids-class VM, AES-128 16 KiB: 66% -> 82% of the
    ceiling; little-endian entries: 85-87%). On ymm (avx2) the same batches measured 50% (the
    staged batches: 62%): per 20 AES rounds they carry two chunks' fill and slot traffic, more
    uops than the rounds leave room for, so ymm keeps kernels/otr_staged.py. No BMI2 or MOVBE: avx files run on CPUs
    without them (Sandy Bridge), so sar, and no movbe."""
    return spec.isa == "avx" and spec.backend == "aesni"


def table_bytes(depth: int, lanes: int, width: int) -> int:
    """Frame bytes: 3K, two tables of a batch's chunks + 1, two sets of slots of a batch's
    groups (a batch: half the depth); whole vectors (the wipe)."""
    vb, half = width // 8, max(1, depth // 2)
    raw = 16 + 2 * 16 * (half * lanes + 1) + 2 * len(SLOTS) * half * vb
    return -(-raw // vb) * vb


class TabledChunks:
    """Whole chunks of an Otr (kernels/otr.py) in batches of D groups, from rsp + `base`."""

    def __init__(self, otr, base: int) -> None:
        self.o, self.b = otr, otr.b
        self.half = max(1, self.b.depth // 2)  # groups per batch: two batches are in flight
        self.n = self.half * self.b.lanes  # chunks per batch
        self.three_k = base
        self.tables = base + 16
        self.table_stride = 16 * (self.n + 1)
        self.slots = self.tables + 2 * self.table_stride
        self.bytes = table_bytes(self.b.depth, self.b.lanes, self.b.width)

    # -- frame --------------------------------------------------------------------
    def entry(self, table: int, k: int, half: int | None = None) -> Mem:
        """Entry k (chunk k of the batch) of table 0 or 1; half: one of its qwords."""
        disp = self.tables + table * self.table_stride + 16 * k
        return Mem("rsp", disp) if half is None else Mem("rsp", disp + half, bits=64)

    def slot(self, s: int, j: int, name: str) -> Mem:
        """Group j's slot `name` in slot set s (batch k uses set k mod 2)."""
        vb = self.b.width // 8
        return Mem("rsp", self.slots + (len(SLOTS) * (s * self.half + j) + SLOTS.index(name)) * vb)

    # -- the loop -----------------------------------------------------------------
    def run(self, nr: int, offsets, total: VReg) -> None:
        """Batches while two or more are left, software-pipelined: one batch's second rounds
        beside the next one's first rounds (2 x half independent chains, each half as long as
        a group's two rounds: no stall where one batch ends and the next starts). outp runs a
        batch behind inp while a batch is in flight. `offsets` then starts at the next chunk."""
        o, b, H = self.o, self.b, self.half
        batch = 32 * self.n
        skip, top, done = b.label_name("no_tables"), b.label_name("tabled"), b.label_name("tables_done")
        drains = {t: b.label_name(f"drain{t}_") for t in (0, 1)}
        b.s("cmp.r64.imm", o.count, imm=2 * batch)
        b.branch("b", skip)
        self.start(offsets)
        self.fill(0)
        self.fill(1)
        self.stage_batch(nr, 0, total)  # batch 0: table 0, slot set 0; its first rounds alone
        b.groups(H, lambda j: self.first_rounds(nr, 0, j, batch=0), riders=lambda: self.fill(0),
                 comment=f"first rounds of {H} group(s) of {b.lanes} chunk(s)")
        b.s("add.r64.imm", o.inp, imm=batch)
        b.s("sub.r64.imm", o.count, imm=batch)
        b.label(top)
        for t in (1, 0):  # batch k: table and slot set k mod 2; unrolled once per table
            b.s("cmp.r64.imm", o.count, imm=batch)
            b.branch("b", drains[t])
            self.stage_batch(nr, t, total)
            b.groups(2 * H, lambda j, t=t: self.second_rounds(nr, 1 - t, j, total) if j < H else
                     self.first_rounds(nr, t, j - H, batch),
                     comment=f"second rounds of {H} group(s) beside the next {H} groups' first rounds; "
                     f"the chain refills table {t}", riders=lambda t=t: self.fill(t))
            b.s("add.r64.imm", o.inp, imm=batch)
            b.s("add.r64.imm", o.outp, imm=batch)
            b.s("sub.r64.imm", o.count, imm=batch)
        b.branch("jmp", top)
        for t in (1, 0):  # the batch in flight used set 1 - t; table t heads the next chunks
            b.label(drains[t])
            b.groups(H, lambda j, t=t: self.second_rounds(nr, 1 - t, j, total),
                     comment=f"second rounds of the last {H} group(s)")
            b.s("add.r64.imm", o.outp, imm=batch)
            self.resume(t, offsets)
            if t == 1:
                b.branch("jmp", done)
        b.label(done)
        self.wipe()  # only when the tables were used: short messages skip the stores
        b.label(skip)

    def wipe(self) -> None:
        """Zero the tables, slots and 3K (secret), from rsp + three_k on."""
        b = self.b
        with b.at_width(128):
            z = b.v("vzero")
            for off in range(self.three_k, self.three_k + self.bytes, 16):
                b.store(Mem("rsp", off), z, comment="wipe the offset tables and slots")
        b.s("xor.r32.r32", r32(T), r32(T), comment="r11 (caller-saved) held offset bits")

    def start(self, offsets) -> None:
        """3K to the frame; the chain at A of the next chunk (lane 0 of offsets)."""
        b = self.b
        with b.at_width(128):
            k = b.v("pshufb", b.v("vload", Mem(self.o.key, 0)), bswap_mask(1), comment="K: round key 0, le")
            three = b.v("vxor", k, double(b, k, self.o.method), comment="3K")
            b.store(Mem("rsp", self.three_k), three)
            b.store(self.entry(0, 0), b.v("vxor", offsets.current, k, comment="A: the next chunk's L ^ K"))
        b.s("mov.r64.m64", LO, self.entry(0, 0, 0))
        b.s("mov.r64.m64", HI, self.entry(0, 0, 8))

    def resume(self, table: int, offsets) -> None:
        """After the batches: the next chunk's L = its table entry ^ K, for the loops after."""
        b = self.b
        with b.at_width(128):
            be = b.v("vxor", self.entry_be(table, 0), key(0), comment="the next chunk's L_i")
            le = b.v("pshufb", be, bswap_mask(1), comment="byte-reversed")
        offsets.start(le)  # at the function's width: lane l = 2^l L

    # -- the chain ----------------------------------------------------------------
    def fill(self, table: int) -> None:
        """The table's n + 1 entries (its batch's chunks and the next batch's first); the
        chain ends on the last, where the next fill starts."""
        b = self.b
        for k in range(self.n + 1):
            b.s("mov.m64.r64", self.entry(table, k, 0), LO, comment=f"A of chunk {k} of the batch")
            b.s("mov.m64.r64", self.entry(table, k, 8), HI)
            if k == self.n:
                break
            gpr_double(b, LO, HI, T, None, "2 A_i")
            b.s("xor.r64.m64", LO, Mem("rsp", self.three_k, bits=64))
            b.s("xor.r64.m64", HI, Mem("rsp", self.three_k + 8, bits=64), comment="A_(i+1) = 2 A_i ^ 3K")

    # -- vectors ------------------------------------------------------------------
    def entry_be(self, table: int, k: int) -> VReg:
        """Entries k .. k + L - 1 byte-reversed: L_i ^ k0 of those chunks, one per lane."""
        b = self.b
        return b.v("pshufb", b.v("vload", self.entry(table, k)), bswap_mask(b.lanes), role="ofs", comment="L_i ^ k0")

    def stage_batch(self, nr: int, table: int, total: VReg) -> None:
        """The batch's slots; each entry byte-reversed once (a group reads its own entries and
        the next ones: at one chunk a group, the next group's own)."""
        L, reversed_ = self.b.lanes, {}

        def be(k: int) -> VReg:
            if k not in reversed_:
                reversed_[k] = self.entry_be(table, k)
            return reversed_[k]
        for j in range(self.half):
            self.stage(nr, table, j, be(L * j), be(L * j + 1), total)

    def stage(self, nr: int, table: int, j: int, here: VReg, on: VReg, total: VReg) -> None:
        """Group j's slots (set `table`) from its blocks at inp and its offsets: here = L_i ^ k0,
        on the next chunks' (decrypting, the offsets swap: the first round takes L*_i, the
        second L_i)."""
        o, b = self.o, self.b
        off = 32 * b.lanes * j
        first = o.dealt(off, 0)
        if o.decrypt:
            x = o.xor3(b.v("vxor", first, here), on, key(0), comment="round 1: block ^ L*_i ^ round key 0")
        else:
            x = b.v("vxor", first, here, comment="round 1: block ^ L_i ^ round key 0")
        b.store(self.slot(table, j, "X"), x)
        b.store(self.slot(table, j, "K2"), o.last_key(nr, first))
        second = o.dealt(off, 1)
        o.checksum_plain(total, second, None)
        b.store(self.slot(table, j, "K1"), b.v("vxor", second, key(nr), comment="second blocks ^ last round key"))
        o2 = here if o.decrypt else o.xor3(here, on, key(0), comment="L*_i ^ k0")
        b.store(self.slot(table, j, "O2"), o2)

    def first_rounds(self, nr: int, s: int, j: int, batch: int) -> None:
        """Group j's first round from slot set s; its first blocks to outp + batch (the batch
        outp trails by); the second round's input back to its X slot."""
        o, b = self.o, self.b
        off = 32 * b.lanes * j
        x = o.middle_rounds(nr, b.v("vload", self.slot(s, j, "X"), role="blk"))
        y1 = b.v("aesenclast", x, self.slot(s, j, "K1"), comment=f"round {nr}: first output block")
        store_lanes(b, o.outp, batch + off, y1)
        b.store(self.slot(s, j, "X"), b.v("vxor", y1, self.slot(s, j, "O2"),
                                          comment="round 2: block ^ offset ^ round key 0"))

    def second_rounds(self, nr: int, s: int, j: int, total: VReg) -> None:
        """Group j's second round from slot set s; its second blocks to outp."""
        o, b = self.o, self.b
        x = o.middle_rounds(nr, b.v("vload", self.slot(s, j, "X"), role="blk"))
        b.final()
        y2 = b.v("aesenclast", x, self.slot(s, j, "K2"), comment=f"round {nr}: second output block")
        if o.decrypt:
            b.v("vxor", total, y2, dst=total, comment="checksum of even plaintext blocks")
        store_lanes(b, o.outp, 32 * b.lanes * j + 16, y2)
