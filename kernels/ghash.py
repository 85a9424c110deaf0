"""GHASH and POLYVAL in the DSL: carry-less products, aggregated reduction, powers of H.

Both are POLYVAL's Montgomery product dot(a, b) = a * b * x^-128 (see
`aesgen.gf128`); GHASH runs it on byte-reversed blocks with H * x as its key.
A main-loop iteration multiplies k = lanes x depth blocks by H^k .. H^1 (read
from a table of powers kept in descending order, so any run of r <= k blocks
uses the contiguous entries H^r .. H^1), sums the unreduced products and
reduces once. Products are schoolbook (4 clmul) or Karatsuba (3 clmul, the
halves-xor of each power precomputed in a second table).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator

from aesgen.consts import bswap_mask, gfpoly, x_to_the_0
from aesgen.dsl import FunctionBuilder
from aesgen.ir import Mem, VReg
from aesgen.spec import GFNI_MATRIX_POWERS

from . import ghash_gpr, ghash_planes
from .aes import encrypt_rounds, finish, key_size_paths
from .frame import aligned, drop_frame, open_frame
from .modes import qword_mask_for_blocks, return_if_zero
from .regs import RESULT, r32
from .registry import describes
from .xors import XorSum, xor_all

# Register roles of HashCore's tail (public; the callers keep theirs elsewhere).
POWER_AT = "r10"  # the next powers of H: their address, or their offset in the table (walk_by_index)
MASK_LEN = "r11"  # AVX-512: the qword count of the last vector's mask (POWER_AT is busy)


@dataclass
class Products:
    """Unreduced sum of products: lo + mi * x^64 + hi * x^128 (per lane)."""

    lo: VReg
    mi: VReg
    hi: VReg


def each_product(b: FunctionBuilder, x: VReg, p, px, karatsuba: bool, width: int) -> Iterator[tuple[str, VReg]]:
    """x * p lane-wise, unreduced: its terms one at a time as ("lo" | "mi" | "hi", value), each
    emitted only when asked for, so a caller that folds each into a running sum before taking
    the next keeps one product live, not four (what lets GHASH ride a 16-register AES loop)."""
    yield "lo", b.v("clmul", x, p, imm=0x00, width=width, comment="x0 * h0")
    yield "hi", b.v("clmul", x, p, imm=0x11, width=width, comment="x1 * h1")
    if karatsuba:
        xx = b.v("vxor", x, b.v("pshufd", x, imm=0x4E, width=width), width=width, comment="x0 ^ x1")
        yield "mi", b.v("clmul", xx, px, imm=0x00, width=width, comment="(x0 ^ x1)(h0 ^ h1)")
        return
    yield "mi", b.v("clmul", x, p, imm=0x01, width=width, comment="x1 * h0")
    yield "mi", b.v("clmul", x, p, imm=0x10, width=width, comment="x0 * h1")


def product_terms(b: FunctionBuilder, x: VReg, p, px, karatsuba: bool, width: int) -> tuple[VReg, list[VReg], VReg]:
    """x * p lane-wise, unreduced, as lo, the middle terms (to be xored) and hi."""
    terms: dict[str, list[VReg]] = {"lo": [], "mi": [], "hi": []}
    for field_name, value in each_product(b, x, p, px, karatsuba, width):
        terms[field_name].append(value)
    return terms["lo"][0], terms["mi"], terms["hi"][0]


def multiply(b: FunctionBuilder, x: VReg, p, px, karatsuba: bool, width: int) -> Products:
    """x * p lane-wise, unreduced. `px` is p's halves-xor (Karatsuba only)."""
    if b.spec.gfmul != "clmul":  # without clmul a product is a long sequence: sum each term as it is made
        terms: dict[str, VReg] = {}
        for field_name, v in each_product(b, x, p, px, karatsuba, width):
            terms[field_name] = b.v("vxor", terms[field_name], v, width=width) if field_name in terms else v
        return Products(terms["lo"], terms["mi"], terms["hi"])
    lo, mids, hi = product_terms(b, x, p, px, karatsuba, width)
    return Products(lo, xor_all(b, mids, width) if len(mids) > 1 else mids[0], hi)


