"""Batched AES for MPC / garbling, and multi-stream CBC encryption, in the DSL.

The multikey schedule (P_set_encrypt_keys, P_ecb_encrypt_multikey) stores keys in groups of
L = lanes of the multikey width (P_MULTIKEY_LANES), 256 * L bytes per group:

    group g, row r (r = 0..14): the round keys r of keys gL .. gL+L-1, 16 bytes each
        at  g * 256L + 16L * r + 16 * (k mod L)
    row 15: each key's round count (a 32-bit 10/12/14 in the first 4 bytes of its slot)

so one vector load of row r feeds its L lanes the round keys of L different keys. A key's
share is P_MULTIKEY_BYTES = 256 bytes; the last group is whole even when nkeys is not a
multiple of L (its unused slots are never read for data that is stored).

The vectors of both batched kernels hold one block of a different key (stream) per lane.
Where a key (stream) has L blocks to go and the registers allow, its L blocks are read as
one vector and L such vectors transposed (gather_rows), so block t of L keys fills one
vector; otherwise lane l is read with an xmm load (lane 0) or a 128-bit insert and written
with a store of lane 0 or a 128-bit extract (gather_lanes). The loads of a whole batch come
before its rounds and the stores after, so the rounds of D vectors run interleaved with
nothing between them.

fixed_key_hash is ECB with sigma before and after (see `sigma`).
"""
from __future__ import annotations

from aesgen.dsl import FunctionBuilder, key
from aesgen.ir import Mem, VReg
from aesgen.spec import MULTIKEY_BYTES

from .aes import EXPANDERS, encrypt_rounds, finish, key_size_paths
from .frame import aligned, leave_frame, open_frame
from .modes import ecb_function, return_if_zero
from .regs import r32
from .registry import describes
from .xors import xor_all

ROW = 16  # one round key of one key
# Register roles beside the arguments (b.reg); all public (pointers, counts, offsets).
LANE = "r11"  # set_encrypt_keys: the next key's lane in its group
STRIDE = "r9"  # ecb_encrypt_multikey (five arguments): bytes of one key's blocks
BLOCKS_LEFT = "rax"  # ecb_encrypt_multikey: blocks of each key of the batch still to go
IN_AT, OUT_AT = "r10", "r11"  # ecb_encrypt_multikey: a lane's block, one key (STRIDE) per lane on
STREAM_AT = "r10"  # cbc_encrypt_multi: a pointer read from an array (keys, in, out, ivs)
STEP_END = STREAM_AT  # cbc_encrypt_multi: the offset past a step's blocks (before any pointer is read)
OFFSET = "rax"  # cbc_encrypt_multi: the offset of the block in every stream


def zero_extend(b: FunctionBuilder, reg: str) -> None:
    """An `unsigned` argument: the caller may leave garbage in the upper 32 bits."""
    b.s("mov.r32.r32", r32(reg), r32(reg), comment="unsigned: clear the upper 32 bits")


def public_pointer(b: FunctionBuilder, reg: str, slot: Mem) -> None:
    """reg = a caller's pointer from an array (public: declassified for the static CT check)."""
    b.declassify_mark("caller_pointer", values_live_across=True)
    b.s("mov.r64.m64", reg, Mem(slot.base, slot.disp, bits=64))


def gather_lanes(b: FunctionBuilder, at, count: int, lanes: int, steps: int = 1,
                 width: int | None = None) -> list[list[VReg]]:
    """steps x count vectors of `lanes` blocks: block t of lane m (vector m // lanes, lane
    m % lanes) from the address `at(m, t)` (a Mem, after whatever pointer arithmetic `at`
    emits); a lane's blocks are read one after the other."""
    vecs: list[list[VReg]] = [[] for _ in range(steps)]
    for m in range(count * lanes):
        j, lane = divmod(m, lanes)
        for t in range(steps):
            mem = at(m, t)
            if lane == 0:
                vecs[t].append(b.v("vload", mem, width=128, role="blk", comment=f"vector {j}: lane 0"))
            else:
                vecs[t][j] = b.v("insert_lane", vecs[t][j], mem, imm=lane, width=width, role="blk",
                                 comment=f"lane {lane}")
    return vecs


