"""AES-GCM-SIV (RFC 8452) on the bitsliced backend: the AES-NI description (kernels/gcmsiv.py:
its nonce blocks, derived keys, POLYVAL, tag input, counter block, tag check and wipe) with its
AES done by bitsliced batches (kernels/bitsliced.py). A batch owns every vector register, so a
function is a chain of paths falling one into the next and handing values over in the frame
(as kernels/bitsliced_gcm.py does for GCM):

    nonce      LE32(i) || N, i = 0..7, into the batches' buffer
    derive     one xmm batch of them under the key-generating key; its round count kept as the
               message key's (AES-128 keys make AES-128 keys)
    keys       the authentication and encryption keys; then, encrypting, POLYVAL and the tag's
               input, or, decrypting, the counter block from the given tag
    schedule   the message key's schedule (below); then the tag (encrypting: one xmm batch) or
               the CTR over the ciphertext (decrypting)
    ...        encrypting: the tag out and the counter block, the CTR, return 0; decrypting:
               POLYVAL of the plaintext, the tag, its check (out zeroed on a mismatch)

The message schedule is made per call without a secret ever stored at a variable stack
address (the static constant-time check would then distrust every reload of a saved pointer or
length): the round keys, as blocks, go through a shift register of 15 fixed slots (a step moves
every key down one slot and puts the new one in the last), SubWord is the S-box circuit on 8
copies of the last key, and unrolled code turns each block into planes stored at fixed offsets.
AES-128 takes 14 steps (keys 11..14 are never used), AES-256 13: round key i ends in slot i.
The rounds then read the frame's schedule at rsp + a public index, and its round count from a
slot only public values are stored to.
"""
from __future__ import annotations

from functools import partial

from aesgen import bitslice
from aesgen.bitsliced_code import Planes
from aesgen.consts import last_word_everywhere
from aesgen.dsl import FunctionBuilder
from aesgen.ir import Const, Insn, Mem, Phys

from . import gcmsiv
from .bitsliced import BLOCK_REGS, Batch, registers_per_set, set_key_function, spill_slots, x
from .bitsliced_gcm import CONTROLS, COUNTER, BitslicedAes
from .frame import aligned
from .gcm import KEY, SAVED_ARGS, TAG, TAG_PTR
from .gcmsiv import CTR_BLOCK, CTR_IN, CTR_LEN, CTR_OUT, ENC_KEY, IN_PTR, SCHEDULE, GcmSiv, gcmsiv_function
from .regs import RESULT, r32

# The message schedule's round count: between IN_PTR and the secrets, never under a vector store.
MSG_ROUNDS = Mem("rsp", gcmsiv.AREA + 8, bits=32)
RING_SLOTS = 15  # round keys 0..14 as blocks
# Register roles of the schedule's making (all public; the CTR reloads rsi, rdi, rdx after it).
STEPS, RCON, ODD, TOGGLE, BACK, TABLE_AT = "r15", "r12", "rsi", "rdi", "rdx", "r8"


