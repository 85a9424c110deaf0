"""XTS-AES (IEEE 1619) with ciphertext stealing, and the bare tweak sequences (gfdouble).

Block i of a data unit is C_i = E_K1(P_i ^ T_i) ^ T_i with T_i = E_K2(tweak) * x^i
(little-endian convention). The tweaks advance by the spec's doubling method
(kernels/gfdouble.py) one vector of L blocks at a time. Each block's tweak is folded
into round key 0 on the way in and into the last round key on the way out, so the AES
chain itself carries no extra XOR.

When len is not a multiple of 16 (r = len mod 16 bytes in a last partial block), the
last whole block and the partial one are handled by ciphertext stealing: encrypting,
CC = E(P_{m-1}) under T_{m-1}; the partial ciphertext block is CC's first r bytes and
C_{m-1} = E(P_m || CC[r:]) under T_m. Decrypting swaps the two tweaks. The byte swap
is two byte shuffles and a mask, chosen by the public r (see Xts.steal).
"""
from __future__ import annotations

from collections.abc import Callable

from aesgen.consts import bswap_mask
from aesgen.dsl import FunctionBuilder, key
from aesgen.ir import XOR3, Const, Mem, VReg

from .aes import encrypt_rounds, expand_schedule, finish, key_size_paths
from .gfdouble import CLMUL_METHODS, TweakStream, double
from .modes import return_if_zero, vector_loops
from .regs import r32
from .registry import describes
from .xts_far import FarTables
from .xts_table import Tables, TweakTable, layout, table_from

# Register roles beside the arguments (b.reg); all public.
PARTIAL = "r9"  # r = len mod 16: the bytes of a last partial block (0: no stealing)
STEAL = "r10"  # the stealing table's address
BACK = "r11"  # -r: the stealing table read from its end
NR = "rax"  # the round count at the key-size dispatch (STEAL when rax holds tweak bits)
TWEAK_KEY = "r10"  # xts_set_key: where the tweak key's schedule goes


@describes("xts_set_key")
def xts_set_key_function(b: FunctionBuilder) -> None:
    """P_xts_set_key(key1, key2, bits, xkey, enc): key1's schedule (encrypt, or decrypt when
    enc == 0) then key2's encryption schedule; 0, or -1 when bits is not 128/192/256."""
    key1, key2, out, enc = (b.reg[a] for a in ("key1", "key2", "xkey", "enc"))

    def expand(bits: int, nr: int) -> None:
        b.s("lea.r64.m", TWEAK_KEY, Mem(out, b.spec.key_bytes), comment="the tweak key's schedule")
        expand_schedule(b, bits, key2, TWEAK_KEY, decrypt=False)
        dec, stored = b.label_name("decrypt_key"), b.label_name("stored")
        b.s("cmp.r32.imm", r32(enc), imm=0)
        b.branch("e", dec)
        expand_schedule(b, bits, key1, out, decrypt=False)
        b.branch("jmp", stored)
        b.label(dec)
        expand_schedule(b, bits, key1, out, decrypt=True)
        b.label(stored)

    key_size_paths(b, expand=expand)


def xmm_method(b: FunctionBuilder) -> str:
    """The one-block doubling for tails: the spec's method, or its serial stand-in."""
    method = b.spec.gfdouble
    if method in CLMUL_METHODS:
        return "ternlog" if b.spec.isa == "avx512" else "krovetz"
    return method


