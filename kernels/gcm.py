"""AES-GCM (SP 800-38D) one-shot encryption and decryption in the DSL.

    J0  = IV || 0^31 || 1 for a 12-byte IV, else GHASH(IV || pad || [len(IV)]_64)
    C   = CTR from inc32(J0) over P;  S = GHASH(A || pad || C || pad || [len A]_64 || [len C]_64)
    tag = MSB_t(E(K, J0) ^ S)

The CTR main loop carries GHASH along (stitched: a batch's ciphertext is multiplied by
H^k..H^1 and reduced once while the AES rounds of the next batch run, or, decrypting, of
its own; see modes.stitched_loop); what is left after it is hashed in a second pass.
Scratch lives in a frame under the six saved callee-saved registers:

    [rsp+0] the length block   [rsp+16] E(K, J0)   [rsp+32] a zero-padded block   [rsp+48] the tag
    [rsp+64] aad pointer   [rsp+72] aad length   [rsp+80] out   [rsp+88] len   [rsp+96] tag
"""
from __future__ import annotations

from typing import Callable

from aesgen.consts import be32_one_in_dword3, bswap_mask
from aesgen.dsl import FunctionBuilder
from aesgen.ir import Mem, VReg

from . import ghash_planes
from .aes import encrypt_rounds
from .frame import CALLEE_SAVED, aligned, leave_frame, open_frame, push_saved
from .ghash import HashCore, Products, dot, multiply
from .modes import MASK, byte_loop, counter_base, ctr_stream
from .registry import describes
from .regs import RESULT, arg, r8, r32

# The slots below (gcm_stream's end at 120), in 128 bytes under the six callee-saved
# registers (kernels/frame.py: rsp 16-byte aligned, never copied into another register).
SLOTS = 128
FRAME = aligned(SLOTS)
# --gfmul gfni: the byte planes' scratch (kernels/ghash_planes.py) after the slots.
PLANES_SCRATCH = Mem("rsp", SLOTS)
FRAME_PLANES = aligned(SLOTS + ghash_planes.SCRATCH_BYTES)
# Register roles. The arguments are in their SysV registers (regs.arg; gcm_decrypt's are
# gcm_encrypt's); the stack arguments move to OUT, LEN, TAG_PTR, TAGLEN at entry.
KEY, IN = (arg("gcm_encrypt", a) for a in ("key", "in"))  # the gkey (schedule, then the powers of H); the input
IV, IVLEN = (arg("gcm_encrypt", a) for a in ("iv", "ivlen"))  # the nonce, until J0 is made
AAD, AAD_LEN_REG = "rsi", "rdx"  # then the AAD, as hashed (after the text: REST)
OUT, LEN, TAG_PTR, TAGLEN = "r12", "r13", "r14", "r15"  # TAGLEN: the verdict of a tag check
HASH_PTR, HASH_BLOCKS = "rbx", "rcx"  # hash_bytes: the next block; whole blocks, partial bytes
SCRATCH = "r10"  # public: a byte index, a length in bits, a mask length
# Secret-carrying scalars (gathered partial blocks, the tag difference) live only in the data
# GPRs, which never address memory or decide a branch: the other GPRs stay public.
BYTES_LO, BYTES_HI, BYTE = "rbp", "r11", "rax"  # gathered bytes 0..7, 8..15; one byte
LENGTHS, EKJ0, BLOCK, TAG, AAD_PTR, AAD_LEN = (Mem("rsp", o) for o in (0, 16, 32, 48, 64, 72))
# The stack arguments, copied into the frame at entry: reloaded rsp-relative, the static
# constant-time check can see they are the caller's public pointers and lengths.
SAVED_ARGS = {"out": Mem("rsp", 80, bits=64), "len": Mem("rsp", 88, bits=64), "tag": Mem("rsp", 96, bits=64)}
# The counter of the next text block when it is public (12-byte IV), else 0: lets the
# main loop skip the counter byte shuffles of batches that cannot carry (modes.FastCounter).
# r8 (aadlen at entry, saved in the frame) holds nothing else after that.
PUBLIC_COUNTER = "r8"
FIRST_TEXT_COUNTER = 2  # with a 12-byte IV, J0 = IV || 1 and the text starts at J0 + 1
# Encrypting, the ciphertext the main loop left unhashed: where it starts, its length
# (registers the CTR tail does not touch).
REST = (AAD, AAD_LEN_REG)




