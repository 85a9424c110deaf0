"""The GFNI backend: each AES-NI op of the DSL lowered to GFNI, byte shuffles and XORs.

Kernels describe AES with aesenc & co. whatever the backend; on `--backend gfni` the
lowering pass replaces every one of them with the sequence below (the constants come
from generator/gfni.py). The simulator runs the kernel's AES-NI description, so the
runtime check "kernel == simulation" proves these sequences equal the AES-NI ops.

Round (aesenc): ShiftRows is a byte shuffle and commutes with the bytewise S-box, so
it goes first; then s = S(x) is one vgf2p8affineinvqb, and MixColumns,
  b_r = 2 s_r + 3 s_(r+1) + s_(r+2) + s_(r+3) = s_r + (s_0 + s_1 + s_2 + s_3) + 2 u_r,
with u_r = s_r + s_(r+1) and the column sum u_r + u_(r+2), takes two column rotations
(vprord on AVX-512, else byte shuffles), one vgf2p8affineqb for 2u and three XORs.
Inverse round (aesdec, on the equivalent inverse cipher's keys): InvShiftRows, the
affine part of InvSubBytes (vgf2p8affineqb), then m * InvS for m = 0e, 0b, 0d, 09 from
four vgf2p8affineinvqb, rotated and added (InvMixColumns).
"""
from __future__ import annotations

from typing import Callable

from . import gfni
from .ir import XOR3, Const, Insn, VReg

LOWERED = ("aesenc", "aesenclast", "aesdec", "aesdeclast", "aeskeygenassist", "aesimc")
INV_MIX = (0x0E, 0x0B, 0x0D, 0x09)


def _per_qword(name: str, q: int, lanes: int) -> Const:
    return Const(f"gfni_{name}_x{lanes}", q.to_bytes(8, "little") * (2 * lanes))


def _per_lane(name: str, block: bytes, lanes: int) -> Const:
    return Const(f"gfni_{name}_x{lanes}", block * lanes)


