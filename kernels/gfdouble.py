"""Multiplying blocks by x and by its powers in GF(2^128) mod x^128 + x^7 + x^2 + x + 1.

XTS, OCB and OTR advance their masks by doubling. Two conventions:
  "le" (XTS, IEEE 1619): the 16 bytes are a little-endian integer, bit i the coefficient of x^i;
  "be" (OCB, OTR): big-endian. Reversing the bytes turns one into the other, so a be doubling is
  a byte reversal around the le one (a kernel that keeps its masks reversed pays it once).
Every method works on each 128-bit lane of a register on its own.

One doubling, T * x: both qwords shift left by one; bit 63 carries into the high qword and
bit 127 wraps around as x^128 = 0x87 (derived in gf128.doubling_reduction):
  krovetz  5 ops: pshufd + psrad spread bits 127 and 63 into sign masks, pand keeps [0x87, 1]
           of them, paddq doubles each qword, pxor adds the carries.
  ternlog  4 ops (AVX-512): the pand and the pxor are one vpternlogd.
  table    Aoki's: movmskpd puts bits 63 and 127 in a GPR that indexes a 4-entry table of
           carries. The load address depends on the data: NOT constant-time, generated only
           with --allow-table-lookups (the static check flags it), xmm only.
Powers, T * x^k for every lane at once (`times_x_pow`): the k bits that fall off the top are
carry-less multiplied by 0x87 (one pclmulqdq) and added to T shifted left by k.
How a stream of tweaks T x^0, T x^1, ... advances vector by vector (`TweakStream`):
  krovetz/ternlog/table: each vector is the previous one doubled once per lane (L times);
  lanewise: each vector is the previous one times x^L (one clmul per vector);
  batch:    the D vectors of a batch come from the batch's first one times x^(L j) — D
            independent clmuls instead of a chain of D dependent ones.
"""
from __future__ import annotations

from aesgen.consts import bswap_mask
from aesgen.doubling import CLMUL_METHODS, SERIAL
from aesgen.dsl import BuildError, FunctionBuilder
from aesgen.gf128 import doubling_reduction
from aesgen.ir import XOR3, Const, Mem, VReg

from .regs import r32

A_XOR_B_AND_C = 0xF0 ^ (0xCC & 0xAA)  # vpternlogd truth table of a ^ (b & c)


# ----------------------------------------------------------------------------- constants
def _per_lane(name: str, lo: int, hi: int, lanes: int) -> Const:
    return Const(f"{name}_x{lanes}", (lo.to_bytes(8, "little") + hi.to_bytes(8, "little")) * lanes)


def carry_mask(lanes: int) -> Const:
    """[0x87, 1] per lane: what bit 127 (wrapping) and bit 63 (carrying) add when doubling."""
    return _per_lane("gf_carries", doubling_reduction(), 1, lanes)


def reduction(lanes: int) -> Const:
    """0x87 in each lane's low qword: the clmul multiplier of the bits shifted out."""
    return _per_lane("gf_x128", doubling_reduction(), 0, lanes)


def carry_table() -> Const:
    """Entry i (16 bytes) for movmskpd's i = bit63 | bit127 << 1 (Aoki's method)."""
    r = doubling_reduction()
    return Const("gf_carry_table", b"".join(
        ((r if i & 2 else 0).to_bytes(8, "little") + (i & 1).to_bytes(8, "little")) for i in range(4)))


def lane_shifts(lanes: int, right: bool) -> Const:
    """Per lane l, both qwords: l (left) or 64 - l (right; 64 shifts to zero)."""
    counts = [(64 - lane) if right else lane for lane in range(lanes)]
    return Const(f"gf_lane_{'r' if right else 'l'}shift_x{lanes}",
                 b"".join(c.to_bytes(8, "little") * 2 for c in counts))


# ----------------------------------------------------------------------------- one doubling
# The table method's GPRs (public: an index into the carry table, its address).
TABLE_INDEX, TABLE_AT = "r10", "r11"