def _arg(name: str) -> Mem:
    return SAVED_ARGS[name]


def read_overlapping(b: FunctionBuilder, src: str, count: str, shift: str, lo: str, hi: str, tmp: str,
                     done: str, fewer: str, big_endian: bool = False) -> None:
    """With BMI2: the count (4..16, public) bytes at src as an integer in hi:lo, byte 0 lowest
    (or, big-endian, the last byte lowest), no byte past them read; then a jump to `done`.
    Fewer than 4 jump to `fewer`. 9..16 bytes are two overlapping 8-byte loads, the one that
    holds the far end shifted down past the bytes the other has (`shrx`); 4..8 two 4-byte
    loads, the far one shifted up (`shlx`) and ORed: a byte read twice lands in the same place
    twice. `shift` (count itself, or public scratch) ends holding the shift."""
    short = b.label_name("overlap_short")
    b.s("cmp.r64.imm", count, imm=4)
    b.branch("b", fewer)
    b.s("cmp.r64.imm", count, imm=8)
    b.branch("be", short)
    for bits, near_to, far_to in ((64, lo, tmp), (32, r32(lo), r32(tmp))):
        head, tail = Mem(src, 0, bits=bits), Mem(src, -bits // 8, index=count, bits=bits)
        near, far = (tail, head) if big_endian else (head, tail)
        load, swap = ("mov.r64.m64", "bswap.r64") if bits == 64 else ("mov.r32.m32", "bswap.r32")
        b.s(load, near_to, near, comment="the first bytes" if near is head else "the last bytes")
        b.s(load, far_to, far)
        if big_endian:
            b.s(swap, near_to)
            b.s(swap, far_to)
        if shift != count:
            b.s("mov.r64.r64", shift, count)
        if bits == 64:  # the far qword's bytes past the near one's: 8 (16 - count) bits down
            b.s("neg.r64", shift)
            b.s("add.r64.imm", shift, imm=16)
            b.s("shl.r64.imm", shift, imm=3)
            b.s("shrx.r64.r64.r64", hi, tmp, shift, comment="the bytes past the first 8")
        else:  # the far dword 8 (count - 4) bits up
            b.s("sub.r64.imm", shift, imm=4)
            b.s("shl.r64.imm", shift, imm=3)
            b.s("shlx.r64.r64.r64", tmp, tmp, shift)
            b.s("or.r64.r64", lo, tmp)
            b.s("xor.r32.r32", r32(hi), r32(hi))
        b.branch("jmp", done)
        if bits == 64:
            b.label(short)


def gather_partial(b: FunctionBuilder, src: str, count: str, dst: Mem) -> None:
    """dst = the count (1..16, public) bytes at src, zero-padded to 16; no byte is read past
    src + count, and no stack store has a variable address. With BMI2 4..16 bytes are two
    overlapping loads (read_overlapping); fewer, or without BMI2, gathered into two GPRs from
    the last byte down (constant shifts). Clobbers count and the data GPRs."""
    top, high, done = b.label_name("gather"), b.label_name("gather_hi"), b.label_name("gathered")
    if "bmi2" in b.spec.features:
        bytewise = b.label_name("gather_bytes")
        read_overlapping(b, src, count, count, BYTES_LO, BYTES_HI, BYTE, done, bytewise)
        b.label(bytewise)
    b.s("xor.r32.r32", r32(BYTES_LO), r32(BYTES_LO), comment="bytes 0..7")
    b.s("xor.r32.r32", r32(BYTES_HI), r32(BYTES_HI), comment="bytes 8..15")
    b.label(top)
    b.s("test.r64.r64", count, count)
    b.branch("e", done)
    b.s("sub.r64.imm", count, imm=1)
    b.s("movzx.r32.m8", r32(BYTE), Mem(src, 0, index=count, bits=8))
    b.s("cmp.r64.imm", count, imm=8)
    b.branch("ae", high)
    b.s("shl.r64.imm", BYTES_LO, imm=8)
    b.s("or.r64.r64", BYTES_LO, BYTE)
    b.branch("jmp", top)
    b.label(high)
    b.s("shl.r64.imm", BYTES_HI, imm=8)
    b.s("or.r64.r64", BYTES_HI, BYTE)
    b.branch("jmp", top)
    b.label(done)
    b.s("mov.m64.r64", Mem(dst.base, dst.disp, bits=64), BYTES_LO)
    b.s("mov.m64.r64", Mem(dst.base, dst.disp + 8, bits=64), BYTES_HI)


def ored_difference(b: FunctionBuilder, computed: VReg, given: Mem, slot: Mem, lo: str, hi: str) -> None:
    """hi = the two qwords of computed ^ given (16 tag bytes) ORed: nonzero iff they differ.
    Through a frame slot (no vector-to-GPR moves in the op set); every byte counts, no early exit."""
    with b.at_width(128):
        b.store(slot, b.v("vxor", computed, given, comment="computed ^ given tag"))
    b.s("mov.r64.m64", lo, Mem(slot.base, slot.disp, bits=64))
    b.s("mov.r64.m64", hi, Mem(slot.base, slot.disp + 8, bits=64))
    b.s("or.r64.r64", hi, lo, comment="any difference")


def zero_bytes(b: FunctionBuilder, dst: str, count: str, index: str) -> None:
    """dst[0..count) = 0, a byte at a time (count public, `index` the loop's counter): what a
    rejected decryption leaves in its output."""
    b.s("xor.r32.r32", r32(BYTES_HI), r32(BYTES_HI))
    byte_loop(b, index, count, lambda at: b.s("mov.m8.r8", at(dst), r8(BYTES_HI)), "zero")


def tag_verdict(b: FunctionBuilder, differences: str, verdict: str) -> None:
    """verdict = -1 if `differences` (secret) is nonzero, else 0: the one public bit of a tag check."""
    b.s("neg.r64", differences, comment="CF = any difference")
    b.declassify_mark("verdict")
    b.s("sbb.r64.r64", verdict, verdict, comment="verdict: -1 wrong tag, 0 authentic (public)")


def load_qwords(b: FunctionBuilder, mem: Mem) -> VReg:
    """A 16-byte block the scalar code just wrote as two 8-byte stores, read back as two
    8-byte loads: a 16-byte load could not be forwarded from them and would wait for
    the stores to retire."""
    with b.at_width(128):
        lo = b.v("vload64", Mem(mem.base, mem.disp, bits=64))
        hi = b.v("vload64", Mem(mem.base, mem.disp + 8, bits=64))
        return b.v("punpcklqdq", lo, hi)


class Gcm:
    def __init__(self, b: FunctionBuilder, decrypt: bool) -> None:
        self.b, self.decrypt, self.spec = b, decrypt, b.spec
        self.K = b.spec.ghash_blocks
        self.table = Mem(KEY, b.spec.gcm_table_offset)
        self.frame = FRAME_PLANES if b.spec.gfmul == "gfni" else FRAME  # subclasses with a larger frame set their own

    # -- small pieces ---------------------------------------------------------
    def load_partial(self, src: str, count: str, dst: Mem) -> None:
        gather_partial(self.b, src, count, dst)

    def load_qwords(self, mem: Mem) -> VReg:
        return load_qwords(self.b, mem)

    def hash_block(self, acc: VReg, mem: Mem) -> None:
        b = self.b
        with b.at_width(128):
            x = b.v("pshufb", self.load_qwords(mem), bswap_mask(1), comment="to POLYVAL order")
            x = b.v("vxor", x, acc)
            h = b.v("vload", Mem(self.table.base, self.table.disp + 16 * (self.K - 1)), comment="H")
            dot(b, x, h, dst=acc)

    def hash_bytes(self, acc: VReg, ptr: str, length: str) -> None:
        """acc = GHASH continued over length bytes at ptr, the last block zero-padded."""
        b = self.b
        core = self.core
        b.s("mov.r64.r64", HASH_PTR, ptr)
        b.s("mov.r64.r64", HASH_BLOCKS, length)
        b.s("shr.r64.imm", HASH_BLOCKS, imm=4, comment="whole blocks")
        core.main_loop(acc, HASH_PTR, HASH_BLOCKS)
        core.tail(acc, HASH_PTR, HASH_BLOCKS, self.spec.isa)
        skip = b.label_name("no_partial")
        b.s("mov.r64.r64", HASH_BLOCKS, length)
        b.s("and.r64.imm", HASH_BLOCKS, imm=15, comment="bytes of a partial last block")
        b.branch("e", skip)
        b.s("mov.r64.r64", HASH_PTR, length)
        b.s("and.r64.imm", HASH_PTR, imm=-16)
        b.s("add.r64.r64", HASH_PTR, ptr, comment="the partial block's first byte")
        self.load_partial(HASH_PTR, HASH_BLOCKS, BLOCK)
        self.hash_block(acc, BLOCK)
        b.label(skip)

    def hash_final(self, acc: VReg, ptr: str, length: str, hi_len: Mem | str | None, lo_len: Mem | str) -> None:
        """hash_bytes, then the length block [8*hi]_64 || [8*lo]_64. Without a partial block
        the length block joins the last reduction (the powers shift up by one: H^(k+1) is in
        the key) instead of costing a product and a reduction of its own after it.
        Keeps ptr and length; clobbers HASH_PTR, HASH_BLOCKS, SCRATCH and the data GPRs."""
        b, core = self.b, self.core
        self.length_block(hi_len, lo_len, LENGTHS)
        aligned, done = b.label_name("aligned_end"), b.label_name("final_done")
        b.s("mov.r64.r64", SCRATCH, length)
        b.s("and.r64.imm", SCRATCH, imm=15, comment="a partial block?")
        b.branch("e", aligned)
        self.hash_bytes(acc, ptr, length)
        self.hash_block(acc, LENGTHS)
        b.branch("jmp", done)
        b.label(aligned)
        b.s("mov.r64.r64", HASH_PTR, ptr)
        b.s("mov.r64.r64", HASH_BLOCKS, length)
        b.s("shr.r64.imm", HASH_BLOCKS, imm=4, comment="whole blocks")
        core.main_loop(acc, HASH_PTR, HASH_BLOCKS, keep_last=True)
        full, none = b.label_name("last_batch"), b.label_name("only_lengths")
        b.s("cmp.r64.imm", HASH_BLOCKS, imm=self.K)
        b.branch("e", full)
        b.s("test.r64.r64", HASH_BLOCKS, HASH_BLOCKS)
        b.branch("e", none)
        core.tail(acc, HASH_PTR, HASH_BLOCKS, self.spec.isa, last=self.length_products)
        b.branch("jmp", done)
        b.label(full)
        core.batch(acc, Mem(HASH_PTR, 0), last=self.length_products)
        b.branch("jmp", done)
        b.label(none)
        self.hash_block(acc, LENGTHS)
        b.label(done)

    def length_products(self) -> Products:
        """The length block times H, unreduced (128-bit)."""
        b = self.b
        with b.at_width(128):
            x = b.v("pshufb", self.load_qwords(LENGTHS), bswap_mask(1), comment="the length block")
            p, px = self.core.power(16 * (self.K - 1), 128)
            return multiply(b, x, p, px, self.spec.karatsuba, 128)

    def length_block(self, hi_len: Mem | str | None, lo_len: Mem | str, dst: Mem = BLOCK) -> None:
        """dst = [8*hi]_64 || [8*lo]_64, big-endian; a length is a stack slot, a
        register, or None for zero. Read it back with load_qwords."""
        b = self.b
        for src, off in ((hi_len, 0), (lo_len, 8)):
            if src is None:
                b.s("xor.r32.r32", r32(SCRATCH), r32(SCRATCH))
                b.s("mov.m64.r64", Mem(dst.base, dst.disp + off, bits=64), SCRATCH)
                continue
            if isinstance(src, str):
                b.s("mov.r64.r64", SCRATCH, src)
            else:
                b.s("mov.r64.m64", SCRATCH, src)
            b.s("shl.r64.imm", SCRATCH, imm=3, comment="bits")
            b.s("bswap.r64", SCRATCH)
            b.s("mov.m64.r64", Mem(dst.base, dst.disp + off, bits=64), SCRATCH)

    # -- the function -----------------------------------------------------------
    def take_stack_args(self) -> None:
        """The prologue: the callee-saved pushes, the stack arguments into OUT, LEN, TAG_PTR
        and TAGLEN, the frame."""
        b = self.b
        push_saved(b)
        for reg, name in ((OUT, "out"), (LEN, "len"), (TAG_PTR, "tag"), (TAGLEN, "taglen")):
            b.s("mov.r64.m64", reg, b.stack_arg(name, pushed=len(CALLEE_SAVED)))
        open_frame(b, self.frame)

    def refuse_tag_length(self, shortest: int) -> None:
        """To bad_args unless shortest <= TAGLEN <= 16."""
        b = self.b
        b.s("cmp.r64.imm", TAGLEN, imm=shortest, comment=f"tag length {shortest}..16")
        b.branch("b", self.bad)
        b.s("cmp.r64.imm", TAGLEN, imm=16)
        b.branch("a", self.bad)

    def entry(self) -> None:
        b = self.b
        self.take_stack_args()
        b.s("mov.m64.r64", Mem(AAD_PTR.base, AAD_PTR.disp, bits=64), b.reg["aad"])
        b.s("mov.m64.r64", Mem(AAD_LEN.base, AAD_LEN.disp, bits=64), b.reg["aadlen"])
        for reg, name in ((OUT, "out"), (LEN, "len"), (TAG_PTR, "tag")):
            b.s("mov.m64.r64", SAVED_ARGS[name], reg)
        self.bad = b.label_name("bad_args")
        self.exit = b.label_name("exit")
        b.s("test.r64.r64", IVLEN, IVLEN, comment="an empty IV is refused")
        b.branch("e", self.bad)
        self.refuse_tag_length(4)

    def paths(self) -> None:
        """After the entry: one path per key size."""
        self.b.key_paths("key", self.path, scratch=r32(SCRATCH))  # rax carries data bytes in GCM

    def path(self, nr: int) -> None:
        b = self.b
        acc = self.start_hashing()
        base = b.pinned("CTR_BASE")
        self.j0(acc, nr, lambda j: counter_base(b, j, first=1, dst=base))
        self.hash_aad(acc)
        # Text: the main loop hashes each batch's ciphertext as the CTR loop produces (or,
        # decrypting, consumes) it; the rest is hashed in a second pass — before it is
        # decrypted, since in == out may overwrite it.
        ctr_stream(b, nr, base, IN, OUT, LEN, stitch=self.stitch(acc, final=True),
                   public_counter=PUBLIC_COUNTER, counter_start=FIRST_TEXT_COUNTER)
        if not self.decrypt:  # the ciphertext left, then the lengths
            self.hash_final(acc, *REST, Mem(AAD_LEN.base, AAD_LEN.disp, bits=64), _arg("len"))
        self.finish_tag(acc)

    def hash_aad(self, acc: VReg) -> None:
        """acc = GHASH of the AAD (from the frame's copy of its pointer and length)."""
        b = self.b
        b.v("vzero", dst=acc, width=128)
        b.s("mov.r64.m64", AAD, Mem(AAD_PTR.base, AAD_PTR.disp, bits=64))
        b.s("mov.r64.m64", AAD_LEN_REG, Mem(AAD_LEN.base, AAD_LEN.disp, bits=64))
        self.hash_bytes(acc, AAD, AAD_LEN_REG)

    def finish_tag(self, acc: VReg) -> None:
        """tag = E(K, J0) ^ S (S = acc, the whole hash): written (taglen bytes) or checked;
        the frame's secrets wiped; on to the exit with the result in RESULT."""
        b = self.b
        b.s("mov.r64.m64", TAG_PTR, _arg("tag"))
        with b.at_width(128):
            s = b.v("pshufb", acc, bswap_mask(1))
            tag = b.v("vxor", s, b.v("vload", EKJ0), comment="tag = E(K, J0) ^ S")
            if not self.decrypt and self.spec.isa == "avx512":
                b.s("mov.r64.imm", SCRATCH, imm=-1)
                b.s("bzhi.r64.r64.r64", SCRATCH, SCRATCH, TAGLEN, comment="taglen bytes")
                b.s("kmovq.k.r64", MASK, SCRATCH)
                b.store(Mem(TAG_PTR, 0), tag, mask=MASK, mask_elem="b", comment="exactly taglen bytes")
            else:
                b.store(TAG, tag)
        if self.decrypt:
            self._check_tag()
        else:
            if self.spec.isa != "avx512":
                self.tag_out()
            b.s("xor.r32.r32", r32(RESULT), r32(RESULT))
        self._wipe()
        b.branch("jmp", self.exit)

    def tag_out(self) -> None:
        """The tag (the TAG slot) to the caller's taglen bytes at TAG_PTR: a whole tag in one
        store, a shorter one byte by byte (AVX-512 files store through a byte mask instead)."""
        b = self.b
        short, stored = b.label_name("short_tag"), b.label_name("tag_stored")
        b.s("cmp.r64.imm", TAGLEN, imm=16)
        b.branch("ne", short)
        with b.at_width(128):
            b.store(Mem(TAG_PTR, 0), b.v("vload", TAG), comment="a whole tag: one store")
        b.branch("jmp", stored)
        b.label(short)
        self.copy_bytes_out(TAG_PTR, TAGLEN)
        b.label(stored)

    def stitch(self, acc: VReg, final: bool = False) -> "Stitch":
        """The hashing that rides along the CTR main loop: reductions per batch, or with
        --gfmul gfni the byte-plane chains."""
        if self.spec.gfmul == "gfni" and self.b.depth * self.b.lanes % ghash_planes.BATCH == 0:
            return PlaneStitch(self, acc, final)
        return Stitch(self, acc, final)  # (gfni with an odd depth: batches of 4 blocks, reduced each)

    def start_hashing(self) -> VReg:
        """The running hash (POLYVAL order) and the hashing loops over the powers of H."""
        self.core = HashCore(self.b, reflect=True, table=self.table, k_max=self.K,
                             karatsuba=self.spec.karatsuba, halves=self.spec.gcm_halves_offset,
                             shifted=Mem(KEY, self.spec.gcm_shifted_table_offset))
        return self.b.pinned("HASH")

    def j0(self, acc: VReg, nr: int, then: Callable[[VReg], None]) -> None:
        """make_j0, and E(K, J0) into its frame slot; then(J0) runs on each of the two paths
        (J0 never goes through the stack). acc is scratch."""
        b = self.b

        def finish_j0(j: VReg) -> None:
            with b.at_width(128):
                b.store(EKJ0, encrypt_rounds(b, j, nr), comment="E(K, J0) masks the tag")
            then(j)

        self.make_j0(acc, finish_j0)

    def make_j0(self, acc: VReg, then: Callable[[VReg], None]) -> None:
        """J0 from iv = IV, ivlen = IVLEN (not 0), as an xmm value: then(J0) on each of the
        two paths (a 12-byte IV; any other length, hashed). acc is scratch."""
        b = self.b
        general, have_j0 = b.label_name("iv_hash"), b.label_name("iv_done")
        b.s("cmp.r64.imm", IVLEN, imm=12)
        b.branch("ne", general)
        b.s("mov.r64.imm", PUBLIC_COUNTER, imm=FIRST_TEXT_COUNTER, comment="the first text block's counter: public")
        with b.at_width(128):
            lo = b.v("vload64", Mem(IV, 0, bits=64), comment="12 bytes, never 16: no over-read")
            j = b.v("punpcklqdq", lo, b.v("vload32", Mem(IV, 8, bits=32)))
            j = b.v("vxor", j, be32_one_in_dword3(), comment="J0 = IV || 0^31 || 1")
        then(j)
        b.branch("jmp", have_j0)
        b.label(general)
        b.s("xor.r32.r32", r32(PUBLIC_COUNTER), r32(PUBLIC_COUNTER), comment="J0 depends on H: no public counter")
        b.v("vzero", dst=acc, width=128)
        self.hash_final(acc, IV, IVLEN, None, IVLEN)  # IV || pad || 0^64 || [len(IV)]_64
        with b.at_width(128):
            j = b.v("pshufb", acc, bswap_mask(1), comment="J0 = GHASH(IV ...)")
        then(j)
        b.label(have_j0)

    def for_each_byte(self, count: str, body: Callable[[Mem, Mem], None], stem: str) -> None:
        """modes.byte_loop over SCRATCH: `body` gets the indexed byte operands of TAG and of
        [base + SCRATCH] via a maker."""
        byte_loop(self.b, SCRATCH, count, lambda at: body(Mem(TAG.base, TAG.disp, index=SCRATCH, bits=8), at), stem)

    def copy_bytes_out(self, dst: str, count: str) -> None:
        """dst[0..count) = the computed tag."""
        def body(tag_byte: Mem, at) -> None:
            self.b.s("movzx.r32.m8", r32(BYTES_HI), tag_byte)
            self.b.s("mov.m8.r8", at(dst), r8(BYTES_HI))
        self.for_each_byte(count, body, "tag_out")

    def _check_tag(self) -> None:
        """Constant-time compare of taglen bytes (the computed tag in TAG, the caller's at
        TAG_PTR); the verdict alone is public. A whole tag: one vector XOR and the two qwords
        of differences ORed (the byte loop's 16 rounds were a dependent chain of about 20
        cycles after the tag); a shorter one, byte by byte."""
        b = self.b

        def body(tag_byte: Mem, at) -> None:
            b.s("movzx.r32.m8", r32(BYTE), tag_byte)
            b.s("xor.r8.m8", r8(BYTE), at(TAG_PTR))
            b.s("or.r8.r8", r8(BYTES_HI), r8(BYTE), comment="accumulate differences, no early exit")

        short, compared = b.label_name("short_tag"), b.label_name("compared")
        b.s("cmp.r64.imm", TAGLEN, imm=16)
        b.branch("ne", short)
        ored_difference(b, b.v("vload", TAG, width=128), Mem(TAG_PTR, 0), TAG, BYTE, BYTES_HI)
        b.branch("jmp", compared)
        b.label(short)
        b.s("xor.r32.r32", r32(BYTES_HI), r32(BYTES_HI))
        self.for_each_byte(TAGLEN, body, "cmp")
        b.label(compared)
        tag_verdict(b, BYTES_HI, TAGLEN)
        good = b.label_name("authentic")
        b.s("test.r64.r64", TAGLEN, TAGLEN)
        b.branch("e", good)
        b.s("mov.r64.m64", OUT, _arg("out"))
        b.s("mov.r64.m64", LEN, _arg("len"))
        self.zero_out()
        b.s("mov.r32.imm", r32(BYTE), imm=-1)
        self._wipe()
        b.branch("jmp", self.exit)
        b.label(good)
        b.s("xor.r32.r32", r32(BYTE), r32(BYTE))

    def zero_out(self) -> None:
        """out[0..len) = 0 (a rejected decryption releases nothing)."""
        zero_bytes(self.b, OUT, LEN, SCRATCH)

    def _wipe(self) -> None:
        b = self.b
        with b.at_width(128):
            z = b.v("vzero")
            for off in range(16, 64, 16):  # E(K, J0), the block and the tag
                b.store(Mem("rsp", off), z)

    def bad_args(self) -> None:
        b = self.b
        b.label(self.bad)
        if self.decrypt:
            self.zero_out()
        b.s("mov.r32.imm", r32(RESULT), imm=-1)

    def epilogue(self, label: bool = True) -> None:
        b = self.b
        if label:
            b.label(self.exit)
        leave_frame(b, self.frame, CALLEE_SAVED)


class Stitch:
    """GHASH riding along the CTR main loop: one batch of K = D x lanes blocks per
    reduction, hashed while a batch's AES rounds run (see modes.stitched_loop)."""

    def __init__(self, gcm: Gcm, acc: VReg, final: bool = False) -> None:
        """final: the text ends with this call (one-shot), so the lengths are hashed too."""
        self.g, self.acc, self.final = gcm, acc, final
        self.lagging = not gcm.decrypt  # encrypting, the ciphertext is the loop's output
        self.batch_bytes = 16 * gcm.b.depth * gcm.b.lanes

    def riders(self, inp: str, outp: str, vectors: int | None = None) -> None:
        """Hash a batch (`vectors` of them, default D) while the rounds run."""
        self.g.core.batch(self.acc, self.batch_at(inp, outp), vectors=vectors)

    def half_group(self) -> int:
        """Decrypting, the vectors of one group after the main loop that takes half a batch or
        more of what is left with its own hashing riding along (0: none; stitched_loop); the
        rest is hashed first and then decrypted a vector at a time. 32 vector registers only:
        native 512x8 read 0.79-0.90x the ticks from 256 B to 960 B (AES-128 and AES-256), avx2
        256x6 0.91-0.95x at 96-128 B but 1.06x at 160 B (family 6 model 207)."""
        D, b = self.g.b.depth, self.g.b
        return D // 2 if not self.lagging and D % 2 == 0 and b.spec.vector_registers >= 32 else 0

    def batch_at(self, inp: str, outp: str) -> Mem:
        """The batch to hash: decrypting the input, encrypting the previous batch's output."""
        return Mem(inp, 0) if self.g.decrypt else Mem(outp, -self.batch_bytes)

    def after_main(self, pending: bool) -> None:
        """Decrypting, hash the rest of the input now (in == out may overwrite it); encrypting,
        note where the unhashed ciphertext starts (the last batch, if pending) and its length."""
        b, g = self.g.b, self.g
        if g.decrypt:
            if self.final:
                g.hash_final(self.acc, IN, LEN, Mem(AAD_LEN.base, AAD_LEN.disp, bits=64), _arg("len"))
            else:
                g.hash_bytes(self.acc, IN, LEN)
            return
        back = self.batch_bytes if pending else 0
        b.s("lea.r64.m", REST[0], Mem(OUT, -back))
        b.s("lea.r64.m", REST[1], Mem(LEN, back))


class PlaneStitch(Stitch):
    """--gfmul gfni: the loop's batches go to eight Horner chains of byte planes by 8 blocks
    (kernels/ghash_planes.py), with no reduction per batch. The running hash joins the first
    block through JOIN planes that every step adds and then zeroes (a branch-free "first
    step"); after the loop the chains are joined back into the running hash (plus JOIN's row
    0: the hash itself if no step ran) and the rest is hashed as without them."""

    def __init__(self, gcm: Gcm, acc: VReg, final: bool = False) -> None:
        super().__init__(gcm, acc, final)
        b = gcm.b
        self.chains = (b.pinned("CHAINS_LO"), b.pinned("CHAINS_HI"))
        self.joining = (b.pinned("JOIN_LO"), b.pinned("JOIN_HI"))
        raw = b.v("pshufb", acc, bswap_mask(1), width=128, comment="the running hash, GHASH order")
        zero = b.v("vzero", width=ghash_planes.W)
        ghash_planes.to_planes(b, (raw, zero), dst=self.joining)
        for z in self.chains:
            b.v("vzero", dst=z, width=ghash_planes.W)

    def half_group(self) -> int:
        return 0  # the chains take whole batches of 8 blocks

    def riders(self, inp: str, outp: str, vectors: int | None = None) -> None:
        assert vectors is None
        b, at = self.g.b, self.batch_at(inp, outp)
        for step in range(self.batch_bytes // (16 * ghash_planes.BATCH)):
            ghash_planes.chain_step(b, self.chains, Mem(at.base, at.disp + 16 * ghash_planes.BATCH * step),
                                    KEY, PLANES_SCRATCH, joining=self.joining)
            for j in self.joining:
                b.v("vzero", dst=j, width=ghash_planes.W)

    def after_main(self, pending: bool) -> None:
        b = self.g.b
        y = ghash_planes.join_chains(b, self.chains, KEY, PLANES_SCRATCH)
        y = b.v("vxor", y, ghash_planes.row_of(b, self.joining, 0), width=128, comment="+ the hash if no step ran")
        b.v("pshufb", y, bswap_mask(1), width=128, dst=self.acc, comment="to POLYVAL order")
        ghash_planes.wipe_scratch(b, PLANES_SCRATCH)
        super().after_main(pending)


@describes("gcm_encrypt", decrypt=False)
@describes("gcm_decrypt", decrypt=True)
def gcm_function(b: FunctionBuilder, decrypt: bool, kind: type[Gcm] = Gcm) -> None:
    """`kind`: whose AES (Gcm.paths)."""
    g = kind(b, decrypt)
    g.entry()
    g.paths()

    def tail() -> None:
        g.bad_args()
        g.epilogue()

    b.single_path(None, tail)
