"""The bitsliced backend's functions: key setup, ECB, CTR32 and CBC with the AES-NI files' C ABI.

One batch is 8 vectors: 8 blocks per 128-bit lane (8, 16 or 32 blocks per xmm, ymm or zmm),
turned into 8 bit-planes (generator/bitslice.py), run through the rounds and turned back.
The rounds are a loop: the count comes from the key schedule (public), a pointer walks the
round keys, so one copy of each S-box circuit serves every key size. Partial batches run on
a stack buffer: the caller's bytes are copied in and out, nothing outside [in, in + len) is
read and nothing outside [out, out + len) written; the frame is wiped before returning.

The key schedule (set_encrypt_key) is FIPS-197's word recurrence in scalar code; SubWord
runs the same S-box circuit on one block (8 copies of it transposed: every plane byte is
0x00 or 0xff). Each round key is then stored as its 8 planes, replicated to every lane
(key i at i * width bytes; the round count at 15 * width). set_decrypt_key stores the same
keys in reverse order: decryption is the straightforward inverse cipher.

GPR roles: the constants below. In CTR, DATA carries secret bytes and nothing else. rsp is never
copied into another register (the static constant-time check would then distrust every stack
reload, win64's stack arguments included).
Key setup: TEMP is the only secret GPR (the word being computed).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, TypeVar

from aesgen import bitslice
from aesgen.aesref import ROUNDS_BY_BITS
from aesgen.bitsliced_code import PLANES, Planes, circuit_pass, sbox_program
from aesgen.consts import bswap_mask, counter_step, lane_index
from aesgen.dsl import BuildError, FunctionBuilder
from aesgen.ir import Insn, Mem, Phys
from aesgen.spec import BITSLICED_MODES, KernelSpec

from .aes import finish
from .frame import aligned, drop_frame, leave_frame, open_frame
from .ghash import ghash_function, h_slot, polyval_function, power_table
from .modes import DATA, SCRATCH, block_cipher_functions, return_if_zero
from .regs import RESULT, arg, r8, r32

BLOCK_REGS = list(range(PLANES))
T = TypeVar("T")
WORDS = 64  # key setup: room for the 60 words of an AES-256 schedule

# Register roles of the modes beside the arguments (b.reg); all public but DATA (kernels/modes.py:
# CTR's counter word, then keystream bytes). SCRATCH (modes' too) holds CTR's block count and a
# copy's length in bytes.
ROUNDS_LEFT = "rax"  # the rounds loop's count (from the schedule)
INDEX = "rax"  # a byte offset: of a copy, of CTR's tail byte, of CBC's chaining pass
ROUND_KEY = "r10"  # the round keys' pointer
# The round's shuffle controls (ShiftRows drifts: bitslice.drift_entry): a GPR no argument still
# needs during the batch (not r9: win64's wrapper reads it).
CONTROLS = "r8"  # ECB; CTR (its ctr argument is read and written at entry)
CBC_CONTROLS = "r11"  # CBC (r8 keeps iv)
BATCH_BYTES = CBC_CONTROLS  # CBC decryption, after the batch: 16 x its blocks, the chaining pass's limit
# Key setup (set_encrypt_key's arguments, set_decrypt_key's the same), then its roles.
USER, BITS, KEY_OUT = (arg("set_encrypt_key", a) for a in ("user_key", "bits", "key"))
NR = BITS  # Nr, once a path has checked the bits
NK = "r8"  # Nk: words of the user key
WORD_COUNT = "r9"  # 4 (Nr + 1): the schedule's words (then their bytes)
WORD_INDEX = "rcx"  # the word index i (then the byte offset of a round key's words)
I_NK = USER  # i - Nk (the user key is copied by then)
I_MOD_NK = "rax"  # i mod Nk (then scratch)
RCON = "r10"  # the round constant
TEMP = "r11"  # the word being computed (secret)
PLANES_AT, TABLE_AT = "r10", "r8"  # the conversion: the round key's planes; its shuffle table entry


@dataclass(frozen=True)
class Frame:
    """The stack frame below the return address (rsp 16-byte aligned after `sub`)."""

    buf: int  # a batch of blocks (partial batches, CBC results)
    slots: int  # the S-box programs' spill slots, one area per set of planes
    chain: int  # 16 bytes: CTR's byte-reversed counter block, CBC's chaining value
    size: int  # what `sub rsp` takes (frame.aligned: rsp 16-byte aligned)
    payload: int


def spill_slots(spec: KernelSpec, regs: int) -> int:
    return max(sbox_program(c, circuit_pass(spec), regs).slots() for c in ("sbox_bp113", "inv_sbox_bp121"))


def registers_per_set(spec: KernelSpec, depth: int) -> int:
    return spec.vector_registers // depth


def check_config(spec: KernelSpec) -> None:
    others = [m for m in spec.modes if m not in BITSLICED_MODES]
    if others:
        raise BuildError(f"the bitsliced backend implements {', '.join(BITSLICED_MODES)}, not {', '.join(others)}")
    most = 2 if spec.isa == "avx512" else 1
    if not 1 <= spec.depth <= most or spec.overrides:
        raise BuildError(f"bitsliced on {spec.isa}: depth is the number of 8-plane sets interleaved, "
                         f"1{' or 2 (16 registers each)' if most == 2 else ' (16 registers hold one set)'}; "
                         f"got {spec.depth}{' and per-mode overrides' if spec.overrides else ''}")


def x(n: int) -> Phys:
    return Phys(n)


class Batch:
    """A mode function's bitsliced batch: `depth` sets of 8 vectors, turned into planes, through
    the rounds and back; the sets' instructions are interleaved one by one (independent work
    that hides each circuit's dependency chains)."""

    def __init__(self, b: FunctionBuilder, controls: str, single: bool = False, key: str | None = None,
                 counter: str = ROUNDS_LEFT, origin: int = 0, on_stack: tuple[int, Mem] | None = None) -> None:
        """`controls`: a GPR free during the batch, for the per-round shuffle controls;
        `single`: one set of xmm planes (8 blocks), whatever the file's width and depth
        (CBC encryption uses one block of each batch); `key`: the register holding the
        schedule's address (default the `key` argument); `counter`: a public GPR for the round
        count and byte indices; `origin`: where the batch's area starts in a frame the caller
        opens (16-byte aligned; the area ends at frame.payload); `on_stack`: the schedule is in
        that frame instead, (its offset, its round count's slot): round keys are read at rsp +
        offset + a public index (rsp is never copied, see the module's notes)."""
        check_config(b.spec)
        self.controls, self.key, self.counter = controls, key or b.reg["key"], counter
        self.on_stack = on_stack
        self.b, self.spec = b, b.spec
        self.width, self.depth = (128, 1) if single else (b.width, b.spec.depth)
        self.lanes = self.width // 128
        self.vectors = PLANES * self.depth
        self.blocks = self.vectors * self.lanes  # per batch
        self.vbytes = self.width // 8
        regs = registers_per_set(self.spec, self.depth)
        area = spill_slots(self.spec, regs) * self.vbytes
        slots = origin + 16 * self.blocks
        chain = slots + area * self.depth
        payload = origin + -(-(chain - origin + 16) // self.vbytes) * self.vbytes
        self.frame = Frame(origin, slots, chain, aligned(payload, pushes=0), payload)
        self.sets = [Planes(b, self.spec, self.width, slots + k * area, base=k * regs, nregs=regs)
                     for k in range(self.depth)]
        self.p = self.sets[0]

    def vec(self, op: str, dst, *srcs, width: int | None = None, imm: int | None = None, comment: str = "") -> None:
        self.b.emit(Insn(op, dst, tuple(srcs), imm=imm, width=width or self.width, comment=comment))

    def each(self, step: Callable[[Planes], T]) -> list[T]:
        """step(p) for every set, the sets' instructions interleaved one by one."""
        lists, results = [], []
        for p in self.sets:
            with self.b.collect() as items:
                results.append(step(p))
            lists.append(items)
        for k in range(max(map(len, lists))):
            for li in lists:
                if k < len(li):
                    self.b.emit(li[k])
        return results

    # -- frame ----------------------------------------------------------------------
    def enter(self) -> None:
        open_frame(self.b, self.frame.size, comment="frame: batch buffer, spill slots, chaining value")

    def leave(self) -> None:
        """Wipe the frame (plaintext, keystream, spilled planes), pop it, return."""
        self.wipe()
        leave_frame(self.b, self.frame.size)

    def wipe(self, end: int | None = None) -> None:
        """Zero the batch's area (up to `end`, if another batch's area ends further)."""
        self.vec("vzero", x(0), comment="wipe the frame")
        for off in range(self.frame.buf, end or self.frame.payload, self.vbytes):
            self.vec("vstore", Mem("rsp", off), x(0))

    def encrypt_block(self, src: Mem, dst: Mem, comment: str = "") -> None:
        """dst = E(K, the block at src), one xmm batch (`single`) of 8 copies of it."""
        assert self.width == 128
        self.vec("vload", x(0), src, comment=comment)
        for j in BLOCK_REGS[1:]:
            self.p.move(x(j), x(0))
        outs = self.run(False)
        self.vec("vstore", dst, self.p.r(outs[0][0]))

    # -- copies -----------------------------------------------------------------------
    def copy_in(self, src: Mem, count: str) -> None:
        """count (0 < count < blocks per batch) blocks from src into the buffer, by fixed
        displacements (a store at a variable stack address would make the static check
        distrust every stack reload, win64's stack arguments included)."""
        b, done = self.b, self.b.label_name("copied")
        for k in range(self.blocks - 1):
            if k:
                b.s("cmp.r64.imm", count, imm=k)
                b.branch("be", done)
            self.vec("vload", x(0), Mem(src.base, src.disp + 16 * k), width=128)
            self.vec("vstore", Mem("rsp", self.frame.buf + 16 * k), x(0), width=128)
        b.label(done)

    def copy_blocks(self, src: Mem, dst: Mem, count: str) -> None:
        """count (> 0) blocks from src to dst, 16 bytes at a time (INDEX, SCRATCH clobbered)."""
        b = self.b
        top = b.label_name("copy")
        index = self.counter
        b.s("mov.r64.r64", SCRATCH, count)
        b.s("shl.r64.imm", SCRATCH, imm=4)
        b.s("xor.r32.r32", r32(index), r32(index))
        b.label(top)
        self.vec("vload", x(0), Mem(src.base, src.disp, index=index), width=128)
        self.vec("vstore", Mem(dst.base, dst.disp, index=index), x(0), width=128)
        b.s("add.r64.imm", index, imm=16)
        b.s("cmp.r64.r64", index, SCRATCH)
        b.branch("b", top)

    # -- the batch ----------------------------------------------------------------------
    def at(self, base: Mem, k: int, j: int) -> Mem:
        """Vector j of set k in a batch at `base`."""
        return Mem(base.base, base.disp + (PLANES * k + j) * self.vbytes, base.index, base.scale)

    def load(self, src: Mem) -> None:
        for k, p in enumerate(self.sets):
            for j in BLOCK_REGS:
                self.vec("vload", p.r(j), self.at(src, k, j),
                         comment=f"{self.lanes} block(s) per vector, {self.vectors} vectors" if j + k == 0 else "")

    def store(self, outs: list[list[int]], dst: Mem) -> None:
        for k, (p, regs) in enumerate(zip(self.sets, outs)):
            for j, n in enumerate(regs):
                self.vec("vstore", self.at(dst, k, j), p.r(n))

    @staticmethod
    def temps(p: Planes, used: list[int]) -> list[int]:
        return [n for n in range(p.nregs) if n not in used][:4]

    def run(self, decrypt: bool) -> list[list[int]]:
        """Blocks in registers 0..7 of every set -> the output blocks (their local registers, per set)."""
        self.each(lambda p: p.to_planes(BLOCK_REGS, self.temps(p, BLOCK_REGS)))
        outs = self.rounds(decrypt, self.key)
        way_out = Mem(self.controls, 2 * self.vbytes)  # the last round's coordinate, then memory order
        self.each(lambda p: p.from_planes(outs[self.sets.index(p)], self.temps(p, outs[self.sets.index(p)]), way_out))
        return outs

    def rounds(self, decrypt: bool, key: str) -> list[list[int]]:
        b, W, stride = self.b, self.width, self.spec.key_stride
        top, last = b.label_name("round"), b.label_name("last_round")
        left = self.counter
        if self.on_stack is None:
            rk = Mem(ROUND_KEY, 0)
            b.s("mov.r32.m32", r32(left), Mem(key, self.spec.rounds_offset, bits=32), comment="round count (public)")
            b.s("mov.r64.r64", ROUND_KEY, key, comment="round-key pointer")
        else:
            at, count = self.on_stack
            rk = Mem("rsp", at, index=ROUND_KEY)
            b.s("mov.r32.m32", r32(left), count, comment="round count (public)")
            b.s("xor.r32.r32", r32(ROUND_KEY), r32(ROUND_KEY), comment="round-key offset in the frame's schedule")
        entry = 3 * self.vbytes
        c = self.controls
        b.s("lea.r64.m", c, bitslice.drift_table(decrypt, W), comment="per round: rot1, rot2, way out")
        b.s("add.r64.imm", c, imm=entry, comment="round 1's")
        rot = (Mem(c, 0), Mem(c, self.vbytes))
        self.each(lambda p: p.add_round_key(BLOCK_REGS, rk))
        b.s("add.r64.imm", ROUND_KEY, imm=stride)
        b.label(top)
        # (no ShiftRows: the planes' byte order drifts with it, see bitslice.drift_entry)
        if decrypt:
            outs = self.each(lambda p: p.sbox(inverse=True))
            self.each(lambda p: p.add_round_key(outs[self.sets.index(p)], rk))
            b.s("sub.r64.imm", left, imm=1)
            b.branch("e", last)
            res = self.each(lambda p: p.inv_mix_columns(outs[self.sets.index(p)], rot))
        else:
            outs = self.each(lambda p: p.sbox())
            b.s("sub.r64.imm", left, imm=1)
            b.branch("e", last)
            res = self.each(lambda p: p.mix_columns(outs[self.sets.index(p)], rot, key=rk))

        def back(p: Planes) -> None:
            r = res[self.sets.index(p)]
            spare = next((n for n in range(p.nregs) if n not in r and n not in BLOCK_REGS), -1)
            p.permute(r, BLOCK_REGS, spare)
        self.each(back)
        b.s("add.r64.imm", ROUND_KEY, imm=stride, comment="next round key")
        b.s("add.r64.imm", c, imm=entry)
        b.branch("jmp", top)
        b.label(last)
        if not decrypt:
            self.each(lambda p: p.add_round_key(outs[self.sets.index(p)], rk))
        return outs


# ----------------------------------------------------------------------------- ECB
def ecb_function(b: FunctionBuilder, decrypt: bool) -> None:
    bt = Batch(b, CONTROLS)
    inp, outp, n = (b.reg[a] for a in ("in", "out", "nblocks"))
    top, full, body, tail, done = (b.label_name(s) for s in ("batch", "full", "body", "tail_out", "done"))
    return_if_zero(b, n)
    bt.enter()
    buf = Mem("rsp", bt.frame.buf)
    b.label(top)
    b.s("cmp.r64.imm", n, imm=bt.blocks)
    b.branch("ae", full)
    b.s("test.r64.r64", n, n)
    b.branch("e", done)
    bt.copy_blocks(Mem(inp, 0), buf, n)
    bt.load(buf)  # partial batch: a copy on the stack (rsp is never copied: see Frame)
    b.branch("jmp", body)
    b.label(full)
    bt.load(Mem(inp, 0))
    b.label(body)
    out = bt.run(decrypt)
    b.s("cmp.r64.imm", n, imm=bt.blocks)
    b.branch("b", tail)
    bt.store(out, Mem(outp, 0))
    b.s("add.r64.imm", inp, imm=16 * bt.blocks)
    b.s("add.r64.imm", outp, imm=16 * bt.blocks)
    b.s("sub.r64.imm", n, imm=bt.blocks)
    b.branch("jmp", top)
    b.label(tail)
    bt.store(out, buf)
    bt.copy_blocks(buf, Mem(outp, 0), n)
    b.label(done)
    bt.leave()


# ----------------------------------------------------------------------------- CTR32
def ctr32_function(b: FunctionBuilder) -> None:
    bt = Batch(b, CONTROLS)
    inp, outp, length, ctr = (b.reg[a] for a in ("in", "out", "len", "ctr"))
    return_if_zero(b, length)
    bt.enter()
    chain = Mem("rsp", bt.frame.chain)
    bt.vec("vload", x(0), Mem(ctr, 0), width=128, comment="counter block")
    bt.vec("pshufb", x(0), x(0), bswap_mask(1), width=128, comment="byte-reversed: the counter in dword 0")
    bt.vec("vstore", chain, x(0), width=128)
    # The counter after the last block used, written back now (ceil(len / 16) blocks).
    b.s("mov.r32.m32", r32(DATA), Mem(ctr, 12, bits=32))
    b.s("bswap.r32", r32(DATA))
    b.s("mov.r64.r64", SCRATCH, length)
    b.s("add.r64.imm", SCRATCH, imm=15)
    b.s("shr.r64.imm", SCRATCH, imm=4)
    b.s("add.r32.r32", r32(DATA), r32(SCRATCH))
    b.s("bswap.r32", r32(DATA))
    b.s("mov.m32.r32", Mem(ctr, 12, bits=32), r32(DATA), comment="ctr += blocks (mod 2^32)")
    ctr_batches(bt, inp, outp, length)
    bt.leave()


def ctr_batches(bt: Batch, inp: str, outp: str, length: str, little_endian: bool = False) -> None:
    """out = in ^ the keystream of length (> 0) bytes, batch by batch; advances inp, outp and
    counts length down. The counter is the 16 bytes at frame.chain with its 32-bit counter
    in dword 0 (CTR32 and GCM: the counter block byte-reversed; GCM-SIV, `little_endian`: the
    block as it is), incremented mod 2^32; it ends one batch past the last batch used.
    DATA carries keystream bytes."""
    b = bt.b
    L, W = bt.lanes, bt.width
    chain = Mem("rsp", bt.frame.chain)
    top, tail, done = (b.label_name(s) for s in ("batch", "tail", "done"))
    b.label(top)
    base = x(8)
    if W == 128:
        bt.vec("vload", base, chain, comment="this batch's first counter")
    else:
        bt.vec("vload_bcast", base, chain, comment="this batch's first counter, every lane")
        bt.vec("paddd", base, base, lane_index(L), comment="lane l: + l")
    for k, p in enumerate(bt.sets):
        for j in BLOCK_REGS:
            if little_endian:  # GCM-SIV: the counter block as it is
                bt.vec("vmov", p.r(j), base, comment="counter blocks" if j + k == 0 else "")
            elif p.two_op:
                bt.vec("vmov", p.r(j), base)
                bt.vec("pshufb", p.r(j), p.r(j), bswap_mask(L))
            else:
                bt.vec("pshufb", p.r(j), base, bswap_mask(L), comment="counter blocks, big-endian" if j + k == 0 else "")
            if PLANES * k + j < bt.vectors - 1:
                bt.vec("paddd", base, base, counter_step(L, L))
    bt.vec("vload", x(8), chain, width=128)
    bt.vec("paddd", x(8), x(8), counter_step(bt.blocks, 1), width=128, comment="counter + blocks per batch")
    bt.vec("vstore", chain, x(8), width=128)
    outs = bt.run(False)
    b.s("cmp.r64.imm", length, imm=16 * bt.blocks)
    b.branch("b", tail)
    for k, (p, out) in enumerate(zip(bt.sets, outs)):
        spare = p.r(bt.temps(p, out)[0])
        for j, n in enumerate(out):
            at = bt.at(Mem(inp, 0), k, j)
            if p.two_op:  # legacy SSE: no unaligned memory operand
                bt.vec("vload", spare, at)
                bt.vec("vxor", p.r(n), p.r(n), spare)
            else:
                bt.vec("vxor", p.r(n), p.r(n), at, comment="keystream ^ input" if j + k == 0 else "")
            bt.vec("vstore", bt.at(Mem(outp, 0), k, j), p.r(n))
    b.s("add.r64.imm", inp, imm=16 * bt.blocks)
    b.s("add.r64.imm", outp, imm=16 * bt.blocks)
    b.s("sub.r64.imm", length, imm=16 * bt.blocks)
    b.branch("e", done)
    b.branch("jmp", top)
    b.label(tail)
    bt.store(outs, Mem("rsp", bt.frame.buf))
    loop = b.label_name("tail_byte")
    index = bt.counter
    b.s("xor.r32.r32", r32(index), r32(index))
    b.label(loop)
    b.s("movzx.r32.m8", r32(DATA), Mem("rsp", bt.frame.buf, index=index, bits=8), comment="keystream byte")
    b.s("xor.r8.m8", r8(DATA), Mem(inp, 0, index=index, bits=8))
    b.s("mov.m8.r8", Mem(outp, 0, index=index, bits=8), r8(DATA))
    b.s("add.r64.imm", index, imm=1)
    b.s("cmp.r64.r64", index, length)
    b.branch("b", loop)
    b.label(done)


# ----------------------------------------------------------------------------- CBC
def cbc_encrypt_function(b: FunctionBuilder) -> None:
    """Serial: each block is one xmm batch (8 blocks) of which only block 0 counts (correct,
    not fast)."""
    bt = Batch(b, CBC_CONTROLS, single=True)
    inp, outp, n, iv = (b.reg[a] for a in ("in", "out", "nblocks", "iv"))
    top = b.label_name("block")
    return_if_zero(b, n)
    bt.enter()
    buf, chain = Mem("rsp", bt.frame.buf), Mem("rsp", bt.frame.chain)
    bt.vec("vzero", x(0))
    for off in range(bt.frame.buf, bt.frame.payload, bt.vbytes):  # the batch's unused blocks: defined values
        bt.vec("vstore", Mem("rsp", off), x(0))
    bt.vec("vload", x(0), Mem(iv, 0), width=128)
    bt.vec("vstore", chain, x(0), width=128, comment="chaining value")
    b.label(top)
    bt.vec("vload", x(0), Mem(inp, 0), width=128)
    bt.vec("vxor", x(0), x(0), chain, width=128, comment="P_i ^ C_(i-1)")
    bt.vec("vstore", buf, x(0), width=128)
    bt.load(buf)
    outs = bt.run(False)
    bt.vec("vstore", buf, bt.p.r(outs[0][0]), width=128)
    bt.vec("vload", x(0), buf, width=128)
    bt.vec("vstore", Mem(outp, 0), x(0), width=128)
    bt.vec("vstore", chain, x(0), width=128)
    b.s("add.r64.imm", inp, imm=16)
    b.s("add.r64.imm", outp, imm=16)
    b.s("sub.r64.imm", n, imm=1)
    b.branch("ne", top)
    bt.vec("vstore", Mem(iv, 0), x(0), width=128, comment="iv = last ciphertext block")
    bt.leave()


def cbc_decrypt_function(b: FunctionBuilder) -> None:
    """Parallel: a batch of ciphertext decrypted into the buffer, then P_j = D(C_j) ^ C_(j-1),
    last block first (in == out: C_(j-1) is read before P_(j-1) overwrites it)."""
    bt = Batch(b, CBC_CONTROLS)
    inp, outp, n, iv = (b.reg[a] for a in ("in", "out", "nblocks", "iv"))
    top, full, body, short, have, chained, first, done = (b.label_name(s) for s in (
        "batch", "full", "body", "short", "have", "chained", "first", "done"))
    return_if_zero(b, n)
    bt.enter()
    buf, chain = Mem("rsp", bt.frame.buf), Mem("rsp", bt.frame.chain)
    bt.vec("vload", x(0), Mem(iv, 0), width=128)
    bt.vec("vstore", chain, x(0), width=128, comment="chaining value")
    b.label(top)
    b.s("cmp.r64.imm", n, imm=bt.blocks)
    b.branch("ae", full)
    b.s("test.r64.r64", n, n)
    b.branch("e", done)
    bt.copy_in(Mem(inp, 0), n)
    bt.load(buf)  # partial batch: decrypt a copy
    b.branch("jmp", body)
    b.label(full)
    bt.load(Mem(inp, 0))
    b.label(body)
    out = bt.run(True)
    bt.store(out, buf)
    # BATCH_BYTES = 16 * min(n, blocks per batch)
    b.s("cmp.r64.imm", n, imm=bt.blocks)
    b.branch("b", short)
    b.s("mov.r64.imm", BATCH_BYTES, imm=16 * bt.blocks)
    b.branch("jmp", have)
    b.label(short)
    b.s("mov.r64.r64", BATCH_BYTES, n)
    b.s("shl.r64.imm", BATCH_BYTES, imm=4)
    b.label(have)
    bt.vec("vload", x(15), Mem(inp, -16, index=BATCH_BYTES), width=128,
           comment="next chaining value: the batch's last C")
    b.s("mov.r64.r64", INDEX, BATCH_BYTES)
    b.s("sub.r64.imm", INDEX, imm=16)
    b.branch("e", first)
    b.label(chained)
    bt.vec("vload", x(0), Mem("rsp", bt.frame.buf, index=INDEX), width=128)
    bt.vec("vload", x(1), Mem(inp, -16, index=INDEX), width=128)
    bt.vec("vxor", x(0), x(0), x(1), width=128, comment="P_j = D(C_j) ^ C_(j-1)")
    bt.vec("vstore", Mem(outp, 0, index=INDEX), x(0), width=128)
    b.s("sub.r64.imm", INDEX, imm=16)
    b.branch("ne", chained)
    b.label(first)
    bt.vec("vload", x(0), buf, width=128)
    bt.vec("vxor", x(0), x(0), chain, width=128, comment="P_0 = D(C_0) ^ chaining value")
    bt.vec("vstore", Mem(outp, 0), x(0), width=128)
    bt.vec("vstore", chain, x(15), width=128)
    b.s("cmp.r64.imm", n, imm=bt.blocks)
    b.branch("b", done)
    b.s("add.r64.imm", inp, imm=16 * bt.blocks)
    b.s("add.r64.imm", outp, imm=16 * bt.blocks)
    b.s("sub.r64.imm", n, imm=bt.blocks)
    b.branch("jmp", top)
    b.label(done)
    bt.vec("vload", x(0), chain, width=128)
    bt.vec("vstore", Mem(iv, 0), x(0), width=128, comment="iv = last ciphertext block")
    bt.leave()


# ----------------------------------------------------------------------------- key setup
def set_key_function(b: FunctionBuilder, decrypt: bool, then: Callable[[], None] | None = None,
                     sizes: tuple[int, ...] = tuple(ROUNDS_BY_BITS)) -> None:
    """FIPS-197 key expansion in GPRs (SubWord by the bitsliced S-box), then every round key
    stored as 8 planes; decryption's schedule in reverse order. `then`: what follows once the
    schedule is written (instead of returning 0); `sizes`: the key sizes accepted (others: -1)."""
    spec = b.spec
    W = b.width
    # (the words start 16 bytes up: w[i-1] is read at rsp + 12 + 4i, never below rsp)
    words_at, word_slot, slots = 16, 16 + 4 * WORDS, 32 + 4 * WORDS
    payload = -(-(slots + 16 * spill_slots(spec, spec.vector_registers)) // (W // 8)) * (W // 8)
    size = aligned(payload, pushes=0)
    labels = {bits: b.label_name(f"bits{bits}_") for bits in sizes}
    go, loop, not_first, sub, no_sub, done_words, conv = (b.label_name(s) for s in (
        "expand", "word", "not_first", "subword", "no_subword", "words_done", "planes"))
    for bits, lab in labels.items():
        b.s("cmp.r32.imm", r32(BITS), imm=bits)
        b.branch("e", lab)
    b.s("mov.r32.imm", r32(RESULT), imm=-1, comment="unsupported key size")
    b.s("ret")
    for bits, lab in labels.items():
        b.label(lab)
        b.s("mov.r32.imm", r32(NK), imm=bits // 32, comment="Nk: words of the user key")
        b.s("mov.r32.imm", r32(NR), imm=ROUNDS_BY_BITS[bits], comment="Nr")
        b.branch("jmp", go)
    b.label(go)
    open_frame(b, size, comment="frame: schedule words, SubWord block, spill slots")
    words = lambda disp, index: Mem("rsp", words_at + disp, index=index, scale=4, bits=32)  # noqa: E731
    b.s("mov.r64.r64", WORD_COUNT, NR)
    b.s("add.r64.imm", WORD_COUNT, imm=1)
    b.s("shl.r64.imm", WORD_COUNT, imm=2, comment="4 (Nr + 1) words")
    copy = b.label_name("user_words")
    b.s("xor.r32.r32", r32(WORD_INDEX), r32(WORD_INDEX))
    b.label(copy)
    b.s("mov.r32.m32", r32(TEMP), Mem(USER, 0, index=WORD_INDEX, scale=4, bits=32))
    b.s("mov.m32.r32", words(0, WORD_INDEX), r32(TEMP))
    b.s("add.r64.imm", WORD_INDEX, imm=1)
    b.s("cmp.r64.r64", WORD_INDEX, NK)
    b.branch("b", copy)
    b.s("xor.r32.r32", r32(I_NK), r32(I_NK), comment="i - Nk")
    b.s("xor.r32.r32", r32(I_MOD_NK), r32(I_MOD_NK), comment="i mod Nk")
    b.s("mov.r32.imm", r32(RCON), imm=1, comment="rcon")
    b.label(loop)
    b.s("cmp.r64.r64", WORD_INDEX, WORD_COUNT)
    b.branch("ae", done_words)
    b.s("mov.r32.m32", r32(TEMP), words(-4, WORD_INDEX), comment="temp = w[i-1]")
    b.s("test.r64.r64", I_MOD_NK, I_MOD_NK)
    b.branch("ne", not_first)
    b.s("ror.r32.imm", r32(TEMP), imm=8, comment="RotWord")
    b.branch("jmp", sub)
    b.label(not_first)
    b.s("cmp.r64.imm", I_MOD_NK, imm=4)
    b.branch("ne", no_sub)
    b.s("cmp.r64.imm", NK, imm=8)
    b.branch("ne", no_sub)
    b.label(sub)
    sub_word(b, Mem("rsp", word_slot), slots)
    b.s("test.r64.r64", I_MOD_NK, I_MOD_NK)
    b.branch("ne", no_sub)
    b.s("xor.r32.r32", r32(TEMP), r32(RCON), comment="^ rcon")
    b.s("add.r64.r64", RCON, RCON, comment="rcon = x * rcon")
    b.s("cmp.r64.imm", RCON, imm=0x100)
    b.branch("b", no_sub)
    b.s("xor.r32.imm", r32(RCON), imm=0x11B, comment="reduce by x^8 + x^4 + x^3 + x + 1")
    b.label(no_sub)
    b.s("xor.r32.m32", r32(TEMP), words(0, I_NK), comment="^ w[i-Nk]")
    b.s("mov.m32.r32", words(0, WORD_INDEX), r32(TEMP))
    b.s("add.r64.imm", WORD_INDEX, imm=1)
    b.s("add.r64.imm", I_NK, imm=1)
    b.s("add.r64.imm", I_MOD_NK, imm=1)
    b.s("cmp.r64.r64", I_MOD_NK, NK)
    b.branch("ne", loop)
    b.s("xor.r32.r32", r32(I_MOD_NK), r32(I_MOD_NK))
    b.branch("jmp", loop)
    b.label(done_words)
    # Round keys as planes: key i at [key + i * W] (encryption) or [key + (Nr - i) * W].
    b.s("shl.r64.imm", WORD_COUNT, imm=2, comment="bytes of the schedule words")
    if decrypt:
        b.s("mov.r64.r64", PLANES_AT, NR)
        b.s("shl.r64.imm", PLANES_AT, imm=W.bit_length() - 1, comment="Nr * key stride")
        b.s("add.r64.r64", PLANES_AT, KEY_OUT)
    else:
        b.s("mov.r64.r64", PLANES_AT, KEY_OUT)
    vb = W // 8
    b.s("lea.r64.m", TABLE_AT, bitslice.key_table(decrypt, W),
        comment="per round key: into plane order and its coordinate")
    if decrypt:
        b.s("mov.r64.r64", I_MOD_NK, NR)
        b.s("shl.r64.imm", I_MOD_NK, imm=vb.bit_length() - 1)
        b.s("add.r64.r64", TABLE_AT, I_MOD_NK, comment="key Nr's (stored first)")
    b.s("xor.r32.r32", r32(WORD_INDEX), r32(WORD_INDEX))
    p = Planes(b, spec, W, slots)
    b.label(conv)
    src = Mem("rsp", words_at, index=WORD_INDEX)
    b.emit(Insn("vload_bcast" if W > 128 else "vload", x(0), (src,), width=W,
                         comment="round key, every lane"))
    for j in BLOCK_REGS[1:]:
        p.move(x(j), x(0))
    p.to_planes(BLOCK_REGS, [8, 9, 10, 11], Mem(TABLE_AT, 0))
    for j in BLOCK_REGS:
        b.emit(Insn("vstore_key", Mem(PLANES_AT, j * W // 8), (x(j),), width=W,
                             comment=f"plane {j} (bit {7 - j})"))
    b.s("add.r64.imm", WORD_INDEX, imm=16)
    b.s("sub.r64.imm" if decrypt else "add.r64.imm", PLANES_AT, imm=W)
    b.s("sub.r64.imm" if decrypt else "add.r64.imm", TABLE_AT, imm=vb)
    b.s("cmp.r64.r64", WORD_INDEX, WORD_COUNT)
    b.branch("b", conv)
    b.s("mov.m32.r32", Mem(KEY_OUT, spec.rounds_offset, bits=32), r32(NR), comment="round count")
    b.emit(Insn("vzero", x(0), (), width=W, comment="wipe the frame"))
    for off in range(0, payload, W // 8):
        b.emit(Insn("vstore", Mem("rsp", off), (x(0),), width=W))
    drop_frame(b, size)
    if then is not None:
        then()
        return
    b.s("xor.r32.r32", r32(RESULT), r32(RESULT))
    finish(b)


def sub_word(b: FunctionBuilder, slot: Mem, slots: int) -> None:
    """TEMP = SubWord(TEMP) (32 bits): the S-box circuit on 8 copies of one xmm block."""
    p = Planes(b, b.spec, 128, slots)
    b.s("mov.m32.r32", Mem(slot.base, slot.disp, bits=32), r32(TEMP))
    p.op("vload", x(0), slot, comment="SubWord: the word as a block")
    for j in BLOCK_REGS[1:]:
        p.move(x(j), x(0))
    p.to_planes(BLOCK_REGS, [8, 9, 10, 11])
    out = p.sbox()
    p.from_planes(out, [n for n in range(16) if n not in out][:4])
    p.op("vstore", slot, x(out[0]))
    b.s("mov.r32.m32", r32(TEMP), Mem(slot.base, slot.disp, bits=32))


# ----------------------------------------------------------------------------- GHASH's key
def gcm_set_key_function(b: FunctionBuilder) -> None:
    """P_gcm_set_key: the bitsliced schedule, then H = E(K, 0) from one xmm batch (8 zero blocks,
    block 0 kept) into the table's H^1 entry; the powers of H as in every other file."""
    powers = b.label_name("powers")

    def h_of_zero() -> None:
        bt = Batch(b, CONTROLS, single=True)
        bt.enter()
        bt.vec("vzero", x(0))
        for off in range(bt.frame.buf, bt.frame.payload, bt.vbytes):
            bt.vec("vstore", Mem("rsp", off), x(0))
        bt.load(Mem("rsp", bt.frame.buf))
        outs = bt.run(False)
        bt.vec("vstore", h_slot(b.spec, b.reg["key"]), bt.p.r(outs[0][0]), width=128, comment="E(K, 0)")
        bt.vec("vzero", x(0), comment="wipe the frame")
        for off in range(bt.frame.buf, bt.frame.payload, bt.vbytes):
            bt.vec("vstore", Mem("rsp", off), x(0))
        drop_frame(b, bt.frame.size)
        b.branch("jmp", powers)

    set_key_function(b, False, then=h_of_zero)
    b.single_path(None, lambda: power_table(b), powers)


FUNCTIONS = {**block_cipher_functions(set_key_function, ecb_function, ctr32_function, cbc_encrypt_function,
                                      cbc_decrypt_function),
             # GHASH and POLYVAL themselves have no AES: the descriptions every backend shares
             "gcm_set_key": gcm_set_key_function, "ghash": ghash_function, "polyval": polyval_function}
