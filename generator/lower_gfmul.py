"""GF(2^128) products without carry-less multiply: each `clmul` of the DSL lowered to integer
multiplies with holes (`ctmul`) or to logic and shifts (`bitsliced`), constant time.

Kernels describe GHASH and POLYVAL with `clmul` whatever the method; on `--gfmul ctmul` or
`--gfmul bitsliced` this pass replaces every one of them (the simulator runs the kernel's
clmul description, so the runtime check "kernel == simulation" proves these sequences equal
the carry-less multiply). A `clmul` takes one qword of each 128-bit lane of both sources and
writes their 128-bit carry-less product to the lane.

- A product by a constant (the reduction's folds by c = x^63 + x^62 + x^57, derived from the
  polynomial in `gf128.fold_constant`) becomes the shift-and-XOR form: one left and one right
  qword shift per set bit of the constant, whatever the method.
- `ctmul`: the 64-bit operands as 32-bit halves in the low dwords of the two qwords of each lane;
  every 32 x 32 carry-less product is 16 integer products (`vpmuludq`) of "parts with holes":
  part i keeps the bits = i mod 4 of an operand. Bits of a partial product whose positions add
  to r mod 4 land in class r; at most 8 bit products meet at one position, so their sum (at most
  8 < 16) never carries into the next bit of the same class, and the class's low bit is the XOR.
- `bitsliced`: Kaesper and Schwabe's bit-logical product, one bit of the second operand at a
  time from the top: a mask from that bit (sign extension), the 128-bit accumulator doubled and
  the first operand ANDed with the mask added in (`vpternlogd` on AVX-512). No table.
"""
from __future__ import annotations

from typing import Callable

from .consts import spaced_bits
from .ir import XOR3, Const, Insn, Mem, VReg

METHODS = ("ctmul", "bitsliced")
HOLES = 4  # ctmul: parts per 32-bit operand (8 bits each: at most 8 products meet, < 2^4)


def ternlog_imm(f: Callable[[int, int, int], int]) -> int:
    """vpternlogd's table for f(a, b, c), a the destination/first source."""
    return f(0xF0, 0xCC, 0xAA) & 0xFF


AND_OR = ternlog_imm(lambda a, b, c: a | (b & c))
XOR_AND = ternlog_imm(lambda a, b, c: a ^ (b & c))


def _dword_pattern(name: str, dword: int, lanes: int) -> Const:
    return Const(f"gfmul_{name}_x{lanes}", dword.to_bytes(4, "little") * (4 * lanes))


def _qword_pattern(name: str, qword: int, lanes: int) -> Const:
    return Const(f"gfmul_{name}_x{lanes}", qword.to_bytes(8, "little") * (2 * lanes))


def _dwords(*d: int) -> int:
    """pshufd's immediate: destination dword k takes source dword d[k]."""
    return sum(x << (2 * k) for k, x in enumerate(d))


