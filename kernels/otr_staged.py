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

from aesgen.dsl import key
from aesgen.ir import Mem, VReg
from aesgen.spec import KernelSpec

from .frame import align32, unalign32
from .modes import vector_loops

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
    """Frame bytes the slots of a batch of `depth` groups take, LEAD bytes on."""
    return LEAD + len(SLOTS) * depth * width // 8


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
        vector_loops(b, o.count, 32 * b.lanes, (o.inp, o.outp), lambda g: self.batch(nr, g, offsets, total),
                     stride=32 * b.lanes, sizes=sizes(b.depth))
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
        o, b = self.o, self.b
        o1, o2 = (ofs[1], ofs[0]) if o.decrypt else ofs
        off = 32 * b.lanes * j
        first = o.dealt(off, 0)
        b.store(self.slot(j, "X"), o.xor3(first, o1, key(0), comment="round 1: block ^ offset ^ round key 0"))
        b.store(self.slot(j, "K2"), o.last_key(nr, first))
        second = o.dealt(off, 1)
        o.checksum_plain(total, second, None)
        b.store(self.slot(j, "K1"), b.v("vxor", second, key(nr), comment="second block folded into the last round key"))
        b.store(self.slot(j, "B"), b.v("vxor", o2, key(0), comment="round 2's offset ^ round key 0"))

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
