"""XTS tweaks for the batch loop from tables in the stack frame: which layout a config takes,
and the tables whose tweaks are doubled in general-purpose registers.

On Zen 4 a zmm vpclmulqdq (the batch doubling's multiply) or shuffle issues on the pipes
vaesenc needs, so the vector tweak arithmetic costs AES throughput; the integer ALUs and
the store ports sit idle. Here two 64-bit registers (lo, hi: the le tweak, bit k the
coefficient of x^k) double the tweak once per block and store each one to a table that
the batch loop reads as whole vectors two batches later (a vector load that spans recent
narrower stores cannot be store-forwarded).

One doubling, 5 ops, no branch: t = hi >> 63 (arithmetic: all ones if bit 127 is set),
t &= x^128 mod P (0x87), (hi, lo) <<= 1 by add/adc, lo ^= t. Its dependency chain is
about 2.5 cycles. The stores ride spread over the AES rounds (GroupBlock riders).

Two GPR layouts:
- 32 registers (zmm): the batch's tweaks are loaded into registers at its start, so two
  tables alternate; a batch's table comes from two chains (the AES rounds of a block at
  512 bits take about as long as one doubling): the first half's tweaks from one, the
  second half's from another that starts half a batch on (a jump by x^h: the top h bits,
  carry-less times 0x87, added back).
- 16 registers (xmm): D tweaks beside D AES states do not fit, so the tweaks stay in the
  table and are read as memory operands where used (the whitening and the last round's
  key). A table is then read until its batch ends, so three rotate (read one, fill the
  one after next); one chain (at 128 bits its doublings keep up with the rounds).
The ymm layout on 16 registers takes its tweaks from vector arithmetic instead (xts_far.py).

Registers: the chains, t and u are the only GPRs that hold data (the static constant-time
check tracks registers, not program points); the sarx count 63 is public.
"""
from __future__ import annotations

from dataclasses import dataclass

from aesgen.doubling import default_method
from aesgen.dsl import FunctionBuilder
from aesgen.gf128 import doubling_reduction
from aesgen.ir import Mem, VReg
from aesgen.spec import KernelSpec

from .frame import align32, aligned, drop_frame, open_frame, push_saved, unalign32
from .gfdouble import gpr_double
from .regs import r32

# Shorter messages keep the vector tweaks: at 1 KiB (512 x 4, four batches) the table's
# start-up (frame, chains, two filling batches) was 8% slower than main's loop, at 2 KiB even.
TABLE_FROM_BYTES = 2048
MAX_DEPTH = 8  # zmm: D tweak vectors live beside D AES states and 15 round keys (AES-256)
# x^64 per vector (xts_far.py) reaches the same vector this many batches on: at most 4 (five
# tables, the loop unrolled five times), so D x L of 16 or 32 blocks
FAR_BITS, MOST_FAR = 64, 4
# Register roles (the XTS function's own, in kernels/xts.py, are r9, r10 and the arguments):
COUNT63 = "r11"  # public: the sarx count
ALIGN = "r10"  # public: what aligned a ymm frame to 32 bytes (the XTS function's STEAL, free here)
CHAINS = (("rax", "rbx"), ("rbp", "r12"))  # (lo, hi) of each chain: the tweaks, secret
T, U = "r13", "r14"  # scratch of a doubling (T) and of a jump (T, U): tweak bits
SAVED = ("rbx", "rbp", "r12", "r13", "r14")  # the callee-saved registers the chains use
NUMBERS = {2: "two", 3: "three", 5: "five"}


@dataclass(frozen=True)
class Layout:
    """in_memory: tweaks read as memory operands where used (else loaded at the batch's start);
    chains: GPR doubling chains (0: vector tweaks, x^64 from `far` batches back)."""
    in_memory: bool
    chains: int
    far: int = 0

    @property
    def tables(self) -> int:
        """Tables the loop rotates through (one loop body each)."""
        return self.far + 1 if self.far else 3 if self.in_memory else 2

    @property
    def filling(self) -> int:
        """Batches before the loop, on vector-doubled tweaks, while the tables fill."""
        return self.far or 2


def table_from(batch: int, layout: Layout) -> int:
    """The shortest message (bytes) that takes the table loop. The xmm GPR tables pay from
    four batches on (512 B at depth 8: 66% of ECB against the register loop's 60%, 1 KiB 78%
    against 62%); the others from TABLE_FROM_BYTES (x^64 tables at 1.5 KiB: 56% against 62%),
    and at least one batch after the filling ones."""
    if layout.in_memory and not layout.far:
        return (layout.filling + 2) * batch
    return max((layout.filling + 1) * batch, TABLE_FROM_BYTES)


