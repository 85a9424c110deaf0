"""GHASH and POLYVAL on general-purpose registers (--gfmul ctmul-gpr): ctmul's GPR form.

Horner, one block at a time: acc = dot(acc ^ X, H) in POLYVAL's order (GHASH: the block and
the hash byte-reversed, H * x from the GCM key). The 128 x 128 carry-less product is
Karatsuba's three 64 x 64 ones; each of those is 25 `mul`s (64 x 64 -> 128 bits, rdx:rax) of
parts with holes: part i of an operand keeps its bits at positions = i (mod 5) (13 bits at
most), so in the integer product of part i of a and part j of b every bit product lands at a
position = i + j (mod 5), at most 13 meet at one position, and their sum (< 16) never reaches
the next position of its class, 5 bits up: bit 0 of the sum there is their XOR. The five
products of a class are XORed and masked to the class (in the high qword the class of
position 64 + q is that of q + 4), and the classes ORed. (Holes of 4 would let 16 bit
products meet in the middle of the 128-bit result: a carry into the class's next position.)

The reduction is the two Montgomery folds of the vector code, each a product of a qword by
the fold constant c, done as shifts and XORs from c's set bits (gf128.fold_constant).

H's parts (of its halves and their XOR) are made once per call and kept in the frame with
the current operand's parts and the outer products; the frame is wiped before returning.
Secrets live in rax, rdx (the multiplier's), rbx, rbp, r11..r15, r9 and r10; the pointers
and the count (the arguments but the data's, and DATA) stay public.
"""
from __future__ import annotations

from aesgen.consts import hole_masks
from aesgen.dsl import FunctionBuilder
from aesgen.gf128 import fold_constant
from aesgen.ir import Mem

from .frame import CALLEE_SAVED, aligned, drop_frame, open_frame, push_saved

HOLES = 5  # parts per 64-bit operand (see the module doc)
PUSHED = CALLEE_SAVED  # every one of them holds product bits
# Register roles beside the arguments (SysV names; a win64 file's wrapper maps its arguments).
DATA = "r8"  # public: the data, moved out of rdx (the multiplier's)
ACC_LO, ACC_HI = "r9", "r10"  # the running hash, POLYVAL order
PART = "r11"  # an operand's part being made
CLASS_LO, CLASS_HI = "rbx", "rbp"  # one class of a 64 x 64 product
PROD_LO, PROD_HI = "r12", "r13"  # a 64 x 64 product
SPARE_LO, SPARE_HI = "r14", "r15"  # the reduction's
MUL_LO, MUL_HI = "rax", "rdx"  # `mul`'s product (and rax its other factor)
# Frame slots (qwords): H's parts [half][i] (half 0: low, 1: high, 2: their XOR), the
# operand's parts, the first two products.
H_PARTS = 0
A_PARTS = H_PARTS + 8 * 3 * HOLES
PRODUCTS = A_PARTS + 8 * HOLES
PAYLOAD = PRODUCTS + 8 * 4
FRAME = aligned(PAYLOAD, pushes=len(PUSHED))


def _slot(offset: int) -> Mem:
    return Mem("rsp", offset, bits=64)


def clmul64(b: FunctionBuilder, a: str, half: int) -> None:
    """PROD_HI:PROD_LO = a * H's half `half` (carry-less), by parts with holes."""
    masks = hole_masks(HOLES)
    for i in range(HOLES):
        b.s("mov.r64.r64", PART, a)
        b.s("and.r64.m64", PART, masks[i], comment=f"part {i}: bits = {i} (mod {HOLES})")
        b.s("mov.m64.r64", _slot(A_PARTS + 8 * i), PART)
    for r in range(HOLES):
        for i in range(HOLES):
            j = (r - i) % HOLES
            b.s("mov.r64.m64", MUL_LO, _slot(A_PARTS + 8 * i))
            b.s("mul.m64", _slot(H_PARTS + 8 * (HOLES * half + j)), comment=f"part {i} x part {j}")
            b.s("mov.r64.r64" if i == 0 else "xor.r64.r64", CLASS_LO, MUL_LO)
            b.s("mov.r64.r64" if i == 0 else "xor.r64.r64", CLASS_HI, MUL_HI)
        b.s("and.r64.m64", CLASS_LO, masks[r], comment=f"class {r}")
        b.s("and.r64.m64", CLASS_HI, masks[(r - 64) % HOLES], comment="(position 64 + q: the class of q - 64)")
        b.s("mov.r64.r64" if r == 0 else "or.r64.r64", PROD_LO, CLASS_LO)
        b.s("mov.r64.r64" if r == 0 else "or.r64.r64", PROD_HI, CLASS_HI)


def times_c(b: FunctionBuilder, v: str, lo: str, hi: str) -> None:
    """lo ^= the low qword of v * c, hi ^= its high qword (c: the fold constant; v kept)."""
    c = fold_constant()
    for k in range(64):
        if c >> k & 1:
            for dst, op, n in ((lo, "shl.r64.imm", k), (hi, "shr.r64.imm", 64 - k)):
                b.s("mov.r64.r64", PART, v)
                b.s(op, PART, imm=n)
                b.s("xor.r64.r64", dst, PART)


