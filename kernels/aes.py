"""AES in the DSL: the cipher rounds on one block group, and the key schedules.

Round keys are `KeyRef`s: regalloc keeps them in registers when they fit and
turns the rest into aligned memory operands on the schedule.
"""
from __future__ import annotations

from aesgen.aesref import ROUNDS_BY_BITS, rcon
from typing import Callable

from aesgen.dsl import FunctionBuilder, key
from aesgen.ir import Const, Mem, Operand, VReg

from .registry import describes
from .regs import RESULT, r32


def finish(b: FunctionBuilder) -> None:
    """Return; after ymm/zmm use, vzeroupper first (no SSE/AVX transition penalty for the caller)."""
    if b.width > 128:
        b.s("vzeroupper")
    b.s("ret")


def encrypt_rounds(b: FunctionBuilder, x: VReg, nr: int, last_key: Operand | None = None,
                   width: int | None = None, whiten: bool = True, dst: VReg | None = None,
                   last: bool = True, key_at=key) -> VReg:
    """AddRoundKey 0, nr-1 full rounds, the last round with `last_key` (default key nr).

    Folding a value into the last round key (CTR's plaintext, CBC's next block)
    moves that XOR off the critical path: aesenclast ends with XOR of its key.
    """
    if whiten:
        x = b.v("vxor", x, key_at(0), width=width, dst=dst, comment="round 0: whiten")
    for r in range(1, nr):
        x = b.v("aesenc", x, key_at(r), width=width, dst=dst, comment=f"round {r}")
    if not last:
        return x
    return b.v("aesenclast", x, last_key if last_key is not None else key_at(nr), width=width,
               dst=dst, comment=f"round {nr} (last)")


def decrypt_rounds(b: FunctionBuilder, x: VReg, nr: int, last_key: Operand | None = None,
                   width: int | None = None, last: bool = True) -> VReg:
    """Equivalent inverse cipher on the decryption schedule (dk[0] = ek[nr] ...)."""
    x = b.v("vxor", x, key(0), width=width, comment="round 0: whiten")
    for r in range(1, nr):
        x = b.v("aesdec", x, key(r), width=width, comment=f"round {r}")
    if not last:
        return x
    return b.v("aesdeclast", x, last_key if last_key is not None else key(nr), width=width,
               comment=f"round {nr} (last)")


def _prefix_xor(b: FunctionBuilder, k: VReg) -> VReg:
    """[w0, w0^w1, w0^w1^w2, w0^w1^w2^w3]: the running XOR of the key words."""
    s = b.v("pslldq", k, imm=4, width=128)
    k = b.v("vxor", k, s, width=128)
    s = b.v("pslldq", k, imm=8, width=128)
    return b.v("vxor", k, s, width=128)


