"""Constants the kernels use, each computed from its definition (never pasted)."""
from __future__ import annotations

from .gf128 import x128_mod_p
from .ir import Const


def per_lane(block: bytes, lanes: int) -> bytes:
    return block * lanes


def bswap_mask(lanes: int) -> Const:
    """pshufb control reversing the 16 bytes of every lane (big-endian <-> little-endian)."""
    return Const(f"bswap_x{lanes}", per_lane(bytes(range(15, -1, -1)), lanes))


def dword0(values: list[int]) -> bytes:
    """One lane per value: the value in dword 0, zeros elsewhere."""
    return b"".join((v & 0xFFFFFFFF).to_bytes(4, "little") + bytes(12) for v in values)


def lane_index(lanes: int) -> Const:
    """Lane l gets l in dword 0: turns a broadcast counter into consecutive counters."""
    return Const(f"lane_index_x{lanes}", dword0(list(range(lanes))))


def counter_step(step: int, lanes: int) -> Const:
    """`step` added to dword 0 of every lane (advances all lanes' counters by step)."""
    return Const(f"ctr_step{step}_x{lanes}", dword0([step] * lanes))


def be_counter_step(step: int, lanes: int) -> Const:
    """`step` added to the last byte of every lane's big-endian counter block (dword 3 gets
    step << 24): a counter increment while that byte does not carry (GCM's shuffle-free batches)."""
    return Const(f"be_step{step}_x{lanes}", (bytes(15) + bytes([step])) * lanes)


def be_counter_xor(start: int, step: int, lanes: int) -> Const:
    """What turns lane l's big-endian counter block c + l into c + l + `step` by XOR, for a
    counter c = start (mod P), P a power of two with start + lanes - 1 + step < P: the low
    bits then never carry, so the change is (start + l) ^ (start + l + step) in byte 15."""
    return Const(f"be_xor{start}_{step}_x{lanes}",
                 b"".join(bytes(15) + bytes([(start + lane) ^ (start + lane + step)]) for lane in range(lanes)))


def gfpoly(lanes: int) -> Const:
    """x^128 mod P (0xc2..01) per lane: its high qword is the reduction's fold multiplier c."""
    return Const(f"gfpoly_x{lanes}", x128_mod_p().to_bytes(16, "little") * lanes)


def x_to_the_0() -> Const:
    """The field's 1 in POLYVAL's order (bit 0 of byte 0)."""
    return Const("gf128_one", (1).to_bytes(16, "little"))


def block_msb(clear: bool) -> Const:
    """Bit 7 of byte 15 (the top bit of a block read as a little-endian 128-bit integer)
    alone, or every other bit: GCM-SIV clears it in the tag input and sets it in the counter."""
    top = (1 << 127).to_bytes(16, "little")
    return Const("msb_clear" if clear else "msb_set", bytes(b ^ 0xFF for b in top) if clear else top)


def last_word_everywhere(rotate: bool) -> Const:
    """A pshufb control copying word 3 of a block (bytes 12..15) into every word, turned one
    byte (FIPS-197 RotWord: a0 a1 a2 a3 -> a1 a2 a3 a0) or not: a key expansion's temp word,
    for the four words of the next round key at once."""
    word = [12 + (k + rotate) % 4 for k in range(4)]
    return Const("rot_word3_x4" if rotate else "word3_x4", bytes(word * 4))


def be32_one_in_dword3() -> Const:
    """Bytes 12..15 = 00 00 00 01: ORed (XORed) into IV || 0^32, it makes GCM's J0 = IV || 0^31 || 1."""
    return Const("j0_one", bytes(15) + b"\x01")


def zip_index(half: int, lanes: int = 4) -> Const:
    """vpermi2q's qword indices (8 and up: the second table) interleaving half `half` of two
    vectors' lanes: destination lane k is lane half * lanes / 2 + k // 2 of the first (k even)
    or the second (k odd). What zip_lanes needs on AVX-512 zmm (generator/lower.py)."""
    qwords = [8 * (k % 2) + 2 * (half * lanes // 2 + k // 2) + q for k in range(lanes) for q in (0, 1)]
    return Const(f"zip_lanes{half}_x{lanes}", b"".join(x.to_bytes(8, "little") for x in qwords))


# --gfmul gfni (kernels/ghash_planes.py): eight 16-byte rows <-> sixteen byte planes.
PLANE_ROWS = 8  # rows (blocks, chains) a plane holds: one byte each in a qword


def plane_index(half: int) -> Const:
    """vpermt2b's byte indices turning eight 16-byte rows (two zmm: rows 0..3, 4..7) into the
    byte planes 8 * half .. 8 * half + 7: qword j of the result holds byte 8 * half + j of
    each row, row k in byte k."""
    index = [16 * k + 8 * half + j for j in range(8) for k in range(PLANE_ROWS)]
    return Const(f"plane_index{half}", bytes(index))


def plane_row_bytes(row: int) -> Const:
    """vpermt2b's byte indices gathering row `row`'s byte of the 16 planes (two zmm) into bytes
    0..15: one row back from the planes."""
    index = [8 * j + row for j in range(16)]
    return Const(f"plane_row{row}_bytes", bytes(index + [0] * 48))


def affine_transpose_unit() -> Const:
    """vgf2p8affineqb's data operand that makes it return its matrix operand's transpose as a
    matrix operand: byte c of every qword = 1 << (7 - c). (Output bit r of byte c is the parity
    of matrix byte 7 - r AND byte c, i.e. bit 7 - c of matrix byte 7 - r.)"""
    return Const("affine_transpose_unit", bytes(1 << (7 - c) for c in range(8)) * 8)


def spaced_bits(unit: int, bits: int, shift: int) -> int:
    """`unit`-spaced ones over `bits` bits, from bit `shift` (0x1111... << shift for unit 4): the
    masks of the parts and classes of the products with holes (ctmul)."""
    return sum(1 << k for k in range(shift, bits, unit))


def hole_masks(holes: int) -> list[Const]:
    """Per i < holes, the 64-bit mask of the bits at positions = i (mod holes): the parts of
    an operand of GHASH's GPR product with holes (kernels/ghash_gpr.py)."""
    return [Const(f"holes{holes}_part{i}", spaced_bits(holes, 64, i).to_bytes(8, "little")) for i in range(holes)]
