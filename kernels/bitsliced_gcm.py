"""AES-GCM on the bitsliced backend: the AES-NI descriptions (kernels/gcm.py, gcm_stream.py)
with their AES done by bitsliced batches (kernels/bitsliced.py).

A batch works on physical registers, all of them, so it cannot share a path with the hash's
pinned registers: a function is a chain of paths, falling through one into the next, that
hand values over in the frame or the context. The one-shot functions:

    hashing   J0 (kept in the frame), GHASH of the AAD (and, decrypting, of the ciphertext,
              before an in-place decryption overwrites it); the running hash into the frame
    AES       E(K, J0) (one xmm batch), then the CTR from inc32(J0) over the text (the file's
              batches: CTR32's counter is GCM's inc32); the batches' area wiped
    tag       (encrypting) GHASH of the ciphertext and the lengths; the tag written or checked
              as every GCM file does it (Gcm.finish_tag)

The updates of the streaming API are the same chain: the whole blocks' hash before (decrypting)
or after (encrypting) their CTR, the keystream block of a new partial block made by the AES
path. gcm_start's J0 is made in a hashing path, E(K, J0) in the next. gcm_aad, gcm_finish,
ghash and gcm_set_key have no AES of their own: every backend shares them.

The frame is the one-shot GCM's slots, then J0 and the running hash (the one-shot's) or the
whole blocks' place (an update's), then the batches' area. Register roles of the batches:
HASH_PTR and HASH_BLOCKS, public and free while no hash runs, walk the rounds and hold the
round's shuffle controls; the key is KEY (the gkey starts with the AES schedule).
"""
from __future__ import annotations

from functools import partial

from aesgen.consts import bswap_mask, counter_step
from aesgen.dsl import FunctionBuilder
from aesgen.ir import Mem

from .bitsliced import Batch, ctr_batches, x
from .frame import aligned
from .gcm import (AAD, AAD_LEN, AAD_LEN_REG, EKJ0, HASH_BLOCKS, HASH_PTR, IN, KEY, LEN, OUT, SAVED_ARGS, SLOTS,
                  Gcm, gcm_function)
from .gcm_stream import (CTX_COUNTER, CTX_KEYSTREAM, GcmStream, SUFFIX_LEN, gcm_aad_function,
                         gcm_finish_function, gcm_start_function, gcm_update_function)

CONTROLS, COUNTER = HASH_BLOCKS, HASH_PTR  # the batches' shuffle controls; rounds left and byte index
J0_SLOT, HASH_SLOT = Mem("rsp", SLOTS), Mem("rsp", SLOTS + 16)  # one-shot: J0, the running hash
TEXT_AT, TEXT_LEN = Mem("rsp", SLOTS, bits=64), Mem("rsp", SLOTS + 8, bits=64)  # update: its whole blocks
AREA = SLOTS + 32  # the batches' area (16-byte aligned: SSE's memory operands)