def constant_qword(c: Const, half: int) -> int:
    """The qword `half` of every lane of c (refused unless every lane has the same)."""
    qs = {int.from_bytes(c.data[16 * k + 8 * half:16 * k + 8 * half + 8], "little") for k in range(len(c.data) // 16)}
    if len(qs) != 1:
        raise ValueError(f"clmul by {c.name}: its lanes differ (no shift-and-XOR form)")
    return qs.pop()


class GfmulLowering:
    def __init__(self, isa: str, method: str, temp: Callable[[], VReg], ternlog: bool = True) -> None:
        """`ternlog`: vpternlogd allowed on AVX-512 (not with --no-ternlog)."""
        if method not in METHODS:
            raise ValueError(f"unknown GF(2^128) multiply method {method!r}")
        self.isa, self.method, self.temp = isa, method, temp
        self.ternlog = isa == "avx512" and ternlog
        # ctmul with 16 registers: each part made where it is used, from the operand (the
        # hashing loops around keep values live; holding the parts does not fit)
        self.lean = isa != "avx512"

    def __call__(self, i: Insn) -> list[Insn]:
        self.out: list[Insn] = []
        self.width = i.width
        self.lanes = i.width // 128
        a, b = i.srcs
        qa, qb = i.imm & 1, (i.imm >> 4) & 1
        if isinstance(a, Const):
            a, b, qa, qb = b, a, qb, qa
        if isinstance(b, Const):
            self.by_constant(a, qa, constant_qword(b, qb), i.dst, i.comment)
        elif self.method == "ctmul":
            self.ctmul(a, qa, b, qb, i.dst, i.comment)
        else:
            self.bitsliced(a, qa, b, qb, i.dst, i.comment)
        return self.out

    # -- emitting ---------------------------------------------------------------
    def op(self, name: str, *srcs, imm: int | None = None, dst=None, comment: str = "") -> VReg:
        d = dst if dst is not None else self.temp()
        self.out.append(Insn(name, d, tuple(srcs), imm=imm, width=self.width, comment=comment))
        return d

    def xor(self, terms: list, dst=None, comment: str = "") -> VReg:
        """The XOR of terms (three at a time with vpternlogd on AVX-512)."""
        acc, rest = terms[0], list(terms[1:])
        while rest:
            take = 2 if self.ternlog and len(rest) >= 2 else 1
            last = len(rest) == take
            if take == 2:
                acc = self.op("ternlog", acc, rest[0], rest[1], imm=XOR3, dst=dst if last else None,
                              comment=comment if last else "")
            else:
                acc = self.op("vxor", acc, rest[0], dst=dst if last else None, comment=comment if last else "")
            rest = rest[take:]
        return acc

    def qword_to_both(self, v, q: int, comment: str = "") -> VReg:
        """Qword q of each lane in both of its qwords."""
        return self.op("pshufd", v, imm=_dwords(2 * q, 2 * q + 1, 2 * q, 2 * q + 1), comment=comment)

    # -- by a constant: shifts and XORs ------------------------------------------------
    def by_constant(self, a, qa: int, c: int, dst: VReg, comment: str) -> None:
        """a's qword qa times the 64-bit constant c: for every set bit k of c, a << k (its low
        qword) and a >> (64 - k) (its high qword)."""
        v = self.qword_to_both(a, qa, comment=f"{comment}: by {c:#x} as shifts and XORs".lstrip(": "))
        bits = [k for k in range(64) if c >> k & 1]
        lo = self.xor([v if k == 0 else self.op("psllq", v, imm=k) for k in bits])
        hi_terms = [self.op("psrlq", v, imm=64 - k) for k in bits if k]
        if not hi_terms:
            self.op("punpcklqdq", lo, self.op("vzero"), dst=dst)
            return
        hi = self.xor(hi_terms)
        self.op("punpcklqdq", lo, hi, dst=dst, comment="(low qword, high qword)")

    # -- ctmul: integer multiplication with holes ------------------------------------------
    def ctmul(self, a, qa: int, b, qb: int, dst: VReg, comment: str) -> None:
        """(a1 x^32 + a0)(b1 x^32 + b0): a0b0 and a1b1 from one set of dword products, the middle
        a0b1 + a1b0 from another (b's halves swapped), added at x^32."""
        A = self.parts(a, _dwords(2 * qa, 0, 2 * qa + 1, 0))  # (a0, a1) in the qwords' low dwords
        outer = self.holes(A, self.parts(b, _dwords(2 * qb, 0, 2 * qb + 1, 0)))  # (a0 b0, a1 b1)
        inner = self.holes(A, self.parts(b, _dwords(2 * qb + 1, 0, 2 * qb, 0)))  # (a0 b1, a1 b0)
        mid = self.op("vxor", inner, self.op("pshufd", inner, imm=0x4E), comment="a0 b1 + a1 b0, both qwords")
        mid = self.op("pshufd", mid, imm=_dwords(0, 0, 1, 0), comment="at x^32")
        keep = Const(f"gfmul_mid_x{self.lanes}", (b"\0" * 4 + b"\xff" * 8 + b"\0" * 4) * self.lanes)
        if self.ternlog:
            self.op("ternlog", outer, mid, keep, imm=XOR_AND, dst=dst)
        else:
            self.op("vxor", outer, self.op("pand", mid, keep), dst=dst)

    def parts(self, v, select: int) -> list[Callable[[], VReg]]:
        """The parts with holes of pshufd(v, select), part i its bits = i mod 4: made once, or
        (lean) each where it is used, from v (nothing but v stays in a register)."""
        def make(i: int, sel: VReg | None = None) -> VReg:
            src = sel if sel is not None else self.op("pshufd", v, imm=select)
            return self.op("pand", src, _dword_pattern(f"hole{i}", spaced_bits(HOLES, 32, i), self.lanes))
        if not self.lean:
            sel = self.op("pshufd", v, imm=select)
            made = [make(i, sel) for i in range(HOLES)]
            return [lambda k=k: made[k] for k in range(HOLES)]
        return [lambda k=k: make(k) for k in range(HOLES)]

    def holes(self, parts: list[Callable[[], VReg]], bparts: list[Callable[[], VReg]]) -> VReg:
        """Each qword: the carry-less product of the low dwords, from 16 vpmuludq of parts: the
        products whose positions add to r mod 4 summed, and their class-r bits kept."""
        result = None
        for r in range(HOLES):
            keep = _qword_pattern(f"class{r}", spaced_bits(HOLES, 64, r), self.lanes)
            note = f"bit positions {r} mod {HOLES}"
            if self.lean:  # few registers: each product's class bits xored in at once
                for i in range(HOLES):
                    p = self.op("pand", self.op("pmuludq", parts[i](), bparts[(r - i) % HOLES]()), keep,
                                comment=note if i == 0 else "")
                    result = p if result is None else self.op("vxor", result, p)
                continue
            cls = self.xor([self.op("pmuludq", parts[i](), bparts[(r - i) % HOLES]()) for i in range(HOLES)])
            if result is None:
                result = self.op("pand", cls, keep, comment=note)
            elif self.ternlog:
                result = self.op("ternlog", result, cls, keep, imm=AND_OR, comment=note)
            else:
                result = self.op("por", result, self.op("pand", cls, keep), comment=note)
        return result

    # -- bitsliced: one bit at a time, masks from sign extension -------------------------------
    def bitsliced(self, a, qa: int, b, qb: int, dst: VReg, comment: str) -> None:
        """acc = 2 acc + (a & mask(bit i of b)) for i = 63 .. 0, acc 128 bits per lane."""
        if qa == 0:  # a's qword alone in the low qword (the high one zero)
            x = self.op("psrldq", self.op("pslldq", a, imm=8), imm=8,
                        comment=f"{comment}: bit-logical product, one bit at a time".lstrip(": "))
        else:
            x = self.op("psrldq", a, imm=8, comment=f"{comment}: bit-logical product, one bit at a time".lstrip(": "))
        if isinstance(b, Mem):
            b = self.op("vload", b)
        y = self.qword_to_both(b, qb)
        acc = None
        for i in reversed(range(64)):
            top = y if i == 63 else self.op("psllq", y, imm=63 - i)
            m = self.sign_mask(top)
            out = dst if i == 0 else None
            if acc is None:
                acc = self.op("pand", x, m, dst=out)
                continue
            carry = self.op("pslldq", self.op("psrlq", acc, imm=63), imm=8, comment="")
            doubled = self.op("psllq", acc, imm=1)
            if self.ternlog:
                acc = self.op("ternlog", self.op("vxor", doubled, carry), x, m, imm=XOR_AND, dst=out)
            else:
                acc = self.op("vxor", self.op("vxor", doubled, carry), self.op("pand", x, m), dst=out)

    def sign_mask(self, v: VReg) -> VReg:
        """All ones in each qword whose top bit is set."""
        if self.isa == "avx512":
            return self.op("psraq", v, imm=63)
        return self.op("pshufd", self.op("psrad", v, imm=31), imm=_dwords(1, 1, 3, 3))