def accumulate(b: FunctionBuilder, acc: Products | None, new: Products, width: int,
               into: Products | None = None) -> Products:
    """acc + new (just new when nothing is summed yet); `into` names the registers to
    write (pinned accumulators of a loop) instead of fresh temporaries."""
    if acc is None:
        return new
    return Products(*(b.v("vxor", getattr(acc, f), getattr(new, f), width=width,
                          dst=getattr(into, f) if into else None) for f in ("lo", "mi", "hi")))


def reduce(b: FunctionBuilder, s: Products, karatsuba: bool, width: int, dst: VReg | None = None) -> VReg:
    """Two Montgomery folds per lane, then the lanes summed into one 128-bit value."""
    lanes = width // 128
    mi = s.mi
    if karatsuba:  # (x0^x1)(h0^h1) = mid ^ lo ^ hi
        mi = xor_all(b, [mi, s.lo, s.hi], width, comment="Karatsuba middle")
    t = b.v("clmul", s.lo, gfpoly(lanes), imm=0x10, width=width, comment="fold 1: lo0 * c")
    mi = xor_all(b, [mi, b.v("pshufd", s.lo, imm=0x4E, width=width), t], width)
    t = b.v("clmul", mi, gfpoly(lanes), imm=0x10, width=width, comment="fold 2: mi0 * c")
    hi = xor_all(b, [s.hi, b.v("pshufd", mi, imm=0x4E, width=width), t], width,
                 dst=dst if lanes == 1 else None)
    while lanes > 1:  # sum the lanes: each is a reduced partial sum
        lanes //= 2
        half = b.v("upper_half", hi, width=64 * lanes * 2, comment="sum the lanes")
        hi = b.v("vxor", hi, half, width=128 * lanes, dst=dst if lanes == 1 else None)
    return hi


def dot(b: FunctionBuilder, a, h, dst: VReg | None = None) -> VReg:
    """One 128-bit POLYVAL product (schoolbook)."""
    return reduce(b, multiply(b, a, h, None, False, 128), False, 128, dst)


def mul_x(b: FunctionBuilder, v: VReg) -> VReg:
    """v * x mod P, constant time: the carry out of bit 127 selects the 0xc2..01 xor."""
    top = b.v("psrad", b.v("pshufd", v, imm=0xFF, width=128), imm=31, width=128, comment="all ones if bit 127")
    fix = b.v("pand", top, gfpoly(1), width=128)
    shifted = b.v("psllq", v, imm=1, width=128)
    carry = b.v("pslldq", b.v("psrlq", v, imm=63, width=128), imm=8, width=128, comment="bit 63 -> 64")
    return b.v("vxor", b.v("vxor", shifted, carry, width=128), fix, width=128)