def scatter_lanes(b: FunctionBuilder, vecs: list[list[VReg]], lanes: int, at, width: int | None = None) -> None:
    """Lane l of vecs[t][j] to the address `at(j * lanes + l, t)`, a lane's blocks one after
    the other."""
    for m in range(len(vecs[0]) * lanes):
        j, lane = divmod(m, lanes)
        for t, step in enumerate(vecs):
            if lane == 0:
                b.store(at(m, t), step[j], width=128, comment=f"vector {j}: lane 0")
            else:
                b.store(at(m, t), step[j], width=width, op="vstore_lane", imm=lane, comment=f"lane {lane}")


def transpose(b: FunctionBuilder, rows: list[VReg], width: int | None = None) -> list[VReg]:
    """L vectors of L lanes: out[t] lane s = rows[s] lane t (2 or 4 lanes; it is its own
    inverse). Two levels of deal_lanes ([a[p], a[p+2], b[p], b[p+2]]; with 2 lanes [a[p], b[p]])."""
    if len(rows) == 2:
        return [b.v("deal_lanes", rows[0], rows[1], imm=p, width=width, comment=f"lanes {p}") for p in (0, 1)]
    a, c, e, f = rows
    x = [b.v("deal_lanes", a, c, imm=p, width=width) for p in (0, 1)]  # [a p, a p+2, c p, c p+2]
    y = [b.v("deal_lanes", e, f, imm=p, width=width) for p in (0, 1)]
    out = [b.v("deal_lanes", x[p], y[p], imm=q, width=width, comment=f"lanes {p + 2 * q}")
           for q in (0, 1) for p in (0, 1)]
    return out  # [t=0, t=1, t=2, t=3]


def gather_rows(b: FunctionBuilder, at, count: int, lanes: int) -> list[list[VReg]]:
    """`lanes` consecutive blocks of each of count * lanes streams, read whole (one vector per
    stream from `at(m)`), transposed: out[t][j] lane l = block t of stream j * lanes + l."""
    out: list[list[VReg]] = [[] for _ in range(lanes)]
    for j in range(count):
        rows = [b.v("vload", at(j * lanes + l, 0), role="blk", comment=f"stream {j * lanes + l}: {lanes} blocks")
                for l in range(lanes)]
        for t, v in enumerate(transpose(b, rows)):
            out[t].append(v)
    return out


def scatter_rows(b: FunctionBuilder, vecs: list[list[VReg]], lanes: int, at) -> None:
    """The inverse of gather_rows: vecs[t][j] transposed back, one whole vector per stream."""
    for j in range(len(vecs[0])):
        rows = transpose(b, [vecs[t][j] for t in range(lanes)])
        for l, v in enumerate(rows):
            b.store(at(j * lanes + l, 0), v, comment=f"stream {j * lanes + l}: {lanes} blocks")


# ----------------------------------------------------------------------------- key setup
class ColumnWriter:
    """Round key i of one key into its column of a multikey group (row stride 16L)."""

    def __init__(self, b: FunctionBuilder, base: str, row_bytes: int) -> None:
        self.b, self.base, self.row = b, base, row_bytes

    def __call__(self, i: int, k: VReg) -> None:
        self.b.store(Mem(self.base, i * self.row), k, width=128, comment=f"ek[{i}]")


