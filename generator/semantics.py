"""Reference semantics of the ops on plain Python ints: what the op table (`ops.OPS`) points at.

A vector op's function takes the interpreter and the instruction and returns the
128-bit lanes its destination gets (None for a store, which writes memory itself);
`lanewise(f)` makes one from a function of one lane of each source and the
immediate. A scalar op's function updates the machine's GPRs, flags, opmasks,
stack or memory. `simulate.Interpreter` calls them; nothing here knows its class
beyond the `Cpu` protocol below.
"""
from __future__ import annotations

from typing import Any, Callable, Protocol

from . import aesref, gf128, gfni
from .ir import Const, Function, Insn

M64 = (1 << 64) - 1
M32 = (1 << 32) - 1
M128 = (1 << 128) - 1

Lanes = tuple[int, ...]


class Cpu(Protocol):
    """What the semantics read and write: `simulate.Interpreter`."""

    m: Any  # simulate.Machine: memory, GPRs, opmasks, flags
    fn: Function

    def value(self, op: Any, lanes: int) -> Lanes: ...

    def mask_bytes(self, insn: Insn, nbytes: int) -> list[bool]: ...


Semantics = Callable[[Cpu, Insn], Any]


def _lanes(i: Insn) -> int:
    return i.width // 128


def _join(lanes: Lanes) -> bytes:
    return b"".join(x.to_bytes(16, "little") for x in lanes)


def _split(raw: bytes, lanes: int) -> Lanes:
    return tuple(int.from_bytes(raw[16 * k:16 * k + 16], "little") for k in range(lanes))


# -- vector ops that move lanes, or touch memory ---------------------------------------
def vstore(it: Cpu, i: Insn) -> None:
    raw = _join(it.value(i.srcs[0], _lanes(i)))
    addr = it.m.addr(i.dst)
    keep = it.mask_bytes(i, len(raw))
    for n, byte in enumerate(raw):
        if keep[n]:
            it.m.write(addr + n, bytes([byte]))


def vstore_lane(it: Cpu, i: Insn) -> None:
    lane = it.value(i.srcs[0], _lanes(i))[i.imm]
    it.m.write(it.m.addr(i.dst), lane.to_bytes(16, "little"))


def vload(it: Cpu, i: Insn) -> Lanes:
    """Masked loads read only the enabled bytes (fault suppression)."""
    src = i.srcs[0]  # a Const: a constant loaded into a register for a whole path
    addr = it.m.const_addr(src) if isinstance(src, Const) else it.m.addr(src)
    nbytes = 16 * _lanes(i)
    keep = it.mask_bytes(i, nbytes)
    return _split(bytes(it.m.read(addr + n, 1)[0] if keep[n] else 0 for n in range(nbytes)), _lanes(i))


def vload_bcast(it: Cpu, i: Insn) -> Lanes:
    return it.value(i.srcs[0], 1) * _lanes(i)


def vload_bcast64(it: Cpu, i: Insn) -> Lanes:
    """The 8 bytes at the address in every qword."""
    qword = bytes(it.m.read(it.m.addr(i.srcs[0]) + n, 1)[0] for n in range(8))
    return _split(qword * (2 * _lanes(i)), _lanes(i))


def vload64(it: Cpu, i: Insn) -> Lanes:
    return (int.from_bytes(it.m.read(it.m.addr(i.srcs[0]), 8), "little"),)


def vload32(it: Cpu, i: Insn) -> Lanes:
    return (int.from_bytes(it.m.read(it.m.addr(i.srcs[0]), 4), "little"),)


def vzero(it: Cpu, i: Insn) -> Lanes:
    return (0,) * _lanes(i)