class ScheduleWriter:
    """Stores round key i of an encryption schedule into the encrypt or decrypt layout.

    `out` is the register holding the caller's schedule (64-byte aligned, the file's width:
    key i at i * spec.key_stride), or a Mem where a schedule of `width`-bit keys starts
    (a stack frame: width / 8 bytes per key, unaligned stores)."""

    def __init__(self, b: FunctionBuilder, out: str | Mem, nr: int, decrypt: bool,
                 width: int | None = None) -> None:
        self.b, self.nr, self.decrypt = b, nr, decrypt
        self.at = out if isinstance(out, Mem) else Mem(out, 0)
        self.width = width or b.spec.width
        self.op = "vstore" if isinstance(out, Mem) else "vstore_key"

    def slot(self, i: int) -> Mem:
        """Where round key i lives."""
        return Mem(self.at.base, self.at.disp + i * self.width // 8)

    def __call__(self, i: int, k: VReg) -> None:
        b = self.b
        slot = i
        if self.decrypt:
            slot = self.nr - i
            if 0 < i < self.nr:
                k = b.v("aesimc", k, width=128, comment=f"InvMixColumns(ek[{i}])")
        if self.width > 128:
            k = b.v("widen", k, width=self.width, comment="replicate the round key to every lane")
        b.store(self.slot(slot), k, width=self.width, op=self.op,
                comment=f"{'dk' if self.decrypt else 'ek'}[{slot}]")


def _user(user: str | Mem, off: int, bits: int | None = None) -> Mem:
    """The user key's bytes at off: `user` is a pointer register or a Mem (a stack slot)."""
    if isinstance(user, Mem):
        return Mem(user.base, user.disp + off, bits=bits)
    return Mem(user, off, bits=bits)


def keygen_by_aesenclast(b: FunctionBuilder) -> bool:
    """Key expansion's SubWord by pshufb + aesenclast instead of aeskeygenassist: with AES-NI
    on an AVX ISA. aeskeygenassist's latency on the schedule's serial chain is 11.9 cycles
    on GenuineIntel 6/207 (a chain of them, timed with rdtsc) against 2.9 for vaesenclast
    and 1 for vpshufb, so a round key takes about 5 cycles instead of 14. BoringSSL takes
    the same form where AVX is present (aes_hw_set_encrypt_key_alt_preferred: slower on some
    older cores); the sse ISA keeps aeskeygenassist; GFNI lowers either."""
    return b.spec.backend == "aesni" and b.spec.isa != "sse"


def _word_mask(dword: int, rotate: bool) -> Const:
    """pshufb control: word `dword` (RotWord'd if `rotate`) in every dword."""
    order = [1, 2, 3, 0] if rotate else [0, 1, 2, 3]
    return Const(f"keygen_w{dword}{'_rot' if rotate else ''}", bytes(4 * dword + i for i in order) * 4)


def _rcon_words(rc: int) -> Const:
    return Const(f"keygen_rcon_{rc:02x}", rc.to_bytes(4, "little") * 4)


def sub_word(b: FunctionBuilder, src: VReg, dword: int, rotate: bool, rc: int) -> VReg:
    """SubWord(word `dword` of src, RotWord'd first if `rotate`) ^ rc, in every dword: the
    step of the key schedules. By aesenclast (keygen_by_aesenclast): the word in every
    column, so ShiftRows moves nothing and the round is SubBytes ^ the key [rc, 0, 0, 0]
    per word; else aeskeygenassist and the dword picked out (it offers dwords 1 and 3)."""
    what = f"{'RotWord(' if rotate else ''}SubWord(w{dword}){')' if rotate else ''}{f' ^ rcon {rc:#x}' if rc else ''}"
    if keygen_by_aesenclast(b):
        t = b.v("pshufb", src, _word_mask(dword, rotate), width=128, comment=f"w{dword} in every word")
        return b.v("aesenclast", t, _rcon_words(rc), width=128, comment=what)
    assert dword in (1, 3) and (rotate or not rc)
    # aeskeygenassist: [SubWord(w1), RotWord(SubWord(w1)) ^ rc, SubWord(w3), RotWord(SubWord(w3)) ^ rc]
    t = b.v("aeskeygenassist", src, imm=rc, width=128)
    return b.v("pshufd", t, imm=0x55 * (dword - 1 + rotate), width=128, comment=what)


def expand_128(b: FunctionBuilder, user: str | Mem, put: ScheduleWriter) -> None:
    k = b.v("vload", _user(user, 0), width=128, role="key")
    put(0, k)
    for i in range(1, 11):
        t = sub_word(b, k, 3, True, rcon(i))  # first: it is the chain's long pole
        k = b.v("vxor", _prefix_xor(b, k), t, width=128)
        put(i, k)


def expand_256(b: FunctionBuilder, user: str | Mem, put: ScheduleWriter, keys: int = 15) -> None:
    """The Nk = 8 recurrence, 4 words at a time: `keys` blocks of 4 words (AES-256: 15;
    Rijndael-256, 8 words per round key: 30)."""
    a = b.v("vload", _user(user, 0), width=128, role="key")
    c = b.v("vload", _user(user, 16), width=128, role="key")
    put(0, a)
    put(1, c)
    for i in range(2, keys):
        if i % 2 == 0:  # RotWord(SubWord(w7)) ^ rcon
            t = sub_word(b, c, 3, True, rcon(i // 2))
            a = b.v("vxor", _prefix_xor(b, a), t, width=128)
            put(i, a)
        else:  # SubWord(w3), no rotation, no rcon
            t = sub_word(b, a, 3, False, 0)
            c = b.v("vxor", _prefix_xor(b, c), t, width=128)
            put(i, c)


def expand_192(b: FunctionBuilder, user: str | Mem, put: ScheduleWriter) -> None:
    """Six words per step: A holds w[6s..6s+3], the low half of B holds w[6s+4..6s+5].

    Round keys are 4-word windows over the 6-word steps, three keys per two
    steps: A[2t], (B[2t].lo | A[2t+1].lo), (A[2t+1].hi | B[2t+1].lo).
    """
    a = b.v("vload", _user(user, 0), width=128, role="key")
    c = b.v("vload64", _user(user, 16, bits=64), width=128, role="key")
    put(0, a)
    for s in range(1, 9):
        t = sub_word(b, c, 1, True, rcon(s))  # RotWord(SubWord(w[6s-1])) ^ rcon
        a_new = b.v("vxor", _prefix_xor(b, a), t, width=128)
        if s == 8:
            put(12, a_new)
            break
        u = b.v("pslldq", c, imm=4, width=128)
        c_new = b.v("vxor", c, u, width=128)
        last = b.v("pshufd", a_new, imm=0xFF, width=128, comment="broadcast w[6s+3]")
        c_new = b.v("vxor", c_new, last, width=128)
        if s % 2 == 1:  # odd step: two keys straddle the previous B and this step
            base = 3 * (s // 2)
            put(base + 1, b.v("punpcklqdq", c, a_new, width=128))
            put(base + 2, b.v("palignr", c_new, a_new, imm=8, width=128))
        else:
            put(3 * (s // 2), a_new)
        a, c = a_new, c_new


EXPANDERS = {128: expand_128, 192: expand_192, 256: expand_256}


def key_size_paths(b: FunctionBuilder, decrypt: bool = False,
                   then: Callable[[int], None] | None = None,
                   sizes: tuple[int, ...] = tuple(EXPANDERS),
                   expand: Callable[[int, int], None] | None = None) -> None:
    """Dispatch on `bits` (one of `sizes`, else return -1); per size expand the encryption
    schedule into `key` and store the round count (or `expand(bits, nr)` instead), then
    `then(nr)` (default: return 0)."""
    labels = {kb: b.label_name(f"bits{kb}_") for kb in sizes}
    for kb, lab in labels.items():
        b.s("cmp.r32.imm", r32(b.reg["bits"]), imm=kb)
        b.branch("e", lab)
    b.s("mov.r32.imm", r32(RESULT), imm=-1, comment="unsupported key size")
    b.s("ret")
    for kb, lab in labels.items():
        nr = ROUNDS_BY_BITS[kb]

        def body(kb: int = kb, nr: int = nr) -> None:
            if expand is not None:
                expand(kb, nr)
            else:
                expand_schedule(b, kb, b.reg["user_key"], b.reg["key"], decrypt)
            if then is not None:
                then(nr)
            else:
                b.s("xor.r32.r32", r32(RESULT), r32(RESULT))
                finish(b)

        b.single_path(nr, body, lab)


def expand_schedule(b: FunctionBuilder, bits: int, user: str, out: str, decrypt: bool) -> None:
    """The schedule of the key at `user` into the one at `out` (encrypt or decrypt layout),
    with its round count."""
    nr = ROUNDS_BY_BITS[bits]
    EXPANDERS[bits](b, user, ScheduleWriter(b, out, nr, decrypt))
    b.s("mov.m32.imm", Mem(out, b.spec.rounds_offset, bits=32), imm=nr, comment="round count")


@describes("set_encrypt_key", decrypt=False)
@describes("set_decrypt_key", decrypt=True)
def set_key_function(b: FunctionBuilder, decrypt: bool) -> None:
    """P_set_{en,de}crypt_key(user_key, bits, key): 0, or -1 when bits is not 128/192/256."""
    key_size_paths(b, decrypt)