@describes("set_encrypt_keys")
def set_encrypt_keys_function(b: FunctionBuilder) -> None:
    """P_set_encrypt_keys(user_keys, bits, nkeys, keys): nkeys keys of bits/8 bytes each, one
    after the other, into the multikey schedule; 0, or -1 when bits is not 128/192/256."""
    L = b.lanes
    user, n, col = b.reg["user_keys"], b.reg["nkeys"], b.reg["keys"]
    zero_extend(b, n)

    def expand(bits: int, nr: int) -> None:
        top, done = b.label_name("key"), b.label_name("keys_done")
        b.s("xor.r32.r32", r32(LANE), r32(LANE), comment="lane of the next key in its group")
        b.label(top)
        b.s("test.r64.r64", n, n)
        b.branch("e", done)
        EXPANDERS[bits](b, user, ColumnWriter(b, col, ROW * L))
        b.s("mov.m32.imm", Mem(col, 15 * ROW * L, bits=32), imm=nr, comment="round count")
        b.s("add.r64.imm", user, imm=bits // 8)
        b.s("add.r64.imm", col, imm=ROW, comment="the next key's column")
        if L > 1:
            same = b.label_name("same_group")
            b.s("add.r64.imm", LANE, imm=1)
            b.s("cmp.r64.imm", LANE, imm=L)
            b.branch("b", same)
            b.s("xor.r32.r32", r32(LANE), r32(LANE))
            b.s("add.r64.imm", col, imm=(MULTIKEY_BYTES - ROW) * L, comment="the next group")
            b.label(same)
        else:
            b.s("add.r64.imm", col, imm=MULTIKEY_BYTES - ROW, comment="the next group")
        b.s("sub.r64.imm", n, imm=1)
        b.branch("jmp", top)
        b.label(done)

    key_size_paths(b, expand=expand)


# ----------------------------------------------------------------------------- multikey ECB
@describes("ecb_encrypt_multikey")
def ecb_multikey_function(b: FunctionBuilder) -> None:
    """P_ecb_encrypt_multikey(keys, nkeys, in, out, blocks_per_key): block i of key k at
    in[(k * blocks_per_key + i) * 16]; lane l of a vector holds a block of key jL + l of its
    batch, and round r of all its lanes is one row of the schedule.

    With at least L blocks per key, batches of K = D / L key vectors take L blocks of each key
    at once (one whole vector per key, transposed), so D vectors are in flight for only K
    vectors of round keys, which stay in registers when they fit. Otherwise (and for the keys
    and blocks left over) a batch of D vectors takes D*L keys one block at a time, each lane
    read and written on its own, round keys as memory operands."""
    L, D = b.lanes, b.depth
    keys, n, inp, outp, bpk = (b.reg[a] for a in ("keys", "nkeys", "in", "out", "blocks_per_key"))
    group = MULTIKEY_BYTES * L
    zero_extend(b, n)
    return_if_zero(b, n)
    return_if_zero(b, bpk)
    b.s("mov.r64.r64", STRIDE, bpk)
    b.s("shl.r64.imm", STRIDE, imm=4, comment="bytes of one key's blocks")

    def walk(ptr: str, start: str):
        """Lane m's block: one key further (stride bytes) than lane m - 1's."""
        def at(m: int, t: int) -> Mem:
            if m == 0 and t == 0:
                b.s("mov.r64.r64", ptr, start)
            elif t == 0:
                b.s("add.r64.r64", ptr, STRIDE, comment="the next key's block")
            return Mem(ptr, 16 * t)
        return at

    def rows(j: int, resident: list[list[VReg]]):
        return lambda r: resident[j][r] if j < len(resident) else Mem(keys, j * group + ROW * L * r)

    def path(nr: int) -> None:
        if L > 1:
            whole_line_batches(nr)
        for g in batch_sizes(D):
            block_batch(nr, g)
        if L > 1:
            tail_keys(b, nr, keys, n, inp, outp, bpk)
        finish(b)

    def next_batch(g: int) -> None:
        """in/out moved on by one key's blocks in the loop; the batch's other keys' now."""
        for _ in range(g * L - 1):
            b.s("add.r64.r64", inp, STRIDE)
            b.s("add.r64.r64", outp, STRIDE)
        b.s("add.r64.imm", keys, imm=g * group)
        b.s("sub.r64.imm", n, imm=g * L)

    def block_batch(nr: int, g: int, resident: list[list[VReg]] = (), blocks_left: bool = False) -> None:
        """g vectors of L keys, one block of each key at a time (all the blocks, or with
        `blocks_left` the BLOCKS_LEFT < L left by whole_line_batches)."""
        top, out = b.label_name(f"keys{g}x_"), b.label_name(f"keys_end{g}x_")
        if not blocks_left:
            b.label(top)
            b.s("cmp.r64.imm", n, imm=g * L)
            b.branch("b", out)
            b.s("mov.r64.r64", BLOCKS_LEFT, bpk)
        blocks, end = b.label_name("block"), b.label_name("blocks_end")
        b.label(blocks)
        b.s("test.r64.r64", BLOCKS_LEFT, BLOCKS_LEFT)
        b.branch("e", end)
        xs = gather_lanes(b, walk(IN_AT, inp), g, L)[0]
        ys: list[VReg] = []
        b.groups(g, lambda j: ys.append(encrypt_rounds(b, xs[j], nr, key_at=rows(j, resident))),
                 comment=f"{g} vector(s) of {L} keys, one block each")
        scatter_lanes(b, [ys], L, walk(OUT_AT, outp))
        b.s("add.r64.imm", inp, imm=16)
        b.s("add.r64.imm", outp, imm=16)
        b.s("sub.r64.imm", BLOCKS_LEFT, imm=1)
        b.branch("jmp", blocks)
        b.label(end)
        if not blocks_left:
            next_batch(g)
            b.branch("jmp", top)
            b.label(out)

    def whole_line_batches(nr: int) -> None:
        K = max(1, D // L)
        fits = K * (nr + 1) + K * L + 2 <= register_file(b)
        resident = [[b.pinned(f"KEY{j}_{r}") for r in range(nr + 1)] for j in range(K if fits else 0)]
        top, out = b.label_name("line_keys"), b.label_name("line_keys_end")
        b.s("cmp.r64.imm", bpk, imm=L)
        b.branch("b", out)
        b.label(top)
        b.s("cmp.r64.imm", n, imm=K * L)
        b.branch("b", out)
        for j, regs in enumerate(resident):
            for r, reg in enumerate(regs):
                b.v("vload_key", Mem(keys, j * group + ROW * L * r), dst=reg, comment=f"keys of vector {j}: round {r}")
        b.s("mov.r64.r64", BLOCKS_LEFT, bpk)
        lines, lines_end = b.label_name("lines"), b.label_name("lines_end")
        b.label(lines)
        b.s("cmp.r64.imm", BLOCKS_LEFT, imm=L)
        b.branch("b", lines_end)
        xs = gather_rows(b, walk(IN_AT, inp), K, L)
        ys: list[list[VReg]] = [[] for _ in range(L)]

        def block(m: int) -> None:
            t, j = divmod(m, K)
            ys[t].append(encrypt_rounds(b, xs[t][j], nr, key_at=rows(j, resident)))
        b.groups(K * L, block, comment=f"{K} vector(s) of {L} keys, {L} blocks of each")
        scatter_rows(b, ys, L, walk(OUT_AT, outp))
        b.s("add.r64.imm", inp, imm=16 * L)
        b.s("add.r64.imm", outp, imm=16 * L)
        b.s("sub.r64.imm", BLOCKS_LEFT, imm=L)
        b.branch("jmp", lines)
        b.label(lines_end)
        block_batch(nr, K, resident, blocks_left=True)
        next_batch(K)
        b.branch("jmp", top)
        b.label(out)

    b.key_paths("keys", path, count_at=b.spec.multikey_rounds_offset)


def tail_keys(b: FunctionBuilder, nr: int, keys: str, n: str, inp: str, outp: str, bpk: str) -> None:
    """The last nkeys mod L keys, one at a time: ECB of its blocks (contiguous) on xmm, D blocks
    interleaved; its round keys are its column of the last group."""
    L, D = b.lanes, b.depth
    top, done = b.label_name("tail_key"), b.label_name("tail_done")
    b.label(top)
    b.s("test.r64.r64", n, n)
    b.branch("e", done)
    b.s("mov.r64.r64", BLOCKS_LEFT, bpk)
    with b.at_width(128):
        for g in ((D, 1) if D > 1 else (1,)):
            loop, end = b.label_name(f"tail{g}x_"), b.label_name(f"tail_end{g}x_")
            b.label(loop)
            b.s("cmp.r64.imm", BLOCKS_LEFT, imm=g)
            b.branch("b", end)

            def block(j: int) -> None:
                x = b.v("vload", Mem(inp, 16 * j), role="blk")
                y = encrypt_rounds(b, x, nr, key_at=lambda r: Mem(keys, ROW * L * r))
                b.final()
                b.store(Mem(outp, 16 * j), y)
            b.groups(g, block, comment=f"{g} block(s) of one key")
            b.s("add.r64.imm", inp, imm=16 * g)
            b.s("add.r64.imm", outp, imm=16 * g)
            b.s("sub.r64.imm", BLOCKS_LEFT, imm=g)
            b.branch("jmp", loop)
            b.label(end)
    b.s("add.r64.imm", keys, imm=ROW, comment="the next key's column")
    b.s("sub.r64.imm", n, imm=1)
    b.branch("jmp", top)
    b.label(done)


# ----------------------------------------------------------------------------- fixed-key hash
def sigma(b: FunctionBuilder, x: VReg, width: int | None = None, extra: VReg | None = None) -> VReg:
    """sigma(xL || xR) = (xL ^ xR) || xL per block, xL = bytes 0..7, xR = bytes 8..15:
    [q0, q0] ^ [q1, 0] in qwords (the half-gates orthomorphism); sigma(x) ^ extra if given (one
    vpternlogd on AVX-512)."""
    lo = b.v("pshufd", x, imm=0x44, width=width, comment="xL || xL")
    hi = b.v("psrldq", x, imm=8, width=width, comment="xR || 0")
    if extra is not None:
        return xor_all(b, [lo, hi, extra], width or b.width, comment="sigma(x) ^ tweak")
    return b.v("vxor", lo, hi, width=width, comment="sigma(x) = (xL ^ xR) || xL")


def fixed_key_hash_rounds(b: FunctionBuilder, x: VReg, nr: int, width: int | None = None) -> VReg:
    """pi(sigma(x)) ^ sigma(x): sigma folded into the last round key (aesenclast ends with XOR)."""
    s = sigma(b, x, width)
    y = encrypt_rounds(b, s, nr, width=width, last=False)
    k = b.v("vxor", s, key(nr), width=width, comment="sigma folded into the last round key")
    return b.v("aesenclast", y, k, width=width, comment=f"round {nr} (last)")


@describes("fixed_key_hash")
def fixed_key_hash_function(b: FunctionBuilder) -> None:
    ecb_function(b, False, cipher=fixed_key_hash_rounds)


# ----------------------------------------------------------------------------- multi-stream CBC
KEY_ROWS = 15  # round keys a stream's copied schedule has room for


@describes("cbc_encrypt_multi")
def cbc_multi_function(b: FunctionBuilder) -> None:
    """P_cbc_encrypt_multi(keys, in, out, nblocks, ivs, nstreams): nstreams independent CBC
    encryptions of nblocks blocks, stream s with the schedule keys[s] (all of one key size),
    from in[s] to out[s], chained from ivs[s] (which holds its last ciphertext block on return).

    Each batch of D vectors holds D*L streams, lane l of vector j stream jL + l: the chains stay
    in registers for the whole batch while the blocks go by. At a batch's start the streams'
    round keys are copied to the stack transposed (row r of vector j: round key r of its L
    streams) so one memory operand per round feeds every lane; they are wiped on return."""
    L, D = b.lanes, b.depth
    keys, ins, outs, n, ivs, ns = (b.reg[a] for a in ("keys", "in", "out", "nblocks", "ivs", "nstreams"))
    # rsp 16-byte aligned below the return address. (Not realigned to 64: that needs rsp
    # in another register, and the static check then distrusts every stack reload, the
    # win64 wrapper's pops included; aligned rows measured no faster.)
    frame = aligned(D * L * KEY_ROWS * ROW, pushes=0)
    zero_extend(b, ns)
    return_if_zero(b, n)
    return_if_zero(b, ns)
    public_pointer(b, STREAM_AT, Mem(keys, 0))

    def path(nr: int) -> None:
        chains = [b.pinned(f"CHAIN{j}") for j in range(D)]
        resident = [[b.pinned(f"KEY{j}_{r}") for r in range(nr + 1)] for j in range(resident_vectors(b, nr))]
        b.s("shl.r64.imm", n, imm=4, comment="bytes of one stream")
        open_frame(b, frame, comment="room for the batch's transposed round keys")
        shapes = [(g, L, b.width) for g in batch_sizes(D)]
        if L > 1:
            shapes.append((1, 1, 128))
        for g, lanes, width in shapes:
            with b.at_width(width):
                stream_batch(b, nr, chains[:g], resident, lanes, keys, ins, outs, n, ivs, ns)
        z = b.v("vzero")
        for off in range(0, frame - 8, b.width // 8):
            b.store(Mem("rsp", off), z, comment="leave no round keys behind" if off == 0 else "")
        leave_frame(b, frame)

    b.key_paths(STREAM_AT, path)


def batch_sizes(depth: int) -> list[int]:
    """Vectors per batch, largest first: the depth, then halves, so a stream count below the
    depth's still fills as many chains as it can (any count in a handful of batches)."""
    sizes = [depth]
    while sizes[-1] > 1:
        sizes.append(sizes[-1] // 2)
    return sizes


def _needs(g: int, steps: int) -> int:
    """Vector registers a batch of g vectors uses at `steps` blocks per stream at once: the
    chains, the gathered blocks, one temporary per vector (with steps > 1 the steps before
    the last keep their results too) and four more."""
    return g * (steps + 1 + (steps > 1)) + 4


def register_file(b: FunctionBuilder) -> int:
    return b.spec.vector_registers


def resident_vectors(b: FunctionBuilder, nr: int) -> int:
    """How many vectors of a batch keep their round keys in registers (the others read them as
    memory operands, a load each): what is left beside a depth-D batch at its most steps."""
    return max(0, min(b.depth, (register_file(b) - _needs(b.depth, steps_for(b, b.depth, 0))) // (nr + 1)))


def steps_for(b: FunctionBuilder, g: int, pinned: int) -> int:
    """Blocks per stream gathered at once (4, 2 or 1): a stream's line is read and written in one
    go, not revisited after every other stream's; as many as the register file allows beside
    `pinned` registers."""
    return next((u for u in STEPS if _needs(g, u) + pinned <= register_file(b)), 1)


STEPS = (4, 2, 1)


def stream_batch(b: FunctionBuilder, nr: int, chains: list[VReg], resident: list[list[VReg]], lanes: int,
                 keys: str, ins: str, outs: str, n: str, ivs: str, ns: str) -> None:
    """While nstreams allows, batches of len(chains) vectors of `lanes` streams each; the first
    len(resident) vectors' round keys in registers."""
    g, span = len(chains), KEY_ROWS * ROW * lanes
    top, out = b.label_name(f"streams{g}x{lanes}_"), b.label_name(f"streams_end{g}x{lanes}_")

    def pointer(array: str, index: str | None = None):
        def at(m: int, t: int) -> Mem:
            if t == 0:
                public_pointer(b, STREAM_AT, Mem(array, 8 * m))
            return Mem(STREAM_AT, 16 * t, index=index)
        return at

    def row(j: int, r: int) -> Mem | VReg:
        return resident[j][r] if j < len(resident) else Mem("rsp", j * span + ROW * lanes * r)

    b.label(top)
    b.s("cmp.r64.imm", ns, imm=g * lanes)
    b.branch("b", out)
    for s in range(g * lanes):  # the round keys, transposed
        j, lane = divmod(s, lanes)
        public_pointer(b, STREAM_AT, Mem(keys, 8 * s))
        for r in range(nr + 1):
            k = b.v("vload", Mem(STREAM_AT, r * b.spec.key_stride), width=128)
            b.store(Mem("rsp", j * span + ROW * lanes * r + ROW * lane), k, width=128,
                    comment=f"stream {s}: round key {r}" if r == 0 else "")
    for j, regs in enumerate(resident[:g]):
        for r, reg in enumerate(regs):
            b.v("vload", Mem("rsp", j * span + ROW * lanes * r), dst=reg, comment=f"vector {j}: round key {r}")
    for j, iv in enumerate(gather_lanes(b, pointer(ivs), g, lanes)[0]):
        b.assign(chains[j], iv, comment="chain = iv")
    b.s("xor.r32.r32", r32(OFFSET), r32(OFFSET), comment="offset of the block in every stream")
    steps = steps_for(b, g, len(resident) * (nr + 1))
    for u in STEPS[STEPS.index(steps):]:
        loop, done = b.label_name(f"blocks{u}x_"), b.label_name(f"blocks_end{u}x_")
        b.label(loop)
        b.s("lea.r64.m", STEP_END, Mem(OFFSET, 16 * u))
        b.s("cmp.r64.r64", STEP_END, n)
        b.branch("a", done)
        whole = u == lanes > 1  # a stream's u blocks are one vector: read whole and transposed
        ps = gather_rows(b, pointer(ins, OFFSET), g, lanes) if whole else \
            gather_lanes(b, pointer(ins, OFFSET), g, lanes, steps=u)
        ys: list[list[VReg]] = []
        for t in range(u):
            last = t == u - 1
            prev = chains if t == 0 else ys[-1]
            ys.append([])

            def block(j: int, t: int = t, last: bool = last, prev: list[VReg] = prev) -> None:
                dst = chains[j] if last else None
                pk = b.v("vxor", ps[t][j], row(j, 0), comment="plaintext ^ round key 0 (off the chain)")
                x = b.v("vxor", prev[j], pk, dst=dst, comment="round 0: chain ^ plaintext ^ k0")
                ys[t].append(encrypt_rounds(b, x, nr, whiten=False, dst=dst, key_at=lambda r: row(j, r)))
            b.groups(g, block, comment=f"{g} vector(s) of {lanes} stream(s): block {t} of {u}")
        if whole:
            scatter_rows(b, ys, lanes, pointer(outs, OFFSET))
        else:
            scatter_lanes(b, ys, lanes, pointer(outs, OFFSET))
        b.s("add.r64.imm", OFFSET, imm=16 * u)
        b.branch("jmp", loop)
        b.label(done)
    scatter_lanes(b, [chains], lanes, pointer(ivs))
    for array in (keys, ins, outs, ivs):
        b.s("add.r64.imm", array, imm=8 * g * lanes)
    b.s("sub.r64.imm", ns, imm=g * lanes)
    b.branch("jmp", top)
    b.label(out)
