"""AES-OTR v3.1 (Minematsu's Offset Two-Round mode), parallel associated-data hash, 16-byte tags.

The algorithm, step by step, is in verify/otr.py (the independent reference). Here:

    L = E(nonce block); chunk i (blocks 2i-1, 2i) has offsets L_i = 2^(i-1) L, L*_i = 2^(i-1) 3L
    C1 = E(L_i ^ M1) ^ M2;  C2 = E(L*_i ^ C1) ^ M1;  Sigma ^= M2     (decrypting: swap L_i, L*_i)

Offsets are kept byte-reversed ("le", kernels/gfdouble.py) in a TweakStream, so one vector of
L lanes holds the offsets of L consecutive chunks and advances with the spec's doubling
method; byte-reversing back gives L_i, and L*_i = L_i ^ L_(i+1) is L_i xor the same vector
moved on by one lane (`next_lanes`). A register's lanes are chunks: two loaded vectors of
blocks are dealt into first blocks and second blocks, and the outputs zipped back.
Each group of a batch runs both Feistel rounds (2 x nr AES rounds) in its stream; the D
groups' first rounds interleave, then their second rounds. On AVX-512 (depth 1..4) the
batches are software-pipelined instead: one batch's second rounds beside the next one's
first rounds, the offsets read from two frame tables that general-purpose registers fill
two batches ahead, their stores riding between the AES rounds (Otr.pipelined_batches;
docs/tuning.md has the measurements behind it). On ymm with 16 registers (avx2) the batches are
staged instead (kernels/otr_staged.py): blocks, offsets and last keys go to frame slots first,
so a group holds only its AES state and 8 groups fit; at depths 4 and 8 the whole batches pair
chunks i and i + D in a vector (no lane shuffle) and stage the next batch while this one's
rounds run. On xmm (avx) the offsets come from tables
that general-purpose registers fill (kernels/otr_tabled.py), staged the same way.

The AD hash is PMAC-like: TA = E(sum of E(2^(j-1) Q ^ A_j) ^ ozp(A_a) ^ c' 2^(a-1) Q) with
Q = E(0) kept in the key, its mask stream like the offsets'. Tag = E(Sigma ^ c La) ^ TA.

Whole chunks the vector loops leave: one masked vector on AVX-512 (masked_chunks), else xmm.

Partial blocks and the nonce (1..15 bytes) are read and written byte-exactly: AVX-512 byte
masks, else a gather into two GPRs (rbp, r11, rax: the only GPRs that hold data, none of
them ever an address or a branch condition) and a byte loop out of a stack slot.
Stack frame (rsp-relative, under six saved registers): [0] gathered bytes, [16] a block on
its way out, [32] the tag difference, [48] TA, pipelined: [64] the two offset tables; all wiped
before returning.
"""
from __future__ import annotations

from aesgen.consts import bswap_mask, zip_index
from aesgen.dsl import FunctionBuilder, key
from aesgen.gf128 import clmul
from aesgen.ir import XOR3, Const, Mem, VReg
from aesgen.spec import KernelSpec

from .aes import encrypt_rounds, key_size_paths, finish
from .frame import CALLEE_SAVED, aligned, leave_frame, open_frame, push_saved
from .gcm import BYTE, BYTES_HI, gather_partial, ored_difference, tag_verdict, zero_bytes
from .gfdouble import TweakStream, advance, double, gpr_double, times_x_pow
from .modes import MASK, byte_mask, vector_loops
from .otr_staged import StagedChunks, sizes, slot_bytes, staged
from .otr_tabled import TabledChunks, table_bytes, tabled
from .regs import RESULT, r8, r32
from .registry import describes
from .xts import steal_table, xmm_method

GATHER, OUTGOING, TAG_DIFF, TA = (Mem("rsp", o) for o in (0, 16, 32, 48))
WIPED = range(0, 64, 16)
PIPELINED_DEPTH = 4  # the deepest batches that are software-pipelined
# Whole batches from which the software-pipelined loop runs: below, its tables' GPR fill is not
# hidden (two batches took 1.17-1.24x the ticks of one and then groups; docs/tuning.md).
PIPELINED_FROM = 3
STAGED_AD_DEPTH = 4  # the AD hash's groups beside staged batches (each keeps a mask and a state)
PLAIN_DEPTH = 4  # xmm groups that keep their offsets in registers: the deepest that fit 16
TABLE = 64  # after the four slots: the offset tables (software pipelining)

# Register roles beside the arguments (b.reg). The stack arguments move to OUT, LEN and TAG at
# entry; COUNT and REST are the bytes of whole chunks/blocks and after them (REST: the verdict
# at the end). Only GCM's data GPRs (kernels/gcm.py: BYTES_LO, BYTES_HI, BYTE) hold data
# (gathered bytes, the tag difference), never an address or a branch condition; INDEX is public
# scratch (a byte index, a table's address, a byte-mask length). The offset tables' GPRs are
# Otr.OFS_LO, OFS_HI, OFS_T, COUNT63.
OUT, LEN, TAG = "r12", "r13", "r14"
COUNT, REST = "rbx", "r15"
INDEX = "r10"


# The multiples of masks the spec names, as polynomials in x: 3 = x + 1, 7 = x^2 + x + 1,
# and 3^2 = (x + 1)^2, which over GF(2) is x^2 + 1.
THREE = 0b11
SEVEN = 0b111
THREE_SQUARED = clmul(THREE, THREE)


def marker_table() -> Const:
    """16 bytes at offset n have a 1 in byte 15 - n: the bit that ends the nonce block's zeros."""
    return Const("otr_nonce_marker", bytes(15) + b"\x01" + bytes(16))


