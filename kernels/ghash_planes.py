"""GHASH with GFNI (--gfmul gfni): products by powers of H as GF(2) matrices on byte planes.

Multiplying by a fixed G in GF(2^128), reduction included, is linear over GF(2): a 128 x 128
bit matrix M_G on a block's raw bits. Cut into 8 x 8 pieces, output byte j is the xor over
input bytes i of A[j][i] * in[i], and vgf2p8affineqb applies one 8 x 8 matrix (a qword) to
every byte of a qword. So the kernel hashes eight Horner chains at once: block 8m + c of the
message goes to chain c, and every chain multiplies by H^8. The chains are kept as 16 byte
planes: plane j (a qword) holds byte j of every chain, chain c in byte c; planes 0..7 in one
zmm, 8..15 in another. A product by M: each plane i in turn broadcast to every qword (a
broadcast load from the planes stored in the frame), then one vgf2p8affineqb per half h with
the key's matrix row (i, h), whose qword l is A[8h + l][i]: its qword l is plane i's share of
plane 8h + l, for all eight chains. 32 vgf2p8affineqb per 8 blocks, no reduction step.

A message of n blocks is padded in front with p = -n mod 8 zero blocks (its first batch is
read with masked loads that touch nothing before the data), so its last block ends chain 7;
the running hash joins block p. After the last batch (added, not multiplied), chain c still
needs H^(8 - c); three rounds pair the chains up, each multiplying every chain by H^s and
adding chain c - s (a shift of s bytes within each plane) into chain c, for s = 1, 2, 4:
chain 7 then holds the sum over c of H^(7 - c) * chain c, and one more product by H ends it.

The matrices are made by P_gcm_set_key from the powers of H (kernels/ghash.py). Column m of
M_G (the image of input bit m) is G * x^(m - 128) in POLYVAL's order, byte-reversed for
GHASH's: dot(x^0, G) then a multiply by x per column. The columns are written to the
matrix's own place, then transposed in place row of eight by row: vpermt2b gathers byte j of
the eight columns of input byte i into a qword, and vgf2p8affineqb with a constant data
operand turns that qword (columns) into the operand form (rows).
"""
from __future__ import annotations

from typing import Callable

from aesgen.consts import PLANE_ROWS, affine_transpose_unit, bswap_mask, plane_index, plane_row_bytes
from aesgen.dsl import FunctionBuilder
from aesgen.ir import Mem, VReg
from aesgen.spec import GFNI_MATRIX_BYTES, GFNI_MATRIX_POWERS

from .frame import aligned, drop_frame, open_frame
from .modes import MASK
from .regs import r32
from .xors import XorSum

W = 512  # the planes: 16 qwords, two zmm
BATCH = PLANE_ROWS  # blocks per product: one per chain
PLANES = 16
ROW_BYTES = 2 * 64  # one input byte's matrix row: two zmm (output planes 0..7, 8..15)
SCRATCH_BYTES = 2 * 64  # the planes, stored for their broadcast loads
FRAME = aligned(SCRATCH_BYTES, pushes=0)  # P_ghash's: the scratch at rsp
SCRATCH = Mem("rsp", 0)
# Register roles of P_ghash's GPRs beside its arguments (all public: lengths and addresses).
PAD = "r8"  # zero blocks in front of the message
PAD_BYTES = "r9"  # 16 * PAD; then masks
COUNT = "r11"  # qword counts of the masks; then the first batch's mask
ACC_AT = "r10"  # where the running hash's load starts
MASK_BITS = "rax"


def matrix(spec, key: str, power: int) -> Mem:
    """The key's matrix of multiplying by H^power."""
    return Mem(key, spec.gcm_matrix_offset + GFNI_MATRIX_POWERS.index(power) * GFNI_MATRIX_BYTES)


def to_planes(b: FunctionBuilder, rows: tuple[VReg, VReg], dst: tuple[VReg, VReg] | None = None) -> tuple[VReg, VReg]:
    """Eight 16-byte rows (two zmm) as 16 byte planes (two zmm)."""
    lo, hi = rows
    return tuple(b.v("permt2b", lo, b.v("vload", plane_index(h), width=W), hi, width=W, dst=dst[h] if dst else None,
                     comment=f"byte planes {8 * h}..{8 * h + 7}") for h in (0, 1))