class Xts:
    def __init__(self, b: FunctionBuilder, decrypt: bool) -> None:
        self.b, self.decrypt = b, decrypt
        self.inp, self.outp, self.n, self.tweak = (b.reg[a] for a in ("in", "out", "len", "tweak"))
        # the batch loop's tweaks from tables where that pays (kernels/xts_table.py), per key size;
        # `layout`: whether some key size's loop takes them (rax then holds tweak bits)
        self.layout = layout(b.spec, b.width, b.depth)

    def cipher(self, x: VReg, t: VReg, nr: int, width: int | None = None) -> VReg:
        """One (vector of) block(s) under its tweak(s): whole, for tails."""
        b = self.b
        y = _rounds_after_whitening(b, self.whiten(x, t, width), nr, width, self.decrypt)
        return self.last_round(y, t, nr, width)

    def last_round(self, x: VReg, t: VReg | Mem, nr: int, width: int | None = None,
                   last: VReg | None = None) -> VReg:
        """`last`: round key nr in a register (t in memory)."""
        b = self.b
        comment = "tweak folded into the last round key"
        k = b.v("vxor", last, t, width=width, comment=comment) if last else \
            b.v("vxor", t, key(nr), width=width, comment=comment)
        return b.v("aesdeclast" if self.decrypt else "aesenclast", x, k, width=width,
                   comment=f"round {nr} (last)")

    def whiten(self, x: VReg, t: VReg, width: int | None) -> VReg:
        """x ^ tweak ^ round key 0 (one vpternlogd on AVX-512)."""
        b = self.b
        if b.spec.isa == "avx512":
            return b.v("ternlog", x, t, key(0), imm=XOR3, width=width, comment="block ^ tweak ^ round key 0")
        x = b.v("vxor", x, t, width=width, comment="block ^ tweak")
        return b.v("vxor", x, key(0), width=width, comment="round 0: whiten")

    # -- the function -----------------------------------------------------------
    def function(self) -> None:
        b = self.b
        go = b.label_name("go")
        b.s("cmp.r64.imm", self.n, imm=16)
        b.branch("ae", go)
        b.s("ret", comment="less than one block: nothing to do")
        b.label(go)
        # with the tweak table rax holds tweak bits (the ct check tracks registers, not points)
        b.key_paths("xkey", self.path, scratch=r32(NR if self.layout is None else STEAL))

    def path(self, nr: int) -> None:
        b, L = self.b, self.b.lanes
        inp, outp, n = self.inp, self.outp, self.n
        spec = b.spec
        with b.at_width(128):
            t = b.v("vload", Mem(self.tweak, 0), role="tweak")
            # T_0 = E_K2(tweak): the tweak key's schedule follows the data key's
            t = encrypt_rounds(b, t, nr, key_at=lambda i: Mem(b.fn.key_base, spec.key_bytes + i * spec.key_stride))
        stream = TweakStream(b, spec.gfdouble)
        stream.start(t)
        # PARTIAL = len mod 16; the bulk leaves the last whole block to stealing when it is not 0.
        b.s("mov.r64.r64", PARTIAL, n)
        b.s("and.r64.imm", PARTIAL, imm=15, comment="bytes in a last partial block (public)")
        b.s("and.r64.imm", n, imm=-16)
        whole = b.label_name("no_stealing")
        b.s("test.r64.r64", PARTIAL, PARTIAL)
        b.branch("e", whole)
        b.s("sub.r64.imm", n, imm=16, comment="the last whole block goes with the partial one")
        b.label(whole)

        def body(g: int, tweaks: list[VReg | Mem] | None = None, riders: Callable[[], None] | None = None,
                 table: Tables | None = None) -> None:
            """g vectors; `table`: the tweaks are in its memory."""
            tweaks = tweaks or stream.vectors(g)
            if table:  # a memory operand's partner must be a register: round keys 0 and nr loaded
                first, last = (b.v("vload_key", Mem(b.fn.key_base, i * spec.key_stride), comment=f"round key {i}")
                               for i in (0, nr))

            def block(j: int) -> None:
                off = 16 * L * j
                t = tweaks[j]
                if table:  # in the table: memory operands, no register
                    x = b.v("vxor", first, t, comment="tweak ^ round key 0")
                    x = b.v("vxor", x, Mem(inp, off), role="blk", comment="round 0: block ^ tweak ^ key")
                else:
                    x = self.whiten(b.v("vload", Mem(inp, off), role="blk"), t, None)
                x = _rounds_after_whitening(b, x, nr, None, self.decrypt)
                b.final()
                b.store(Mem(outp, off), self.last_round(x, t, nr, last=last if table else None))
            b.groups(g, block, comment=f"{g} group(s) of {L} block(s)", riders=riders)

        tables = layout(spec, b.width, b.depth, nr)
        if tables is not None:
            self.batches(stream, body, FarTables(b, tables) if tables.far else TweakTable(b, tables))
            vector_loops(b, n, 16 * L, (inp, outp), body, sizes=(1,))
        else:
            vector_loops(b, n, 16 * L, (inp, outp), body)
        single = stream.current  # from here on only its first lane: the next block's tweak
        method = xmm_method(b)
        with b.at_width(128):
            if L > 1:  # whole blocks left over from the vector loops, one at a time
                def one_block(g: int) -> None:
                    b.store(Mem(outp, 0), self.cipher(b.v("vload", Mem(inp, 0)), single, nr))

                vector_loops(b, n, 16, (inp, outp), one_block, sizes=(1,), stride=16,
                             advance=lambda g: b.assign(single, double(b, single, method),
                                                        comment="next block's tweak"))
            done = b.label_name("done")
            b.s("test.r64.r64", PARTIAL, PARTIAL)
            b.branch("e", done)
            self.steal(nr, single, double(b, single, method))
            b.label(done)
        finish(b)

    def batches(self, stream: TweakStream, body, table: Tables) -> None:
        """The D-vector loop with its tweaks from tables (kernels/xts_table.py, xts_far.py).
        From table_from(batch) bytes on: the filling batches take vector-doubled tweaks while
        the tables fill for the ones after them (no load waits on the tables' stores); the
        loop is unrolled once per table; after it the stream restarts from the next table's
        first vector and the frame is wiped and dropped. Shorter messages: main's loop, no frame."""
        b, D, L, n = self.b, self.b.depth, self.b.lanes, self.n
        batch, tables = 16 * L * D, table.layout.tables
        few, joined, top = b.label_name("few_batches"), b.label_name("batches_done"), b.label_name("batch")
        b.s("cmp.r64.imm", n, imm=table_from(batch, table.layout))
        b.branch("b", few)
        table.enter()  # registers saved and the frame made only here: short messages skip it
        table.start(stream.current)
        # the fills ride spread over the rounds: in one run before them their 64 stores
        # filled the store queue and stalled dispatch (0.18 ticks/B instead of 0.125)
        memory = table if table.layout.in_memory else None
        for k in range(table.layout.filling):
            body(D, table.stage(k, stream.vectors(D)), riders=lambda k=k: table.filling_riders(k), table=memory)
            self.step(batch)
        exits = [b.label_name(f"after_table{k}") for k in range(tables - 1)]
        b.label(top)
        order = [(table.first + i) % tables for i in range(tables)]
        for i, k in enumerate(order):
            body(D, table.vectors(k), riders=lambda k=k: table.loop_riders(k), table=memory)
            self.step(batch)
            b.s("cmp.r64.imm", n, imm=batch)
            b.branch("b" if i < tables - 1 else "ae", exits[i] if i < tables - 1 else top)
        # the next block's tweaks head the table after the one the last batch read
        done = b.label_name("tables_done")
        for i in [tables - 1, *range(tables - 1)]:
            if i < tables - 1:
                b.label(exits[i])
            b.assign(stream.current, b.v("vload", table.entry((order[i] + 1) % tables, 0)),
                     comment="the next block's tweaks")
            if i != tables - 2:
                b.branch("jmp", done)
        b.label(done)
        table.leave()
        b.branch("jmp", joined)
        b.label(few)
        vector_loops(b, n, 16 * L, (self.inp, self.outp), body, sizes=(table.few_depth,))
        b.label(joined)

    def step(self, nbytes: int) -> None:
        b = self.b
        b.s("add.r64.imm", self.inp, imm=nbytes)
        b.s("add.r64.imm", self.outp, imm=nbytes)
        b.s("sub.r64.imm", self.n, imm=nbytes)

    def steal(self, nr: int, t_prev: VReg, t_last: VReg) -> None:
        """The last whole block (tweak t_prev) and the r-byte partial one (t_last; r in PARTIAL).

        No byte loop: the 16 bytes that end the input hold the partial block in their top r
        bytes; byte shuffles picked by r (public) move it down, and move the first r bytes of
        the stolen block up to be stored as the 16 bytes that end the output (their low
        16 - r bytes land in the last whole block's slot, rewritten right after)."""
        b = self.b
        inp, outp = self.inp, self.outp
        first, second = (t_last, t_prev) if self.decrypt else (t_prev, t_last)
        b.s("lea.r64.m", STEAL, steal_table(), comment="shuffles and masks, picked by r (public)")
        b.s("mov.r64.r64", BACK, PARTIAL)
        b.s("neg.r64", BACK)
        x = b.v("vload", Mem(inp, 0), comment="the last whole block")
        tail = b.v("vload", Mem(inp, 0, index=PARTIAL), comment="the 16 bytes that end the input")
        whole = self.cipher(x, first, nr)  # CC encrypting, PP decrypting
        down = b.v("pshufb", tail, Mem(STEAL, 32, index=BACK), comment="the partial block, bytes 0..r-1")
        up = b.v("pshufb", whole, Mem(STEAL, 0, index=PARTIAL), comment="its first r bytes, to the top")
        b.store(Mem(outp, 0, index=PARTIAL), up, comment="the partial output block (and 16 - r bytes rewritten below)")
        keep = b.v("pand", whole, Mem(STEAL, 64, index=BACK), comment="bytes r..15 of the stolen block")
        y = b.v("vxor", down, keep, comment="partial block || the stolen bytes")
        b.store(Mem(outp, 0), self.cipher(y, second, nr))


