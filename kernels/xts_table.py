"""XTS tweaks doubled in general-purpose registers into a table in the stack frame.

On Zen 4 a zmm vpclmulqdq (the batch doubling's multiply) or shuffle issues on the pipes
vaesenc needs, so the vector tweak arithmetic costs AES throughput; the integer ALUs and
the store ports sit idle. Here two 64-bit registers (lo, hi: the le tweak, bit k the
coefficient of x^k) double the tweak once per block and store each one to a table that
the batch loop reads as whole vectors one batch later (a zmm load that spans recent
narrower stores cannot be store-forwarded, so the table is filled one batch ahead).

One doubling, 5 ops, no branch: t = hi >> 63 (arithmetic: all ones if bit 127 is set),
t &= x^128 mod P (0x87), (hi, lo) <<= 1 by add/adc, lo ^= t. Its latency chain is about
2.5 cycles, as long as the AES rounds of a block at 512 bits, so a batch's table comes
from two chains: the first half's tweaks from one, the second half's from another that
starts half a batch on (a jump of x^h: the top h bits carry-less times 0x87 added back).

Registers: the tweak halves, t and u are the only GPRs that hold data (the static
constant-time check tracks registers, not program points); the table base and the shift
count 63 are public.
"""
from __future__ import annotations

from aesgen.dsl import FunctionBuilder
from aesgen.gf128 import doubling_reduction
from aesgen.ir import Mem, VReg

from .gcm import SAVED

MAX_DEPTH = 8  # D tweak vectors live beside D AES states and 15 round keys (AES-256)
ALIGN = 64  # zmm loads of the table never split a cache line
BASE, OTHER, COUNT63 = "r15", "r10", "r11"
CHAINS = (("rax", "rbx"), ("rbp", "r12"))  # (lo, hi) of each chain
T, U = "r13", "r14"


def gpr_tweaks(b: FunctionBuilder) -> bool:
    """The batch method at 512 bits on AVX-512 (AES-NI backend, depth <= 8) takes its
    in-loop tweaks from the GPR table; anything else keeps the vector doubling."""
    spec = b.spec
    return (spec.isa == "avx512" and b.width == 512 and spec.backend == "aesni"
            and spec.gfdouble == "batch" and 1 < b.depth <= MAX_DEPTH)


class TweakTable:
    def __init__(self, b: FunctionBuilder) -> None:
        self.b = b
        self.blocks = b.depth * b.lanes  # tweaks of one batch
        self.half = self.blocks // 2
        self.bytes = 16 * self.blocks  # one table; two alternate
        self.frame = 2 * self.bytes + ALIGN  # + the slack of aligning the base

    # -- frame ------------------------------------------------------------------
    def enter(self) -> None:
        """Save the registers the table uses, make the frame, align its base."""
        b = self.b
        for r in SAVED:
            b.s("push", r)
        b.s("sub", "rsp", imm=self.frame)
        self.align()

    def align(self) -> None:
        b = self.b
        b.s("lea", BASE, Mem("rsp", ALIGN - 1))
        b.s("and", BASE, imm=-ALIGN, comment="the tweak tables, 64-byte aligned")

    def toggle(self) -> None:
        """BASE to the other table."""
        self.b.s("xor_r", BASE, OTHER, comment="the other tweak table")

    def leave(self) -> None:
        """Wipe the table (tweaks are secret), drop the frame, restore the registers, return."""
        b = self.b
        self.align()
        z = b.v("vzero", width=512)
        for off in range(0, 2 * self.bytes, 64):
            b.store(Mem(BASE, off), z, width=512, comment="wipe the tweak table")
        b.s("vzeroupper", comment="before the pops: the ct check trusts pops that end at ret")
        b.s("add", "rsp", imm=self.frame)
        for r in reversed(SAVED):
            b.s("pop", r)
        b.s("ret")

    def entry(self, k: int) -> Mem:
        return Mem(BASE, 16 * k)

    # -- the chains ---------------------------------------------------------------
    def start(self, current: VReg, batches: int) -> None:
        """Chain 0 `batches` batches on from lane 0 of `current` (the next block's tweak),
        chain 1 half a batch further."""
        b = self.b
        (lo, hi), (lo1, hi1) = CHAINS
        b.s("movi", COUNT63, imm=63, comment="sarx count: bit 127 spread over the qword")
        b.s("lea", OTHER, Mem(BASE, self.bytes))
        b.s("xor_r", OTHER, BASE, comment="BASE ^ this toggles between the two tables")
        with b.at_width(128):
            b.store(self.entry(0), current, comment="the next block's tweak, to the GPRs")
        b.s("load64", lo, Mem(BASE, 0, bits=64))
        b.s("load64", hi, Mem(BASE, 8, bits=64))
        for _ in range(batches):
            self.jump(lo, hi, self.blocks)
        b.s("mov", lo1, lo)
        b.s("mov", hi1, hi)
        self.jump(lo1, hi1, self.half)

    def double(self, lo: str, hi: str) -> None:
        """(hi, lo) = (hi, lo) * x."""
        b = self.b
        b.s("sarx", T, hi, COUNT63, comment="all ones if bit 127 is set")
        b.s("and", T, imm=doubling_reduction(), comment="x^128 = x^7 + x^2 + x + 1 then")
        b.s("add_r", lo, lo, comment="the low qword doubled, its bit 63 carried")
        b.s("adc_r", hi, hi, comment="the high qword doubled")
        b.s("xor_r", lo, T, comment="next block's tweak")

    def jump(self, lo: str, hi: str, h: int) -> None:
        """(hi, lo) = (hi, lo) * x^h, 0 < h <= 57 (the reduction fits the low qword): the
        top h bits, carry-less times 0x87, added to the shifted value."""
        b = self.b
        b.s("mov", T, hi)
        b.s("shr", T, imm=64 - h, comment=f"the top {h} bits, x^128 * them to add")
        b.s("shld", hi, lo, imm=h, comment=f"<< {h}")
        b.s("shl", lo, imm=h)
        reduction = doubling_reduction()
        for k in range(reduction.bit_length()):
            if not reduction >> k & 1:
                continue
            if k == 0:
                b.s("xor_r", lo, T, comment="+ them * x^k for each x^k of 0x87")
                continue
            b.s("mov", U, T)
            b.s("shl", U, imm=k)
            b.s("xor_r", lo, U)

    def fill(self) -> None:
        """The next batch's tweaks into the table; the chains move on by a batch."""
        b = self.b
        (lo0, hi0), (lo1, hi1) = CHAINS
        for k in range(self.half):
            for c, (lo, hi) in enumerate(CHAINS):
                e = k + c * self.half
                b.s("store64", Mem(BASE, 16 * e, bits=64), lo, comment=f"tweak of block {e} of the batch")
                b.s("store64", Mem(BASE, 16 * e + 8, bits=64), hi)
                self.double(lo, hi)
        # chain 1 ended where the next batch starts; chain 1 goes half a batch on
        b.s("mov", lo0, lo1)
        b.s("mov", hi0, hi1)
        self.jump(lo1, hi1, self.half)

    def vectors(self) -> list[VReg]:
        """The batch's D tweak vectors (read before fill overwrites them)."""
        b = self.b
        return [b.v("vload", Mem(BASE, 16 * b.lanes * j), role="tweak", comment=f"tweaks of vector {j}")
                for j in range(b.depth)]
