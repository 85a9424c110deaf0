"""Streaming AES-GCM: start / aad / encrypt_update | decrypt_update / finish, any chunking.

The context (P_GCM_CTX_BYTES, 64-byte aligned by the caller) is

    [0]  gkey          [8] AAD bytes so far   [16] text bytes so far   [24] 1 once text began
    [32] E(K, J0)      [48] the next counter block (J0 with its 32-bit counter advanced)
    [64] the running hash (POLYVAL order)
    [80] keystream of the current partial text block
    [96] the bytes of the current partial AAD or text block, zero-padded (hashed when full)
    [112] the first text block's counter when the counters are public (2: a 12-byte IV), else 0

The first counter lets an update's main loop take the one-shot's shuffle-free batches
(modes.FastCounter) from the counter of its first whole block, 2 + the text's blocks
before it: a function of lengths, as in the one-shot function. (Not the XOR form: that
needs the loop's first counter mod the batch at generation time.)

The first four fields and [112] are public (a pointer and lengths the caller chose); they are read
with loads marked `*_ct_declassify*` so the static constant-time check knows it. Bytes
that continue a partial block go one at a time through [80]/[96]; whole blocks take the
same stitched CTR+GHASH main loop as the one-shot functions. Every function shares the
one-shot frame (six saved registers, scratch slots under rsp) and keeps the context in r14.
"""
from __future__ import annotations

from typing import Callable

from aesgen.consts import bswap_mask
from aesgen.dsl import FunctionBuilder
from aesgen.ir import Mem, VReg
from aesgen.spec import GCM_CTX_BYTES

from .aes import encrypt_rounds
from .frame import open_frame, push_saved
from .gcm import BLOCK, BYTE, BYTES_HI, EKJ0, IN, IV, IVLEN, KEY, LEN, OUT, PUBLIC_COUNTER, REST, SCRATCH, Gcm
from .modes import counter_base, ctr_stream
from .registry import describes
from .regs import RESULT, arg, r8, r32

CTX = "r14"
GKEY, AAD_BYTES, TEXT_BYTES, IN_TEXT = (Mem(CTX, o, bits=64) for o in (0, 8, 16, 24))
CTX_EKJ0, CTX_COUNTER, CTX_HASH, CTX_KEYSTREAM, CTX_BLOCK = (Mem(CTX, o) for o in (32, 48, 64, 80, 96))
FIRST_COUNTER = Mem(CTX, 112, bits=64)
assert FIRST_COUNTER.disp + 8 <= GCM_CTX_BYTES
# Frame slots of an update: where the bytes after its whole blocks start (in, out).
SUFFIX_IN, SUFFIX_OUT = Mem("rsp", 104, bits=64), Mem("rsp", 112, bits=64)
# Register roles beside the arguments (b.reg) and the one-shot's (kernels/gcm.py: KEY, the
# gkey; IN, OUT, LEN, the text of the stitched loop; BYTE, BYTES_HI, data bytes; SCRATCH).
# Public scalars (lengths, flags) go through PUBLIC only: the data GPRs carry data bytes, and
# the static check's taint is per register, not per program point. It is the one-shot's
# PUBLIC_COUNTER, which an update's main loop reads (public_counter) and nothing else then needs.
PUBLIC = PUBLIC_COUNTER
POS = SCRATCH  # bytes already in the partial block (public)
BLOCKS = OUT  # gcm_aad: whole AAD blocks
SUFFIX_LEN = "r15"  # an update: bytes left for a new partial block
SUFFIX_SRC, SUFFIX_DST = (arg("gcm_encrypt_update", a) for a in ("in", "out"))  # an update: where they start


def _byte(field: Mem, index: str) -> Mem:
    return Mem(field.base, field.disp, index=index, bits=8)


