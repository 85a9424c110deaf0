"""XOR of many vector values: three at a time with vpternlogd where the file may use it.

Shared by the hashing (GHASH, POLYVAL and their byte planes), the fixed-key hash and the
half-gates kernels.
"""
from __future__ import annotations

from aesgen.dsl import FunctionBuilder
from aesgen.ir import XOR3, VReg


class XorSum:
    """A running XOR fed term by term: on AVX-512 two new terms join the sum in one
    vpternlogd (half the ops of pairwise vpxor), else each joins with a vpxor. At most
    two terms wait, so a long sum never holds its products live."""

    def __init__(self, b: FunctionBuilder, width: int) -> None:
        self.b, self.width, self.terms = b, width, []
        self.arity = 3 if ternary(b) else 2

    def add(self, *terms: VReg) -> None:
        for t in terms:
            self.terms.append(t)
            if len(self.terms) == self.arity:
                self.terms = [xor_all(self.b, self.terms, self.width)]

    def value(self, dst: VReg | None = None) -> VReg:
        """The sum, written to `dst` if given (a lone term is copied there)."""
        if len(self.terms) == 1:
            if dst is None:
                return self.terms[0]
            self.b.assign(dst, self.terms[0], width=self.width)
            return dst
        return xor_all(self.b, self.terms, self.width, dst=dst)


def ternary(b: FunctionBuilder) -> bool:
    """XOR three at a time with vpternlogd: AVX-512, unless --no-ternlog."""
    return b.spec.isa == "avx512" and not b.spec.no_ternlog


def xor_all(b: FunctionBuilder, values: list, width: int, dst: VReg | None = None, comment: str = "") -> VReg:
    """The XOR of values: three at a time with vpternlogd on AVX-512, else two at a time."""
    acc, rest = values[0], list(values[1:])
    while rest:
        last = len(rest) <= (2 if ternary(b) else 1)
        out = dst if last else None
        if ternary(b) and len(rest) >= 2:
            acc = b.v("ternlog", acc, rest[0], rest[1], imm=XOR3, width=width, dst=out, comment=comment)
            rest = rest[2:]
        else:
            acc = b.v("vxor", acc, rest[0], width=width, dst=out, comment=comment)
            rest = rest[1:]
    return acc