def multiply(b: FunctionBuilder, planes: tuple[VReg, VReg], at: Mem, scratch: Mem,
             dst: tuple[VReg, VReg] | None = None, extra: tuple[tuple[VReg, ...], ...] = ((), ())) -> tuple[VReg, VReg]:
    """Every chain times the matrix at `at`, plus the `extra` terms of each half: plane i
    broadcast (from the planes stored at `scratch`, 128 bytes), times row i, summed per half."""
    for h in (0, 1):
        b.store(Mem(scratch.base, scratch.disp + 64 * h), planes[h], width=W)
    sums = (XorSum(b, W), XorSum(b, W))
    for h in (0, 1):
        for t in extra[h]:
            sums[h].add(t)
    for i in range(PLANES):
        x = b.v("vload_bcast64", Mem(scratch.base, scratch.disp + 8 * i), width=W,
                comment=f"plane {i} in every qword")
        for h in (0, 1):
            sums[h].add(b.v("gf2p8affineqb", x, Mem(at.base, at.disp + ROW_BYTES * i + 64 * h), imm=0, width=W))
    return tuple(sums[h].value(dst[h] if dst else None) for h in (0, 1))


def chain_step(b: FunctionBuilder, chains: tuple[VReg, VReg], at: Mem, key: str, scratch: Mem,
               joining: tuple[VReg, VReg] | None = None) -> None:
    """chains = chains * H^8 + the 8 blocks at `at` (+ `joining`, planes to add once)."""
    x = to_planes(b, tuple(b.v("vload", Mem(at.base, at.disp + 64 * h), width=W, comment="data blocks")
                           for h in (0, 1)))
    extra = tuple((x[h], joining[h]) if joining else (x[h],) for h in (0, 1))
    multiply(b, chains, matrix(b.spec, key, BATCH), scratch, dst=chains, extra=extra)


def row_of(b: FunctionBuilder, planes: tuple[VReg, VReg], row: int) -> VReg:
    """Row (chain) `row` of the planes, as one 16-byte block (an xmm's worth)."""
    index = b.v("vload", plane_row_bytes(row), width=W)
    return b.v("permt2b", planes[0], index, planes[1], width=W, comment=f"chain {row}'s bytes")


def join_chains(b: FunctionBuilder, planes: tuple[VReg, VReg], key: str, scratch: Mem) -> VReg:
    """The hash: sum over chains c of H^(8 - c) * chain c, as one 16-byte row (an xmm)."""
    spec = b.spec
    for shift in (1, 2, 4):  # chain c += H^shift * chain (c - shift)
        t = multiply(b, planes, matrix(spec, key, shift), scratch)
        planes = tuple(b.v("vxor", b.v("psllq", t[h], imm=8 * shift, width=W), planes[h], width=W)
                       for h in (0, 1))
    return row_of(b, multiply(b, planes, matrix(spec, key, 1), scratch), BATCH - 1)