def top_lane(it: Cpu, i: Insn) -> Lanes:
    """The last lane of a register of the function's width."""
    return it.value(i.srcs[0], it.fn.width // 128)[-1:]


def prev_lanes(it: Cpu, i: Insn) -> Lanes:
    """[carried's top lane, cur's lanes 0..n-2]: the previous block of each lane (CBC)."""
    cur, carried = (it.value(s, _lanes(i)) for s in i.srcs)
    return (carried[-1],) + cur[:-1]


def next_lanes(it: Cpu, i: Insn) -> Lanes:
    """[a's lanes 1..n-1, b's lane 0]."""
    a, c = (it.value(s, _lanes(i)) for s in i.srcs)
    return a[1:] + c[:1]


def deal_lanes(it: Cpu, i: Insn) -> Lanes:
    """Lanes imm, imm + 2, ... of a, then of b."""
    a, c = (it.value(s, _lanes(i)) for s in i.srcs)
    return (a + c)[i.imm::2]


def zip_lanes(it: Cpu, i: Insn) -> Lanes:
    """Half imm of a and of b, interleaved lane by lane (srcs[2]: zmm's vpermi2q indices)."""
    a, c = (it.value(s, _lanes(i)) for s in i.srcs[:2])
    half = _lanes(i) // 2
    return tuple(x for k in range(half * i.imm, half * i.imm + half) for x in (a[k], c[k]))


def permt2b(it: Cpu, i: Insn) -> Lanes:
    """Byte k: byte index[k] of the two tables' bytes, the first table first."""
    table1, index, table2 = (it.value(s, _lanes(i)) for s in i.srcs)
    raw, idx = _join(table1 + table2), _join(index)
    return _split(bytes(raw[k % len(raw)] for k in idx), _lanes(i))


def upper_half(it: Cpu, i: Insn) -> Lanes:
    """The upper half of a register twice the instruction's width."""
    lanes = _lanes(i)
    return it.value(i.srcs[0], 2 * lanes)[lanes:]


def insert_lane(it: Cpu, i: Insn) -> Lanes:
    out = list(it.value(i.srcs[0], _lanes(i)))
    out[i.imm] = it.value(i.srcs[1], 1)[0]
    return tuple(out)


def widen(it: Cpu, i: Insn) -> Lanes:
    """A 128-bit value in every lane."""
    return it.value(i.srcs[0], 1) * _lanes(i)


def lanewise(f: Callable[..., int]) -> Semantics:
    """Semantics that apply f(lane of each source..., imm) to every lane; EVEX
    zeroing-masking clears the elements whose mask bit is clear. `.lane` is f."""
    def run(it: Cpu, i: Insn) -> Lanes:
        lanes = _lanes(i)
        srcs = [it.value(s, lanes) for s in i.srcs]
        out = tuple(f(*(s[k] for s in srcs), i.imm) for k in range(lanes))
        if i.mask:
            raw = _join(tuple(x & M128 for x in out))
            keep = it.mask_bytes(i, len(raw))
            out = _split(bytes(byte if keep[n] else 0 for n, byte in enumerate(raw)), lanes)
        return out

    run.lane = f  # type: ignore[attr-defined]
    return run


# -- one 128-bit lane -------------------------------------------------------------------
def _dwords(x: int) -> list[int]:
    return [(x >> (32 * k)) & M32 for k in range(4)]


def _from_dwords(ws: list[int]) -> int:
    return sum((w & M32) << (32 * k) for k, w in enumerate(ws))


def _qwords_map(a: int, f: Callable[[int], int]) -> int:
    return f(a & M64) | (f(a >> 64) << 64)


def _qwords_zip(a: int, b: int, f: Callable[[int, int], int]) -> int:
    return f(a & M64, b & M64) | (f(a >> 64, b >> 64) << 64)


def pshufb(a: int, ctl: int, _imm: None) -> int:
    src, c = a.to_bytes(16, "little"), ctl.to_bytes(16, "little")
    return int.from_bytes(bytes(0 if c[n] & 0x80 else src[c[n] & 15] for n in range(16)), "little")


def psrad(a: int, imm: int) -> int:
    n = min(imm, 31)
    return _from_dwords([(d >> n) | (-(d >> 31) << (32 - n)) if d >> 31 else d >> n for d in _dwords(a)])


def pmuludq(a: int, b: int, _imm: None) -> int:
    """Each qword: the unsigned product of the two low dwords (vpmuludq)."""
    qa, qb = [(a >> (64 * k)) & M64 for k in range(2)], [(b >> (64 * k)) & M64 for k in range(2)]
    return sum(((qa[k] & 0xFFFFFFFF) * (qb[k] & 0xFFFFFFFF)) << (64 * k) for k in range(2))


def psraq(a: int, imm: int) -> int:
    """Each qword shifted right arithmetically (vpsraq)."""
    n = min(imm, 63)
    return _qwords_map(a, lambda q: ((q - (1 << 64) if q >> 63 else q) >> n) & M64)


def clmul(a: int, b: int, imm: int) -> int:
    """The qwords imm bit 0 of a and imm bit 4 of b, multiplied carry-less."""
    return gf128.clmul((a >> (64 * (imm & 1))) & M64, (b >> (64 * ((imm >> 4) & 1))) & M64)


def blendv(a: int, b: int, mask: int, _imm: None) -> int:
    """Byte k from b where bit 7 of mask byte k is set, else from a (vpblendvb)."""
    out = 0
    for k in range(16):
        src = b if mask >> (8 * k + 7) & 1 else a
        out |= src & (0xFF << 8 * k)
    return out


def ternlog(a: int, b: int, c: int, imm: int) -> int:
    """Bit i of the result is bit (a_i b_i c_i) of imm (a the most significant)."""
    out = 0
    for k in range(8):
        if imm >> k & 1:
            ma = a if k & 4 else ~a
            mb = b if k & 2 else ~b
            mc = c if k & 1 else ~c
            out |= ma & mb & mc
    return out & M128


def affine(invert: bool) -> Callable[[int, int, int], int]:
    """vgf2p8affine(inv)qb on one 128-bit lane: byte b uses the matrix in qword b // 8."""
    def lane(a: int, m: int, imm: int) -> int:
        out = 0
        for b in range(16):
            x = (a >> (8 * b)) & 0xFF
            if invert:
                x = aesref.gf256_inv(x)
            out |= gfni.affine_byte((m >> (64 * (b // 8))) & M64, x, imm) << (8 * b)
        return out
    return lane


# (named after their ops; `ops.OPS` wraps each in `lanewise`)
def vmov(a: int, _imm: None) -> int:
    return a


def vxor(a: int, b: int, _imm: None) -> int:
    return a ^ b


def pand(a: int, b: int, _imm: None) -> int:
    return a & b


def por(a: int, b: int, _imm: None) -> int:
    return a | b


def pandn(a: int, b: int, _imm: None) -> int:
    return ~a & b


def paddd(a: int, b: int, _imm: None) -> int:
    return _from_dwords([x + y for x, y in zip(_dwords(a), _dwords(b))])


def paddq(a: int, b: int, _imm: None) -> int:
    return _qwords_zip(a, b, lambda x, y: (x + y) & M64)


def aesenc(a: int, k: int, _imm: None) -> int:
    return aesref.aesenc(a, k)


def aesenclast(a: int, k: int, _imm: None) -> int:
    return aesref.aesenclast(a, k)


def aesdec(a: int, k: int, _imm: None) -> int:
    return aesref.aesdec(a, k)


def aesdeclast(a: int, k: int, _imm: None) -> int:
    return aesref.aesdeclast(a, k)


def aesimc(a: int, _imm: None) -> int:
    return aesref.aesimc(a)


def aeskeygenassist(a: int, imm: int) -> int:
    return aesref.aeskeygenassist(a, imm)


def pshufd(a: int, imm: int) -> int:
    return _from_dwords([_dwords(a)[(imm >> (2 * k)) & 3] for k in range(4)])


def pslldq(a: int, imm: int) -> int:
    return (a << (8 * imm)) & M128 if imm < 16 else 0


def psrldq(a: int, imm: int) -> int:
    return a >> (8 * imm) if imm < 16 else 0


def punpcklqdq(a: int, b: int, _imm: None) -> int:
    return (a & M64) | ((b & M64) << 64)


def palignr(hi: int, lo: int, imm: int) -> int:
    return (((hi << 128) | lo) >> (8 * imm)) & M128


def psllq(a: int, imm: int) -> int:
    return _qwords_map(a, lambda q: (q << imm) & M64)


def psrlq(a: int, imm: int) -> int:
    return _qwords_map(a, lambda q: q >> imm)


def psllvq(a: int, n: int, _imm: None) -> int:
    return _qwords_zip(a, n, lambda x, c: (x << c) & M64 if c < 64 else 0)


def psrlvq(a: int, n: int, _imm: None) -> int:
    return _qwords_zip(a, n, lambda x, c: x >> c if c < 64 else 0)


def prord(a: int, imm: int) -> int:
    return _from_dwords([((d >> imm) | (d << (32 - imm))) & M32 for d in _dwords(a)])


gf2p8affineqb = affine(invert=False)
gf2p8affineinvqb = affine(invert=True)


# -- scalar ops ---------------------------------------------------------------------------
def copy(it: Cpu, i: Insn) -> None:
    it.m.put(i.dst, it.m.get(i.srcs[0]))


def set_imm(it: Cpu, i: Insn) -> None:
    it.m.put(i.dst, i.imm & M64)  # a 32-bit destination keeps the low 32 bits


def load(nbytes: int) -> Semantics:
    """dst = nbytes of memory, zero-extended."""
    def run(it: Cpu, i: Insn) -> None:
        it.m.put(i.dst, int.from_bytes(it.m.read(it.m.addr(i.srcs[0]), nbytes), "little"))
    return run


def store(nbytes: int, swap: bool = False) -> Semantics:
    """nbytes of memory = the source register (or the immediate); `swap`: byte-reversed (movbe)."""
    def run(it: Cpu, i: Insn) -> None:
        value = (i.imm if i.imm is not None else it.m.get(i.srcs[0])) & ((1 << (8 * nbytes)) - 1)
        it.m.write(it.m.addr(i.dst), value.to_bytes(nbytes, "big" if swap else "little"))
    return run


def alu(f: Callable[[int, int], int], bits: int = 64, write: bool = True) -> Semantics:
    """dst = f(dst, source or immediate) on `bits` bits, setting CF and ZF (cmp/test: write=False)."""
    def run(it: Cpu, i: Insn) -> None:
        a = it.m.get(i.dst)
        b = i.imm if i.imm is not None else it.m.get(i.srcs[0])
        mask = (1 << bits) - 1
        raw = f(a, b & mask)
        res = raw & mask
        it.m.flags = (raw < 0 or raw > mask, res == 0)
        if write:
            it.m.put(i.dst, res)
    return run


def adc(it: Cpu, i: Insn) -> None:
    alu(lambda a, b: a + b + it.m.flags[0])(it, i)


def xor_mem(nbytes: int) -> Semantics:
    """dst ^= nbytes of memory (flags not modelled: no kernel reads them after it)."""
    return _mem_op(lambda a, b: a ^ b, nbytes)


def and_mem(nbytes: int) -> Semantics:
    """dst &= nbytes of memory (flags not modelled)."""
    return _mem_op(lambda a, b: a & b, nbytes)


def _mem_op(f: Callable[[int, int], int], nbytes: int) -> Semantics:
    def run(it: Cpu, i: Insn) -> None:
        it.m.put(i.dst, f(it.m.get(i.dst), int.from_bytes(it.m.read(it.m.addr(i.srcs[0]), nbytes), "little")))
    return run


def mul_wide(it: Cpu, i: Insn) -> None:
    """rdx:rax = rax * the qword at the operand (flags not modelled: no kernel reads them)."""
    p = it.m.get("rax") * int.from_bytes(it.m.read(it.m.addr(i.dst), 8), "little")
    it.m.put("rax", p & M64)
    it.m.put("rdx", p >> 64)


def or_byte(it: Cpu, i: Insn) -> None:
    it.m.put(i.dst, it.m.get(i.dst) | it.m.get(i.srcs[0]))


def sbb_self(it: Cpu, i: Insn) -> None:
    """sbb r, r: -CF (the operands are one register)."""
    it.m.put(i.dst, (-1 if it.m.flags[0] else 0) & M64)


def neg(it: Cpu, i: Insn) -> None:
    v = it.m.get(i.dst)
    it.m.put(i.dst, (-v) & M64)
    it.m.flags = (v != 0, v == 0)  # CF = (source != 0)


def bswap(nbytes: int) -> Semantics:
    def run(it: Cpu, i: Insn) -> None:
        it.m.put(i.dst, int.from_bytes(it.m.get(i.dst).to_bytes(nbytes, "little"), "big"))
    return run


def shl(it: Cpu, i: Insn) -> None:
    it.m.put(i.dst, (it.m.get(i.dst) << i.imm) & M64)


def shr(it: Cpu, i: Insn) -> None:
    it.m.put(i.dst, it.m.get(i.dst) >> i.imm)


def sar(it: Cpu, i: Insn) -> None:
    it.m.put(i.dst, ((it.m.get(i.dst) ^ 1 << 63) - (1 << 63) >> i.imm) & M64)


def bt(it: Cpu, i: Insn) -> None:
    it.m.flags = (bool(it.m.get(i.dst) >> i.imm & 1), it.m.flags[1])


def ror32(it: Cpu, i: Insn) -> None:
    v, n = it.m.get(i.dst), i.imm & 31
    it.m.put(i.dst, ((v >> n) | (v << (32 - n))) & M32)


def shld(count: Callable[[Cpu, Insn], int]) -> Semantics:
    """dst = dst << c | src >> (64 - c), c = count mod 64."""
    def run(it: Cpu, i: Insn) -> None:
        c = count(it, i) & 63
        d = it.m.get(i.dst)
        if c:
            d = ((d << c) | (it.m.get(i.srcs[0]) >> (64 - c))) & M64
        it.m.put(i.dst, d)
    return run


def bsf(it: Cpu, i: Insn) -> None:
    v = it.m.get(i.srcs[0])
    it.m.put(i.dst, (v & -v).bit_length() - 1 if v else it.m.get(i.dst))


def lea(it: Cpu, i: Insn) -> None:
    src = i.srcs[0]
    it.m.put(i.dst, it.m.const_addr(src) if isinstance(src, Const) else it.m.addr(src))


def bzhi(it: Cpu, i: Insn) -> None:
    n = it.m.get(i.srcs[1]) & 0xFF
    src = it.m.get(i.srcs[0])
    it.m.put(i.dst, src if n >= 64 else src & ((1 << n) - 1))


def sarx(it: Cpu, i: Insn) -> None:
    c = it.m.get(i.srcs[1]) & 63
    it.m.put(i.dst, ((it.m.get(i.srcs[0]) ^ 1 << 63) - (1 << 63) >> c) & M64)


def shlx(it: Cpu, i: Insn) -> None:
    it.m.put(i.dst, it.m.get(i.srcs[0]) << (it.m.get(i.srcs[1]) & 63) & M64)


def shrx(it: Cpu, i: Insn) -> None:
    it.m.put(i.dst, it.m.get(i.srcs[0]) >> (it.m.get(i.srcs[1]) & 63))


def movmskpd(it: Cpu, i: Insn) -> None:
    v = it.value(i.srcs[0], 1)[0]
    it.m.put(i.dst, ((v >> 63) & 1) | ((v >> 127) << 1))


def kmovq(it: Cpu, i: Insn) -> None:
    it.m.kreg[i.dst] = it.m.get(i.srcs[0])


def cpuid(it: Cpu, i: Insn) -> None:
    """A model CPU that has every feature the kernels know about."""
    leaf = it.m.get("eax")
    if leaf == 0:
        vals = (0x20, 0, 0, 0)
    elif leaf in (1, 7):
        vals = (0, M32, M32, M32)
    else:
        vals = (0, 0, 0, 0)
    for reg, v in zip(("eax", "ebx", "ecx", "edx"), vals):
        it.m.put(reg, v)


def xgetbv(it: Cpu, i: Insn) -> None:
    it.m.put("eax", 0xE7)
    it.m.put("edx", 0)


def push(it: Cpu, i: Insn) -> None:
    it.m.gpr["rsp"] -= 8
    it.m.write(it.m.gpr["rsp"], it.m.get(i.dst).to_bytes(8, "little"))


def pop(it: Cpu, i: Insn) -> None:
    it.m.put(i.dst, int.from_bytes(it.m.read(it.m.gpr["rsp"], 8), "little"))
    it.m.gpr["rsp"] += 8


def nothing(it: Cpu, i: Insn) -> None:
    """No architectural effect the kernels' results depend on (endbr64, vzeroupper)."""
