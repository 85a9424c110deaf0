"""XTS tweaks for the ymm batch loop on 16 registers: vector arithmetic, 64 blocks at a time.

With 16 registers the tweaks cannot sit beside 8 AES states, so they live in tables in the
stack frame and are read as memory operands where used. Where they come from decides the
speed. On this Intel core (family 6 model 167; llvm-mca's Alder Lake model agrees) vaesenc
ymm takes ports 0 and 1, every other vector op competes for port 5, the integer ALUs share
ports 0, 1 and 5 too, and stores cost: the GPR doubling (xts_table.py: 5 integer ops and 2
stores a block) ran at 65% of ECB's loop, this at 86-88% (docs/tuning.md has the others).

The tweak of block i + 64 is T_i x^64: T's low qword moved up a qword (vpunpcklqdq with
zero), plus its high qword carry-less times 0x87 (x^128 mod P; one vpclmulqdq), XOR: three
vector ops per vector, one load, one store. The source vector is loaded into a register
first: read as two memory operands (one load each) the loop ran 4-8% slower on an Emerald
Rapids-class core (family 6 model 207; 16 KiB AES-128 0.1633 -> 0.1509 ticks/B decrypting). A batch of D x L blocks
(D x L dividing 64) finds its source `far` = 64 / (D x L) batches back, so far + 1 tables
rotate: the batch that reads one writes the one `far` on.

Tried and dropped (family 6 model 207, 16 KiB AES-128 encrypt, one process alternating
builds): reading the moved-up half [0, T.lo] from a shadow beside each table (written by a
vmovq and a vextracti128 store, no vector op) takes the step to 2 vector ops, but each of
the two extra stores a vector cost 3.5% (0.1539 -> 0.1666 ticks/B; the shadow stores alone,
step unchanged, 0.1659): on this core stores are dearer than a port-5 op.
"""
from __future__ import annotations

from aesgen.dsl import FunctionBuilder
from aesgen.ir import Mem, VReg

from .gfdouble import reduction
from .xts_table import Layout, Tables


class FarTables(Tables):
    """Tables T_0..T_far, 32 bytes a vector."""

    def __init__(self, b: FunctionBuilder, layout: Layout) -> None:
        super().__init__(b, layout)
        self.first = layout.far  # the filling batches read tables 0 .. far - 1

    def start(self, current: VReg) -> None:
        """Nothing to set up: the filling batches stage their tweaks."""

    def stage(self, k: int, tweaks: list[VReg]) -> list[VReg | Mem]:
        """Filling batch k's vector-doubled tweaks into table k."""
        b = self.b
        for j, t in enumerate(tweaks):
            b.store(self.entry(k, b.lanes * j), t, comment=f"tweaks of vector {j}, staged")
        return self.vectors(k)

    def derive(self, src: int) -> None:
        """Table src + far (the same vectors 64 blocks on) from table src."""
        b = self.b
        red = b.v("vload", reduction(b.lanes), comment="0x87 in each lane's low qword")
        zero = b.v("vzero")
        dst = (src + self.layout.far) % self.layout.tables
        for j in range(b.depth):
            t = b.v("vload", self.entry(src, b.lanes * j), role="tweak", comment=f"tweaks of vector {j}")
            up = b.v("punpcklqdq", zero, t, comment="the low qwords up a qword")
            down = b.v("clmul", red, t, imm=0x10, comment="the high qwords * 0x87")
            b.store(self.entry(dst, b.lanes * j), b.v("vxor", up, down, role="tweak", comment="tweaks * x^64"),
                    comment=f"tweaks of vector {j}, {self.layout.far} batches on")

    def filling_riders(self, k: int) -> None:
        self.derive(k)

    def loop_riders(self, k: int) -> None:
        self.derive(k)