def hash_blocks(b: FunctionBuilder, key: str, acc_p: str, data: str, n: str) -> None:
    """[acc_p] = GHASH_H continued over the n >= 1 blocks at data (GHASH byte order throughout:
    the matrices are on raw bytes)."""
    spec = b.spec
    open_frame(b, FRAME)
    z = (b.pinned("PLANES_LO"), b.pinned("PLANES_HI"))
    # p = -n mod 8 blocks of padding: the first batch starts p blocks before the data.
    b.s("mov.r64.r64", PAD, n)
    b.s("neg.r64", PAD)
    b.s("and.r64.imm", PAD, imm=BATCH - 1, comment="p: zero blocks in front")
    b.s("add.r64.r64", n, PAD, comment="a whole number of batches")
    b.s("lea.r64.m", PAD_BYTES, Mem(PAD, 0, index=PAD, scale=1))
    b.s("shl.r64.imm", PAD_BYTES, imm=3, comment="16 p")
    b.s("sub.r64.r64", data, PAD_BYTES)
    b.s("mov.r64.r64", ACC_AT, acc_p)
    b.s("sub.r64.r64", ACC_AT, PAD_BYTES, comment="the running hash lands in block p")
    b.s("lea.r64.m", COUNT, Mem(PAD, 0, index=PAD, scale=1), comment="2p qwords skipped")
    b.s("mov.r64.imm", PAD_BYTES, imm=-1)
    b.s("bzhi.r64.r64.r64", PAD_BYTES, PAD_BYTES, COUNT)
    b.s("add.r64.imm", COUNT, imm=2)
    b.s("mov.r64.imm", MASK_BITS, imm=-1)
    b.s("bzhi.r64.r64.r64", MASK_BITS, MASK_BITS, COUNT)
    b.s("xor.r64.r64", MASK_BITS, PAD_BYTES, comment="the qwords of block p")
    b.s("mov.r64.imm", COUNT, imm=-1)
    b.s("sub.r64.r64", COUNT, PAD_BYTES, comment="the qwords from block p on")
    rows = []
    for h in (0, 1):
        b.s("kmovq.k.r64", MASK, COUNT)
        x = b.v("vload", Mem(data, 64 * h), width=W, mask=MASK, comment="the first batch, from block p")
        b.s("kmovq.k.r64", MASK, MASK_BITS)
        a = b.v("vload", Mem(ACC_AT, 64 * h), width=W, mask=MASK, comment="the running hash, in block p")
        rows.append(b.v("vxor", x, a, width=W))
        b.s("shr.r64.imm", COUNT, imm=8)
        b.s("shr.r64.imm", MASK_BITS, imm=8)
    to_planes(b, tuple(rows), dst=z)
    top, last = b.label_name("planes_loop"), b.label_name("planes_join")
    b.label(top)
    b.s("add.r64.imm", data, imm=16 * BATCH)
    b.s("sub.r64.imm", n, imm=BATCH)
    b.branch("e", last)
    chain_step(b, z, Mem(data, 0), key, SCRATCH)
    b.branch("jmp", top)
    b.label(last)
    out = join_chains(b, z, key, SCRATCH)
    b.store(Mem(acc_p, 0), out, width=128)
    wipe_scratch(b, SCRATCH)
    drop_frame(b, FRAME)


def wipe_scratch(b: FunctionBuilder, scratch: Mem) -> None:
    """Leave no chain of the hash in the planes' scratch."""
    zero = b.v("vzero", width=W)
    for h in (0, 1):
        b.store(Mem(scratch.base, scratch.disp + 64 * h), zero, width=W)


def build_matrix(b: FunctionBuilder, at: Mem, column: VReg, times_x: Callable[[VReg], VReg],
                 count: str, walk: str) -> None:
    """The matrix of multiplying by G at `at` (GFNI_MATRIX_BYTES), from `column` = dot(x^0, G)
    (POLYVAL order); `times_x(v)` = v * x. `count`, `walk`: two scratch GPRs."""
    col = b.pinned("COLUMN")
    b.assign(col, column, width=128)
    # Column m (input bit m of the byte-reversed block: bit m % 8 of byte 15 - m // 8) goes to
    # row slot 127 - m: input byte i's eight columns in slots 8i .. 8i + 7, bit 7 first.
    b.s("lea.r64.m", walk, Mem(at.base, at.disp + GFNI_MATRIX_BYTES - 16))
    b.s("mov.r32.imm", r32(count), imm=128)
    top = b.label_name("columns")
    b.label(top)
    b.store(Mem(walk, 0), b.v("pshufb", col, bswap_mask(1), width=128, comment="GHASH byte order"), width=128)
    b.assign(col, times_x(col), width=128)
    b.s("sub.r64.imm", walk, imm=16)
    b.s("sub.r64.imm", count, imm=1)
    b.branch("ne", top)
    unit = b.v("vload", affine_transpose_unit(), width=W)
    for i in range(PLANES):  # in place: one input byte's 128 bytes of columns become its row
        row = Mem(at.base, at.disp + ROW_BYTES * i)
        cols = tuple(b.v("vload", Mem(row.base, row.disp + 64 * h), width=W) for h in (0, 1))
        for h, q in enumerate(to_planes(b, cols)):
            b.store(Mem(row.base, row.disp + 64 * h),
                    b.v("gf2p8affineqb", unit, q, imm=0, width=W, comment="columns to operand rows"), width=W)
