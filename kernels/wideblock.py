"""256-bit blocks on the AES round instructions: Rijndael-256 (ECB) and Simpira v2 (b = 2).

A 256-bit block is two 128-bit halves. A group holds `lanes` blocks in two registers, dealt
(`deal_lanes`): HALF0 has every block's first 16 bytes, HALF1 every block's last 16, so all
the work below is lane by lane; `zip_lanes` puts the blocks back together for the store.

Rijndael-256 (Nb = 8) shifts rows 1, 2, 3 by 1, 3, 4 columns across the whole 8-column state,
AESENC by 1, 2, 3 within its 4 columns. Before each AESENC pair, a byte blend swaps between
the halves the bytes that ShiftRows moves across them (vpblendvb; SSE: xor, and, xor), and
one pshufb per half undoes what AESENC's own ShiftRows will do (SubBytes commutes with any
byte permutation); on AVX-512 one vpermt2b per half does both. The controls are derived here
from the two ShiftRows definitions; decryption does the same for AESDEC's InvShiftRows. The
key schedule is AES-256's recurrence continued to 120 words: 30 halves of round keys,
replicated per lane (decrypting: InvMixColumns of them, round by round in reverse).

Simpira v2 (b = 2) is a Feistel network of 15 rounds: round c XORs F_c(branch) into the other
branch, F_c(x) = AESENC(AESENC(x, C_c), 0); the outer AESENC takes the other branch as its
round key, which does the XOR. The inverse runs the rounds from c = 15 down.
"""
from __future__ import annotations

from aesgen.consts import zip_index
from aesgen.dsl import FunctionBuilder, key
from aesgen.ir import Const, Mem, VReg

from .aes import ScheduleWriter, expand_256, finish
from .modes import group_counts, return_if_zero, vector_loops
from .regs import RESULT, r32
from .registry import describes

NB = 8  # columns of the Rijndael-256 state
RIJNDAEL_SHIFTS = (0, 1, 3, 4)  # ShiftRows offsets C0..C3 for Nb = 8 (the Rijndael proposal)
AES_SHIFTS = (0, 1, 2, 3)  # what AESENC's ShiftRows does within its 4 columns
RIJNDAEL256_ROUNDS = 14
RIJNDAEL256_HALF_KEYS = 2 * (RIJNDAEL256_ROUNDS + 1)  # 120 words = 30 halves of 4 words
SIMPIRA_ROUNDS = 15
SIMPIRA_B = 2


def shift_compensation(decrypt: bool = False) -> tuple[bytes, bytes]:
    """(blend, shuffle): blend byte i is 0xFF where a half must take byte i from the other
    half (the same positions for both halves); the shuffle moves the blended bytes so that
    AESENC's ShiftRows (AESDEC's InvShiftRows) lands each on its place in Rijndael-256's.

    Rijndael's row r, column c (global, 0..7) takes column (c + C_r) mod 8 (InvShiftRows:
    c - C_r). After the blend, the byte of global column s sits at column s mod 4 of its
    half's register; AESENC's ShiftRows then reads column (c' + r) mod 4 into column c'
    (AESDEC's, c' - r), which the shuffle prepares."""
    way = -1 if decrypt else 1
    blend, shuffle = [[None] * 16 for _ in range(2)], [None] * 16
    for h in (0, 1):
        for r in range(4):
            for c in range(4):
                src = (4 * h + c + way * RIJNDAEL_SHIFTS[r]) % NB
                at = r + 4 * (src % 4)  # where the blend leaves it
                took_other = 0xFF if src // 4 != h else 0
                want = r + 4 * ((c + way * AES_SHIFTS[r]) % 4)  # where AESENC/AESDEC reads it
                for table, i, v in ((blend[h], at, took_other), (shuffle, want, at)):
                    if table[i] not in (None, v):
                        raise AssertionError("Rijndael-256 ShiftRows is not a blend and a shuffle")
                    table[i] = v
    if blend[1] != blend[0]:  # half 1 takes from half 0 exactly where half 0 takes from half 1
        raise AssertionError("the halves need different blends")
    return bytes(blend[0]), bytes(shuffle)


def _name(stem: str, decrypt: bool, lanes: int) -> str:
    return f"rijndael256_{'inv_' if decrypt else ''}{stem}_x{lanes}"


def blend_mask(lanes: int, decrypt: bool = False) -> Const:
    return Const(_name("blend", decrypt, lanes), shift_compensation(decrypt)[0] * lanes)


def shuffle_control(lanes: int, decrypt: bool = False) -> Const:
    return Const(_name("shuffle", decrypt, lanes), shift_compensation(decrypt)[1] * lanes)


def two_table_index(lanes: int, decrypt: bool = False) -> Const:
    """vpermt2b's byte indices doing the blend and the shuffle at once: byte k of lane l takes
    what the shuffle picks, from this half's register (the first table) or, where the blend
    takes the other half, from the other's (the second table, indices + 16 * lanes)."""
    mask, shuffle = shift_compensation(decrypt)
    index = bytes(16 * l + shuffle[k] + (16 * lanes if mask[shuffle[k]] else 0)
                  for l in range(lanes) for k in range(16))
    return Const(_name("index", decrypt, lanes), index)