class GcmStream(Gcm):
    def __init__(self, b: FunctionBuilder, decrypt: bool = False) -> None:
        super().__init__(b, decrypt)

    # -- frame and context ------------------------------------------------------
    def enter(self, ctx_arg: str) -> None:
        """Save registers, open the frame, ctx -> CTX and the gkey it names -> KEY."""
        b = self.b
        push_saved(b)
        open_frame(b, self.frame)
        b.s("mov.r64.r64", CTX, ctx_arg)
        self.public_load(KEY, GKEY, "key_pointer")

    def leave(self) -> None:
        self._wipe()
        self.epilogue(label=False)

    def public_load(self, reg: str, field: Mem, reason: str = "byte_counts") -> None:
        """reg = a public context field (declassified for the static constant-time check)."""
        b = self.b
        b.declassify_mark(reason)
        b.s("mov.r64.m64", reg, field)

    def load_hash(self) -> VReg:
        acc = self.start_hashing()
        self.b.v("vload", CTX_HASH, width=128, dst=acc, comment="the running hash")
        return acc

    def save_hash(self, acc: VReg) -> None:
        self.b.store(CTX_HASH, acc, width=128)

    def hash_partial_block(self, acc: VReg) -> None:
        """Hash the zero-padded partial block and clear it for the next one."""
        b = self.b
        self.hash_block(acc, CTX_BLOCK)
        b.store(CTX_BLOCK, b.v("vzero", width=128), width=128)

    def close_aad(self, acc: VReg) -> None:
        """Before the first text byte (or the tag): hash the AAD's partial last block."""
        b = self.b
        done = b.label_name("aad_closed")
        self.public_load(PUBLIC, IN_TEXT)
        b.s("test.r64.r64", PUBLIC, PUBLIC)
        b.branch("ne", done)
        b.s("mov.r64.imm", PUBLIC, imm=1)
        b.s("mov.m64.r64", IN_TEXT, PUBLIC)
        self.public_load(PUBLIC, AAD_BYTES)
        b.s("and.r64.imm", PUBLIC, imm=15)
        b.branch("e", done)
        self.hash_partial_block(acc)
        b.label(done)

    def advance_length(self, field: Mem, n: str, pos: str) -> None:
        """pos = field mod 16 (bytes already in the partial block); field += n."""
        b = self.b
        self.public_load(pos, field)
        b.s("lea.r64.m", PUBLIC, Mem(pos, 0, index=n, scale=1))
        b.s("mov.m64.r64", field, PUBLIC)
        b.s("and.r64.imm", pos, imm=15)

    def byte_loop(self, src: str, dst: str | None, n: str, pos: str, acc: VReg) -> None:
        """Bytes from src into the partial block at pos while n > 0 and the block is not
        full; text (dst given) is also xored with the keystream into dst. A block that
        fills up is hashed. Advances src, dst, pos; counts n down."""
        b = self.b
        top, out = b.label_name("bytes"), b.label_name("bytes_done")
        b.label(top)
        b.s("test.r64.r64", n, n)
        b.branch("e", out)
        b.s("cmp.r64.imm", pos, imm=16)
        b.branch("ae", out)
        b.s("movzx.r32.m8", r32(BYTE), Mem(src, 0, bits=8))
        if dst is not None and self.decrypt:
            b.s("mov.m8.r8", _byte(CTX_BLOCK, pos), r8(BYTE), comment="ciphertext byte to hash")
        if dst is not None:
            b.s("xor.r8.m8", r8(BYTE), _byte(CTX_KEYSTREAM, pos))
            b.s("mov.m8.r8", Mem(dst, 0, bits=8), r8(BYTE))
            b.s("add.r64.imm", dst, imm=1)
        if dst is None or not self.decrypt:
            b.s("mov.m8.r8", _byte(CTX_BLOCK, pos), r8(BYTE), comment="byte to hash")
        b.s("add.r64.imm", src, imm=1)
        b.s("add.r64.imm", pos, imm=1)
        b.s("sub.r64.imm", n, imm=1)
        b.branch("jmp", top)
        b.label(out)
        partial = b.label_name("still_partial")
        b.s("cmp.r64.imm", pos, imm=16)
        b.branch("b", partial)
        self.hash_partial_block(acc)
        b.label(partial)

    def advance_counter(self, blocks: str) -> None:
        """The context's 32-bit big-endian counter += blocks (mod 2^32)."""
        b = self.b
        word = Mem(CTX, CTX_COUNTER.disp + 12, bits=32)
        count = r32(BYTES_HI)
        b.s("mov.r32.m32", count, word)
        b.s("bswap.r32", count)
        b.s("add.r32.r32", count, blocks)
        b.s("bswap.r32", count)
        b.s("mov.m32.r32", word, count)

    def advance_counter_by_one(self) -> None:
        self.b.s("mov.r64.imm", PUBLIC, imm=1)
        self.advance_counter(r32(PUBLIC))

    # -- the parts of start and update around the AES ------------------------------------
    def start_paths(self) -> None:
        """gcm_start after its prologue: per key size, J0 and E(K, J0), then the fresh state."""
        b = self.b

        def path(nr: int) -> None:
            acc = self.start_hashing()
            self.j0(acc, nr, self.keep_j0)
            self.finish_start()

        b.key_paths(KEY, path, scratch=r32(SCRATCH))

    def keep_j0(self, j: VReg) -> None:
        """On each of make_j0's paths: J0 as the counter, and the first text counter (make_j0's
        PUBLIC_COUNTER: 2 for a 12-byte IV, else 0)."""
        self.b.store(CTX_COUNTER, j, width=128)
        self.b.s("mov.m64.r64", FIRST_COUNTER, PUBLIC_COUNTER, comment="the text's counters: public?")

    def public_counter(self) -> None:
        """PUBLIC_COUNTER = the counter of this update's first whole block when the counters are
        public (the first counter + the blocks of the text before it, whose bytes are TEXT_BYTES
        less those of the whole blocks, LEN, and of the new partial block, SUFFIX_LEN), else 0."""
        b = self.b
        unknown = b.label_name("counter_unknown")
        self.public_load(PUBLIC_COUNTER, FIRST_COUNTER, "first_counter")
        b.s("test.r64.r64", PUBLIC_COUNTER, PUBLIC_COUNTER)
        b.branch("e", unknown)
        self.public_load(SCRATCH, TEXT_BYTES)
        b.s("sub.r64.r64", SCRATCH, SUFFIX_LEN)
        b.s("sub.r64.r64", SCRATCH, LEN)
        b.s("shr.r64.imm", SCRATCH, imm=4, comment="blocks before (a multiple of 16 bytes)")
        b.s("add.r64.r64", PUBLIC_COUNTER, SCRATCH)
        b.label(unknown)

    def finish_start(self) -> None:
        """E(K, J0) (in its frame slot) and J0 (as the counter) are made: the rest of the state."""
        b = self.b
        with b.at_width(128):
            b.store(CTX_EKJ0, b.v("vload", EKJ0))
            z = b.v("vzero")
            for field in (CTX_HASH, CTX_KEYSTREAM, CTX_BLOCK):
                b.store(field, z)
        self.advance_counter_by_one()
        b.s("xor.r32.r32", r32(PUBLIC), r32(PUBLIC))
        for field in (AAD_BYTES, TEXT_BYTES, IN_TEXT):
            b.s("mov.m64.r64", field, PUBLIC)
        b.s("xor.r32.r32", r32(RESULT), r32(RESULT))
        self.leave()

    def update_paths(self, inp: str, outp: str, n: str) -> None:
        """An update after its prologue (n > 0), per key size: the whole blocks through the
        stitched CTR + GHASH loop, from the context's counter."""
        b = self.b

        def path(nr: int) -> None:
            acc = self.load_hash()
            self.update_whole_blocks(acc, inp, outp, n)
            self.public_counter()
            base = counter_base(b, CTX_COUNTER)
            self.advance_counter_past(LEN)
            whole = b.label_name("no_blocks")
            b.s("test.r64.r64", LEN, LEN)
            b.branch("e", whole)
            ctr_stream(b, nr, base, IN, OUT, LEN, stitch=self.stitch(acc), public_counter=PUBLIC_COUNTER,
                       counter_start=None)
            if not self.decrypt:
                self.hash_bytes(acc, *REST)
            b.label(whole)

            def keystream() -> None:  # one keystream block kept in the context
                with b.at_width(128):
                    b.store(CTX_KEYSTREAM, encrypt_rounds(b, b.v("vload", CTX_COUNTER), nr))
            self.update_suffix(acc, keystream)

        b.key_paths(KEY, path, scratch=r32(SCRATCH))

    def update_whole_blocks(self, acc: VReg, inp: str, outp: str, n: str) -> None:
        """An update up to its whole blocks: the AAD closed, the partial block of the last call
        finished; then IN, OUT, LEN = the whole blocks (LEN in bytes), SUFFIX_LEN = the bytes
        after them, whose place SUFFIX_IN / SUFFIX_OUT keep."""
        b = self.b
        self.close_aad(acc)
        self.advance_length(TEXT_BYTES, n, POS)
        b.s("mov.r64.r64", IN, inp)
        b.s("mov.r64.r64", OUT, outp)
        b.s("mov.r64.r64", LEN, n)
        skip = b.label_name("aligned")
        b.s("test.r64.r64", POS, POS)
        b.branch("e", skip)
        self.byte_loop(IN, OUT, LEN, POS, acc)  # finish the partial block of the last call
        b.label(skip)
        b.s("mov.r64.r64", SUFFIX_LEN, LEN)
        b.s("and.r64.imm", SUFFIX_LEN, imm=15, comment="bytes left for a new partial block")
        b.s("and.r64.imm", LEN, imm=-16)
        b.s("lea.r64.m", SCRATCH, Mem(IN, 0, index=LEN, scale=1), comment="where those bytes start")
        b.s("mov.m64.r64", SUFFIX_IN, SCRATCH)
        b.s("lea.r64.m", SCRATCH, Mem(OUT, 0, index=LEN, scale=1))
        b.s("mov.m64.r64", SUFFIX_OUT, SCRATCH)

    def advance_counter_past(self, length: str) -> None:
        """The context's counter += length / 16 (length: whole blocks in bytes)."""
        b = self.b
        b.s("mov.r64.r64", SCRATCH, length)
        b.s("shr.r64.imm", SCRATCH, imm=4)
        self.advance_counter(r32(SCRATCH))

    def update_suffix(self, acc: VReg, keystream: Callable[[], None] | None) -> None:
        """The bytes after the whole blocks start a new partial block: its keystream block
        (`keystream` makes it and the counter moves on; None: made already), then the bytes;
        the hash saved and the function left."""
        b = self.b
        b.s("mov.r64.m64", SUFFIX_SRC, SUFFIX_IN)
        b.s("mov.r64.m64", SUFFIX_DST, SUFFIX_OUT)
        partial = b.label_name("no_partial")
        b.s("test.r64.r64", SUFFIX_LEN, SUFFIX_LEN)
        b.branch("e", partial)
        if keystream is not None:
            keystream()
            self.advance_counter_by_one()
        b.s("xor.r32.r32", r32(POS), r32(POS))
        self.byte_loop(SUFFIX_SRC, SUFFIX_DST, SUFFIX_LEN, POS, acc)
        b.label(partial)
        self.save_hash(acc)
        self.leave()