class BitslicedAes:
    """The batches of a GCM function: the file's (the CTR) and one xmm set (single blocks),
    sharing one area of the frame."""

    def __init__(self, b: FunctionBuilder, origin: int = AREA, on_stack: tuple[int, Mem] | None = None) -> None:
        """`origin`: where the area starts in the frame; `on_stack`: a schedule in the frame
        instead of the key's (Batch)."""
        self.b = b
        self.wide = Batch(b, CONTROLS, key=KEY, counter=COUNTER, origin=origin, on_stack=on_stack)
        self.one = Batch(b, CONTROLS, single=True, key=KEY, counter=COUNTER, origin=origin, on_stack=on_stack)
        vb = self.wide.vbytes
        self.end = origin + -(-(max(self.wide.frame.payload, self.one.frame.payload) - origin) // vb) * vb
        self.frame = aligned(self.end)

    def ctr(self, counter: Mem, inp: str, outp: str, length: str, after: bool = False,
            little_endian: bool = False) -> None:
        """out = in ^ the CTR keystream from the block at counter (`after`: from the next one),
        length bytes (may be 0): GCM's inc32 (big-endian), or GCM-SIV's (`little_endian`: a
        32-bit counter in bytes 0..3)."""
        b, bt = self.b, self.wide
        skip = b.label_name("no_text")
        b.s("test.r64.r64", length, length)
        b.branch("e", skip)
        bt.vec("vload", x(0), counter, width=128)
        if not little_endian:
            bt.vec("pshufb", x(0), x(0), bswap_mask(1), width=128, comment="byte-reversed: the counter in dword 0")
        if after:
            bt.vec("paddd", x(0), x(0), counter_step(1, 1), width=128, comment="inc32(J0): the first text block's")
        bt.vec("vstore", Mem("rsp", bt.frame.chain), x(0), width=128)
        ctr_batches(bt, inp, outp, length, little_endian)
        b.label(skip)

    def wipe(self) -> None:
        self.wide.wipe(self.end)


class BitslicedGcm(Gcm):
    def __init__(self, b: FunctionBuilder, decrypt: bool) -> None:
        super().__init__(b, decrypt)
        self.aes = BitslicedAes(b)
        self.frame = self.aes.frame

    def _wipe(self) -> None:
        super()._wipe()
        b = self.b
        with b.at_width(128):
            z = b.v("vzero")
            for slot in (J0_SLOT, HASH_SLOT):
                b.store(slot, z)

    def paths(self) -> None:
        b, decrypt, aes = self.b, self.decrypt, self.aes
        lengths = (Mem(AAD_LEN.base, AAD_LEN.disp, bits=64), SAVED_ARGS["len"])

        def hashing() -> None:
            acc = self.start_hashing()
            self.make_j0(acc, lambda j: b.store(J0_SLOT, j, width=128))
            self.hash_aad(acc)
            if decrypt:  # the ciphertext, before an in-place decryption overwrites it
                self.hash_final(acc, IN, LEN, *lengths)
            b.store(HASH_SLOT, acc, width=128)

        def cipher() -> None:
            aes.one.encrypt_block(J0_SLOT, EKJ0, comment="E(K, J0) masks the tag")
            aes.ctr(J0_SLOT, IN, OUT, LEN, after=True)
            aes.wipe()

        def tag() -> None:
            acc = self.start_hashing()
            b.v("vload", HASH_SLOT, width=128, dst=acc, comment="the running hash")
            if not decrypt:
                b.s("mov.r64.m64", AAD, SAVED_ARGS["out"])
                b.s("mov.r64.m64", AAD_LEN_REG, SAVED_ARGS["len"])
                self.hash_final(acc, AAD, AAD_LEN_REG, *lengths)
            self.finish_tag(acc)

        for part in (hashing, cipher, tag):
            b.single_path(None, part)


class BitslicedGcmStream(GcmStream):
    def __init__(self, b: FunctionBuilder, decrypt: bool = False) -> None:
        super().__init__(b, decrypt)
        self.aes = BitslicedAes(b)
        self.frame = self.aes.frame

    def start_paths(self) -> None:
        b = self.b

        def j0() -> None:
            self.make_j0(self.start_hashing(), self.keep_j0)

        def ekj0() -> None:
            self.aes.one.encrypt_block(CTX_COUNTER, EKJ0, comment="E(K, J0) masks the tag")
            self.aes.wipe()
            self.finish_start()

        b.single_path(None, j0)
        b.single_path(None, ekj0)

    def update_paths(self, inp: str, outp: str, n: str) -> None:
        b, aes = self.b, self.aes

        def before() -> None:
            acc = self.load_hash()
            self.update_whole_blocks(acc, inp, outp, n)
            b.s("mov.m64.r64", TEXT_AT, OUT)
            b.s("mov.m64.r64", TEXT_LEN, LEN)
            if self.decrypt:  # the ciphertext, before an in-place decryption overwrites it
                self.hash_bytes(acc, IN, LEN)
            self.save_hash(acc)

        def cipher() -> None:
            aes.ctr(CTX_COUNTER, IN, OUT, LEN, after=False)
            b.s("mov.r64.m64", LEN, TEXT_LEN)
            self.advance_counter_past(LEN)
            partial = b.label_name("no_keystream")
            b.s("test.r64.r64", SUFFIX_LEN, SUFFIX_LEN)
            b.branch("e", partial)
            aes.one.encrypt_block(CTX_COUNTER, CTX_KEYSTREAM, comment="keystream of the new partial block")
            self.advance_counter_by_one()
            b.label(partial)
            aes.wipe()

        def after() -> None:
            acc = self.load_hash()
            if not self.decrypt:
                b.s("mov.r64.m64", AAD, TEXT_AT)
                b.s("mov.r64.m64", AAD_LEN_REG, TEXT_LEN)
                self.hash_bytes(acc, AAD, AAD_LEN_REG)
            self.update_suffix(acc, None)

        for part in (before, cipher, after):
            b.single_path(None, part)


# The C functions of GCM on this backend (kernels/bitsliced.py adds them to its own).
FUNCTIONS = {
    "gcm_encrypt": partial(gcm_function, decrypt=False, kind=BitslicedGcm),
    "gcm_decrypt": partial(gcm_function, decrypt=True, kind=BitslicedGcm),
    "gcm_start": partial(gcm_start_function, kind=BitslicedGcmStream),
    "gcm_aad": gcm_aad_function,  # no AES: shared by every backend
    "gcm_encrypt_update": partial(gcm_update_function, decrypt=False, kind=BitslicedGcmStream),
    "gcm_decrypt_update": partial(gcm_update_function, decrypt=True, kind=BitslicedGcmStream),
    "gcm_finish": gcm_finish_function,
}