class GfniLowering:
    def __init__(self, isa: str, temp: Callable[[], VReg]) -> None:
        self.isa, self.temp = isa, temp

    def __call__(self, i: Insn) -> list[Insn]:
        self.out: list[Insn] = []
        self.width = 128 if i.op in ("aeskeygenassist", "aesimc") else i.width
        self.lanes = self.width // 128
        getattr(self, i.op)(i)
        return self.out

    # -- emitting ---------------------------------------------------------------
    def op(self, name: str, *srcs, imm: int | None = None, dst=None, comment: str = "") -> VReg:
        d = dst if dst is not None else self.temp()
        self.out.append(Insn(name, d, tuple(srcs), imm=imm, width=self.width, comment=comment))
        return d

    def affine(self, x, matrix: tuple[int, int], name: str, inverse: bool, comment: str = "") -> VReg:
        q, imm = matrix
        return self.op("gf2p8affineinvqb" if inverse else "gf2p8affineqb", x,
                       _per_qword(name, q, self.lanes), imm=imm, comment=comment)

    def shuffle(self, x, control: bytes, name: str, comment: str = "") -> VReg:
        return self.op("pshufb", x, _per_lane(name, control, self.lanes), comment=comment)

    def rotate(self, x, n: int) -> VReg:
        """Row r of each column takes row r + n."""
        if self.isa == "avx512":
            return self.op("prord", x, imm=8 * n, comment=f"columns rotated by {n} row(s)")
        return self.shuffle(x, gfni.rotate_columns(n), f"rot{n}", f"columns rotated by {n} row(s)")

    def add(self, terms: list, dst, comment: str) -> None:
        """dst = the XOR of terms (vpternlogd three at a time on AVX-512)."""
        acc = terms[0]
        rest = terms[1:]
        while rest:
            last = len(rest) <= (2 if self.isa == "avx512" else 1)
            target = dst if last else None
            if self.isa == "avx512" and len(rest) >= 2:
                acc = self.op("ternlog", acc, rest[0], rest[1], imm=XOR3, dst=target, comment=comment if last else "")
                rest = rest[2:]
            else:
                acc = self.op("vxor", acc, rest[0], dst=target, comment=comment if last else "")
                rest = rest[1:]

    # -- the AES-NI ops ---------------------------------------------------------------
    def aesenc(self, i: Insn) -> None:
        x, k = i.srcs
        t = self.shuffle(x, gfni.shift_rows(), "shift_rows", "ShiftRows (commutes with SubBytes)")
        s = self.affine(t, gfni.sub_bytes_step(1), "sbox", True, "s = S(x)")
        u = self.op("vxor", s, self.rotate(s, 1), comment="u_r = s_r + s_(r+1)")
        total = [u, self.rotate(u, 2), k]  # u_r + u_(r+2): the column's sum, every row
        double = self.affine(u, (gfni.pack(gfni.times(2)), 0), "mul02", False, "2u")
        if self.isa == "avx512":
            tk = self.op("ternlog", *total, imm=XOR3, comment="column sum + round key")
        else:
            tk = self.op("vxor", self.op("vxor", total[0], total[1]), total[2], comment="column sum + round key")
        self.add([s, tk, double], i.dst,
                 f"MixColumns: s + sum + 2u{' (' + i.comment + ')' if i.comment else ''}")

    def aesenclast(self, i: Insn) -> None:
        x, k = i.srcs
        t = self.shuffle(x, gfni.shift_rows(), "shift_rows", "ShiftRows")
        s = self.affine(t, gfni.sub_bytes_step(1), "sbox", True, "SubBytes")
        self.op("vxor", s, k, dst=i.dst, comment=f"+ round key{' (' + i.comment + ')' if i.comment else ''}")

    def _inv_sub_bytes_times(self, x, factors: tuple[int, ...]) -> list[VReg]:
        t = self.shuffle(x, gfni.shift_rows(inverse_=True), "inv_shift_rows", "InvShiftRows")
        w = self.affine(t, gfni.inv_sub_bytes_pre(), "inv_affine", False, "A^-1 (y + 0x63)")
        return [self.affine(w, gfni.times_inverse(m), f"inv{m:02x}", True, f"{m:#04x} * InvS(y)")
                for m in factors]

    def aesdec(self, i: Insn) -> None:
        x, k = i.srcs
        m = self._inv_sub_bytes_times(x, INV_MIX)
        terms = [m[0], self.rotate(m[1], 1), self.rotate(m[2], 2), self.rotate(m[3], 3), k]
        self.add(terms, i.dst, f"InvMixColumns, + round key{' (' + i.comment + ')' if i.comment else ''}")

    def aesdeclast(self, i: Insn) -> None:
        x, k = i.srcs
        (s,) = self._inv_sub_bytes_times(x, (1,))
        self.op("vxor", s, k, dst=i.dst, comment=f"+ round key{' (' + i.comment + ')' if i.comment else ''}")

    def aeskeygenassist(self, i: Insn) -> None:
        (x,) = i.srcs
        s = self.affine(x, gfni.sub_bytes_step(1), "sbox", True, "SubWord of every word")
        w = self.shuffle(s, gfni.word_rotation_for_keygen(), "keygen_words", "X1, RotWord(X1), X3, RotWord(X3)")
        rcon = Const(f"gfni_rcon_{i.imm:02x}", b"".join(((i.imm if d % 2 else 0) & 0xFF).to_bytes(4, "little")
                                                         for d in range(4)))
        self.op("vxor", w, rcon, dst=i.dst, comment=f"^ rcon {i.imm:#04x}")

    def aesimc(self, i: Insn) -> None:
        (x,) = i.srcs
        m = [self.affine(x, (gfni.pack(gfni.times(f)), 0), f"mul{f:02x}", False, f"{f:#04x} * x")
             for f in INV_MIX]
        terms = [m[0], self.rotate(m[1], 1), self.rotate(m[2], 2), self.rotate(m[3], 3)]
        self.add(terms, i.dst, "InvMixColumns")