def load_block(b: FunctionBuilder, at: Mem, reflect: bool, lo: str, hi: str) -> None:
    """lo, hi = the 16 bytes at `at` in POLYVAL's order (GHASH's byte-reversed with `reflect`)."""
    first, second = (Mem(at.base, at.disp + 8, bits=64), Mem(at.base, at.disp, bits=64)) if reflect else \
        (Mem(at.base, at.disp, bits=64), Mem(at.base, at.disp + 8, bits=64))
    b.s("mov.r64.m64", lo, first)
    b.s("mov.r64.m64", hi, second)
    if reflect:
        b.s("bswap.r64", lo)
        b.s("bswap.r64", hi)


def store_block(b: FunctionBuilder, at: Mem, reflect: bool, lo: str, hi: str) -> None:
    """The inverse of load_block (lo, hi clobbered with `reflect`)."""
    if reflect:
        b.s("bswap.r64", lo)
        b.s("bswap.r64", hi)
        lo, hi = hi, lo
    b.s("mov.m64.r64", Mem(at.base, at.disp, bits=64), lo)
    b.s("mov.m64.r64", Mem(at.base, at.disp + 8, bits=64), hi)


def hash_blocks(b: FunctionBuilder, h: Mem, acc_at: str, count: str, reflect: bool) -> None:
    """[acc_at] continued over count >= 1 blocks at DATA: H (POLYVAL order) at `h`."""
    push_saved(b, PUSHED)
    open_frame(b, FRAME)
    masks = hole_masks(HOLES)
    for half in range(3):  # H's parts: of its low qword, its high qword, their XOR
        b.s("mov.r64.m64", SPARE_LO, Mem(h.base, h.disp + 8 * min(half, 1), bits=64))
        if half == 2:
            b.s("xor.r64.m64", SPARE_LO, Mem(h.base, h.disp, bits=64), comment="h0 ^ h1")
        for i in range(HOLES):
            b.s("mov.r64.r64", PART, SPARE_LO)
            b.s("and.r64.m64", PART, masks[i])
            b.s("mov.m64.r64", _slot(H_PARTS + 8 * (HOLES * half + i)), PART)
    load_block(b, Mem(acc_at, 0), reflect, ACC_LO, ACC_HI)
    top = b.label_name("gpr_block")
    b.label(top)
    load_block(b, Mem(DATA, 0), reflect, SPARE_LO, SPARE_HI)
    b.s("xor.r64.r64", ACC_LO, SPARE_LO, comment="acc ^ X")
    b.s("xor.r64.r64", ACC_HI, SPARE_HI)
    # Karatsuba: x0 h0, x1 h1, (x0 ^ x1)(h0 ^ h1) ^ both.
    for half, operand in ((0, ACC_LO), (1, ACC_HI)):
        clmul64(b, operand, half)
        b.s("mov.m64.r64", _slot(PRODUCTS + 16 * half), PROD_LO)
        b.s("mov.m64.r64", _slot(PRODUCTS + 16 * half + 8), PROD_HI)
    b.s("xor.r64.r64", ACC_LO, ACC_HI, comment="x0 ^ x1")
    clmul64(b, ACC_LO, 2)
    for q in range(4):
        dst = PROD_LO if q % 2 == 0 else PROD_HI
        b.s("xor.r64.m64", dst, _slot(PRODUCTS + 8 * q), comment="the Karatsuba middle" if q == 0 else "")
    # r0..r3 = lo0, hi0 ^ mid0, lo1 ^ mid1, hi1 (r0 = [PRODUCTS], r3 = [PRODUCTS + 24])
    b.s("mov.r64.m64", SPARE_LO, _slot(PRODUCTS + 8))
    b.s("xor.r64.r64", SPARE_LO, PROD_LO, comment="r1")
    b.s("mov.r64.m64", SPARE_HI, _slot(PRODUCTS + 16))
    b.s("xor.r64.r64", SPARE_HI, PROD_HI, comment="r2")
    b.s("mov.r64.m64", ACC_LO, _slot(PRODUCTS), comment="r0")
    b.s("mov.r64.m64", ACC_HI, _slot(PRODUCTS + 24), comment="r3")
    # Fold 1: + r0 * P (P = 1 + c x^64 + x^128) clears r0; fold 2 likewise clears r1.
    times_c(b, ACC_LO, SPARE_LO, SPARE_HI)
    b.s("xor.r64.r64", SPARE_HI, ACC_LO)
    times_c(b, SPARE_LO, SPARE_HI, ACC_HI)
    b.s("xor.r64.r64", ACC_HI, SPARE_LO)
    b.s("mov.r64.r64", ACC_LO, SPARE_HI, comment="acc = r2 + r3 x^64")
    b.s("add.r64.imm", DATA, imm=16)
    b.s("sub.r64.imm", count, imm=1)
    b.branch("ne", top)
    store_block(b, Mem(acc_at, 0), reflect, ACC_LO, ACC_HI)
    b.s("xor.r32.r32", "eax", "eax")
    for off in range(0, PAYLOAD, 8):  # no part of H or of the data left behind
        b.s("mov.m64.r64", _slot(off), MUL_LO)
    drop_frame(b, FRAME, PUSHED)