def simpira_constant(c: int, lanes: int) -> Const:
    """C_{c,b}: dwords 0x00, 0x10, 0x20, 0x30 (little-endian), each XOR c XOR b."""
    block = b"".join(((0x10 * k) ^ c ^ SIMPIRA_B).to_bytes(4, "little") for k in range(4))
    return Const(f"simpira_c{c}_x{lanes}", block * lanes)


# ----------------------------------------------------------------------------- key setup
@describes("rijndael256_set_encrypt_key", decrypt=False)
@describes("rijndael256_set_decrypt_key", decrypt=True)
def rijndael256_set_key_function(b: FunctionBuilder, decrypt: bool) -> None:
    """P_rijndael256_set_{en,de}crypt_key(user_key, bits, rkey): 0, or -1 unless bits is 256.
    The decryption schedule is the equivalent inverse cipher's: round r's halves are
    InvMixColumns of the encryption round 14 - r's (round 0 and 14 as they are)."""
    go = b.label_name("bits256_")
    b.s("cmp.r32.imm", r32(b.reg["bits"]), imm=256)
    b.branch("e", go)
    b.s("mov.r32.imm", r32(RESULT), imm=-1, comment="Rijndael-256 here takes 256-bit keys only")
    b.s("ret")

    def body() -> None:
        store = ScheduleWriter(b, b.reg["rkey"], RIJNDAEL256_HALF_KEYS - 1, decrypt=False)

        def put(i: int, k: VReg) -> None:
            if not decrypt:
                return store(i, k)
            r, h = divmod(i, 2)
            if 0 < r < RIJNDAEL256_ROUNDS:
                k = b.v("aesimc", k, width=128, comment=f"InvMixColumns(ek[{r}] half {h})")
            store(2 * (RIJNDAEL256_ROUNDS - r) + h, k)

        expand_256(b, b.reg["user_key"], put, keys=RIJNDAEL256_HALF_KEYS)
        b.s("xor.r32.r32", r32(RESULT), r32(RESULT))
        finish(b)

    b.single_path(None, body, go)


# ----------------------------------------------------------------------------- the rounds
class Halves:
    """A group's two dealt halves, through one 256-bit-block function."""

    def __init__(self, b: FunctionBuilder) -> None:
        self.b = b

    def load(self, src: str, off: int, lanes: int, width: int) -> tuple[VReg, VReg]:
        b = self.b
        if lanes == 1:
            return tuple(b.v("vload", Mem(src, off + 16 * p), width=width, role="half",
                             comment=f"half {p}") for p in (0, 1))  # type: ignore[return-value]
        first = b.v("vload", Mem(src, off), width=width, role="blk")
        return tuple(b.v("deal_lanes", first, Mem(src, off + 16 * lanes), imm=p, width=width, role="half",
                         comment=f"half {p} of each block") for p in (0, 1))  # type: ignore[return-value]

    def store(self, dst: str, off: int, lanes: int, width: int, y: tuple[VReg, VReg]) -> None:
        b = self.b
        for p in (0, 1):
            v = y[p]
            if lanes > 1:
                index = (zip_index(p, lanes),) if lanes == 4 else ()
                v = b.v("zip_lanes", y[0], y[1], *index, imm=p, width=width, comment="blocks back in order")
            b.store(Mem(dst, off + 16 * lanes * p), v, width=width)


class Rijndael256(Halves):
    """Encryption, or (decrypt) the equivalent inverse cipher: AESDEC's InvShiftRows compensated
    the same way, on the decryption schedule."""

    def __init__(self, b: FunctionBuilder, decrypt: bool) -> None:
        super().__init__(b)
        self.decrypt = decrypt
        self.two_table = "avx512vbmi" in b.spec.features  # every CPU with VAES and AVX-512 has it
        self.ops = ("aesdec", "aesdeclast") if decrypt else ("aesenc", "aesenclast")

    def shift_rows(self, x: tuple[VReg, VReg], blend: VReg, shuffle: VReg, r: int,
                   width: int) -> tuple[VReg, VReg]:
        """Both halves made ready for AESENC (AESDEC) to do Rijndael-256's (Inv)ShiftRows. With AVX512_VBMI,
        `shuffle` holds vpermt2b's indices (two_table_index) and `blend` is unused."""
        b = self.b
        if self.two_table:  # vpermt2b overwrites its first table: one copy of a half per round
            return tuple(b.v("permt2b", x[p], shuffle, x[1 - p], width=width,  # type: ignore[return-value]
                             comment=f"round {r}: half {p} blended and pre-compensated") for p in (0, 1))
        if b.spec.isa == "sse":  # pblendvb's mask is implicitly xmm0: xor, and, xor instead
            d = b.v("vxor", x[0], x[1], width=width)
            d = b.v("pand", d, blend, width=width, comment=f"round {r}: bytes that cross halves")
            t = [b.v("vxor", x[p], d, width=width) for p in (0, 1)]
        else:
            t = [b.v("blendv", x[p], x[1 - p], blend, width=width,
                     comment=f"round {r}: bytes that cross into half {p}") for p in (0, 1)]
        return tuple(b.v("pshufb", t[p], shuffle, width=width,  # type: ignore[return-value]
                         comment="pre-compensate the instruction's ShiftRows") for p in (0, 1))

    def rounds(self, x: tuple[VReg, VReg], blend: VReg, shuffle: VReg, width: int) -> tuple[VReg, VReg]:
        """Whitening and the 14 rounds; the last one is among the group's closing ops."""
        b = self.b
        x = tuple(b.v("vxor", x[p], key(p), width=width,  # type: ignore[assignment]
                      comment="round 0: whiten" if p == 0 else "") for p in (0, 1))
        for r in range(1, RIJNDAEL256_ROUNDS + 1):
            last = r == RIJNDAEL256_ROUNDS
            if last:
                b.final()
            t = self.shift_rows(x, blend, shuffle, r, width)
            x = tuple(b.v(self.ops[last], t[p], key(2 * r + p),  # type: ignore[assignment]
                          width=width, comment=f"round {r}" + (" (last)" if last else "")) for p in (0, 1))
        return x