class HashCore:
    """The hashing loop shared by P_ghash and P_polyval (and later GCM)."""

    def __init__(self, b: FunctionBuilder, *, reflect: bool, table: Mem, k_max: int, karatsuba: bool,
                 halves: int | None = None, walk_by_index: bool = False, shifted: Mem | None = None) -> None:
        """`halves`: bytes from a power to its Karatsuba halves-xor (default: a table of k_max).
        `shifted`: a copy of the table at another alignment, where a batch with `last` (its
        powers one entry up) reads them (GCM's key: gcm_shifted_table_offset).
        `walk_by_index`: the tail addresses the table as table + POWER_AT (an offset), never
        copying the table's base register: for a table in a stack frame, so that rsp is never
        copied into another register (the static check then tracks every stack slot)."""
        self.b, self.reflect, self.table, self.k_max, self.karatsuba = b, reflect, table, k_max, karatsuba
        self.halves = 16 * k_max if halves is None else halves
        self.walk_by_index, self.shifted = walk_by_index, shifted
        self.width, self.lanes, self.depth = b.width, b.lanes, b.depth
        self._sums: Products | None = None  # the tail's accumulators, one set however often it runs

    def power(self, entry_offset: int, width: int, base: str | None = None, mask: str | None = None,
              table: Mem | None = None):
        """Powers vector at table entry offset (bytes); and its Karatsuba halves-xor.
        `base`: the register walking the table (the tail's POWER_AT); `table`: another copy."""
        b, t = self.b, table or self.table
        if base and self.walk_by_index:
            mem = Mem(t.base, t.disp + entry_offset, index=base)
        else:
            mem = Mem(base or t.base, (0 if base else t.disp) + entry_offset)
        p = b.v("vload", mem, width=width, mask=mask, comment="powers of H")
        px = None
        if self.karatsuba:
            pxm = Mem(mem.base, mem.disp + self.halves, index=mem.index)
            px = b.v("vload", pxm, width=width, mask=mask, comment="their halves-xor")
        return p, px

    def block(self, data: str, off: int, width: int, mask: str | None = None) -> VReg:
        b = self.b
        x = b.v("vload", Mem(data, off), width=width, mask=mask, comment="data blocks")
        if self.reflect:
            x = b.v("pshufb", x, bswap_mask(width // 128), width=width, comment="GHASH: byte-reverse")
        return x

    def main_loop(self, acc: VReg, data: str, n: str, keep_last: bool = False) -> None:
        """While n >= k (n > k with keep_last: the caller takes the last batch itself):
        acc = sum of (blocks, acc folded into the first) x H^k..H^1, reduced."""
        b, K = self.b, self.depth * self.lanes
        top, out = b.label_name("hash_loop"), b.label_name("hash_end")
        b.label(top)
        b.s("cmp.r64.imm", n, imm=K)
        b.branch("be" if keep_last else "b", out)
        self.batch(acc, Mem(data, 0))
        b.s("add.r64.imm", data, imm=16 * K)
        b.s("sub.r64.imm", n, imm=K)
        b.branch("jmp", top)
        b.label(out)

    def batch(self, acc: VReg, at: Mem, last: Callable[[], Products] | None = None,
              vectors: int | None = None) -> None:
        """acc = (acc + the D vectors of blocks at `at`) x H^k..H^1, one reduction
        (`vectors`: that many instead of D, k = vectors x lanes).

        One vector's products at a time (few registers; the multiplier's throughput rules
        anyway). Vector 0, which the running hash joins, goes last: the loop-carried chain
        then passes through one product and one xor before the reduction, not all D.
        `last`: the (128-bit) products of one more block times H, which then follows these:
        the powers shift up by one (H^(k+1)..H^2)."""
        b, L, W = self.b, self.lanes, self.width
        D = vectors or self.depth
        shift = 16 if last else 0
        sums = Products(*(XorSum(b, W) for _ in range(3)))
        if last:  # 128-bit products: the upper lanes of their registers are zero
            extra = last()
            for f in ("lo", "mi", "hi"):
                getattr(sums, f).add(getattr(extra, f))
        for j in reversed(range(D)):
            x = self.block(at.base, at.disp + 16 * L * j, W)
            if j == 0:
                x = b.v("vxor", x, acc, width=W, comment="the running hash joins the first block")
            p, px = self.power(16 * (self.k_max - D * L + L * j) - shift, W, table=self.shifted if last else None)
            for field_name, term in each_product(b, x, p, px, self.karatsuba, W):
                getattr(sums, field_name).add(term)
        total = Products(sums.lo.value(), sums.mi.value(), sums.hi.value())
        reduce(b, total, self.karatsuba, W, dst=acc)

    def tail(self, acc: VReg, data: str, n: str, isa: str, last: Callable[[], Products] | None = None) -> None:
        """The last n < k blocks: powers H^n..H^1, whole vectors then a partial one, one reduction.
        `last` as in batch (n > 0 then): H^(n+1)..H^2, and its products join the reduction."""
        b, L, W = self.b, self.lanes, self.width
        done = b.label_name("hash_done")
        b.s("test.r64.r64", n, n)
        b.branch("e", done)
        # POWER_AT walks the powers table from entry k_max - n (- 1 with `last`).
        b.s("mov.r64.imm", POWER_AT, imm=self.k_max - (1 if last else 0))
        b.s("sub.r64.r64", POWER_AT, n)
        b.s("shl.r64.imm", POWER_AT, imm=4)
        if not self.walk_by_index:
            b.s("add.r64.r64", POWER_AT, self.table.base)
            if self.table.disp:
                b.s("add.r64.imm", POWER_AT, imm=self.table.disp)
        if self._sums is None:
            self._sums = Products(b.pinned("SUM_LO"), b.pinned("SUM_MI"), b.pinned("SUM_HI"))
        sums = self._sums
        for v in (sums.lo, sums.mi, sums.hi):
            b.v("vzero", dst=v, width=W)
        if L > 1:
            top, out = b.label_name("tail_vec"), b.label_name("tail_part")
            b.label(top)
            b.s("cmp.r64.imm", n, imm=L)
            b.branch("b", out)
            self._tail_step(sums, acc, data, W, None)
            b.s("add.r64.imm", data, imm=16 * L)
            b.s("add.r64.imm", POWER_AT, imm=16 * L)
            b.s("sub.r64.imm", n, imm=L)
            b.branch("jmp", top)
            b.label(out)
            skip = b.label_name("tail_none")
            b.s("test.r64.r64", n, n)
            b.branch("e", skip)
            if isa == "avx512":
                self._tail_step(sums, acc, data, W, qword_mask_for_blocks(b, n, scratch=MASK_LEN))
            else:  # one block left of a ymm vector
                self._tail_step(sums, acc, data, 128, None)
            b.label(skip)
        else:
            top = b.label_name("tail_blk")
            b.label(top)
            self._tail_step(sums, acc, data, 128, None)
            b.s("add.r64.imm", data, imm=16)
            b.s("add.r64.imm", POWER_AT, imm=16)
            b.s("sub.r64.imm", n, imm=1)
            b.branch("ne", top)
        if last:
            accumulate(b, sums, last(), W, into=sums)
        reduce(b, sums, self.karatsuba, W, dst=acc)
        b.label(done)

    def _tail_step(self, sums: Products, acc: VReg, data: str, width: int, mask: str | None) -> None:
        b, W = self.b, self.width
        x = self.block(data, 0, width, mask)
        x = b.v("vxor", x, acc, width=width, comment="the running hash joins the first block")
        b.v("vzero", dst=acc, width=128)  # folded in: later vectors add nothing
        p, px = self.power(0, width, base=POWER_AT, mask=mask)
        if b.spec.gfmul != "clmul":  # each term summed as it is made
            for field_name, v in each_product(b, x, p, px, self.karatsuba, width):
                b.v("vxor", getattr(sums, field_name), v, width=W, dst=getattr(sums, field_name))
            return
        prod = multiply(b, x, p, px, self.karatsuba, width)
        accumulate(b, sums, prod, W, into=sums)


@describes("ghash")
def ghash_function(b: FunctionBuilder, karatsuba: bool | None = None) -> None:
    """P_ghash(gkey, acc, data, nblocks): acc = GHASH_H continued over the blocks (Karatsuba
    products as the spec says, unless told)."""
    spec = b.spec
    karatsuba = spec.karatsuba if karatsuba is None else karatsuba
    acc_p, data, n = b.reg["acc"], b.reg["data"], b.reg["nblocks"]
    return_if_zero(b, n)

    def body() -> None:
        if spec.gfmul == "ctmul-gpr":
            gpr_hash(b, Mem(b.reg["key"], spec.gcm_table_offset + 16 * (spec.ghash_blocks - 1)), reflect=True)
            return
        if spec.gfmul == "gfni":  # matrices on byte planes
            ghash_planes.hash_blocks(b, b.reg["key"], acc_p, data, n)
            finish(b)
            return
        acc = b.pinned("HASH")
        a = b.v("vload", Mem(acc_p, 0), width=128, comment="acc, GHASH byte order")
        b.v("pshufb", a, bswap_mask(1), width=128, dst=acc, comment="to POLYVAL order")
        core = HashCore(b, reflect=True, table=Mem(b.reg["key"], spec.gcm_table_offset),
                        k_max=spec.ghash_blocks, karatsuba=karatsuba, halves=spec.gcm_halves_offset)
        core.main_loop(acc, data, n)
        core.tail(acc, data, n, spec.isa)
        out = b.v("pshufb", acc, bswap_mask(1), width=128)
        b.store(Mem(acc_p, 0), out, width=128)
        finish(b)

    b.single_path(None, body)


@describes("gcm_set_key")
def gcm_set_key_function(b: FunctionBuilder) -> None:
    """P_gcm_set_key(user_key, bits, gkey): AES schedule, then H^K..H^1 and their halves-xor
    (--gfmul gfni: then the matrices of H^8, H^4, H^2, H^1)."""
    spec = b.spec
    out = b.reg["key"]
    powers = b.label_name("powers")

    def h_of(nr: int) -> None:
        with b.at_width(128):
            # The schedule was just written: read it from memory, not from registers
            # that regalloc would load at the path's entry (before it exists).
            h = encrypt_rounds(b, b.v("vzero"), nr, key_at=lambda i: Mem(out, i * spec.key_stride))
            b.store(h_slot(spec, out), h, comment="E(K, 0)")
        b.branch("jmp", powers)

    key_size_paths(b, then=h_of)
    b.single_path(None, lambda: power_table(b), powers)


def h_slot(spec, key: str) -> Mem:
    """Where gcm_set_key leaves E(K, 0) for power_table: H^1's entry, which it then becomes."""
    return Mem(key, spec.gcm_table_offset + 16 * (spec.ghash_blocks - 1))


def power_table(b: FunctionBuilder) -> None:
    """The GCM key's table from E(K, 0) in H^1's entry (h_slot): H = E(K, 0) * x in POLYVAL
    order, then H^i = dot(H^(i/2), H^(i - i/2)) (a tree, log2(K) products deep) and the
    halves-xor of each, then all of it again at gcm_shifted_table_offset; returns 0."""
    spec, out = b.spec, b.reg["key"]
    K, table, halves = spec.ghash_blocks, spec.gcm_table_offset, spec.gcm_halves_offset

    def entry(i: int) -> Mem:
        return Mem(out, table + 16 * (K - i))

    with b.at_width(128):
        h = b.v("pshufb", b.v("vload", h_slot(spec, out)), bswap_mask(1), comment="H in POLYVAL order")
        b.store(entry(1), mul_x(b, h), comment="H^1 (GHASH's H * x)")
        for i in range(2, K + 2):
            a = b.v("vload", entry(i // 2))
            c = b.v("vload", entry(i - i // 2))
            b.store(entry(i), dot(b, a, c), comment=f"H^{i}")
        for i in range(1, K + 2):
            p = b.v("vload", entry(i))
            px = b.v("vxor", p, b.v("pshufd", p, imm=0x4E))
            b.store(Mem(out, table + halves + 16 * (K - i)), px, comment=f"H^{i} halves-xor")
        copy = spec.gcm_shifted_table_offset
        for off in range(-16, spec.gcm_powers_bytes - 16, 16):  # from H^(K+1), 16 bytes before H^K
            b.store(Mem(out, copy + off), b.v("vload", Mem(out, table + off)),
                    comment="the copy the last batch reads (gcm_shifted_table_offset)")
    if spec.gfmul == "gfni":
        gfni_matrices(b, entry, K + 1)
    b.s("xor.r32.r32", r32(RESULT), r32(RESULT))
    finish(b)


def gpr_hash(b: FunctionBuilder, h: Mem, reflect: bool) -> None:
    """--gfmul ctmul-gpr: P_ghash / P_polyval's body on GPRs (kernels/ghash_gpr.py), H at h."""
    b.declassify_mark("data_pointer")  # the data pointer leaves rdx, which the multiplier then fills with secrets
    b.s("mov.r64.r64", ghash_gpr.DATA, b.reg["data"])
    ghash_gpr.hash_blocks(b, h, b.reg["acc"], b.reg["nblocks"], reflect)
    finish(b)


def gfni_matrices(b: FunctionBuilder, entry: Callable[[int], Mem], stored: int) -> None:
    """--gfmul gfni: the GCM key's matrices (kernels/ghash_planes.py) of H^k for k in
    GFNI_MATRIX_POWERS, H^k read from the table's `entry(k)` where it holds it (k <= `stored`),
    else squared from H^(k/2). Column 0 of each is dot(x^0, H^k); POWER_AT and MASK_LEN walk
    the columns."""
    out = b.reg["key"]
    with b.at_width(128):
        powers: dict[int, VReg] = {}
        for k in sorted(GFNI_MATRIX_POWERS):
            powers[k] = b.v("vload", entry(k)) if k <= stored else dot(b, powers[k // 2], powers[k // 2])
        one = b.v("vload", x_to_the_0(), comment="x^0")
        firsts = {}  # each matrix's first column, made before the column loops (labels)
        for k in GFNI_MATRIX_POWERS:
            firsts[k] = b.pinned(f"COLUMN0_H{k}")
            dot(b, one, powers[k], dst=firsts[k])
        for k in GFNI_MATRIX_POWERS:
            ghash_planes.build_matrix(b, ghash_planes.matrix(b.spec, out, k), firsts[k],
                                      lambda v: mul_x(b, v), count=MASK_LEN, walk=POWER_AT)


def build_powers(b: FunctionBuilder, h: Mem, table: Mem, K: int, karatsuba: bool,
                 needed: str | None = None) -> None:
    """table = H^K..H^1 (descending, 16 bytes each; H read from h), then for Karatsuba
    their halves-xor in the same order. `needed`: a GPR with how many powers the message
    can use (public; its length in blocks): the others are not computed."""
    def entry(i: int) -> Mem:
        return Mem(table.base, table.disp + 16 * (K - i))

    done = b.label_name("powers_done")
    for i in range(1, K + 1):
        if needed and i > 1:
            b.s("cmp.r64.imm", needed, imm=i)
            b.branch("b", done)
        with b.at_width(128):
            if i == 1:
                p = b.v("vload", h)
            else:
                p = dot(b, b.v("vload", entry(i // 2)), b.v("vload", entry(i - i // 2)))
            b.store(entry(i), p, comment=f"H^{i}")
            if karatsuba:
                b.store(Mem(table.base, table.disp + 16 * K + 16 * (K - i)),
                        b.v("vxor", p, b.v("pshufd", p, imm=0x4E)), comment=f"H^{i} halves-xor")
    b.label(done)


@describes("polyval")
def polyval_function(b: FunctionBuilder, karatsuba: bool | None = None) -> None:
    """P_polyval(h, acc, data, nblocks): RFC 8452 POLYVAL continued from acc.

    Short inputs go block by block (Horner); longer ones build H^K..H^1 in a
    stack frame first (no frame pointer: rsp only moves by constants), then run the
    aggregated loop. Karatsuba products as the spec says, unless told.
    """
    spec = b.spec
    karatsuba = spec.karatsuba if karatsuba is None else karatsuba
    h_p, acc_p, data, n = b.reg["h"], b.reg["acc"], b.reg["data"], b.reg["nblocks"]
    K = b.depth * b.lanes
    return_if_zero(b, n)

    def body() -> None:
        if spec.gfmul == "ctmul-gpr":
            gpr_hash(b, Mem(h_p, 0), reflect=False)
            return
        acc = b.pinned("HASH")
        b.v("vload", Mem(acc_p, 0), width=128, dst=acc, comment="acc")
        wide = b.label_name("wide")
        done = b.label_name("done")
        b.s("cmp.r64.imm", n, imm=K)
        b.branch("ae", wide)
        # Horner, one block at a time: acc = dot(acc ^ X, H).
        top = b.label_name("horner")
        b.label(top)
        with b.at_width(128):
            x = b.v("vxor", b.v("vload", Mem(data, 0)), acc)
            dot(b, x, b.v("vload", Mem(h_p, 0)), dst=acc)
        b.s("add.r64.imm", data, imm=16)
        b.s("sub.r64.imm", n, imm=1)
        b.branch("ne", top)
        b.branch("jmp", done)
        b.label(wide)
        frame = aligned(32 * K, pushes=0)  # rsp 16-byte aligned (loads are unaligned anyway)
        open_frame(b, frame)
        build_powers(b, Mem(h_p, 0), Mem("rsp", 0), K, karatsuba)
        core = HashCore(b, reflect=False, table=Mem("rsp", 0), k_max=K, karatsuba=karatsuba)
        core.main_loop(acc, data, n)
        core.tail(acc, data, n, spec.isa)
        # Leave no powers of H behind on the stack.
        with b.at_width(128):
            z = b.v("vzero")
            for off in range(0, frame - 8, 16):
                b.store(Mem("rsp", off), z)
        drop_frame(b, frame)
        b.label(done)
        b.store(Mem(acc_p, 0), acc, width=128)
        finish(b)

    b.single_path(None, body)