def pad_table() -> Const:
    """16 bytes at offset 16 - r: 0x80 in byte r (one-zero padding of r < 16 bytes), or none."""
    return Const("otr_pad", bytes(16) + b"\x80" + bytes(15))


def keep_table() -> Const:
    """16 bytes at offset 16 - r keep bytes 0..r-1."""
    return Const("otr_keep", b"\xff" * 16 + bytes(16))


@describes("otr_set_key")
def otr_set_key_function(b: FunctionBuilder) -> None:
    """P_otr_set_key(user_key, bits, tkey): the encryption schedule, then Q = E_K(0)."""
    spec = b.spec
    out = b.reg["key"]

    def q(nr: int) -> None:
        with b.at_width(128):
            zero = b.v("vzero")
            e = encrypt_rounds(b, zero, nr, key_at=lambda i: Mem(out, i * spec.key_stride))
            b.store(Mem(out, spec.otr_q_offset), e, comment="Q = E_K(0), the AD hash's mask seed")
        b.s("xor.r32.r32", r32(RESULT), r32(RESULT))
        finish(b)

    key_size_paths(b, then=q)



def pipelined(spec: KernelSpec, depth: int) -> bool:
    """Whether the batch loop is software-pipelined with GPR-doubled offsets (AVX-512 AES-NI,
    depth <= PIPELINED_DEPTH); otherwise offsets come from the spec's vector doubling method."""
    return spec.isa == "avx512" and depth <= PIPELINED_DEPTH and spec.backend == "aesni"

