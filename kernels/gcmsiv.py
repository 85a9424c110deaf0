"""AES-GCM-SIV (RFC 8452) one-shot encryption and decryption in the DSL.

Per call, from the key-generating key K (AES-128 or AES-256, set by P_gcmsiv_set_key):

    auth_key = AES(K, LE32(0) || N)[0:8] || AES(K, LE32(1) || N)[0:8]
    enc_key  = the first 8 bytes of AES(K, LE32(i) || N), i = 2, 3 (and 4, 5 for AES-256)
    S   = POLYVAL_auth_key(A || pad || P || pad || LE64(8 len A) || LE64(8 len P))
    tag = AES(enc_key, (S ^ N) with bit 7 of byte 15 cleared)
    C   = CTR over P from tag with bit 7 of byte 15 set, a 32-bit little-endian counter in
          bytes 0..3 (mod 2^32; the other 96 bits stay)

Decryption runs the CTR from the given tag first, hashes the plaintext it recovered,
and compares tags in constant time; on a mismatch out is zeroed and -1 returned.

The frame is the GCM one-shot's (kernels/gcm.py: its partial-block slot, tag slot and saved
arguments, so its byte gathering, hashing and tag check are reused as they are), then a
GCM-SIV area: the input pointer, then every secret: the nonce blocks, the derived keys, the
message key schedule (one `width`-bit round key per slot) and the powers H^K..H^1 of the
authentication key (and their halves-xor for Karatsuba). The secrets are zeroed on return.
"""
from __future__ import annotations

from aesgen.consts import block_msb, counter_step
from aesgen.dsl import FunctionBuilder, key_bits
from aesgen.ir import Mem, Schedule, VReg
from aesgen.spec import line_up

from . import gcm
from .aes import EXPANDERS, ScheduleWriter, encrypt_rounds, key_size_paths
from .frame import CALLEE_SAVED, aligned, leave_frame, open_frame, push_saved
from .ghash import HashCore, build_powers, dot
from .gcm import AAD, AAD_LEN, AAD_PTR, BLOCK, LEN, SCRATCH, TAG, TAG_PTR, TAGLEN, Gcm
from .modes import counter_base, ctr_stream
from .regs import RESULT, r32
from .registry import describes

# The GCM-SIV area starts after the GCM frame, 64-byte aligned relative to rsp.
AREA = line_up(gcm.FRAME)
IN_PTR = Mem("rsp", AREA, bits=64)  # public: the caller's input pointer
SECRETS = AREA + 64  # from here on everything is wiped before returning
NONCE, _FREE, AUTH_KEY, ENC_KEY, CTR_BLOCK = (Mem("rsp", SECRETS + o) for o in (0, 16, 32, 48, 80))
SCHEDULE = SECRETS + 128

# Register roles beside the arguments (b.reg) and the one-shot GCM's (kernels/gcm.py: LEN and
# TAG_PTR, the stack arguments; TAGLEN, the bytes a tag check compares; AAD, AAD_LEN_REG, what
# hash_bytes reads; SCRATCH).
NEEDED = "r8"  # the powers of H the message needs (public)
CTR_IN, CTR_OUT, CTR_LEN = "rsi", "rdi", "rdx"  # the CTR pass


@describes("gcmsiv_set_key")
def gcmsiv_set_key_function(b: FunctionBuilder) -> None:
    """P_gcmsiv_set_key(user_key, bits, skey): the key-generating key's AES schedule; 128 or 256
    bits, else -1 (RFC 8452 has no AES-192)."""
    key_size_paths(b, sizes=(128, 256))


