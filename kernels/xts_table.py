"""XTS tweaks doubled in general-purpose registers into tables in the stack frame.

On Zen 4 a zmm vpclmulqdq (the batch doubling's multiply) or shuffle issues on the pipes
vaesenc needs, so the vector tweak arithmetic costs AES throughput; the integer ALUs and
the store ports sit idle. Here two 64-bit registers (lo, hi: the le tweak, bit k the
coefficient of x^k) double the tweak once per block and store each one to a table that
the batch loop reads as whole vectors two batches later (a zmm load that spans recent
narrower stores cannot be store-forwarded; two tables alternate so none waits).

One doubling, 5 ops, no branch: t = hi >> 63 (arithmetic: all ones if bit 127 is set),
t &= x^128 mod P (0x87), (hi, lo) <<= 1 by add/adc, lo ^= t. Its dependency chain is
about 2.5 cycles, as long as the AES rounds of a block at 512 bits, so a batch's table
comes from two chains: the first half's tweaks from one, the second half's from another
that starts half a batch on (a jump by x^h: the top h bits, carry-less times 0x87, added
back). The stores ride spread over the AES rounds (GroupBlock riders).

Registers: the chains, t and u are the only GPRs that hold data (the static constant-time
check tracks registers, not program points); the sarx count 63 is public.
"""
from __future__ import annotations

from aesgen.dsl import FunctionBuilder
from aesgen.gf128 import doubling_reduction
from aesgen.ir import Mem, VReg
from aesgen.spec import KernelSpec

from .frame import aligned, drop_frame, open_frame, push_saved
from .gfdouble import gpr_double
from .regs import r32

# Shorter messages keep the vector tweaks: at 1 KiB (512 x 4, four batches) the table's
# start-up (frame, chains, two filling batches) was 8% slower than main's loop, at 2 KiB even.
TABLE_FROM_BYTES = 2048
MAX_DEPTH = 8  # D tweak vectors live beside D AES states and 15 round keys (AES-256)
# Register roles (the XTS function's own, in kernels/xts.py, are r9, r10 and the arguments):
COUNT63 = "r11"  # public: the sarx count
CHAINS = (("rax", "rbx"), ("rbp", "r12"))  # (lo, hi) of each chain: the tweaks, secret
T, U = "r13", "r14"  # scratch of a doubling (T) and of a jump (T, U): tweak bits
SAVED = ("rbx", "rbp", "r12", "r13", "r14")  # the callee-saved registers the chains use


def gpr_tweaks(b: FunctionBuilder) -> bool:
    return uses_gpr_tweaks(b.spec, b.width, b.depth)


def uses_gpr_tweaks(spec: KernelSpec, width: int, depth: int) -> bool:
    """The batch method with VAES (zmm on AVX-512, ymm on AVX2; AES-NI backend, depth <= 8)
    takes its in-loop tweaks from the GPR table; anything else keeps the vector doubling.
    At 256 bits the vector doubling's shuffles and multiplies issue on the ports vaesenc
    ymm uses (Intel p0/p1 and p5; AMD's FP pipes): measured 60% -> 70% of the AES ceiling on
    a Sapphire Rapids-class core (family 6 model 167, a VM), depth 7."""
    return ((spec.isa, width) in (("avx512", 512), ("avx2", 256)) and spec.backend == "aesni"
            and spec.gfdouble == "batch" and 1 < depth <= MAX_DEPTH)