@describes("gcm_start")
def gcm_start_function(b: FunctionBuilder, kind: type[GcmStream] = GcmStream) -> None:
    """P_gcm_start(ctx, gkey, iv, ivlen): -1 for an empty IV, else J0, E(K, J0), zero state.
    `kind`: whose AES (GcmStream.start_paths)."""
    g = kind(b)
    bad = b.label_name("bad_iv")
    ctx, gkey, iv, ivlen = (b.reg[a] for a in ("ctx", "gkey", "iv", "ivlen"))
    b.s("test.r64.r64", ivlen, ivlen, comment="an empty IV is refused")
    b.branch("e", bad)
    push_saved(b)
    open_frame(b, g.frame)
    b.s("mov.r64.r64", CTX, ctx)
    b.s("mov.m64.r64", GKEY, gkey)
    b.s("mov.r64.r64", KEY, gkey)
    b.s("mov.r64.r64", IV, iv)
    b.s("mov.r64.r64", IVLEN, ivlen)
    g.start_paths()

    def refuse() -> None:
        b.label(bad)
        b.s("mov.r32.imm", r32(RESULT), imm=-1)
        b.s("ret")

    b.single_path(None, refuse)


@describes("gcm_aad")
def gcm_aad_function(b: FunctionBuilder) -> None:
    """P_gcm_aad(ctx, aad, len): continue the hash over len more AAD bytes."""
    g = GcmStream(b)
    done = b.label_name("nothing")
    ctx, aad, n = (b.reg[a] for a in ("ctx", "aad", "len"))
    b.s("test.r64.r64", n, n)
    b.branch("e", done)
    g.enter(ctx)

    def body() -> None:
        acc = g.load_hash()
        g.advance_length(AAD_BYTES, n, POS)
        b.s("mov.r64.r64", IN, aad)
        b.s("mov.r64.r64", LEN, n)
        b.s("test.r64.r64", POS, POS)
        skip = b.label_name("aligned")
        b.branch("e", skip)
        g.byte_loop(IN, None, LEN, POS, acc)
        b.label(skip)
        b.s("mov.r64.r64", BLOCKS, LEN)
        b.s("and.r64.imm", BLOCKS, imm=-16)
        b.s("lea.r64.m", aad, Mem(IN, 0, index=BLOCKS, scale=1), comment="where the bytes after them start")
        b.s("shr.r64.imm", BLOCKS, imm=4, comment="whole blocks")
        g.core.main_loop(acc, IN, BLOCKS)
        g.core.tail(acc, IN, BLOCKS, g.spec.isa)
        b.s("and.r64.imm", LEN, imm=15, comment="bytes that start the next partial block")
        b.s("xor.r32.r32", r32(POS), r32(POS))
        g.byte_loop(aad, None, LEN, POS, acc)
        g.save_hash(acc)
        g.leave()
        b.label(done)
        b.s("ret")

    b.single_path(None, body)