class BitslicedGcmSiv(GcmSiv):
    def __init__(self, b: FunctionBuilder, decrypt: bool) -> None:
        spec = b.spec
        super().__init__(b, decrypt, schedule_bytes=spec.key_bytes)
        # After GcmSiv's secrets: the shift register, rcon in every word, the key pass's spill
        # slots, then the batches' area (64-byte aligned: wiped with full-width stores).
        self.ring = self.end
        self.rcon = self.ring + 16 * RING_SLOTS
        self.key_slots = self.rcon + 16
        origin = self.key_slots + -(-16 * spill_slots(spec, registers_per_set(spec, 1)) // 64) * 64
        self.aes = BitslicedAes(b, origin, on_stack=(SCHEDULE, MSG_ROUNDS))
        self.kgk = Batch(b, CONTROLS, single=True, key=KEY, counter=COUNTER, origin=origin)
        self.wiped = (self.wiped[0], (self.wiped[1][0], self.aes.end, b.width))
        self.frame = aligned(self.aes.end)

    def slot(self, i: int) -> Mem:
        return Mem("rsp", self.ring + 16 * i)

    def paths(self) -> None:
        b, aes, decrypt = self.b, self.aes, self.decrypt
        buf = Mem("rsp", self.kgk.frame.buf)

        def nonce() -> None:
            with b.at_width(128):
                for k, block in enumerate(self.nonce_blocks(len(BLOCK_REGS))):
                    b.store(Mem("rsp", buf.disp + 16 * k), block)

        def derive() -> None:
            b.s("mov.r32.m32", r32(COUNTER), Mem(KEY, self.spec.rounds_offset, bits=32), comment="round count")
            b.s("mov.m32.r32", MSG_ROUNDS, r32(COUNTER), comment="the message key's too")
            self.kgk.load(buf)
            self.kgk.store(self.kgk.run(False), buf)

        def keys() -> None:
            with b.at_width(128):
                self.store_keys([b.v("vload", Mem("rsp", buf.disp + 16 * k)) for k in range(6)])
            if decrypt:
                self.counter_block(Mem(TAG_PTR, 0))
            else:
                tag_input()

        def tag_input() -> None:
            self.powers()
            s = self.tag_input(self.hash_all())
            b.store(TAG, s, width=128, comment="what the tag encrypts")

        def schedule() -> None:
            self.message_schedule()
            if decrypt:
                text()
            else:
                tag()

        def tag() -> None:
            aes.one.encrypt_block(TAG, TAG, comment="tag = AES(enc_key, ...)")

        def text() -> None:
            b.s("mov.r64.m64", CTR_IN, IN_PTR)
            b.s("mov.r64.m64", CTR_OUT, SAVED_ARGS["out"])
            b.s("mov.r64.m64", CTR_LEN, SAVED_ARGS["len"])
            aes.ctr(CTR_BLOCK, CTR_IN, CTR_OUT, CTR_LEN, little_endian=True)

        def counter() -> None:
            self.tag_out()
            self.counter_block(TAG)

        def done() -> None:
            b.s("xor.r32.r32", r32(RESULT), r32(RESULT))
            self.leave()

        chain = (nonce, derive, keys, schedule) + ((tag_input, tag, self.check) if decrypt else (counter, text, done))
        for part in chain + (self.epilogue,):
            b.single_path(None, part)

    def message_schedule(self) -> None:
        """The frame's schedule (SCHEDULE, planes at the file's width) of ENC_KEY, 128 or 256
        bits as MSG_ROUNDS says: FIPS-197's recurrence a round key at a time through the
        shift register, then every key into planes."""
        b, spec = self.b, self.spec
        p = Planes(b, spec, 128, self.key_slots)
        aes256, start, step, plain, have, small = (b.label_name(s) for s in (
            "enc256_", "expand", "step", "no_rotword", "temp", "rcon_small"))
        b.s("mov.r32.m32", r32(STEPS), MSG_ROUNDS, comment="the message key's size")
        b.s("cmp.r32.imm", r32(STEPS), imm=10)
        b.branch("ne", aes256)
        p.op("vload", x(0), ENC_KEY, comment="AES-128: round key 0 in the last slot")
        p.op("vstore", self.slot(RING_SLOTS - 1), x(0))
        b.s("mov.r32.imm", r32(STEPS), imm=RING_SLOTS - 1, comment="steps")
        b.s("mov.r32.imm", r32(BACK), imm=16, comment="round key i - 1 is w[i - Nk]")
        b.s("xor.r32.r32", r32(TOGGLE), r32(TOGGLE), comment="RotWord and rcon every step")
        b.branch("jmp", start)
        b.label(aes256)
        for k in range(2):
            p.op("vload", x(0), Mem("rsp", ENC_KEY.disp + 16 * k), comment="AES-256: round keys 0 and 1" if k == 0 else "")
            p.op("vstore", self.slot(RING_SLOTS - 2 + k), x(0))
        b.s("mov.r32.imm", r32(STEPS), imm=RING_SLOTS - 2, comment="steps")
        b.s("xor.r32.r32", r32(BACK), r32(BACK), comment="round key i - 2 is w[i - Nk]")
        b.s("mov.r32.imm", r32(TOGGLE), imm=1, comment="RotWord and rcon every other step")
        b.label(start)
        b.s("xor.r32.r32", r32(ODD), r32(ODD))
        b.s("mov.r32.imm", r32(RCON), imm=1, comment="rcon")
        self.store_rcon()
        b.label(step)
        p.op("vload", x(0), self.slot(RING_SLOTS - 1), comment="the last round key: SubWord of its word 3")
        for j in BLOCK_REGS[1:]:
            p.move(x(j), x(0))
        p.to_planes(BLOCK_REGS, [8, 9, 10, 11])
        out = p.sbox()
        free = [n for n in range(16) if n not in out]
        p.from_planes(out, free[:4])
        sub, temp, key, shifted = x(out[0]), x(free[0]), x(free[1]), x(free[2])
        b.s("test.r64.r64", ODD, ODD)
        b.branch("ne", plain)
        self.unary(p, "pshufb", temp, sub, last_word_everywhere(True), comment="RotWord(SubWord(w3)), every word")
        p.binary("vxor", temp, temp, Mem("rsp", self.rcon), comment="^ rcon")
        b.s("add.r64.r64", RCON, RCON, comment="rcon = x * rcon")
        b.s("cmp.r64.imm", RCON, imm=0x100)
        b.branch("b", small)
        b.s("xor.r32.imm", r32(RCON), imm=0x11B, comment="reduce by x^8 + x^4 + x^3 + x + 1")
        b.label(small)
        self.store_rcon()
        b.branch("jmp", have)
        b.label(plain)
        self.unary(p, "pshufb", temp, sub, last_word_everywhere(False), comment="SubWord(w3), every word")
        b.label(have)
        p.op("vload", key, Mem("rsp", self.slot(RING_SLOTS - 2).disp, index=BACK), comment="w[i - Nk ..]")
        for n in (4, 8):
            self.unary(p, "pslldq", shifted, key, imm=n)
            p.binary("vxor", key, key, shifted, comment="each word ^ the words below it" if n == 4 else "")
        p.binary("vxor", key, key, temp, comment="the next round key")
        for i in range(RING_SLOTS - 1):
            p.op("vload", shifted, self.slot(i + 1), comment="shift the register down" if i == 0 else "")
            p.op("vstore", self.slot(i), shifted)
        p.op("vstore", self.slot(RING_SLOTS - 1), key)
        b.s("xor.r64.r64", ODD, TOGGLE)
        b.s("sub.r64.imm", STEPS, imm=1)
        b.branch("ne", step)
        self.to_planes()

    def to_planes(self) -> None:
        """Each round key of the shift register as 8 planes of the file's width, in its round's
        coordinate (the key setup's table), at fixed frame offsets."""
        b, spec = self.b, self.spec
        W = b.width
        p = Planes(b, spec, W, self.key_slots)
        b.s("lea.r64.m", TABLE_AT, bitslice.key_table(False, W), comment="per round key: into plane order")
        for i in range(RING_SLOTS):
            b.emit(Insn("vload_bcast" if W > 128 else "vload", x(0), (self.slot(i),), width=W,
                        comment=f"round key {i}, every lane"))
            for j in BLOCK_REGS[1:]:
                p.move(x(j), x(0))
            p.to_planes(BLOCK_REGS, [8, 9, 10, 11], Mem(TABLE_AT, i * W // 8))
            for j in BLOCK_REGS:
                p.op("vstore", Mem("rsp", SCHEDULE + i * spec.key_stride + j * W // 8), x(j))

    def store_rcon(self) -> None:
        for k in range(4):
            self.b.s("mov.m32.r32", Mem("rsp", self.rcon + 4 * k, bits=32), r32(RCON))

    @staticmethod
    def unary(p: Planes, op: str, dst: Phys, src: Phys, control: Const | None = None, imm: int | None = None,
              comment: str = "") -> None:
        """dst = op(src) (a control or an immediate); two-operand SSE: on a copy."""
        if p.two_op:
            p.move(dst, src)
            src = dst
        p.op(op, dst, src, *([control] if control is not None else []), imm=imm, comment=comment)


# The C functions of GCM-SIV on this backend (kernels/__init__.py adds them to the backend's).
FUNCTIONS = {
    "gcmsiv_set_key": partial(set_key_function, decrypt=False, sizes=(128, 256)),  # RFC 8452: no AES-192
    "gcmsiv_encrypt": partial(gcmsiv_function, decrypt=False, kind=BitslicedGcmSiv),
    "gcmsiv_decrypt": partial(gcmsiv_function, decrypt=True, kind=BitslicedGcmSiv),
}
