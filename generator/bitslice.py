"""The bitsliced layout: where each bit of 8 AES blocks sits in 8 vector registers, and the
constants that move it, each computed from its definition.

Per 128-bit lane, 8 blocks make one set of 8 registers ("planes"). Plane p holds bit 7 - p
of every state byte (plane p is the S-box circuits' input U_p / output S_p: U0 is the top
bit); in each plane, byte q = 4 * row + col is state byte (row, col), row-major, and bit j
of that byte belongs to block 7 - j. Row-major order keeps each row in one dword.

The transposition into planes: a pshufb per block (column-major -> row-major, a 4x4 byte
transpose), then the 8x8 bit transpose of every byte position by three layers of swapmove
(shifts 1, 2, 4 with masks 0x55, 0x33, 0x0f). The network is its own inverse, so leaving
the planes is the same network, then the same byte transpose.
"""
from __future__ import annotations

from aesgen.aesref import gf256_mul

from .ir import Const

# swapmove layers: (shift, byte mask, (a, b) pairs): b's bits under the mask swap with a's bits n above.
SWAPMOVE_LAYERS = (
    (1, 0x55, ((1, 0), (3, 2), (5, 4), (7, 6))),
    (2, 0x33, ((2, 0), (3, 1), (6, 4), (7, 5))),
    (4, 0x0F, ((4, 0), (5, 1), (6, 2), (7, 3))),
)


def position(row: int, col: int) -> int:
    """Byte of a plane holding state byte (row, col)."""
    return 4 * row + col


def byte_transpose() -> bytes:
    """pshufb control: memory order (byte 4 * col + row) to plane order (4 * row + col)."""
    return bytes(4 * (q % 4) + q // 4 for q in range(16))


def times_matrix(c: int) -> tuple[tuple[int, ...], ...]:
    """Multiplication by c in GF(2^8) as a GF(2) matrix on planes: output plane p is the XOR
    of the input planes listed (plane p = bit 7 - p)."""
    rows = []
    for p in range(8):
        bit = 7 - p
        rows.append(tuple(7 - j for j in range(8) if gf256_mul(c, 1 << j) >> bit & 1))
    return tuple(rows)


def replicated(name: str, pattern: bytes, width: int) -> Const:
    """A constant of `pattern` repeated to `width` bits (one copy per 16 bytes or byte)."""
    return Const(f"bs_{name}_x{width // 128}", pattern * (width // 8 // len(pattern)))


def planes_of_block(block: bytes, turn: int = 0) -> list[bytes]:
    """The 8 planes (16 bytes each) of 8 copies of one 16-byte block: a round key as the
    schedule stores it (per lane), in the coordinate ShiftRows^turn. Byte q = (row, col) of
    plane p is 0xff when bit 7 - p of the key byte at (row, col - turn * row) is set."""
    out = []
    for p in range(8):
        plane = bytearray(16)
        for q in range(16):
            row, col = divmod(q, 4)
            col = (col - turn * row) % 4
            if block[4 * col + row] >> (7 - p) & 1:
                plane[q] = 0xFF
        out.append(bytes(plane))
    return out


# -- the drifting coordinate: ShiftRows without shuffles ------------------------------------
# A round never moves bytes for ShiftRows: after round r the planes hold the state with its
# positions permuted by Q_r = ShiftRows^r (InvShiftRows^r when decrypting). MixColumns' row
# rotations are then taken in that coordinate (Q_r^-1 rot Q_r, one pshufb each), round key r is
# stored permuted by Q_r^-1, and the last shuffle out of the planes applies Q_nr with the byte
# transpose. Controls are pshufb's: out[q] = in[control[q]].
ROUNDS_MAX = 14


def compose(first: bytes, then: bytes) -> bytes:
    """The control of shuffling by `first`, then by `then`."""
    return bytes(first[then[q]] for q in range(16))


def inverse(control: bytes) -> bytes:
    out = bytearray(16)
    for q, src in enumerate(control):
        out[src] = q
    return bytes(out)


def rows_turned(turn: int) -> bytes:
    """Q = ShiftRows^turn in plane order: row r takes its bytes from column (c + turn * r) mod 4."""
    return bytes(position(q // 4, (q % 4 + turn * (q // 4)) % 4) for q in range(16))


def rotate_rows_bytes(n: int) -> bytes:
    """rot_n as a byte control: row r of every column takes row r + n."""
    return bytes(position((q // 4 + n) % 4, q % 4) for q in range(16))


def drift_turn(r: int, decrypt: bool) -> int:
    """The coordinate after round r: ShiftRows^turn."""
    return -r if decrypt else r


def drift_entry(r: int, decrypt: bool) -> tuple[bytes, bytes, bytes]:
    """Round r's controls: rot1 and rot2 in its coordinate, and the shuffle out of it
    (Q_r, then plane order back to memory order)."""
    q = rows_turned(drift_turn(r, decrypt))
    conj = [compose(compose(q, rotate_rows_bytes(n)), inverse(q)) for n in (1, 2)]
    return conj[0], conj[1], compose(q, byte_transpose())


def key_entry(r: int, decrypt: bool) -> bytes:
    """Round key r into its coordinate: memory order -> plane order -> Q_r^-1."""
    return compose(byte_transpose(), inverse(rows_turned(drift_turn(r, decrypt))))


def drift_table(decrypt: bool, width: int) -> Const:
    """Rounds 0..14: rot1, rot2 and the way out, each replicated to `width` bits."""
    reps = width // 128
    data = b"".join(c * reps for r in range(ROUNDS_MAX + 1) for c in drift_entry(r, decrypt))
    return Const(f"bs_{'dec' if decrypt else 'enc'}_rounds_x{reps}", data)


def key_table(decrypt: bool, width: int) -> Const:
    reps = width // 128
    data = b"".join(key_entry(r, decrypt) * reps for r in range(ROUNDS_MAX + 1))
    return Const(f"bs_{'dec' if decrypt else 'enc'}_keys_x{reps}", data)