def _tail(b: FunctionBuilder, n: str, inp: str, outp: str, body) -> None:
    """Blocks left after the vector loops (fewer than a register holds): one at a time on xmm."""
    if b.lanes == 1:
        return
    with b.at_width(128):
        vector_loops(b, n, 1, (inp, outp), lambda g: body(g, 128), sizes=(1,), stride=32)


@describes("rijndael256_ecb_encrypt", decrypt=False)
@describes("rijndael256_ecb_decrypt", decrypt=True)
def rijndael256_ecb_function(b: FunctionBuilder, decrypt: bool) -> None:
    """P_rijndael256_ecb_{en,de}crypt(rkey, in, out, nblocks): 32-byte blocks."""
    inp, outp, n = (b.reg[a] for a in ("in", "out", "nblocks"))
    b.fn.key_base = b.reg["rkey"]
    cipher = Rijndael256(b, decrypt)
    return_if_zero(b, n)

    def path() -> None:
        if cipher.two_table:
            blend, shuffle = None, b.pinned("INDEX")
            b.v("vload", two_table_index(b.lanes, decrypt), dst=shuffle, comment="ShiftRows: both halves' bytes")
        else:
            blend, shuffle = b.pinned("BLEND"), shuffle_control(b.lanes, decrypt)
            b.v("vload", blend_mask(b.lanes, decrypt), dst=blend, comment="bytes that cross halves in ShiftRows")

        def body(g: int, width: int | None = None) -> None:
            w = width or b.width
            lanes = w // 128
            # vpermt2b's second table starts at byte 16 * lanes: an xmm tail needs its own indices
            order = shuffle if not cipher.two_table or lanes == b.lanes else \
                b.v("vload", two_table_index(lanes, decrypt), width=w, comment="ShiftRows indices for one block")

            def block(j: int) -> None:
                off = 32 * lanes * j
                y = cipher.rounds(cipher.load(inp, off, lanes, w), blend, order, w)
                cipher.store(outp, off, lanes, w, y)
            b.groups(g, block, comment=f"{g} group(s) of {lanes} block(s)")

        vector_loops(b, n, b.lanes, (inp, outp), body, sizes=group_counts(b.depth), stride=32 * b.lanes)
        _tail(b, n, inp, outp, body)
        finish(b)

    b.single_path(None, path)


@describes("simpira256_permute", inverse=False)
@describes("simpira256_inverse", inverse=True)
def simpira256_function(b: FunctionBuilder, inverse: bool) -> None:
    """P_simpira256_permute / P_simpira256_inverse(in, out, nblocks): Simpira v2 (b = 2), or its
    inverse (the same rounds, c = 15 down to 1: each one's XOR undoes itself), of each 32-byte block."""
    inp, outp, n = (b.reg[a] for a in ("in", "out", "nblocks"))
    feistel = Halves(b)
    return_if_zero(b, n)

    def path() -> None:
        def body(g: int, width: int | None = None) -> None:
            w = width or b.width
            lanes = w // 128

            def block(j: int) -> None:
                off = 32 * lanes * j
                x = list(feistel.load(inp, off, lanes, w))
                order = range(SIMPIRA_ROUNDS, 0, -1) if inverse else range(1, SIMPIRA_ROUNDS + 1)
                for c in order:
                    src = (c - 1) % 2
                    if c == order[-1]:
                        b.final()
                    f = b.v("aesenc", x[src], simpira_constant(c, lanes), width=w,
                            comment=f"round {c}: F_{c}, first AES round (key C_{c})")
                    x[1 - src] = b.v("aesenc", f, x[1 - src], width=w, role="half",
                                     comment=f"round {c}: second AES round, XOR into half {1 - src}")
                feistel.store(outp, off, lanes, w, (x[0], x[1]))
            b.groups(g, block, comment=f"{g} group(s) of {lanes} block(s)")

        vector_loops(b, n, b.lanes, (inp, outp), body, sizes=group_counts(b.depth), stride=32 * b.lanes)
        _tail(b, n, inp, outp, body)
        finish(b)

    b.single_path(None, path)