class GcmSiv(Gcm):
    def __init__(self, b: FunctionBuilder, decrypt: bool, schedule_bytes: int | None = None) -> None:
        """`schedule_bytes`: the message schedule's room (default one `width`-bit vector per
        round key)."""
        super().__init__(b, decrypt)
        self.K = b.depth * b.lanes  # powers of the authentication key per reduction
        self.stride = b.width // 8  # the message schedule holds one vector per round key
        powers = SCHEDULE + (15 * self.stride if schedule_bytes is None else schedule_bytes)
        self.table = Mem("rsp", powers)
        self.end = line_up(powers + 32 * self.K)
        # (from, to, store width): GCM's block and tag slots, then the GCM-SIV secrets.
        self.wiped: tuple[tuple[int, int, int], ...] = ((BLOCK.disp, TAG.disp + 16, 128),
                                                        (SECRETS, self.end, b.width))
        self.frame = aligned(self.end)

    def sched_key(self, i: int) -> Mem:
        """Round key i of the per-message schedule (its first lane at width 128)."""
        return Mem("rsp", SCHEDULE + i * self.stride)

    # -- the function -----------------------------------------------------------
    def entry(self) -> None:
        b = self.b
        push_saved(b)
        b.s("mov.r64.m64", LEN, b.stack_arg("len", pushed=len(CALLEE_SAVED)))
        b.s("mov.r64.m64", TAG_PTR, b.stack_arg("tag", pushed=len(CALLEE_SAVED)))
        open_frame(b, self.frame)
        for mem, reg in ((AAD_PTR, b.reg["aad"]), (AAD_LEN, b.reg["aadlen"]), (IN_PTR, b.reg["in"]),
                         (gcm.SAVED_ARGS["out"], b.reg["out"]), (gcm.SAVED_ARGS["len"], LEN),
                         (gcm.SAVED_ARGS["tag"], TAG_PTR)):
            b.s("mov.m64.r64", Mem(mem.base, mem.disp, bits=64), reg)
        self.exit = b.label_name("exit")

    def paths(self) -> None:
        """Per key size: keys (and, encrypting, the tag), then the CTR in a path of its own
        whose round keys are the stack schedule (kept in registers where they fit), then,
        decrypting, the tag over the recovered plaintext and its check."""
        b = self.b
        ctr = {nr: b.key_section_label("ctr", nr) for nr in (10, 14)}
        check = {nr: b.key_section_label("check", nr) for nr in (10, 14)}

        def keys(nr: int) -> None:
            self.derive_keys(nr)
            if not self.decrypt:
                self.authenticate(nr)
                self.tag_out()
            b.branch("jmp", ctr[nr])

        def stream(nr: int) -> None:
            self.ctr(nr, Mem(TAG_PTR, 0) if self.decrypt else TAG)
            if self.decrypt:
                b.branch("jmp", check[nr])
            else:
                b.s("xor.r32.r32", r32(RESULT), r32(RESULT))
                self.leave()

        def verify(nr: int) -> None:
            self.authenticate(nr)
            self.check()

        b.key_paths("key", keys, scratch=r32(SCRATCH), rounds=(10, 14))  # rax carries data bytes
        schedule = Schedule("rsp", SCHEDULE, self.stride)
        for nr in (10, 14):
            b.single_path(nr, lambda nr=nr: stream(nr), ctr[nr], schedule)
        if self.decrypt:
            for nr in (10, 14):
                b.single_path(nr, lambda nr=nr: verify(nr), check[nr])
        b.single_path(None, self.epilogue)

    def authenticate(self, nr: int) -> None:
        """TAG = the tag of AAD and plaintext (in, or out once decrypted)."""
        self.make_tag(nr, self.hash_all())

    def hash_all(self) -> VReg:
        """S: POLYVAL of the AAD, the plaintext and the length block (hash_message)."""
        acc = self.b.pinned("HASH")
        self.core = HashCore(self.b, reflect=False, table=self.table, k_max=self.K,
                             karatsuba=self.spec.karatsuba, walk_by_index=True)
        self.hash_message(acc)
        return acc

    def tag_out(self) -> None:
        with self.b.at_width(128):
            self.b.store(Mem(TAG_PTR, 0), self.b.v("vload", TAG), comment="tag out")

    def check(self) -> None:
        """The computed tag (TAG) against the caller's, in constant time; then leave."""
        self.b.s("mov.r64.imm", TAGLEN, imm=16, comment="tag bytes to compare")
        self._check_tag()
        self.leave()

    def leave(self) -> None:
        self._wipe()
        self.b.branch("jmp", self.exit)

    def derive_keys(self, nr: int) -> None:
        """NONCE = N || 0^32, the derived keys, the message schedule and the powers of H."""
        b, spec = self.b, self.spec
        kgk = b.reg["key"]
        with b.at_width(128):
            # 8 bytes of key per block: 2 for the authentication key, 2 or 4 for the encryption
            # key (4 or 6 blocks side by side), each round key loaded once for all of them.
            blocks = self.nonce_blocks(2 + key_bits(nr) // 64)
            for r in range(nr + 1):
                k = b.v("vload", Mem(kgk, r * spec.key_stride), comment=f"key-generating key, round {r}")
                op = "vxor" if r == 0 else "aesenc" if r < nr else "aesenclast"
                blocks = [b.v(op, x, k) for x in blocks]
            self.store_keys(blocks)
        EXPANDERS[key_bits(nr)](b, ENC_KEY, ScheduleWriter(b, Mem("rsp", SCHEDULE), nr, False, width=b.width))
        self.powers()

    def nonce_blocks(self, count: int) -> list[VReg]:
        """NONCE = N || 0^32; the blocks LE32(i) || N, i < count (xmm values)."""
        b = self.b
        nonce = b.reg["nonce"]
        with b.at_width(128):
            lo = b.v("vload64", Mem(nonce, 0, bits=64), comment="12 nonce bytes, never 16: no over-read")
            n = b.v("punpcklqdq", lo, b.v("vload32", Mem(nonce, 8, bits=32)), comment="N || 0^32")
            b.store(NONCE, n)
            x = b.v("pslldq", n, imm=4, role="blk", comment="LE32(0) || N")
            return [x] + [b.v("paddd", x, counter_step(i, 1), comment=f"LE32({i}) || N") for i in range(1, count)]

    def store_keys(self, blocks: list[VReg]) -> None:
        """The derived keys from the encrypted nonce blocks: the first 8 bytes of each pair."""
        b = self.b
        with b.at_width(128):
            for n, dst in enumerate((AUTH_KEY, ENC_KEY, Mem("rsp", ENC_KEY.disp + 16))[:len(blocks) // 2]):
                b.store(dst, b.v("punpcklqdq", blocks[2 * n], blocks[2 * n + 1], comment="first 8 bytes of each"))

    def powers(self) -> None:
        """The powers of the authentication key the message can use: min(K, its longer part in
        whole blocks) (public lengths)."""
        b = self.b
        longer = b.label_name("longer")
        b.s("mov.r64.m64", NEEDED, Mem(AAD_LEN.base, AAD_LEN.disp, bits=64))
        b.s("cmp.r64.r64", NEEDED, LEN)
        b.branch("ae", longer)
        b.s("mov.r64.r64", NEEDED, LEN)
        b.label(longer)
        b.s("shr.r64.imm", NEEDED, imm=4)
        build_powers(b, AUTH_KEY, self.table, self.K, self.spec.karatsuba, needed=NEEDED)

    def hash_message(self, acc: VReg) -> None:
        """acc = POLYVAL over AAD, the plaintext (in, or out once decrypted) and the length block."""
        b = self.b
        self.hash_aad(acc)
        text = AAD  # then the plaintext, from the same register
        b.s("mov.r64.m64", text, gcm.SAVED_ARGS["out"] if self.decrypt else IN_PTR)
        self.hash_bytes(acc, text, LEN)
        for src, off in ((Mem(AAD_LEN.base, AAD_LEN.disp, bits=64), 0), (LEN, 8)):
            if isinstance(src, str):
                b.s("mov.r64.r64", SCRATCH, src)
            else:
                b.s("mov.r64.m64", SCRATCH, src)
            b.s("shl.r64.imm", SCRATCH, imm=3, comment="LE64 of the length in bits")
            b.s("mov.m64.r64", Mem(BLOCK.base, BLOCK.disp + off, bits=64), SCRATCH)
        self.hash_block(acc, BLOCK)

    def hash_block(self, acc: VReg, mem: Mem) -> None:
        """acc = dot(acc ^ block, H): POLYVAL, no byte reversal."""
        b = self.b
        with b.at_width(128):
            x = b.v("vxor", self.load_qwords(mem), acc)
            h = b.v("vload", Mem(self.table.base, self.table.disp + 16 * (self.K - 1)), comment="H")
            dot(b, x, h, dst=acc)

    def make_tag(self, nr: int, acc: VReg) -> None:
        b = self.b
        with b.at_width(128):
            s = self.tag_input(acc)
            b.store(TAG, encrypt_rounds(b, s, nr, key_at=self.sched_key), comment="tag = AES(enc_key, ...)")

    def tag_input(self, acc: VReg) -> VReg:
        """What the tag encrypts: S ^ N with bit 7 of byte 15 cleared (an xmm value)."""
        b = self.b
        with b.at_width(128):
            s = b.v("vxor", acc, b.v("vload", NONCE), comment="S ^ N")
            return b.v("pand", s, block_msb(clear=True), comment="clear bit 7 of byte 15")

    def counter_block(self, tag: Mem) -> None:
        """CTR_BLOCK = the tag at `tag` with bit 7 of byte 15 set."""
        b = self.b
        with b.at_width(128):
            t = b.v("pand", b.v("vload", tag), block_msb(clear=True))
            b.store(CTR_BLOCK, b.v("vxor", t, block_msb(clear=False)), comment="counter block: bit 7 of byte 15 set")

    def ctr(self, nr: int, tag: Mem) -> None:
        """out = in ^ CTR keystream from the tag at `tag` (its top bit set)."""
        b = self.b
        self.counter_block(tag)
        base = counter_base(b, CTR_BLOCK, little_endian=True)
        b.s("mov.r64.m64", CTR_IN, IN_PTR)
        b.s("mov.r64.m64", CTR_OUT, gcm.SAVED_ARGS["out"])
        b.s("mov.r64.m64", CTR_LEN, gcm.SAVED_ARGS["len"])
        ctr_stream(b, nr, base, CTR_IN, CTR_OUT, CTR_LEN, little_endian=True)

    def _wipe(self) -> None:
        b = self.b
        z = b.v("vzero")
        for lo, hi, width in self.wiped:
            for off in range(lo, hi, width // 8):
                b.store(Mem("rsp", off), z, width=width)

    def epilogue(self) -> None:
        b = self.b
        b.label(self.exit)
        leave_frame(b, self.frame, CALLEE_SAVED)


@describes("gcmsiv_encrypt", decrypt=False)
@describes("gcmsiv_decrypt", decrypt=True)
def gcmsiv_function(b: FunctionBuilder, decrypt: bool, kind: type[GcmSiv] | None = None) -> None:
    """`kind`: whose AES (GcmSiv.paths)."""
    g = (kind or GcmSiv)(b, decrypt)
    g.entry()
    g.paths()
