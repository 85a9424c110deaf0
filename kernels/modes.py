"""ECB, CTR32, CBC and CFB128 in the DSL, with their loops and tails.

Every mode has the same skeleton: a main loop over D groups of one vector
(D x lanes blocks), a loop over single vectors, then the tail: on AVX-512 one
masked vector (fault-suppressing masked loads/stores never touch bytes outside
the buffers); elsewhere xmm blocks and, for CTR, a partial block through a
16-byte stack buffer (the red zone: these are leaf functions; win64 and --no-red-zone
files move rsp for it instead).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from aesgen.consts import be_counter_step, be_counter_xor, bswap_mask, counter_step, lane_index
from aesgen.dsl import FunctionBuilder, key
from aesgen.ir import Mem, VReg

from .aes import decrypt_rounds, encrypt_rounds, finish
from .regs import r8, r32
from .registry import Describe, describes

Body = Callable[..., None]

# Register roles beside the arguments (b.reg). SCRATCH and MASK_BITS hold public values only
# (counts from the length, byte indices); DATA holds data (a counter word, a text byte).
SCRATCH = "r10"  # block counts, byte index, a copy of the length
DATA = "r11"  # CTR's counter word, the partial block's bytes
MASK_BITS = "rax"  # the tail's element mask before kmovq (computed from the length)
MASK = "k1"  # the tail's element mask


def return_if_zero(b: FunctionBuilder, count: str) -> None:
    """len/nblocks == 0: return before touching any memory."""
    go = b.label_name("go")
    b.s("test.r64.r64", count, count)
    b.branch("ne", go)
    b.s("ret")
    b.label(go)


def group_counts(depth: int) -> tuple[int, ...]:
    """The vector loops: depth groups, then halving: a short message's vectors still run
    interleaved (at most one pass of each smaller count follows the main loop). Where a
    vector's body is long (OCB, Rijndael-256, half-gates) the out-of-order window overlaps
    few single vectors' round chains (OCB: docs/tuning.md, "OCB and OTR, measured"); ECB's
    and CTR32's short bodies overlap well enough: their remainders one vector at a time
    measured the same as in groups (avx2 256x6, 160 B to 4 KiB), so they keep (D, 1)."""
    counts = [depth]
    while counts[-1] > 1:
        counts.append(counts[-1] // 2)
    return tuple(counts)


def vector_loops(b: FunctionBuilder, count: str, per_vector: int, ptrs: tuple[str, ...],
                 body: Body, advance: Callable[[int], None] | None = None,
                 sizes: tuple[int, ...] | None = None, stride: int | None = None) -> None:
    """Loop over D vectors while count allows, then over single vectors (or over `sizes`).

    `per_vector` is how much one vector consumes of `count` (blocks or bytes); `stride`, how
    far one vector moves the pointers (default: one vector of blocks).
    """
    for g in sizes or ((b.depth, 1) if b.depth > 1 else (1,)):
        top, out = b.label_name(f"loop{g}x_"), b.label_name(f"end{g}x_")
        b.label(top)
        b.s("cmp.r64.imm", count, imm=g * per_vector)
        b.branch("b", out)
        body(g)
        step(b, count, per_vector, ptrs, g, advance, stride)
        b.branch("jmp", top)
        b.label(out)


def step(b: FunctionBuilder, count: str, per_vector: int, ptrs: tuple[str, ...], g: int,
         advance: Callable[[int], None] | None = None, stride: int | None = None) -> None:
    """Past g vectors: counters, pointers and the count."""
    if advance:
        advance(g)
    for p in ptrs:
        b.s("add.r64.imm", p, imm=g * (stride or b.lanes * 16))
    b.s("sub.r64.imm", count, imm=g * per_vector)


# Whole batches from which an encryption's stitched loop runs (32 vector registers). With one, it
# hashed nothing while its batch ran and the batch after the loop: single vectors and then one
# pass of hashing took 0.83x the ticks at 512 B (GCM 512x8, AES-128; family 6 model 207). On 16
# registers `aesgen bench` read 256 B 7% slower (avx2 256x6), so there it stays at one batch.
LAGGING_FROM = 2


def stitched_loop(b: FunctionBuilder, count: str, ptrs: tuple[str, str], body: Body,
                  advance: Callable[[int], None], stitch, fast: "FastCounter | None" = None) -> None:
    """The D-vector CTR loop with hashing riding along (GCM), then `stitch.after_main`.

    Decrypting, each batch's own ciphertext (the input) is hashed while its AES rounds
    run. Encrypting, the ciphertext exists only once the rounds are done, so the hash
    lags one batch: iteration i hashes batch i-1 (just stored) during batch i's rounds;
    the first batch runs alone, and the last one is left to after_main(pending=True). Fewer
    than LAGGING_FROM batches take the single vectors and no stitching. Decrypting, half a
    batch or more left after the loop may take a group of half a batch (stitch.half_group).
    With `fast`, a batch whose counters provably do not carry out of their low byte takes
    them from big-endian counter blocks (one vpaddd each, no byte shuffle)."""
    D, L, per_batch = b.depth, b.lanes, 16 * b.lanes * b.depth
    inp, outp = ptrs

    def ride() -> None:
        stitch.riders(inp, outp)

    top, out = b.label_name(f"loop{D}x_"), b.label_name(f"end{D}x_")
    if stitch.lagging:
        none, joined = b.label_name("no_batch"), b.label_name("batches_done")
        # (with one vector a batch the main loop is the only one: it must take every batch)
        b.s("cmp.r64.imm", count, imm=(LAGGING_FROM if D > 1 and b.spec.vector_registers >= 32 else 1) * per_batch)
        b.branch("b", none)
        body(D)  # the first batch: nothing to hash yet
        step(b, count, 16 * L, ptrs, D, advance)
        if fast:
            fast.advance_if_known(b, D * L)
    if fast:
        fast.swap(b)  # at the loop's top the counters are big-endian
    b.label(top)
    b.s("cmp.r64.imm", count, imm=per_batch)
    b.branch("b", out)
    if fast:
        unknown, carrying = b.label_name("shuffled_batch"), b.label_name("carrying_batch")

        def fast_batch(carries: bool) -> None:
            """A batch on big-endian counter blocks, then the base a batch on (with its carry)."""
            body(D, riders=ride, fast=True, carrying=carries)
            step(b, count, 16 * L, ptrs, D, None)
            if carries:
                fast.carried_step(b, D * L, dst=fast.base)
            else:
                b.v("paddd", fast.base, be_counter_step(D * L, L), dst=fast.base, comment="counters + batch")
            b.s("add.r64.imm", fast.counter, imm=D * L)
            b.branch("jmp", top)

        fast.branch_unless_clear(b, D * L, L, unknown, carrying)
        fast_batch(False)
        b.label(carrying)
        if fast.xor_form(b, D * L, L):
            # In the XOR form only the last vector and the next base can carry: a copy of the
            # batch takes those two through the byte-reversed form (vpaddd carries there).
            fast_batch(True)
        else:
            b.s("add.r64.imm", fast.counter, imm=D * L)
        b.label(unknown)
        fast.swap(b)
        body(D, riders=ride)
        step(b, count, 16 * L, ptrs, D, advance)
        fast.swap(b)
    else:
        body(D, riders=ride)
        step(b, count, 16 * L, ptrs, D, advance)
    b.branch("jmp", top)
    b.label(out)
    if fast:
        fast.swap(b)
    if stitch.lagging:
        stitch.after_main(pending=True)
        b.branch("jmp", joined)
        b.label(none)
        stitch.after_main(pending=False)
        b.label(joined)
    else:
        half = stitch.half_group()
        if half:  # half a batch or more left: a group of half a batch, hashing itself as it runs
            fewer = b.label_name("fewer_than_half")
            b.s("cmp.r64.imm", count, imm=16 * L * half)
            b.branch("b", fewer)
            body(half, riders=lambda: stitch.riders(inp, outp, half))
            step(b, count, 16 * L, ptrs, half, advance)
            b.label(fewer)
        stitch.after_main(pending=False)
    if D > 1:
        vector_loops(b, count, 16 * b.lanes, ptrs, body, advance, sizes=(1,))


@dataclass
class FastCounter:
    """Big-endian counter blocks for batches that cannot carry (GCM with a 12-byte IV).

    `counter` is a GPR holding the public counter of the next block (never 0), or 0 when
    it is not public (J0 hashed from the IV: then every batch takes the byte shuffle).
    While the low byte of every counter of a batch stays below 256, adding to the
    big-endian block is adding (j << 24) to its dword 3. Inside the loop CTR_BASE holds
    the big-endian blocks (lane l: counter + l, as the AES input wants them); a batch
    that may carry swaps it back to the byte-reversed form around its body. In the XOR
    form (xor_form: B a power of two, 32 registers) the vectors but the last are the first
    one's whitened blocks XOR constants, and a batch that may carry routes only its last
    vector and the next base through the byte-reversed form (carried_step)."""

    counter: str
    base: VReg  # CTR_BASE
    # The counter of the loop's first block, when public and known at generation time (every
    # batch then starts at start + mB); None when only the running code knows it (a streaming
    # update's loop starts wherever the text before it ended): no XOR form.
    start: int | None

    def xor_form(self, b: FunctionBuilder, blocks: int, lanes: int) -> bool:
        """Whether every vector of a fast batch of `blocks` = B but the last is the first
        vector's whitened blocks XOR a constant (be_counter_xor) rather than a vpaddd and a
        whitening XOR: B a power of two, so the batch's counter is start (mod B), and the lanes
        of those vectors, start + l + j lanes <= start + B - lanes - 1, stay below the next
        multiple of B (start <= lanes; with one lane a vector, start 2 would leave vector D - 2
        to carry too). One op a vector where there were two (GCM at 512x8: 6 of the loop's 171
        vector ops). Only the last vector and the next base can then carry: a batch where they
        may takes a copy of this form that routes just those two through the byte-reversed form
        (stitched_loop, carried_step). With 32 vector registers only: on 16 (avx2 256x8) the
        whitened base, live through the batch's start, cost more than the ops saved (1.2% slower
        at 16 KiB, family 6 model 207); taking the carry in a branch before the rounds instead of
        a copy (two values pinned across its labels) lost 1.5-2.5% at 256 B and 1 KiB."""
        return (self.start is not None and b.spec.vector_registers >= 32 and blocks & (blocks - 1) == 0
                and blocks >= 2 * lanes and self.start + blocks - lanes - 1 < blocks)

    def carried_step(self, b: FunctionBuilder, step_: int, dst: VReg | None = None) -> VReg:
        """CTR_BASE + step_ per lane with the carry out of the low byte: through the byte-reversed
        form, whose dword 0 is the counter (vpaddd there carries, and wraps at 2^32 as inc32)."""
        swapped = b.v("pshufb", self.base, bswap_mask(b.lanes), comment="dword 0 the counter: adds carry")
        return b.v("pshufb", b.v("paddd", swapped, counter_step(step_, b.lanes)), bswap_mask(b.lanes), dst=dst,
                   role="blk", comment=f"counters + {step_}, carried")

    def swap(self, b: FunctionBuilder) -> None:
        """Big-endian <-> byte-reversed counter blocks (the same byte reversal both ways)."""
        b.v("pshufb", self.base, bswap_mask(b.lanes), dst=self.base, comment="counter blocks' byte order")

    def branch_unless_clear(self, b: FunctionBuilder, blocks: int, lanes: int, unknown: str,
                            carrying: str) -> None:
        """Fall through only if the batch's counters and the next batch's base stay within one
        low byte: counter .. counter + blocks + lanes - 1 (the fast batch's closing vpaddd
        moves every lane of CTR_BASE on by `blocks`, and a lane's byte 15 must not wrap there
        either: that carry is lost). Public values only; else jump to `unknown` (no public
        counter) or `carrying`."""
        b.s("test.r64.r64", self.counter, self.counter)
        b.branch("e", unknown)
        b.s("mov.r64.r64", SCRATCH, self.counter)
        b.s("and.r64.imm", SCRATCH, imm=255)
        b.s("cmp.r64.imm", SCRATCH, imm=256 - blocks - lanes)
        b.branch("a", carrying)

    def advance_if_known(self, b: FunctionBuilder, blocks: int) -> None:
        skip = b.label_name("counter_unknown")
        b.s("test.r64.r64", self.counter, self.counter)
        b.branch("e", skip)
        b.s("add.r64.imm", self.counter, imm=blocks)
        b.label(skip)


def byte_loop(b: FunctionBuilder, index: str, count: str, body: Callable[[Callable[[str], Mem]], None],
              stem: str) -> None:
    """for (index = 0; index < count; index++) body(at), `at(base)` the byte [base + index]:
    a byte loop on a public count (tags, a rejected message's zeroing)."""
    top, end = b.label_name(stem), b.label_name(f"{stem}_done")
    b.s("xor.r32.r32", r32(index), r32(index))
    b.label(top)
    b.s("cmp.r64.r64", index, count)
    b.branch("ae", end)
    body(lambda base: Mem(base, 0, index=index, bits=8))
    b.s("add.r64.imm", index, imm=1)
    b.branch("jmp", top)
    b.label(end)


def qword_mask_for_blocks(b: FunctionBuilder, nblocks: str, scratch: str = SCRATCH) -> str:
    """MASK = one bit per qword of the first `nblocks` blocks."""
    b.s("lea.r64.m", scratch, Mem(nblocks, 0, index=nblocks, scale=1), comment="qwords = 2 * blocks")
    return _bzhi_mask(b, scratch)


def byte_mask(b: FunctionBuilder, count: str, scratch: str = MASK_BITS) -> str:
    """MASK = one bit per byte of the first `count` (a byte-exact AVX-512 load or store)."""
    return _bzhi_mask(b, count, scratch, "one bit per byte to touch")


def _bzhi_mask(b: FunctionBuilder, nbits: str, scratch: str = MASK_BITS,
               comment: str = "low bits set: the elements to touch") -> str:
    b.s("mov.r64.imm", scratch, imm=-1)
    b.s("bzhi.r64.r64.r64", scratch, scratch, nbits, comment=comment)
    b.s("kmovq.k.r64", MASK, scratch)
    return MASK


# ----------------------------------------------------------------------------- ECB
@describes("ecb_encrypt", decrypt=False)
@describes("ecb_decrypt", decrypt=True)
def ecb_function(b: FunctionBuilder, decrypt: bool, cipher: Callable[..., VReg] | None = None) -> None:
    """ECB; `cipher(b, x, nr, width=)` replaces the block cipher (the fixed-key hash)."""
    spec = b.spec
    inp, outp, n = (b.reg[a] for a in ("in", "out", "nblocks"))
    rounds = cipher or (decrypt_rounds if decrypt else encrypt_rounds)
    return_if_zero(b, n)

    def path(nr: int) -> None:
        def body(g: int, width: int | None = None, mask: str | None = None) -> None:
            def block(j: int) -> None:
                off = 16 * b.lanes * j
                x = b.v("vload", Mem(inp, off), width=width, mask=mask, role="blk")
                y = rounds(b, x, nr, width=width)
                b.store(Mem(outp, off), y, width=width, mask=mask)
            b.groups(g, block, comment=f"{g} group(s) of {b.lanes} block(s)")

        done = b.label_name("done")
        vector_loops(b, n, b.lanes, (inp, outp), body)
        if b.lanes > 1:
            b.s("test.r64.r64", n, n)
            b.branch("e", done)
            if spec.isa == "avx512":
                body(1, mask=qword_mask_for_blocks(b, n))
            else:  # VAES ymm without AVX-512: at most one block is left
                body(1, width=128)
        b.label(done)
        finish(b)

    b.key_paths("key", path)


# ----------------------------------------------------------------------------- CTR32
@describes("ctr32_encrypt")
def ctr32_function(b: FunctionBuilder) -> None:
    inp, outp, n, ctr = (b.reg[a] for a in ("in", "out", "len", "ctr"))
    return_if_zero(b, n)

    def path(nr: int) -> None:
        base = counter_base(b, Mem(ctr, 0))
        # The counter after the last block used (a partial block counts), written back now.
        blocks, word = SCRATCH, r32(DATA)
        b.s("lea.r64.m", blocks, Mem(n, 15))
        b.s("shr.r64.imm", blocks, imm=4, comment="blocks = ceil(len / 16)")
        # (DATA carries data-derived values; eax keeps only the public round count.)
        b.s("mov.r32.m32", word, Mem(ctr, 12, bits=32))
        b.s("bswap.r32", word)
        b.s("add.r32.r32", word, r32(blocks), comment="mod 2^32: only the low 32 bits count")
        b.s("bswap.r32", word)
        b.s("mov.m32.r32", Mem(ctr, 12, bits=32), word)
        ctr_stream(b, nr, base, inp, outp, n)
        finish(b)

    b.key_paths("key", path)


def counter_base(b: FunctionBuilder, block: Mem | VReg, first: int = 0, little_endian: bool = False,
                 dst: VReg | None = None) -> VReg:
    """CTR_BASE (or dst): per lane, the byte-reversed counter block (dword 0 = counter) + lane
    + first. `block` is in memory or an xmm value. `little_endian` (GCM-SIV): the counter is
    already dword 0, bytes 0..3; no reversal."""
    L = b.lanes
    base = dst or b.pinned("CTR_BASE")
    if isinstance(block, VReg):
        t = b.v("widen", block, role="ctr") if L > 1 else block
    else:
        t = b.v("vload_bcast", block, role="ctr")
    if not little_endian:
        t = b.v("pshufb", t, bswap_mask(L))
    if L > 1:
        t = b.v("paddd", t, lane_index(L), comment="lane l counts from ctr + l")
    if first:
        t = b.v("paddd", t, counter_step(first, L), comment=f"start at counter + {first}")
    b.assign(base, t)
    return base


def ctr_stream(b: FunctionBuilder, nr: int, base: VReg, inp: str, outp: str, n: str,
               stitch=None, little_endian: bool = False, public_counter: str | None = None,
               counter_start: int | None = 0) -> None:
    """out = in ^ keystream for n bytes from CTR_BASE (32-bit big-endian counter): main loop
    over D vectors, single vectors, then an AVX-512 masked vector or xmm blocks and a
    partial block through the red zone.

    `stitch` (GCM) rides along the main loop: see `stitched_loop`.
    `little_endian` (GCM-SIV): CTR_BASE lanes are the counter blocks themselves (see
    counter_base). `public_counter`: a GPR with the public counter of the next block, or
    0 (see FastCounter), for the stitched loop's shuffle-free batches; `counter_start`:
    its value at the first block (whenever it is public), None if known only at run time."""
    spec, L = b.spec, b.lanes
    bswap = None if little_endian else bswap_mask(L)
    counters = FastCounter(public_counter, base, counter_start) if public_counter and stitch else None

    def body(g: int, width: int | None = None, mask: str | None = None,
             riders: Callable[[], None] | None = None, fast: bool = False, carrying: bool = False) -> None:
        """`carrying` (the XOR form only): the last vector's counters may carry out of the low byte."""
        xor_form = fast and counters.xor_form(b, g * L, L)
        whitened = b.v("vxor", base, key(0), comment="round 0: whiten") if xor_form else None
        last = counters.carried_step(b, (g - 1) * L) if carrying else None

        def block(j: int) -> None:
            whiten = True
            if last is not None and j == g - 1:
                x = last
            elif xor_form and j < g - 1:
                whiten = False
                x = whitened if j == 0 else b.v("vxor", whitened, be_counter_xor(counters.start, j * L, L), role="blk",
                                                comment="whitened counter block, big-endian")
            elif fast:  # CTR_BASE holds big-endian counter blocks (FastCounter)
                x = base if j == 0 else b.v("paddd", base, be_counter_step(j * L, L), role="blk",
                                            comment="counter block, big-endian")
            else:
                c = base if j == 0 else b.v("paddd", base, counter_step(j * L, L), width=width)
                x = c if bswap is None else b.v("pshufb", c, bswap, width=width, role="blk",
                                                 comment="counter block")
            x = encrypt_rounds(b, x, nr, width=width, last=False, whiten=whiten)
            b.final()
            d = b.v("vload", Mem(inp, 16 * L * j), width=width, mask=mask, mask_elem="b")
            k = b.v("vxor", d, key(nr), width=width, comment="input folded into the last round key")
            y = b.v("aesenclast", x, k, width=width, comment=f"round {nr} (last)")
            b.store(Mem(outp, 16 * L * j), y, width=width, mask=mask, mask_elem="b")
        b.groups(g, block, comment=f"{g} group(s) of {L} counter block(s)", riders=riders)

    def advance(g: int) -> None:
        b.v("paddd", base, counter_step(g * L, L), dst=base)

    done = b.label_name("done")
    if stitch is None:
        vector_loops(b, n, 16 * L, (inp, outp), body, advance)
    else:
        stitched_loop(b, n, (inp, outp), body, advance, stitch, counters)
    b.s("test.r64.r64", n, n)
    b.branch("e", done)
    if spec.isa == "avx512":
        b.s("mov.r64.r64", SCRATCH, n)
        body(1, mask=_bzhi_mask(b, SCRATCH))
    else:
        if L > 1:  # whole blocks left over from the ymm loop, one xmm at a time
            top, partial = b.label_name("xmm"), b.label_name("partial")
            b.label(top)
            b.s("cmp.r64.imm", n, imm=16)
            b.branch("b", partial)
            body(1, width=128)
            b.v("paddd", base, counter_step(1, L), dst=base, width=128)
            b.s("add.r64.imm", inp, imm=16)
            b.s("add.r64.imm", outp, imm=16)
            b.s("sub.r64.imm", n, imm=16)
            b.branch("jmp", top)
            b.label(partial)
            b.s("test.r64.r64", n, n)
            b.branch("e", done)
        partial_block(b, base, bswap, nr, inp, outp, n)
    b.label(done)


def partial_block(b: FunctionBuilder, base: VReg, bswap, nr: int, inp: str, outp: str, n: str) -> None:
    """XOR the first n (< 16) bytes with one keystream block kept in the red zone
    (`bswap` None: the counter block is CTR_BASE's first lane as it is). Without a red
    zone (win64, --no-red-zone) the block gets 16 bytes of stack of its own."""
    own_stack = not b.spec.red_zone_allowed
    buf = Mem("rsp", 0 if own_stack else -16)
    x = base if bswap is None else b.v("pshufb", base, bswap, width=128)
    ks = encrypt_rounds(b, x, nr, width=128)
    if own_stack:  # after the rounds: round keys may be rsp-relative (GCM-SIV's frame)
        b.s("sub.r64.imm", "rsp", imm=16, comment="win64: no red zone" if b.spec.abi == "win64" else "--no-red-zone")
    b.store(buf, ks, width=128, comment="keystream block to the red zone")
    top = b.label_name("bytes")
    i = SCRATCH  # the byte index
    b.s("xor.r32.r32", r32(i), r32(i))
    b.label(top)
    b.s("movzx.r32.m8", r32(DATA), Mem(inp, 0, index=i, bits=8))
    b.s("xor.r8.m8", r8(DATA), Mem("rsp", buf.disp, index=i, bits=8))
    b.s("mov.m8.r8", Mem(outp, 0, index=i, bits=8), r8(DATA))
    b.s("add.r64.imm", i, imm=1)
    b.s("cmp.r64.r64", i, n)
    b.branch("b", top)
    z = b.v("vzero", width=128)
    b.store(buf, z, width=128, comment="leave no keystream behind")
    if own_stack:  # lea, not add: the static check reads add/pop as the start of an epilogue
        b.s("lea.r64.m", "rsp", Mem("rsp", 16), comment="release the block's stack")


# ----------------------------------------------------------------------------- CBC
def serial_chain(b: FunctionBuilder, role: str, blocks: Callable[[str, str, str, str, int, VReg], None]) -> None:
    """A serial mode (one block at a time, on xmm): nblocks == 0 touches nothing; per key size,
    `blocks(in, out, nblocks, iv, nr, state)` runs with `state` pinned to one register as `role`."""
    inp, outp, n, iv = (b.reg[a] for a in ("in", "out", "nblocks", "iv"))
    return_if_zero(b, n)

    def path(nr: int) -> None:
        state = b.pinned(role)
        with b.at_width(128):
            blocks(inp, outp, n, iv, nr, state)
        finish(b)

    b.key_paths("key", path)


@describes("cbc_encrypt")
def cbc_encrypt_function(b: FunctionBuilder) -> None:
    """Serial by definition: one xmm chain, nr AES rounds of latency per block.

    The next plaintext block (with round key 0) is folded into this block's
    last round key, so the chain is nothing but AES rounds.
    """
    def blocks(inp: str, outp: str, n: str, iv: str, nr: int, state: VReg) -> None:
        chain = b.v("vload", Mem(iv, 0), role="iv")
        p = b.v("vload", Mem(inp, 0))
        p = b.v("vxor", p, chain, comment="P0 ^ IV")
        b.v("vxor", p, key(0), dst=state, comment="round 0: whiten")
        top, last = b.label_name("block"), b.label_name("last")
        b.label(top)
        b.s("sub.r64.imm", n, imm=1)
        b.branch("e", last)
        u = b.v("vload", Mem(inp, 16), comment="next plaintext block")
        u = b.v("vxor", u, key(0), comment="P[i+1] ^ k0")
        t = b.v("vxor", u, key(nr), comment="folded into the last round key")
        encrypt_rounds(b, state, nr, last_key=t, whiten=False, dst=state)
        c = b.v("vxor", state, u, comment="C[i] = state ^ P[i+1] ^ k0")
        b.store(Mem(outp, 0), c)
        b.s("add.r64.imm", inp, imm=16)
        b.s("add.r64.imm", outp, imm=16)
        b.branch("jmp", top)
        b.label(last)
        c = encrypt_rounds(b, state, nr, whiten=False)
        b.store(Mem(outp, 0), c)
        b.store(Mem(iv, 0), c, comment="iv = last ciphertext block")

    serial_chain(b, "CBC_STATE", blocks)


@describes("cfb_encrypt")
def cfb_encrypt_function(b: FunctionBuilder) -> None:
    """CFB128 encryption, C[i] = P[i] ^ E(C[i-1]) from C[-1] = iv: serial, like CBC encryption.

    The state is C[i-1] ^ k0, and P[i] ^ k0 is folded into the last round key, so the state
    moves to C[i] ^ k0 through AES rounds alone.
    """
    def blocks(inp: str, outp: str, n: str, iv: str, nr: int, state: VReg) -> None:
        chain = b.v("vload", Mem(iv, 0), role="iv")
        b.v("vxor", chain, key(0), dst=state, comment="round 0: whiten the iv")
        top = b.label_name("block")
        b.label(top)
        p = b.v("vload", Mem(inp, 0), comment="plaintext block")
        p = b.v("vxor", p, key(0), comment="P[i] ^ k0")
        t = b.v("vxor", p, key(nr), comment="folded into the last round key")
        encrypt_rounds(b, state, nr, last_key=t, whiten=False, dst=state)
        b.store(Mem(outp, 0), b.v("vxor", state, key(0), comment="C[i] = state ^ k0"))
        b.s("add.r64.imm", inp, imm=16)
        b.s("add.r64.imm", outp, imm=16)
        b.s("sub.r64.imm", n, imm=1)
        b.branch("ne", top)
        b.store(Mem(iv, 0), b.v("vxor", state, key(0)), comment="iv = last ciphertext block")

    serial_chain(b, "CFB_STATE", blocks)


@describes("cbc_decrypt")
def cbc_decrypt_function(b: FunctionBuilder) -> None:
    spec = b.spec
    L = b.lanes
    inp, outp, n, iv = (b.reg[a] for a in ("in", "out", "nblocks", "iv"))
    return_if_zero(b, n)

    def path(nr: int) -> None:
        # CARRY: a vector whose top lane is the ciphertext block before the next group.
        carry = b.pinned("CBC_CARRY")
        b.v("vload_bcast", Mem(iv, 0), dst=carry)
        # The returned iv is the last ciphertext block: save it before in-place writes.
        b.s("mov.r64.r64", SCRATCH, n)
        b.s("shl.r64.imm", SCRATCH, imm=4)
        last = b.v("vload", Mem(inp, -16, index=SCRATCH), width=128)
        b.store(Mem(iv, 0), last, width=128, comment="iv = last ciphertext block")

        def body(g: int, width: int | None = None, mask: str | None = None,
                 update_carry: bool = True) -> None:
            cs: list[VReg] = []

            def block(j: int) -> None:
                off = 16 * L * j
                c = b.v("vload", Mem(inp, off), width=width, mask=mask, role="blk")
                cs.append(c)
                if j == 0:  # the block before comes from the previous vector, in a register
                    p = carry if L == 1 else b.v("prev_lanes", c, carry, width=width,
                                                 comment="previous ciphertext blocks")
                    k = b.v("vxor", p, key(nr), width=width, comment="chaining folded into the last round key")
                x = decrypt_rounds(b, c, nr, width=width, last=False)
                b.final()
                if j > 0:  # reload: groups finish in descending order, so this is still ciphertext
                    p = b.v("vload", Mem(inp, off - 16), width=width, comment="previous ciphertext blocks")
                    k = b.v("vxor", p, key(nr), width=width, comment="chaining folded into the last round key")
                y = b.v("aesdeclast", x, k, width=width, comment=f"round {nr} (last)")
                b.store(Mem(outp, off), y, width=width, mask=mask)
            b.groups(g, block, comment=f"{g} group(s) of {L} block(s)", final_order="descending")
            if update_carry:
                b.assign(carry, cs[-1], width=width)

        done = b.label_name("done")
        vector_loops(b, n, L, (inp, outp), body)
        if L > 1:
            b.s("test.r64.r64", n, n)
            b.branch("e", done)
            if spec.isa == "avx512":
                body(1, mask=qword_mask_for_blocks(b, n), update_carry=False)
            else:  # one block left after the ymm loops
                with b.at_width(128):
                    c = b.v("vload", Mem(inp, 0))
                    p = b.v("top_lane", carry, comment="last block of the previous vector")
                    k = b.v("vxor", p, key(nr))
                    b.store(Mem(outp, 0), decrypt_rounds(b, c, nr, last_key=k))
        b.label(done)
        finish(b)

    b.key_paths("key", path)



def block_cipher_functions(set_key: Callable[[FunctionBuilder, bool], object],
                           ecb: Callable[[FunctionBuilder, bool], object], ctr32: Describe,
                           cbc_encrypt: Describe, cbc_decrypt: Describe) -> dict[str, Describe]:
    """Another backend's key setup and ECB/CTR32/CBC descriptions (the bitsliced ones) by C
    function name, for the functions the descriptions here mark with `describes`."""
    return {"set_encrypt_key": lambda b: set_key(b, False), "set_decrypt_key": lambda b: set_key(b, True),
            "ecb_encrypt": lambda b: ecb(b, False), "ecb_decrypt": lambda b: ecb(b, True),
            "ctr32_encrypt": ctr32, "cbc_encrypt": cbc_encrypt, "cbc_decrypt": cbc_decrypt}