def double(b: FunctionBuilder, t: VReg, method: str, width: int | None = None,
           scratch: tuple[str, str] = (TABLE_INDEX, TABLE_AT)) -> VReg:
    """t * x in every lane (le convention) by a serial method."""
    w = width or b.width
    lanes = w // 128
    if method == "table":
        idx, table = scratch
        b.s("movmskpd.r32.x", r32(idx), t, comment="bits 63 and 127 (data-dependent index: not constant-time)")
        b.s("shl.r64.imm", idx, imm=4, comment="16-byte table entries")
        b.s("lea.r64.m", table, carry_table())
        d = b.v("paddq", t, t, width=w, comment="both qwords << 1")
        return b.v("vxor", d, Mem(table, 0, index=idx), width=w, role="tweak",
                   comment="+ the carries (table lookup)")
    s = b.v("pshufd", t, imm=0x13, width=w, comment="dword 0 <- bits 96..127, dword 2 <- bits 32..63")
    s = b.v("psrad", s, imm=31, width=w, comment="sign masks of bits 127 and 63")
    d = b.v("paddq", t, t, width=w, comment="both qwords << 1")
    if method == "ternlog":
        return b.v("ternlog", d, s, carry_mask(lanes), imm=A_XOR_B_AND_C, width=w, role="tweak",
                   comment="+ (masks & [0x87, 1])")
    if method != "krovetz":
        raise BuildError(f"internal: {method} is not a one-doubling method")
    s = b.v("pand", s, carry_mask(lanes), width=w, comment="[0x87 if bit 127, 1 if bit 63]")
    return b.v("vxor", d, s, width=w, role="tweak")