@describes("gcm_encrypt_update", decrypt=False)
@describes("gcm_decrypt_update", decrypt=True)
def gcm_update_function(b: FunctionBuilder, decrypt: bool, kind: type[GcmStream] = GcmStream) -> None:
    """P_gcm_{en,de}crypt_update(ctx, in, out, len): any chunking; the counter, hash and
    partial block carry over in the context. `kind`: whose AES (GcmStream.update_paths)."""
    g = kind(b, decrypt)
    done = b.label_name("nothing")
    ctx, inp, outp, n = (b.reg[a] for a in ("ctx", "in", "out", "len"))
    b.s("test.r64.r64", n, n)
    b.branch("e", done)
    g.enter(ctx)

    g.update_paths(inp, outp, n)

    def nothing() -> None:
        b.label(done)
        b.s("ret")

    b.single_path(None, nothing)


@describes("gcm_finish")
def gcm_finish_function(b: FunctionBuilder) -> None:
    """P_gcm_finish(ctx, tag): hash the last partial block and the lengths; tag = E(K, J0) ^ S.
    The context's secrets are wiped."""
    g = GcmStream(b)
    ctx, tag = b.reg["ctx"], b.reg["tag"]
    g.enter(ctx)

    def body() -> None:
        acc = g.load_hash()
        g.close_aad(acc)
        g.public_load(PUBLIC, TEXT_BYTES)
        skip = b.label_name("whole")
        b.s("and.r64.imm", PUBLIC, imm=15)
        b.branch("e", skip)
        g.hash_partial_block(acc)
        b.label(skip)
        g.public_load(OUT, AAD_BYTES)  # (free registers: public lengths)
        g.public_load(LEN, TEXT_BYTES)
        g.length_block(OUT, LEN)
        g.hash_block(acc, BLOCK)
        with b.at_width(128):
            s = b.v("pshufb", acc, bswap_mask(1))
            b.store(Mem(tag, 0), b.v("vxor", s, b.v("vload", CTX_EKJ0)), comment="tag = E(K, J0) ^ S")
            z = b.v("vzero")
            for field in (CTX_EKJ0, CTX_COUNTER, CTX_HASH, CTX_KEYSTREAM, CTX_BLOCK):
                b.store(field, z)
        g.leave()

    b.single_path(None, body)