class TweakTable:
    """Two tables of one batch's tweaks at [rsp] and [rsp + bytes]; batch k reads table k mod 2.
    rsp-relative on purpose: a stack address in another register would make the static
    check treat every stack reload as secret (a win64 wrapper reloads its fifth argument).
    rsp is only 16-byte aligned, so some zmm loads split a cache line (measured: no worse
    than 64-byte aligned tables within the noise, 0.120-0.123 ticks/B either way)."""

    def __init__(self, b: FunctionBuilder) -> None:
        self.b = b
        self.blocks = b.depth * b.lanes  # tweaks of one batch
        self.half = self.blocks // 2
        self.bytes = 16 * self.blocks  # one table
        self.frame = aligned(2 * self.bytes, len(SAVED))  # the two tables (five pushes: no padding)

    # -- frame ------------------------------------------------------------------
    def enter(self) -> None:
        """Save the registers the chains use, make the frame."""
        b = self.b
        push_saved(b, SAVED)
        open_frame(b, self.frame, comment="the two tweak tables")

    def leave(self) -> None:
        """Wipe the tables (tweaks are secret), drop the frame, restore the registers
        (before the function's tails: they run with rsp where it was at entry)."""
        b = self.b
        z = b.v("vzero")
        for off in range(0, 2 * self.bytes, b.width // 8):
            b.store(Mem("rsp", off), z, comment="wipe the tweak tables")
        drop_frame(b, self.frame, SAVED)
        b.s("xor.r32.r32", r32(CHAINS[0][0]), r32(CHAINS[0][0]), comment="rax (caller-saved) held tweak bits")

    def entry(self, table: int, k: int, bits: int | None = None) -> Mem:
        """Block k's tweak in table 0 or 1."""
        return Mem("rsp", table * self.bytes + 16 * k) if bits is None else \
            Mem("rsp", table * self.bytes + 16 * k, bits=bits)

    # -- the chains ---------------------------------------------------------------
    def start(self, current: VReg, batches: int) -> None:
        """Chain 0 `batches` batches on from lane 0 of `current` (the next block's tweak),
        chain 1 half a batch further."""
        b = self.b
        (lo, hi), (lo1, hi1) = CHAINS
        b.s("mov.r64.imm", COUNT63, imm=63, comment="sarx count: bit 127 spread over the qword")
        with b.at_width(128):
            b.store(self.entry(0, 0), current, comment="the next block's tweak, to the GPRs")
        b.s("mov.r64.m64", lo, Mem("rsp", 0, bits=64))
        b.s("mov.r64.m64", hi, Mem("rsp", 8, bits=64))
        for _ in range(batches):
            self.jump(lo, hi, self.blocks)
        b.s("mov.r64.r64", lo1, lo)
        b.s("mov.r64.r64", hi1, hi)
        self.jump(lo1, hi1, self.half)

    def double(self, lo: str, hi: str) -> None:
        """(hi, lo) = (hi, lo) * x."""
        gpr_double(self.b, lo, hi, T, COUNT63, "next block's tweak")

    def jump(self, lo: str, hi: str, h: int) -> None:
        """(hi, lo) = (hi, lo) * x^h, 0 < h <= 57 (the reduction fits the low qword): the
        top h bits, carry-less times 0x87, added to the shifted value."""
        b = self.b
        b.s("mov.r64.r64", T, hi)
        b.s("shr.r64.imm", T, imm=64 - h, comment=f"the top {h} bits, x^128 * them to add")
        b.s("shld.r64.r64.imm", hi, lo, imm=h, comment=f"<< {h}")
        b.s("shl.r64.imm", lo, imm=h)
        reduction = doubling_reduction()
        for k in range(reduction.bit_length()):
            if not reduction >> k & 1:
                continue
            if k == 0:
                b.s("xor.r64.r64", lo, T, comment="+ them * x^k for each x^k of 0x87")
                continue
            b.s("mov.r64.r64", U, T)
            b.s("shl.r64.imm", U, imm=k)
            b.s("xor.r64.r64", lo, U)

    def fill(self, table: int) -> None:
        """The chains' batch of tweaks into a table; the chains move on by a batch."""
        b = self.b
        (lo0, hi0), (lo1, hi1) = CHAINS
        for k in range(self.half):
            for c, (lo, hi) in enumerate(CHAINS):
                e = k + c * self.half
                b.s("mov.m64.r64", self.entry(table, e, 64), lo, comment=f"tweak of block {e} of the batch")
                b.s("mov.m64.r64", Mem("rsp", self.entry(table, e).disp + 8, bits=64), hi)
                self.double(lo, hi)
        # chain 1 ended where the next batch starts; chain 1 goes half a batch on
        b.s("mov.r64.r64", lo0, lo1)
        b.s("mov.r64.r64", hi0, hi1)
        self.jump(lo1, hi1, self.half)

    def vectors(self, table: int) -> list[VReg]:
        """A table's D tweak vectors (read before fill overwrites them)."""
        b = self.b
        return [b.v("vload", self.entry(table, b.lanes * j), role="tweak", comment=f"tweaks of vector {j}")
                for j in range(b.depth)]