def steal_table() -> Const:
    """48 bytes [0x80 x16, 0..15, 0x80 x16] then 32 bytes [0 x16, 0xff x16]. At r: 16 bytes from
    offset r shift a block up by 16 - r bytes (pshufb), from 32 - r shift it down by 16 - r,
    and 16 bytes from 64 - r keep bytes r..15."""
    zero = bytes([0x80] * 16)
    return Const("xts_steal", zero + bytes(range(16)) + zero + bytes(16) + b"\xff" * 16)


def _rounds_after_whitening(b: FunctionBuilder, x: VReg, nr: int, width: int | None, decrypt: bool) -> VReg:
    """Rounds 1..nr-1 (round 0 was folded with the tweak)."""
    op = "aesdec" if decrypt else "aesenc"
    for r in range(1, nr):
        x = b.v(op, x, key(r), width=width, comment=f"round {r}")
    return x


@describes("xts_encrypt", decrypt=False)
@describes("xts_decrypt", decrypt=True)
def xts_function(b: FunctionBuilder, decrypt: bool) -> None:
    Xts(b, decrypt).function()


# ----------------------------------------------------------------------------- gfdouble
@describes("gfdouble_le", big_endian=False)
@describes("gfdouble_be", big_endian=True)
def gfdouble_function(b: FunctionBuilder, big_endian: bool) -> None:
    """P_gfdouble_{le,be}(tweak, out, nblocks): out[i] = tweak * x^i, the spec's method
    (what XTS's tweaks cost, alone: `aesgen explore gfdouble` times it)."""
    tw, outp, n = (b.reg[a] for a in ("tweak", "out", "nblocks"))
    L = b.lanes
    return_if_zero(b, n)

    def path() -> None:
        stream = TweakStream(b, b.spec.gfdouble)
        with b.at_width(128):
            t = b.v("vload", Mem(tw, 0), role="tweak")
            if big_endian:
                t = b.v("pshufb", t, bswap_mask(1), comment="big-endian -> little-endian")
        stream.start(t)

        def put(v: VReg, off: int, width: int | None = None) -> None:
            if big_endian:
                v = b.v("pshufb", v, bswap_mask((width or b.width) // 128), width=width,
                        comment="back to big-endian")
            b.store(Mem(outp, off), v, width=width)

        def body(g: int) -> None:
            for j, v in enumerate(stream.vectors(g)):
                put(v, 16 * L * j)

        vector_loops(b, n, L, (outp,), body)
        single = stream.current  # its first lane: the next block's tweak
        if L > 1:
            method = xmm_method(b)
            with b.at_width(128):
                top, done = b.label_name("block"), b.label_name("done")
                b.label(top)
                b.s("test.r64.r64", n, n)
                b.branch("e", done)
                put(single, 0, 128)
                b.assign(single, double(b, single, method))
                b.s("add.r64.imm", outp, imm=16)
                b.s("sub.r64.imm", n, imm=1)
                b.branch("jmp", top)
                b.label(done)
        finish(b)

    b.single_path(None, path)