class Otr:
    """One of otr_encrypt / otr_decrypt. Two pinned registers carry everything across loops
    and branches: MASKS (the AD masks, then the chunk offsets, then c La; byte-reversed) and
    SUM (the AD sum, then the checksum). TA waits in the frame while the message runs."""

    def __init__(self, b: FunctionBuilder, decrypt: bool) -> None:
        self.b, self.decrypt, self.spec = b, decrypt, b.spec
        self.key, self.nonce, self.noncelen, self.aad, self.aadlen, self.inp = (
            b.reg[a] for a in ("key", "nonce", "noncelen", "aad", "aadlen", "in"))
        self.outp, self.len, self.tag = OUT, LEN, TAG
        self.count, self.rest = COUNT, REST
        self.avx512 = self.spec.isa == "avx512"
        self.method = xmm_method(b)
        self.width = b.width
        # AVX-512's 32 registers hold two batches' AES states at once: the second rounds of
        # one batch run beside the first rounds of the next (pipelined_batches). Deeper
        # batches push the round keys out of the registers (measured slower).
        # (Not on the GFNI backend: its rounds keep more values live than two batches leave.)
        self.pipelined = pipelined(self.spec, b.depth)
        self.vector_bytes = b.width // 8
        # after the fixed slots, two offset tables of one batch each (its D L chunks' L_i,
        # big-endian, and the next chunk's), in whole vectors for the wipe
        self.table_bytes = -(-16 * (b.depth * b.lanes + 1) // self.vector_bytes) * self.vector_bytes
        self.staged = not self.pipelined and staged(self.spec)
        self.tabled = not self.pipelined and tabled(self.spec)
        # after the fixed slots: the offset tables (pipelined) or the staged batches' slots,
        # then the GPR-filled tables and their slots
        self.area_bytes = 2 * self.table_bytes if self.pipelined else \
            slot_bytes(b.depth, b.width) if self.staged else 0
        self.tabled_at = TABLE + self.area_bytes
        if self.tabled:
            self.area_bytes += table_bytes(b.depth, b.lanes, b.width)
        self.frame = aligned(TABLE + self.area_bytes)

    # -- the function -----------------------------------------------------------
    def function(self) -> None:
        b = self.b
        push_saved(b)
        for reg, arg in ((self.outp, "out"), (self.len, "len"), (self.tag, "tag")):
            b.s("mov.r64.m64", reg, b.stack_arg(arg, pushed=len(CALLEE_SAVED)))
        open_frame(b, self.frame)
        self.bad, self.exit = b.label_name("bad_nonce"), b.label_name("exit")
        b.s("cmp.r64.imm", self.noncelen, imm=1, comment="nonces are 1..15 bytes")
        b.branch("b", self.bad)
        b.s("cmp.r64.imm", self.noncelen, imm=15)
        b.branch("a", self.bad)
        b.key_paths("key", self.path, scratch=r32(INDEX))  # rax carries data bytes
        b.single_path(None, self.epilogue)

    def path(self, nr: int) -> None:
        b = self.b
        masks, total = b.pinned("MASKS"), b.pinned("SUM")
        self.ad_hash(nr, masks, total)
        with b.at_width(128):
            l = encrypt_rounds(b, self.nonce_block(), nr)
            l = b.v("pshufb", l, bswap_mask(1), comment="L, byte-reversed")
        offsets = TweakStream(b, self.spec.gfdouble, masks)
        offsets.start(l)  # at the function's width: lane l = 2^l L
        b.v("vzero", dst=total)
        self.chunks(nr, offsets, total)
        self.last_chunk(nr, masks, total)
        with b.at_width(128):
            x = b.v("vxor", total, b.v("pshufb", masks, bswap_mask(1)), comment="Sigma ^ c La")
            te = encrypt_rounds(b, x, nr)
            tag = b.v("vxor", te, TA, comment="tag = TE ^ TA")
            if self.decrypt:
                self.check_tag(tag)
            else:
                b.store(Mem(self.tag, 0), tag, comment="the tag")
                b.s("xor.r32.r32", r32(RESULT), r32(RESULT))
        b.branch("jmp", self.exit)

    # -- byte-exact loads and stores ---------------------------------------------
    def load_bytes(self, src: str, count: str) -> VReg:
        """The count (1..16, public) bytes at src, zero-padded to a block; nothing past them
        read. (Without AVX-512 a loop: nothing but pinned registers may live across it.)"""
        b = self.b
        with b.at_width(128):
            if self.avx512:
                return b.v("vload", Mem(src, 0), mask=byte_mask(b, count, INDEX), mask_elem="b",
                           comment="only the count bytes")
            b.s("mov.r64.r64", INDEX, count)  # gather_partial counts it down: count stays
            gather_partial(b, src, INDEX, GATHER)
            # two 8-byte loads: a 16-byte one could not be forwarded from the two stores
            lo = b.v("vload64", Mem("rsp", GATHER.disp, bits=64))
            hi = b.v("vload64", Mem("rsp", GATHER.disp + 8, bits=64))
            return b.v("punpcklqdq", lo, hi, comment="the bytes, zero-padded")

    def store_bytes(self, dst: str, count: str, v: VReg) -> None:
        """The first count (1..16, public) bytes of v to dst; nothing past them written."""
        b = self.b
        with b.at_width(128):
            if self.avx512:
                b.store(Mem(dst, 0), v, mask=byte_mask(b, count, INDEX), mask_elem="b", comment="only count bytes")
                return
            b.store(OUTGOING, v)
            top, done = b.label_name("put"), b.label_name("put_done")
            b.s("xor.r32.r32", r32(INDEX), r32(INDEX))
            b.label(top)
            b.s("cmp.r64.r64", INDEX, count)
            b.branch("ae", done)
            b.s("movzx.r32.m8", r32(BYTES_HI), Mem("rsp", OUTGOING.disp, index=INDEX, bits=8))
            b.s("mov.m8.r8", Mem(dst, 0, index=INDEX, bits=8), r8(BYTES_HI))
            b.s("add.r64.imm", INDEX, imm=1)
            b.branch("jmp", top)
            b.label(done)

    def table(self, const: Const, index: str) -> Mem:
        """16 bytes of a constant table at offset index (a public length), through INDEX."""
        self.b.s("lea.r64.m", INDEX, const)
        return Mem(INDEX, 0, index=index)

    def complement(self, count: str) -> str:
        """16 - count, where the keep and pad tables are read for count bytes: in aadlen's
        register, free once the AD's block counts are taken from it."""
        b, free = self.b, self.aadlen
        b.s("mov.r64.r64", free, count)
        b.s("neg.r64", free)
        b.s("add.r64.imm", free, imm=16)
        return free

    def padding(self, count: str) -> Mem:
        """ozp's padding of count (0..16) bytes: 0x80 in byte count (none for 16)."""
        return self.table(pad_table(), self.complement(count))

    def kept(self, v: VReg, count: str) -> VReg:
        """v with its bytes from count (1..16) on cleared."""
        return self.b.v("pand", v, self.table(keep_table(), self.complement(count)))

    # -- GF(2^128) multiples, byte-reversed, in place -------------------------------
    def times(self, v: VReg, poly: int) -> None:
        """v = poly(x) v in place, poly's bit k the coefficient of x^k (3 = x + 1, ...)."""
        b = self.b
        with b.at_width(128):
            powers = [v]
            for _ in range(poly.bit_length() - 1):
                powers.append(double(b, powers[-1], self.method))
            terms = [p for k, p in enumerate(powers) if poly >> k & 1]
            acc = terms[0] if len(terms) == 1 else b.v("vxor", terms[0], terms[1])
            for t in terms[2:]:
                acc = b.v("vxor", acc, t)
            b.v("vmov", acc, dst=v, comment=f"{poly:#b}(x) times it")

    def times_by_length(self, v: VReg, count: str, whole: int, full: int, part: int) -> None:
        """v = full v if count == whole (a public length), else part v."""
        b = self.b
        other, done = b.label_name("partial_mask"), b.label_name("mask_done")
        b.s("cmp.r64.imm", count, imm=whole)
        b.branch("ne", other)
        self.times(v, full)
        b.branch("jmp", done)
        b.label(other)
        self.times(v, part)
        b.label(done)

    # -- nonce and offsets --------------------------------------------------------
    def nonce_block(self) -> VReg:
        """[tag length field (0 for 16-byte tags)] 0* 1 N: N right-aligned, built in a register."""
        b = self.b
        n = self.load_bytes(self.nonce, self.noncelen)
        n = b.v("pshufb", n, self.table(steal_table(), self.noncelen), comment="N to the block's last bytes")
        return b.v("vxor", n, self.table(marker_table(), self.noncelen), comment="the 1 before N")

    def xor3(self, a, c, d, width: int | None = None, comment: str = "", dst: VReg | None = None) -> VReg:
        b = self.b
        if self.avx512:
            return b.v("ternlog", a, c, d, imm=XOR3, width=width, comment=comment, dst=dst)
        return b.v("vxor", b.v("vxor", a, c, width=width), d, width=width, comment=comment, dst=dst)

    def chunk_offsets(self, les: list[VReg], following: VReg, width: int | None = None) -> list[tuple[VReg, VReg]]:
        """(L_i, L*_i) vectors from byte-reversed L_i vectors and the one after them."""
        b = self.b
        w = width or b.width
        bes = [b.v("pshufb", v, bswap_mask(w // 128), width=w, role="ofs", comment="L_i")
               for v in les + [following]]
        out = []
        for j in range(len(les)):
            nxt = bes[j + 1] if w == 128 else b.v("next_lanes", bes[j], bes[j + 1], width=w, comment="L_(i+1)")
            out.append((bes[j], b.v("vxor", bes[j], nxt, width=w, role="ofs", comment="L*_i = L_i ^ 2 L_i")))
        return out

    # -- whole chunks -------------------------------------------------------------
    def feistel(self, nr: int, block, ofs: tuple[VReg, VReg], total: VReg,
                width: int | None = None) -> tuple[VReg, VReg]:
        """One vector of chunks through both rounds; returns the two output block vectors.
        block(p) reads the chunks' first (p = 0) or second (1) blocks: once, both folded into
        the last round keys at the start; or, with few registers (xmm, where that costs only a
        load, or the compact variant), again right where each is used, so a group keeps only
        its AES state and its second offset live."""
        late = self.b.compact or (width or self.b.width) == 128
        y1, x2, k2 = self.first_round(nr, block, ofs, total, late, width)
        return y1, self.second_round(nr, x2, k2 or (lambda: self.last_key(nr, block(0), width)), total, width)

    def last_key(self, nr: int, first: VReg, width: int | None = None) -> VReg:
        return self.b.v("vxor", first, key(nr), width=width,
                        comment="first block folded into the last round key")

    def first_round(self, nr: int, block, ofs: tuple[VReg, VReg], total: VReg, late: bool,
                    width: int | None = None) -> tuple[VReg, VReg, VReg | None]:
        """The first Feistel round: (its output y1, the second round's whitened input, and
        the second round's last key if the first blocks were read only once)."""
        b = self.b
        o1, o2 = (ofs[1], ofs[0]) if self.decrypt else ofs
        first = block(0)
        x = self.xor3(first, o1, key(0), width, "round 1: block ^ offset ^ round key 0")
        k1 = k2 = None
        if not late:  # both last round keys now: the blocks are read once
            k2 = self.last_key(nr, first, width)
            second = block(1)
            k1 = b.v("vxor", second, key(nr), width=width, comment="second block folded into the last round key")
            self.checksum_plain(total, second, width)
        x = self.middle_rounds(nr, x, width)
        if late:  # the second blocks read once, for both
            second = block(1)
            self.checksum_plain(total, second, width)
            k1 = b.v("vxor", second, key(nr), width=width, comment="second block folded into the last round key")
        y1 = b.v("aesenclast", x, k1, width=width, comment=f"round {nr}: first output block")
        return y1, self.xor3(y1, o2, key(0), width, "round 2: block ^ offset ^ round key 0"), k2

    def checksum_plain(self, total: VReg, second: VReg, width: int | None) -> None:
        if not self.decrypt:
            self.b.v("vxor", total, second, dst=total, width=width, comment="checksum of even plaintext blocks")

    def second_round(self, nr: int, x: VReg, k2, total: VReg, width: int | None = None) -> VReg:
        """The second Feistel round from its whitened input; k2: its last key, or a thunk
        that reads it right before the last round."""
        b = self.b
        x = self.middle_rounds(nr, x, width)
        y2 = b.v("aesenclast", x, k2 if isinstance(k2, VReg) else k2(), width=width,
                 comment=f"round {nr}: second output block")
        if self.decrypt:
            b.v("vxor", total, y2, dst=total, width=width, comment="checksum of even plaintext blocks")
        return y2

    def middle_rounds(self, nr: int, x: VReg, width: int | None = None) -> VReg:
        for r in range(1, nr):
            x = self.b.v("aesenc", x, key(r), width=width, comment=f"round {r}")
        return x

    def dealt(self, off: int, p: int) -> VReg:
        """The first (p = 0) or second (1) blocks of the L chunks at inp + off."""
        b, L = self.b, self.b.lanes
        if L == 1:
            return b.v("vload", Mem(self.inp, off + 16 * p), role="blk")
        if L == 2 and not self.avx512:  # lane by lane: vinserti128 on any vector ALU, not the shuffle port
            with b.at_width(128):
                v = b.v("vload", Mem(self.inp, off + 16 * p), role="blk")
            return b.v("insert_lane", v, Mem(self.inp, off + 16 * p + 32), imm=1, role="blk",
                       comment="first blocks of the chunks" if p == 0 else "second blocks")
        v0 = b.v("vload", Mem(self.inp, off), role="blk")
        return b.v("deal_lanes", v0, Mem(self.inp, off + 16 * L), imm=p, role="blk",
                   comment="first blocks of the chunks" if p == 0 else "second blocks")

    def store_chunks(self, off: int, y1: VReg, y2: VReg) -> None:
        """The L chunks' output blocks back in order, to outp + off."""
        b, L = self.b, self.b.lanes
        for p in (0, 1):
            index = (zip_index(p, L),) if L == 4 else ()
            v = (y1, y2)[p] if L == 1 else b.v("zip_lanes", y1, y2, *index, imm=p,
                                               comment="chunks back in order")
            b.store(Mem(self.outp, off + 16 * L * p), v)

    # -- whole chunks -------------------------------------------------------------
    def chunks(self, nr: int, offsets: TweakStream, total: VReg) -> None:
        """Every chunk but the last: count = bytes of them, rest = the 0..32 bytes after."""
        b, L = self.b, self.b.lanes
        inp, outp, count, rest = self.inp, self.outp, self.count, self.rest
        empty = b.label_name("empty_text")
        b.s("mov.r64.r64", count, self.len)
        b.s("mov.r64.r64", rest, self.len)
        b.s("test.r64.r64", count, count)
        b.branch("e", empty)
        b.s("sub.r64.imm", count, imm=1)
        b.s("and.r64.imm", count, imm=-32, comment="whole chunks before the last 1..32 bytes")
        b.s("sub.r64.r64", rest, count)
        b.label(empty)

        def body(g: int) -> None:
            ofs = self.chunk_offsets(offsets.vectors(g), offsets.current)

            def block(j: int) -> None:
                off = 32 * L * j
                y1, y2 = self.feistel(nr, lambda p: self.dealt(off, p), ofs[j], total)
                b.final()
                self.store_chunks(off, y1, y2)
            b.groups(g, block, comment=f"{g} group(s) of {L} chunk(s)")

        if self.tabled:  # two batches or more; the loops below take the rest
            TabledChunks(self, self.tabled_at).run(nr, offsets, total)
        if self.staged:
            StagedChunks(self, TABLE, INDEX).run(nr, offsets, total)
        else:
            if self.pipelined:
                self.pipelined_batches(nr, offsets, total)
            vector_loops(b, count, 32 * L, (inp, outp), body, stride=32 * L,
                         sizes=(1,) if self.pipelined else self.rest_sizes())
        if self.avx512 and L > 1:  # the 1 .. L-1 whole chunks left: one masked vector
            self.masked_chunks(nr, offsets, total)
        fold(b, total)
        if L > 1 and not self.avx512:  # whole chunks left over from the vector loops, one at a time
            top, out = b.label_name("chunk"), b.label_name("chunks_done")
            cur = offsets.current  # from here on only its first lane
            b.label(top)
            b.s("cmp.r64.imm", count, imm=32)
            b.branch("b", out)
            with b.at_width(128):
                nxt = double(b, cur, self.method)
                ofs = self.chunk_offsets([cur], nxt)[0]
                y1, y2 = self.feistel(nr, lambda p: b.v("vload", Mem(inp, 16 * p)), ofs, total)
                b.store(Mem(outp, 0), y1)
                b.store(Mem(outp, 16), y2)
                b.assign(cur, nxt, comment="the next chunk's offset")
            b.s("add.r64.imm", inp, imm=32)
            b.s("add.r64.imm", outp, imm=32)
            b.s("sub.r64.imm", count, imm=32)
            b.branch("jmp", top)
            b.label(out)

    def masked_chunks(self, nr: int, offsets: TweakStream, total: VReg) -> None:
        """AVX-512: the count (< 32 L) bytes of whole chunks left, one vector through qword
        masks (lanes past them load as zero: nothing added to an encryption's checksum, a
        decryption's takes their outputs back out; not stored); then the first lane of
        `offsets.current` moves on by their number. (One at a time: serial Feistel rounds.)"""
        b, L = self.b, self.b.lanes
        inp, outp, count = self.inp, self.outp, self.count
        done, step = b.label_name("no_masked_chunks"), b.label_name("masked_step")
        b.s("test.r64.r64", count, count)
        b.branch("e", done)

        def masks(qwords: str, half: int) -> str:
            """MASK = the qwords of `half` (0 or 1: the first or second 16 L bytes) of the count."""
            b.s("mov.r64.imm", INDEX, imm=-1)
            b.s("bzhi.r64.r64.r64", INDEX, INDEX, qwords, comment="one bit per qword of the chunks")
            if half:
                b.s("shr.r64.imm", INDEX, imm=2 * L, comment="those past the first vector")
            b.s("kmovq.k.r64", MASK, INDEX)
            return MASK

        b.s("shr.r64.imm", count, imm=3, comment="qwords of the chunks left (public)")
        halves = [b.v("vload", Mem(inp, 16 * L * h), mask=masks(count, h), role="blk",
                      comment="chunks, zero past them") for h in (0, 1)]
        blocks = [b.v("deal_lanes", *halves, imm=p, role="blk",
                      comment="first blocks of the chunks" if p == 0 else "second blocks") for p in (0, 1)]
        cur = b.v("vmov", offsets.current, role="ofs", comment="(the chunks' offsets)")
        method = offsets.method
        following = times_x_pow(b, cur, L) if method == "batch" else advance(b, cur, L, method)
        y1, y2 = self.feistel(nr, lambda p: blocks[p], self.chunk_offsets([cur], following)[0], total)
        if self.decrypt:  # the lanes past the chunks added their (garbage) second blocks: out again
            b.s("shr.r64.imm", count, imm=1, comment="qwords of their blocks in one vector (lane k: chunk k)")
            b.s("mov.r64.imm", INDEX, imm=-1)
            b.s("shlx.r64.r64.r64", INDEX, INDEX, count, comment="the lanes past them")
            b.s("kmovq.k.r64", MASK, INDEX)
            b.s("shl.r64.imm", count, imm=1)
            b.v("vxor", total, b.v("vmov", y2, mask=MASK, comment="lanes past the chunks"), dst=total)
        for p in (0, 1):
            index = (zip_index(p, L),) if L == 4 else ()
            v = b.v("zip_lanes", y1, y2, *index, imm=p, comment="chunks back in order")
            b.store(Mem(outp, 16 * L * p), v, mask=masks(count, p))
        b.s("shr.r64.imm", count, imm=2, comment="the chunks themselves")
        b.label(step)  # the next chunk's offset, in the first lane, for the last chunk
        with b.at_width(128):
            b.assign(offsets.current, double(b, offsets.current, self.method))
        b.s("add.r64.imm", inp, imm=32)
        b.s("add.r64.imm", outp, imm=32)
        b.s("sub.r64.imm", count, imm=1)
        b.branch("ne", step)
        b.label(done)

    def rest_sizes(self) -> tuple[int, ...] | None:
        """The plain groups' loop sizes (None: vector_loops' own); after GPR tables on 16
        registers, no deeper than the groups that keep their offsets in registers fit."""
        if not self.tabled:
            return None
        return tuple(s for s in sizes(self.b.depth) if s <= PLAIN_DEPTH)

    # -- whole chunks, software-pipelined -------------------------------------------
    def pipelined_batches(self, nr: int, offsets: TweakStream, total: VReg) -> None:
        """Batches of D vectors of chunks, each batch's second rounds run beside the next
        one's first rounds: 2D independent AES chains, not D that all wait on their first
        rounds at once. inp runs one batch ahead of outp while a batch is in flight; the
        batch in flight is carried in pinned registers (zmm frame slots split cache lines
        when rsp is not 64-byte aligned, measurably slower).
        The offsets come from tables in the frame that general-purpose registers fill: on
        Zen 4 the vector doublings (vpclmulqdq), byte reversals and lane shifts take the
        pipes vaesenc needs; integer ALUs and stores are idle. Batch k reads table k mod 2
        and refills it with batch k + 2's offsets, the stores riding between its rounds (in
        one run they fill the store queue; one batch ahead, the next loads wait for them),
        so the loop is unrolled once per table. From PIPELINED_FROM batches on: the first
        batch's rounds carry the fills of batches 1 and 2; fewer: the first batch alone fills
        nothing, and the vector loop after it takes the rest a group at a time."""
        b, D, L = self.b, self.b.depth, self.b.lanes
        inp, outp, count = self.inp, self.outp, self.count
        batch = 32 * L * D
        skip, top = b.label_name("no_batch"), b.label_name("batch")
        drains = {t: b.label_name(f"drain_table{t}") for t in (0, 1)}

        # MASKS is free while batches run (the table holds the offsets; it is reloaded after
        # them): it carries group 0's second-round input, a register more for the round keys
        carried = [(offsets.current if j == 0 else b.pinned(f"X2_{j}"), b.pinned(f"Y1_{j}")) for j in range(D)]

        def start(j: int, ofs: list[tuple[VReg, VReg]]) -> None:
            """The first round of group j of the batch at inp; its results carried."""
            y1, x2, _ = self.first_round(nr, lambda p: self.dealt(32 * L * j, p), ofs[j], total, late=True)
            b.final()
            b.assign(carried[j][0], x2, comment="second round's input, for the next iteration")
            b.assign(carried[j][1], y1, comment="first output block, for the next iteration")

        def finish(j: int) -> None:
            """The second round of group j of the batch before inp; its chunks to outp."""
            x = carried[j][0]
            y2 = self.second_round(nr, x, lambda: self.last_key(nr, self.dealt(32 * L * j - batch, 0)), total)
            b.final()
            self.store_chunks(32 * L * j, carried[j][1], y2)

        def starting(table: int):
            """The batch's offsets from a table (read before it is refilled)."""
            ofs = [self.tabled_offsets(table, j) for j in range(D)]
            return lambda j: start(j, ofs)

        def drain(table: int) -> None:
            """The last batch's second rounds; the next chunks' offsets head `table`."""
            b.groups(D, finish, comment=f"second rounds of the last {D} group(s)")
            b.s("add.r64.imm", outp, imm=batch)
            le = b.v("pshufb", b.v("vload", self.offset_entry(table, 0)), bswap_mask(L), role="ofs")
            b.assign(offsets.current, le, comment="the offsets of the chunks after the batches, byte-reversed")

        def first_batch() -> list[tuple[VReg, VReg]]:
            """The first batch's offsets by vector doublings: no wait for the tables' stores."""
            return self.chunk_offsets(offsets.vectors(D), offsets.current)

        alone = b.label_name("one_batch")
        b.s("cmp.r64.imm", count, imm=batch)
        b.branch("b", skip)
        b.s("cmp.r64.imm", count, imm=PIPELINED_FROM * batch)
        b.branch("b", alone)  # the tables are only filled if loop iterations read them
        first = first_batch()
        with b.at_width(128):
            b.store(self.offset_entry(0, 0), offsets.current, comment="the next batch's first offset, byte-reversed")
        b.s("mov.r64.m64", self.OFS_LO, Mem("rsp", TABLE, bits=64))
        b.s("mov.r64.m64", self.OFS_HI, Mem("rsp", TABLE + 8, bits=64))
        b.s("mov.r64.imm", self.COUNT63, imm=63, comment="sarx count: bit 127 spread over the qword")
        # the tables of batches 1 and 2 fill beside the first batch's rounds; batch k reads
        # table k mod 2 and refills it with batch k + 2's offsets, spread over its rounds
        # (no load waits for recent stores; stores in one run fill the store queue)
        b.groups(D, lambda j: start(j, first), comment=f"first rounds of {D} group(s) of {L} chunk(s)",
                 riders=lambda: (self.fill_table(1), self.fill_table(0)))
        b.s("add.r64.imm", inp, imm=batch)
        b.s("sub.r64.imm", count, imm=batch)
        b.label(top)
        for table in (1, 0):  # unrolled twice: one body per table
            b.s("cmp.r64.imm", count, imm=batch)
            b.branch("b", drains[table])
            begin = starting(table)
            b.groups(2 * D, lambda j: finish(j) if j < D else begin(j - D),
                     comment=f"second rounds of {D} group(s) beside the next {D} groups' first rounds",
                     riders=lambda table=table: self.fill_table(table))
            b.s("add.r64.imm", inp, imm=batch)
            b.s("add.r64.imm", outp, imm=batch)
            b.s("sub.r64.imm", count, imm=batch)
        b.branch("jmp", top)
        b.label(alone)  # one batch: its first rounds, then straight to its second
        first = first_batch()
        b.store(self.offset_entry(1, 0), b.v("pshufb", offsets.current, bswap_mask(L)),
                comment="the next batch's offsets, big-endian, where the drain reads them")
        b.groups(D, lambda j: start(j, first), comment=f"first rounds of {D} group(s) of {L} chunk(s)")
        b.s("add.r64.imm", inp, imm=batch)
        b.s("sub.r64.imm", count, imm=batch)
        for table in (1, 0):  # the batch after the last one's offsets head the table it would read
            b.label(drains[table])
            drain(table)
            if table:
                b.branch("jmp", skip)
        b.label(skip)

    # -- the offset table, filled by general-purpose registers --------------------------
    # L_i (byte-reversed: bit k the coefficient of x^k) in two GPRs that hold nothing else
    # secret (the static check's data registers), r11 their scratch.
    OFS_LO, OFS_HI, OFS_T = "rax", "rbp", "r11"
    COUNT63 = "r10"  # public: the sarx count

    def offset_entry(self, table: int, k: int) -> Mem:
        """Entry k of offset table 0 or 1: chunk k's L_i of the batch, big-endian."""
        return Mem("rsp", TABLE + table * self.table_bytes + 16 * k)

    def tabled_offsets(self, table: int, j: int) -> tuple[VReg, VReg]:
        """(L_i, L*_i) of group j's chunks: L*_i = L_i ^ L_(i+1), the table read one entry on."""
        b, L = self.b, self.b.lanes
        l = b.v("vload", self.offset_entry(table, L * j), role="ofs", comment="L_i")
        return l, b.v("vxor", l, self.offset_entry(table, L * j + 1), role="ofs", comment="L*_i = L_i ^ L_(i+1)")

    def fill_table(self, table: int) -> None:
        """A table's D L + 1 entries from the GPRs, which end on the last entry: the
        next batch's first. One doubling: shift the 128 bits left by one, and if bit 127
        fell off add x^128 = x^7 + x^2 + x + 1 (a mask from its sign, no branch; taken
        from the old high qword, so the chain is add/xor on lo, about 2 cycles)."""
        b, lo, hi, t = self.b, self.OFS_LO, self.OFS_HI, self.OFS_T
        n = b.depth * b.lanes
        for k in range(n + 1):
            entry = self.offset_entry(table, k).disp
            for half, reg in ((0, hi), (8, lo)):  # big-endian: the high qword first, bytes reversed
                b.s("movbe.m64.r64", Mem("rsp", entry + half, bits=64), reg,
                    comment=f"L_i of chunk {k} of the batch" if half else "")
            if k == n:
                break
            gpr_double(b, lo, hi, t, self.COUNT63, "L_(i+1) = 2 L_i")

    # -- the last chunk -------------------------------------------------------------
    def last_chunk(self, nr: int, masks: VReg, total: VReg) -> None:
        """The last rest = 0..32 bytes (0: the empty message) with the chunk's offset in
        masks (byte-reversed, first lane); leaves Sigma in total and c La in masks.
        Partial loads come first and partial stores last: loops may sit inside them."""
        b = self.b
        inp, outp, rest = self.inp, self.outp, self.rest
        two, none, done = b.label_name("two_blocks"), b.label_name("no_text"), b.label_name("last_done")
        b.s("cmp.r64.imm", rest, imm=16)
        b.branch("a", two)
        b.s("test.r64.r64", rest, rest)
        b.branch("e", none)
        # one block of 1..16 bytes: Z = E(L_l), out = Z ^ in, La = L_l
        data = self.load_bytes(inp, rest)
        with b.at_width(128):
            z = encrypt_rounds(b, b.v("pshufb", masks, bswap_mask(1), comment="L_l"), nr)
            out = b.v("vxor", z, data)
            plain = self.kept(out, rest) if self.decrypt else data
            self.xor3(total, plain, self.padding(rest), 128, "checksum ^= ozp(M_m)", dst=total)
        self.store_bytes(outp, rest, out)
        self.times_by_length(masks, rest, 16, SEVEN, THREE_SQUARED)
        b.branch("jmp", done)
        b.label(none)
        with b.at_width(128):
            b.v("vxor", total, self.padding(rest), dst=total, comment="checksum ^= ozp(empty)")
        self.times(masks, THREE_SQUARED)
        b.branch("jmp", done)
        # two blocks, the second of 1..16 bytes: the Feistel with the final swap, La = L*_l
        b.label(two)
        b.s("sub.r64.imm", rest, imm=16, comment="bytes of the second block")
        b.s("add.r64.imm", inp, imm=16)
        b.s("add.r64.imm", outp, imm=16)
        part = self.load_bytes(inp, rest)
        with b.at_width(128):
            l_be = b.v("pshufb", masks, bswap_mask(1), comment="L_l")
            self.times(masks, THREE)
            l_star = b.v("pshufb", masks, bswap_mask(1), comment="L*_l = 3 L_l")
            whole = b.v("vload", Mem(inp, -16))
            last_key = b.v("vxor", whole, key(nr), comment="first block folded into the last round key")
            if self.decrypt:
                c2 = self.padded(part, rest)
                m1 = encrypt_rounds(b, b.v("vxor", l_star, c2), nr, last_key=last_key)
                z = encrypt_rounds(b, b.v("vxor", l_be, m1), nr)
                out, first = b.v("vxor", z, part), m1
            else:
                z = encrypt_rounds(b, b.v("vxor", l_be, whole), nr)
                out = b.v("vxor", z, part)
                c2 = self.padded(self.kept(out, rest), rest)
                first = encrypt_rounds(b, b.v("vxor", l_star, c2), nr, last_key=last_key)
            b.store(Mem(outp, -16), first)
            self.xor3(total, z, c2, 128, "checksum ^= Z ^ ozp(C_m)", dst=total)
        self.store_bytes(outp, rest, out)
        self.times_by_length(masks, rest, 16, SEVEN, THREE_SQUARED)
        b.label(done)

    def padded(self, v: VReg, count: str) -> VReg:
        """ozp of v's count (1..16) low bytes (its other bytes zero)."""
        return self.b.v("vxor", v, self.padding(count), width=128, comment="one-zero padding")

    # -- associated data ----------------------------------------------------------
    def ad_hash(self, nr: int, masks: VReg, total: VReg) -> None:
        """TA into the frame: 0 for empty AD, else the PMAC-like hash under masks 2^(j-1) Q."""
        b, L = self.b, self.b.lanes
        aad, count, rest = self.aad, self.count, self.rest
        some, done = b.label_name("ad"), b.label_name("ad_done")
        b.s("test.r64.r64", self.aadlen, self.aadlen)
        b.branch("ne", some)
        with b.at_width(128):
            b.store(TA, b.v("vzero"), comment="TA = 0 for empty associated data")
        b.branch("jmp", done)
        b.label(some)
        with b.at_width(128):
            q = b.v("vload", Mem(self.key, self.spec.otr_q_offset), comment="Q = E_K(0)")
            q = b.v("pshufb", q, bswap_mask(1), comment="Q, byte-reversed")
        stream = TweakStream(b, self.spec.gfdouble, masks)
        stream.start(q)  # lane l = 2^l Q
        b.s("mov.r64.r64", count, self.aadlen)
        b.s("sub.r64.imm", count, imm=1)
        b.s("and.r64.imm", count, imm=-16, comment="whole blocks before the last 1..16 bytes")
        b.s("mov.r64.r64", rest, self.aadlen)
        b.s("sub.r64.r64", rest, count)
        b.v("vzero", dst=total)

        def encrypt_masked(x: VReg, mask_le: VReg, width: int | None = None) -> VReg:
            m = b.v("pshufb", mask_le, bswap_mask((width or b.width) // 128), width=width, comment="2^(j-1) Q")
            return encrypt_rounds(b, self.xor3(x, m, key(0), width, "A_j ^ mask ^ round key 0"), nr,
                                  width=width, whiten=False)

        def body(g: int) -> None:
            ms = stream.vectors(g)

            def block(j: int) -> None:
                y = encrypt_masked(b.v("vload", Mem(aad, 16 * L * j), role="blk"), ms[j])
                b.final()
                b.v("vxor", total, y, dst=total)
            b.groups(g, block, comment=f"{g} group(s) of {L} AD block(s)")

        # staged batches are deeper than a group-per-mask AD loop fits: it keeps the old depth
        ad_depth = min(b.depth, STAGED_AD_DEPTH) if self.staged or self.tabled else b.depth
        vector_loops(b, count, 16 * L, (aad,), body, sizes=(ad_depth, 1) if ad_depth > 1 else (1,))
        fold(b, total)
        if L > 1:
            top, out = b.label_name("ad_block"), b.label_name("ad_blocks_done")
            b.label(top)
            b.s("cmp.r64.imm", count, imm=16)
            b.branch("b", out)
            with b.at_width(128):
                y = encrypt_masked(b.v("vload", Mem(aad, 0)), masks, 128)
                b.v("vxor", total, y, dst=total)
                b.assign(masks, double(b, masks, self.method), comment="the next block's mask")
            b.s("add.r64.imm", aad, imm=16)
            b.s("sub.r64.imm", count, imm=16)
            b.branch("jmp", top)
            b.label(out)
        self.times_by_length(masks, rest, 16, THREE_SQUARED, THREE)  # c' 2^(a-1) Q
        last = self.load_bytes(aad, rest)
        with b.at_width(128):
            m = b.v("pshufb", masks, bswap_mask(1), comment="c' 2^(a-1) Q")
            x = self.xor3(total, self.padded(last, rest), m, 128, "sum ^ ozp(A_a) ^ c' 2^(a-1) Q")
            b.store(TA, encrypt_rounds(b, x, nr), comment="TA, until the tag")
        b.label(done)

    # -- tag check, exits ---------------------------------------------------------
    def check_tag(self, tag: VReg) -> None:
        """Constant-time: the difference's 16 bytes ORed together; only the verdict is public."""
        b = self.b
        ored_difference(b, tag, Mem(self.tag, 0), TAG_DIFF, BYTE, BYTES_HI)
        verdict = self.rest
        tag_verdict(b, BYTES_HI, verdict)
        good = b.label_name("authentic")
        b.s("test.r64.r64", verdict, verdict)
        b.branch("e", good)
        self.reject()
        b.label(good)
        b.s("xor.r32.r32", r32(RESULT), r32(RESULT))

    def reject(self) -> None:
        """Return -1 (jumps to the exit); decrypting, with out[0..len) zeroed."""
        b = self.b
        if self.decrypt:
            b.s("mov.r64.m64", self.outp, b.stack_arg("out", pushed=len(CALLEE_SAVED) + self.frame // 8))
            zero_bytes(b, self.outp, self.len, INDEX)
        b.s("mov.r32.imm", r32(RESULT), imm=-1)
        b.branch("jmp", self.exit)

    def epilogue(self) -> None:
        b = self.b
        b.label(self.bad)
        self.reject()
        b.label(self.exit)
        with b.at_width(128):
            z = b.v("vzero")
            for off in WIPED:
                b.store(Mem("rsp", off), z, comment="wipe the frame's secrets")
        if self.tabled_at > TABLE:  # (the GPR tables are wiped where their loop ends)
            z = b.v("vzero", width=self.width)
            for off in range(TABLE, self.tabled_at, self.vector_bytes):
                b.store(Mem("rsp", off), z, width=self.width, comment="wipe the offset tables or slots")
        leave_frame(b, self.frame, CALLEE_SAVED)


def fold(b: FunctionBuilder, v: VReg) -> None:
    """XOR all lanes of v into its first (before any xmm write zeroes the upper lanes)."""
    w = b.width
    while w > 128:
        w //= 2
        b.v("vxor", v, b.v("upper_half", v, width=w), dst=v, width=w, comment="fold the lanes")


@describes("otr_encrypt", decrypt=False)
@describes("otr_decrypt", decrypt=True)
def otr_function(b: FunctionBuilder, decrypt: bool) -> None:
    Otr(b, decrypt).function()