# zmm: the key sizes (round counts) whose batch loops take GPR tables. On the Sapphire
# Rapids-class VM (family 6 model 167), `aesgen bench xts --isa avx512 --width 512 --depth 3`,
# 16 KiB, interleaved processes: AES-128 with the vector doubling 2.13-2.19x OpenSSL against
# 1.93-2.01x with the tables (depth 4 and 8 alike); AES-256 0.90x AWS-LC against 0.98x. zmm
# vaesenc issues on port 0 only, and the chains' integer ops that land there cost a round; at
# 14 rounds a block the chains' share is smaller than the vector doubling's registers beside
# 15 round keys.
ZMM_TABLE_ROUNDS = frozenset({14})


def layout(spec: KernelSpec, width: int, depth: int, nr: int | None = None) -> Layout | None:
    """The table layout of an XTS batch loop (of the key size with `nr` rounds; None: the one
    its tables serve, if any), or None: the vector doubling stays in the loop.

    AES-NI backend, the ISA's default doubling method, depth 2 and up:
    - zmm (AVX-512, depth <= 8), AES-256: GPR tweaks loaded into registers, two chains;
    - ymm (AVX2) when a batch divides 64 blocks 4 times at most (depth 8 or 16): x^64 vector
      tweaks (xts_far.py); other depths: one GPR chain, tweaks in memory;
    - xmm on AVX: one GPR chain, tweaks in memory.
    At 256 bits the vector doubling's shuffles and multiplies issue on the ports vaesenc ymm
    uses (Intel p0/p1 and p5; AMD's FP pipes): measured 60% -> 70% of the AES ceiling on a
    Sapphire Rapids-class core (family 6 model 167, a VM), depth 7, tweaks in registers."""
    if spec.backend != "aesni" or depth < 2 or spec.gfdouble != default_method(spec.isa, width):
        return None
    if (spec.isa, width) == ("avx512", 512):
        return Layout(False, 2) if depth <= MAX_DEPTH and (nr is None or nr in ZMM_TABLE_ROUNDS) else None
    blocks = depth * width // 128
    if (spec.isa, width) == ("avx2", 256) and FAR_BITS % blocks == 0 and FAR_BITS // blocks <= MOST_FAR:
        return Layout(True, 0, FAR_BITS // blocks)
    if (spec.isa, width) in (("avx2", 256), ("avx", 128)):
        return Layout(True, 1)
    return None


class Tables:
    """`layout.tables` tables of one batch's tweaks at [rsp], [rsp + bytes], ... (and what a
    layout keeps after them). rsp-relative on purpose: a stack address in another register
    would make the static check treat every stack reload as secret (a win64 wrapper reloads
    its fifth argument). rsp is only 16-byte aligned, so some zmm loads split a cache line
    (measured: no worse than 64-byte aligned tables within the noise, 0.120-0.123 ticks/B)."""

    saved: tuple[str, ...] = ()  # callee-saved registers the layout uses
    first = 0  # the table the loop reads first

    def __init__(self, b: FunctionBuilder, layout: Layout, extra: int = 0) -> None:
        """`extra`: bytes the layout keeps after the tables."""
        self.b, self.layout = b, layout
        self.blocks = b.depth * b.lanes  # tweaks of one batch
        self.bytes = 16 * self.blocks  # one table
        self.payload = layout.tables * self.bytes + extra
        self.frame = aligned(self.payload, len(self.saved))

    def enter(self) -> None:
        """Save the registers the layout uses, make the frame."""
        push_saved(self.b, self.saved)
        open_frame(self.b, self.frame, comment=f"the {NUMBERS[self.layout.tables]} tweak tables")
        if self.aligned:
            align32(self.b, ALIGN)

    def leave(self) -> None:
        """Wipe the frame (tweaks are secret), drop it, restore the registers (before the
        function's tails: they run with rsp where it was at entry)."""
        b = self.b
        z = b.v("vzero")
        step = b.width // 8
        for off in range(0, self.payload - self.payload % step, step):
            b.store(Mem("rsp", off), z, comment="wipe the tweak tables")
        if self.payload % step:
            b.store(Mem("rsp", self.payload - step), z)
        if self.aligned:
            unalign32(b, ALIGN)
        drop_frame(b, self.frame, self.saved)
        b.s("xor.r32.r32", r32(CHAINS[0][0]), r32(CHAINS[0][0]), comment="rax (caller-saved) held tweak bits")

    def entry(self, table: int, k: int, bits: int | None = None) -> Mem:
        """Block k's tweak in table `table`."""
        return Mem("rsp", table * self.bytes + 16 * k) if bits is None else \
            Mem("rsp", table * self.bytes + 16 * k, bits=bits)

    def vectors(self, table: int) -> list[VReg | Mem]:
        """A table's D tweak vectors: loaded (before a fill overwrites them), or where they are."""
        b = self.b
        if self.layout.in_memory:
            return [self.entry(table, b.lanes * j) for j in range(b.depth)]
        return [b.v("vload", self.entry(table, b.lanes * j), role="tweak", comment=f"tweaks of vector {j}")
                for j in range(b.depth)]

    @property
    def aligned(self) -> bool:
        """ymm tables read as memory operands are 32-byte aligned: at depth 8 with rsp 16 mod
        32, every other vector split a cache line and the loop ran at 77% of ECB, not 88%."""
        return self.layout.in_memory and self.b.width == 256

    @property
    def few_depth(self) -> int:
        """Groups per iteration of the loop that shorter messages take, tweaks in registers:
        each group's tweak and state, the stream's next tweak and a round key must fit."""
        if not self.layout.in_memory:
            return self.b.depth
        return min(self.b.depth, (self.b.spec.vector_registers - 2) // 2)


class TweakTable(Tables):
    """Tweaks doubled in GPR chains, filled two batches ahead."""

    saved = SAVED

    def __init__(self, b: FunctionBuilder, layout: Layout) -> None:
        super().__init__(b, layout)
        self.share = self.blocks // layout.chains  # per chain

    def start(self, current: VReg) -> None:
        """Chain 0 two batches on from lane 0 of `current` (the next block's tweak), chain 1
        (if any) a share further."""
        b = self.b
        (lo, hi), (lo1, hi1) = CHAINS
        if "bmi2" in b.spec.features:
            b.s("mov.r64.imm", COUNT63, imm=63, comment="sarx count: bit 127 spread over the qword")
        with b.at_width(128):
            b.store(self.entry(0, 0), current, comment="the next block's tweak, to the GPRs")
        b.s("mov.r64.m64", lo, Mem("rsp", 0, bits=64))
        b.s("mov.r64.m64", hi, Mem("rsp", 8, bits=64))
        for _ in range(self.layout.filling):
            self.jump(lo, hi, self.blocks)
        if self.layout.chains == 2:
            b.s("mov.r64.r64", lo1, lo)
            b.s("mov.r64.r64", hi1, hi)
            self.jump(lo1, hi1, self.share)

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
        for k in range(self.share):
            for c, (lo, hi) in enumerate(CHAINS[:self.layout.chains]):
                e = k + c * self.share
                b.s("mov.m64.r64", self.entry(table, e, 64), lo, comment=f"tweak of block {e} of the batch")
                b.s("mov.m64.r64", Mem("rsp", self.entry(table, e).disp + 8, bits=64), hi)
                self.double(lo, hi)
        if self.layout.chains == 2:  # chain 1 ended where the next batch starts; it goes a share on
            b.s("mov.r64.r64", lo0, lo1)
            b.s("mov.r64.r64", hi0, hi1)
            self.jump(lo1, hi1, self.share)

    def stage(self, k: int, tweaks: list[VReg]) -> list[VReg | Mem]:
        """Filling batch k's vector-doubled tweaks: as they are, or (in memory) stored to the
        last table, which the loop fills only after the filling batches, and read from there."""
        b, last = self.b, self.layout.tables - 1
        if not self.layout.in_memory:
            return tweaks
        for j, t in enumerate(tweaks):
            b.store(self.entry(last, b.lanes * j), t, comment=f"tweaks of vector {j}, staged")
        return self.vectors(last)

    def filling_riders(self, k: int) -> None:
        """What rides filling batch k: table k's fill (for batch k + 2)."""
        self.fill(k)

    def loop_riders(self, k: int) -> None:
        """What rides the batch that reads table k: the fill of the table two batches on."""
        self.fill((k + 2) % self.layout.tables)