def double_be(b: FunctionBuilder, t: VReg, method: str, width: int | None = None) -> VReg:
    """t * x for big-endian blocks (OCB, OTR): byte-reverse, double, reverse back."""
    w = width or b.width
    swap = bswap_mask(w // 128)
    u = b.v("pshufb", t, swap, width=w, comment="big-endian -> little-endian")
    u = times_x_pow(b, u, 1, width=w) if method in CLMUL_METHODS else double(b, u, method, width=w)
    return b.v("pshufb", u, swap, width=w, role="tweak", comment="back to big-endian")


def gpr_double(b: FunctionBuilder, lo: str, hi: str, t: str, count63: str | None, comment: str) -> None:
    """(hi, lo) = (hi, lo) * x in two GPRs (bit k the coefficient of x^k), 5 ops, no branch:
    t = hi >> 63 arithmetic (all ones if bit 127 is set) & x^128 mod P, (hi, lo) <<= 1 by
    add/adc, lo ^= t. `count63` holds 63 (public) for BMI2's sarx; without it, or without BMI2
    in the file's features (AVX and AVX2 files: sarx is BMI2), a copy and a sar stand in;
    `t` is scratch; `comment` names the result. XTS's tweak tables (xts_table.py) and OTR's
    offset tables (otr.py, otr_tabled.py) double this way."""
    if count63 is not None and "bmi2" in b.spec.features:
        b.s("sarx.r64.r64.r64", t, hi, count63, comment="all ones if bit 127 is set")
    else:
        b.s("mov.r64.r64", t, hi)
        b.s("sar.r64.imm", t, imm=63, comment="all ones if bit 127 is set")
    b.s("and.r64.imm", t, imm=doubling_reduction(), comment="x^128 = x^7 + x^2 + x + 1 then")
    b.s("add.r64.r64", lo, lo, comment="the low qword doubled, its bit 63 carried")
    b.s("adc.r64.r64", hi, hi, comment="the high qword doubled")
    b.s("xor.r64.r64", lo, t, comment=comment)


# ----------------------------------------------------------------------------- powers of x
def _xor3(b: FunctionBuilder, x: VReg, y: VReg, z: VReg, w: int, comment: str) -> VReg:
    if b.spec.isa == "avx512":
        return b.v("ternlog", x, y, z, imm=XOR3, width=w, role="tweak", comment=comment)
    return b.v("vxor", b.v("vxor", x, y, width=w), z, width=w, role="tweak", comment=comment)


def times_x_pow(b: FunctionBuilder, t: VReg, k: int, width: int | None = None) -> VReg:
    """t * x^k in every lane (le convention), 0 <= k <= 64 at a time; one clmul."""
    w = width or b.width
    lanes = w // 128
    if k == 0:
        return t
    if k > 64:
        return times_x_pow(b, times_x_pow(b, t, 64, width=w), k - 64, width=w)
    if k % 8 == 0:  # whole bytes: the top k/8 bytes fall off
        top = b.v("psrldq", t, imm=16 - k // 8, width=w, comment=f"the top {k} bits")
        r = b.v("clmul", top, reduction(lanes), imm=0x00, width=w, comment=f"x^128 * them = 0x87 * them")
        s = b.v("pslldq", t, imm=k // 8, width=w, comment=f"<< {k}")
        return b.v("vxor", s, r, width=w, role="tweak", comment=f"tweaks * x^{k}")
    hi = b.v("psllq", t, imm=k, width=w, comment=f"both qwords << {k}")
    out = b.v("psrlq", t, imm=64 - k, width=w, comment=f"the {k} bits each qword loses")
    r = b.v("clmul", out, reduction(lanes), imm=0x01, width=w, comment="high qword's: * 0x87")
    c = b.v("pslldq", out, imm=8, width=w, comment="low qword's: carried into the high one")
    return _xor3(b, hi, c, r, w, f"tweaks * x^{k}")


def ladder(b: FunctionBuilder, t: VReg, width: int | None = None) -> VReg:
    """From a 128-bit t, a vector whose lane l is t * x^l (batch doubling: every lane at once)."""
    w = width or b.width
    lanes = w // 128
    if lanes == 1:
        return t
    v = b.v("widen", t, width=w, comment="t in every lane")
    hi = b.v("psllvq", v, lane_shifts(lanes, right=False), width=w, comment="lane l: qwords << l")
    out = b.v("psrlvq", v, lane_shifts(lanes, right=True), width=w, comment="lane l: the l bits lost")
    r = b.v("clmul", out, reduction(lanes), imm=0x01, width=w, comment="high qword's: * 0x87")
    c = b.v("pslldq", out, imm=8, width=w, comment="low qword's: carried")
    return _xor3(b, hi, c, r, w, "lane l = t * x^l")


def advance(b: FunctionBuilder, v: VReg, blocks: int, method: str, width: int | None = None) -> VReg:
    """v * x^blocks per lane: repeated doublings (serial methods) or one power (clmul ones)."""
    if method in SERIAL:
        for _ in range(blocks):
            v = double(b, v, method, width=width)
        return v
    return times_x_pow(b, v, blocks, width=width)


class TweakStream:
    """The tweaks of consecutive blocks, one vector (L lanes) at a time.

    `current` (pinned TWEAK) holds T x^i .. T x^(i+L-1) for the next block i."""

    def __init__(self, b: FunctionBuilder, method: str, current: VReg | None = None) -> None:
        """`current`: a pinned register to run in (one reused across streams), else a new one."""
        self.b, self.method = b, method
        self.current = current or b.pinned("TWEAK")

    def start(self, first: VReg) -> None:
        """From the 128-bit tweak of block 0 (lanes > 1: the clmul ladder, whatever the method)."""
        self.b.assign(self.current, ladder(self.b, first))

    def vectors(self, g: int) -> list[VReg]:
        """The tweak vectors of the next g vectors of blocks; `current` moves past them."""
        b, L, method = self.b, self.b.lanes, self.method
        out = [b.v("vmov", self.current, role="tweak", comment="(current moves on)")]
        if method == "batch":
            out += [times_x_pow(b, self.current, L * j) for j in range(1, g)]
            following = times_x_pow(b, self.current, L * g)
        else:
            for _ in range(1, g):
                out.append(advance(b, out[-1], L, method))
            following = advance(b, out[-1], L, method)
        b.assign(self.current, following, comment="tweaks of the next vector")
        return out
