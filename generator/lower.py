"""Lowering: DSL vector ops to the machine ops of an ISA family and width.

Width-generic DSL ops become what the target has: a lane shift across vectors
is `vperm2i128` on AVX2 and `valignq` on AVX-512; a 128-bit broadcast is a
plain load at width 128; legacy SSE cannot take unaligned memory operands in
arithmetic, so such operands become an explicit `movdqu` first.
"""
from __future__ import annotations

from dataclasses import replace

from .ir import GroupBlock, Insn, Mem, Path, VReg
from .lower_gfmul import METHODS as GFMUL_METHODS, GfmulLowering
from .lower_gfni import LOWERED as GFNI_LOWERED, GfniLowering
from .ops import info
from .spec import KernelSpec


# DSL lane shuffles of two vectors (semantics in simulate.py).
LANE_SHUFFLES = ("next_lanes", "deal_lanes", "zip_lanes")


def _lane_select(*lanes: int) -> int:
    """vshufi32x4's immediate: destination lane k takes source lane lanes[k]."""
    return sum(lane << (2 * k) for k, lane in enumerate(lanes))


class Lowerer:
    def __init__(self, spec: KernelSpec, width: int) -> None:
        self.spec = spec
        self.fn_width = width  # the function's main width (top_lane reads a register of it)
        self._ids = 1_000_000  # fresh temps, disjoint from the builder's
        self.gfni = GfniLowering(spec.isa, self._temp) if spec.backend == "gfni" else None
        self.gfmul = (GfmulLowering(spec.isa, spec.product_method, self._temp, not spec.no_ternlog)
                      if spec.product_method in GFMUL_METHODS else None)

    def _temp(self) -> VReg:
        self._ids += 1
        return VReg(self._ids, "ld")

    def insn(self, i: Insn) -> list[Insn]:
        spec = self.spec
        lanes = i.width // 128
        if self.gfni and i.op in GFNI_LOWERED:
            return [x for low in self.gfni(i) for x in self.insn(low)]
        if self.gfmul and i.op == "clmul":
            return [x for low in self.gfmul(i) for x in self.insn(low)]
        if i.op == "vload_bcast" and i.width == 128:
            return [replace(i, op="vload")]
        if i.op == "prev_lanes":
            cur, carried = i.srcs
            if spec.isa == "avx512":  # [carried's top lane, cur lanes 0..n-2]
                return [replace(i, op="valignq", srcs=(cur, carried), imm=2 * (lanes - 1))]
            if lanes == 2:
                return [replace(i, op="vperm2i128", srcs=(carried, cur), imm=0x21)]
            raise ValueError(f"prev_lanes at width {i.width} on {spec.isa}")
        if i.op in LANE_SHUFFLES:
            return self.lane_shuffle(i, lanes)
        if i.op == "top_lane":
            return [replace(i, op="vextract128", imm=self.fn_width // 128 - 1, width=self.fn_width)]
        if i.op == "upper_half":  # the upper half of a width-W register, as a W/2 value
            src_width = i.width * 2
            op = "vextract256" if src_width == 512 else "vextract128"
            return [replace(i, op=op, imm=1, width=src_width)]
        if i.op == "insert_lane":  # [vec with lane imm replaced by 16 bytes of memory]
            return [replace(i, op="vinsert128")]
        if i.op == "vstore_lane":  # lane imm of a register to 16 bytes of memory
            if i.imm == 0:
                return [replace(i, op="vstore", width=128, imm=None)]
            return [replace(i, op="vextract128")]
        if i.op == "widen":
            if spec.isa == "avx512":
                return [replace(i, op="vshufi32x4", srcs=(i.srcs[0], i.srcs[0]), imm=0)]
            return [replace(i, op="vinserti128", srcs=(i.srcs[0], i.srcs[0]), imm=1)]
        # (bitsliced code is allocated already and keeps its legacy memory operands aligned)
        if spec.isa == "sse" and spec.backend != "bitsliced" and info(i.op).memory is None:
            out: list[Insn] = []
            srcs = []
            for s in i.srcs:
                if isinstance(s, Mem):  # legacy SSE arithmetic faults on unaligned memory
                    t = self._temp()
                    out.append(Insn("vload", t, (s,), width=i.width))
                    s = t
                srcs.append(s)
            return out + [replace(i, srcs=tuple(srcs))]
        return [i]

    def lane_shuffle(self, i: Insn, lanes: int) -> list[Insn]:
        """Whole 128-bit lanes moved between two vectors (OTR pairs blocks into chunks):
        `vperm2i128` on AVX2, `vshufi32x4`/`valignq` on AVX-512."""
        a, b = i.srcs[:2]
        avx512 = self.spec.isa == "avx512"
        if lanes not in (2, 4) or (lanes == 4 and not avx512):
            raise ValueError(f"{i.op} at width {i.width} on {self.spec.isa}")
        if i.op == "next_lanes":  # [a lanes 1.., b lane 0]
            if avx512:
                return [replace(i, op="valignq", srcs=(b, a), imm=2)]
            return [replace(i, op="vperm2i128", imm=0x21)]
        if lanes == 2:  # deal and zip coincide: [a[p], b[p]]
            if avx512:
                return [replace(i, op="vshufi32x4", imm=3 * i.imm)]
            return [replace(i, op="vperm2i128", imm=0x31 if i.imm else 0x20)]
        if i.op == "deal_lanes":  # [a[p], a[p+2], b[p], b[p+2]]
            return [replace(i, op="vshufi32x4", imm=_lane_select(i.imm, i.imm + 2, i.imm, i.imm + 2))]
        if len(i.srcs) < 3:
            raise ValueError("zip_lanes of 4 lanes takes its vpermi2q indices (consts.zip_index)")
        index = self._temp()  # one two-table permute by the qword indices the DSL supplied
        return [Insn("vload", index, (i.srcs[2],), width=i.width),
                replace(i, op="vpermi2q", srcs=(index, a, b), imm=None)]

    def items(self, items: list) -> list:
        out: list = []
        for item in items:
            if isinstance(item, GroupBlock):
                out.append(GroupBlock([self.stream(s) for s in item.streams],
                                      [self.stream(s) for s in item.finals],
                                      item.final_order, item.comment, self.stream(item.riders),
                                      item.riders_first))
            elif isinstance(item, Insn) and info(item.op).vector:
                out.extend(self.insn(item))
            else:
                out.append(item)
        return out

    def stream(self, insns: list[Insn]) -> list[Insn]:
        return [x for i in insns for x in self.insn(i)]

    def path(self, p: Path) -> Path:
        return replace(p, items=self.items(p.items))

