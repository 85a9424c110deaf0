"""Reference semantics of the IR: run a kernel description on plain Python ints.

The simulator executes the DSL-level program (before lowering and register
allocation) on a flat byte memory. Block groups run in the documented
interleave (`schedule.flatten`: lockstep streams, then each group's closing
ops), which is part of what `groups()` means: a kernel may rely on every
group's loads coming before any group's stores.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from . import aesref, gf128, gfni
from .ir import Branch, Const, Function, Insn, KeyRef, Label, Mem, VReg
from .schedule import flatten
from .spec import KernelSpec

M64 = (1 << 64) - 1
M32 = (1 << 32) - 1
M128 = (1 << 128) - 1

_GPR64 = ("rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rbp", "rsp", "r8", "r9", "r10", "r11",
          "r12", "r13", "r14", "r15")


def _gpr_alias(name: str) -> tuple[str, int]:
    """Map a GPR name of any size to (64-bit name, bits)."""
    if name in _GPR64:
        return name, 64
    if name.startswith("r") and name.endswith("b") and name[1:-1].isdigit():
        return name[:-1], 8
    if name.startswith("r") and name.endswith("d"):
        return name[:-1], 32
    if name.startswith("e"):
        return "r" + name[1:], 32
    if name in ("al", "bl", "cl", "dl"):
        return "r" + name[0] + "x", 8
    raise ValueError(f"unknown GPR {name}")


class SimError(Exception):
    pass


@dataclass
class Machine:
    spec: KernelSpec
    size: int = 1 << 20
    mem: bytearray = field(default_factory=bytearray)
    gpr: dict[str, int] = field(default_factory=dict)
    vec: dict[int, tuple[int, ...]] = field(default_factory=dict)
    kreg: dict[str, int] = field(default_factory=dict)
    flags: tuple[bool, bool] = (False, False)  # (CF, ZF)
    _brk: int = 4096
    _consts: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.mem = bytearray(self.size)
        self.gpr = {r: 0 for r in _GPR64}
        self.gpr["rsp"] = self.size - 4096

    # -- memory -------------------------------------------------------------
    def alloc(self, data: bytes | int, align: int = 64) -> int:
        n = data if isinstance(data, int) else len(data)
        addr = (self._brk + align - 1) // align * align
        self._brk = addr + n + 64  # a gap between buffers
        if self._brk > self.size - 8192:
            raise SimError("simulated memory exhausted")
        if not isinstance(data, int):
            self.mem[addr:addr + n] = data
        return addr

    def read(self, addr: int, n: int) -> bytes:
        if addr < 0 or addr + n > self.size:
            raise SimError(f"read outside memory at {addr:#x}")
        return bytes(self.mem[addr:addr + n])

    def write(self, addr: int, data: bytes) -> None:
        if addr < 0 or addr + len(data) > self.size:
            raise SimError(f"write outside memory at {addr:#x}")
        self.mem[addr:addr + len(data)] = data

    def const_addr(self, c: Const) -> int:
        if c.name not in self._consts:
            self._consts[c.name] = self.alloc(c.data)
        return self._consts[c.name]

    # -- registers ----------------------------------------------------------
    def get(self, name: str) -> int:
        full, bits = _gpr_alias(name)
        return self.gpr[full] & ((1 << bits) - 1)

    def put(self, name: str, value: int) -> None:
        full, bits = _gpr_alias(name)
        if bits == 8:
            self.gpr[full] = (self.gpr[full] & ~0xFF) | (value & 0xFF)
        else:  # 32-bit writes zero-extend, as on x86-64
            self.gpr[full] = value & ((1 << bits) - 1)

    def addr(self, m: Mem) -> int:
        a = self.get(m.base) + m.disp
        if m.index:
            a += self.get(m.index) * m.scale
        return a & M64


class Interpreter:
    def __init__(self, machine: Machine, fn: Function) -> None:
        self.m = machine
        self.fn = fn
        self.spec = machine.spec
        self.key_reg = fn.key_base
        self.code: list = []
        self.schedules: list = []  # per item of code: its path's key schedule (None: the key argument's)
        self.pc = 0
        # Groups run in the documented interleave (lockstep, then closing ops).
        for items, schedule in [(fn.entry, None)] + [(p.items, p.schedule) for p in fn.paths]:
            flat = flatten(items)
            self.code.extend(flat)
            self.schedules.extend([schedule] * len(flat))
        self.labels = {it.name: n for n, it in enumerate(self.code) if isinstance(it, Label)}

    # -- vector operand access ----------------------------------------------
    def lanes_of(self, width: int) -> int:
        return width // 128

    def load_lanes(self, addr: int, lanes: int) -> tuple[int, ...]:
        raw = self.m.read(addr, 16 * lanes)
        return tuple(int.from_bytes(raw[16 * i:16 * i + 16], "little") for i in range(lanes))

    def value(self, op, lanes: int) -> tuple[int, ...]:
        if isinstance(op, VReg):
            v = self.m.vec.get(op.id)
            if v is None:
                raise SimError(f"{op} read before written")
            return tuple(v[i] if i < len(v) else 0 for i in range(lanes))
        if isinstance(op, KeyRef):
            s = self.schedules[self.pc - 1]
            if s is not None:
                return self.load_lanes(self.m.get(s.base) + s.disp + op.index * s.stride, lanes)
            return self.load_lanes(self.m.get(self.key_reg) + op.index * self.spec.key_stride, lanes)
        if isinstance(op, Const):
            return self.load_lanes(self.m.const_addr(op), lanes)
        if isinstance(op, Mem):
            return self.load_lanes(self.m.addr(op), lanes)
        raise SimError(f"bad vector operand {op!r}")

    def mask_bytes(self, insn: Insn, nbytes: int) -> list[bool]:
        if not insn.mask:
            return [True] * nbytes
        k = self.m.kreg.get(insn.mask, 0)
        per = 1 if insn.mask_elem == "b" else 8
        return [bool((k >> (i // per)) & 1) for i in range(nbytes)]

    # -- execution ----------------------------------------------------------
    def run(self) -> int:
        pc = 0
        steps = 0
        while True:
            if pc >= len(self.code):
                raise SimError(f"{self.fn.name}: fell off the end")
            item = self.code[pc]
            steps += 1
            if steps > 5_000_000:
                raise SimError("step limit exceeded")
            pc += 1
            self.pc = pc
            if isinstance(item, Label):
                continue
            if isinstance(item, Branch):
                if item.cond == "jmp" or self.cond(item.cond):
                    pc = self.labels[item.target]
                continue
            if item.op == "ret":
                return self.m.get("rax")
            self.execute(item)

    def cond(self, cc: str) -> bool:
        cf, zf = self.m.flags
        return {"b": cf, "ae": not cf, "e": zf, "ne": not zf, "a": not cf and not zf,
                "be": cf or zf}[cc]

    def execute(self, i: Insn) -> None:
        if i.op in SCALAR:
            SCALAR[i.op](self, i)
        else:
            self.vector(i)

    def vector(self, i: Insn) -> None:
        lanes = self.lanes_of(i.width)
        op = i.op
        if op == "vstore" or op == "vstore_key":
            val = self.value(i.srcs[0], lanes)
            raw = b"".join(x.to_bytes(16, "little") for x in val)
            addr = self.m.addr(i.dst)
            keep = self.mask_bytes(i, len(raw))
            for n, byte in enumerate(raw):
                if keep[n]:
                    self.m.write(addr + n, bytes([byte]))
            return
        if op == "vstore_lane":
            lane = self.value(i.srcs[0], lanes)[i.imm]
            self.m.write(self.m.addr(i.dst), lane.to_bytes(16, "little"))
            return
        if op in ("vload", "vload_key"):
            src = i.srcs[0]  # a Const: a constant loaded into a register for a whole path
            addr = self.m.const_addr(src) if isinstance(src, Const) else self.m.addr(src)
            keep = self.mask_bytes(i, 16 * lanes)
            raw = bytes(self.m.read(addr + n, 1)[0] if keep[n] else 0 for n in range(16 * lanes))
            out = tuple(int.from_bytes(raw[16 * k:16 * k + 16], "little") for k in range(lanes))
        elif op == "vload_bcast":
            out = self.load_lanes(self.m.addr(i.srcs[0]), 1) * lanes
        elif op in ("vload64", "vload32"):
            size = 8 if op == "vload64" else 4
            out = (int.from_bytes(self.m.read(self.m.addr(i.srcs[0]), size), "little"),)
        elif op == "vzero":
            out = (0,) * lanes
        elif op == "top_lane":
            src = self.value(i.srcs[0], self.lanes_of(self.fn.width))
            out = (src[-1],)
        elif op == "prev_lanes":
            cur, carried = (self.value(s, lanes) for s in i.srcs)
            out = (carried[-1],) + cur[:-1]
        elif op == "next_lanes":  # [a lanes 1..n-1, b lane 0]
            a, c = (self.value(s, lanes) for s in i.srcs)
            out = a[1:] + c[:1]
        elif op == "deal_lanes":  # lanes imm, imm + 2, ... of a then b
            a, c = (self.value(s, lanes) for s in i.srcs)
            out = (a + c)[i.imm::2]
        elif op == "zip_lanes":  # half imm of a and of b, interleaved lane by lane (srcs[2]: zmm's indices)
            a, c = (self.value(s, lanes) for s in i.srcs[:2])
            half = lanes // 2
            out = tuple(x for k in range(half * i.imm, half * i.imm + half) for x in (a[k], c[k]))
        elif op == "permt2b":  # byte k: byte index[k] of the two tables' bytes, the first table first
            table1, index, table2 = (self.value(s, lanes) for s in i.srcs)
            raw = b"".join(x.to_bytes(16, "little") for x in table1 + table2)
            idx = b"".join(x.to_bytes(16, "little") for x in index)
            picked = bytes(raw[k % len(raw)] for k in idx)
            out = tuple(int.from_bytes(picked[16 * k:16 * k + 16], "little") for k in range(lanes))
        elif op == "upper_half":  # i.width is the result's width
            src = self.value(i.srcs[0], 2 * lanes)
            out = src[lanes:]
        elif op == "insert_lane":
            out = list(self.value(i.srcs[0], lanes))
            out[i.imm] = self.value(i.srcs[1], 1)[0]
            out = tuple(out)
        elif op == "widen":
            out = self.value(i.srcs[0], 1) * lanes
        else:
            srcs = [self.value(s, lanes) for s in i.srcs]
            fn = LANE_OPS[op]
            out = tuple(fn(*(s[k] for s in srcs), i.imm) for k in range(lanes))
            if i.mask:  # EVEX zeroing-masking: elements whose mask bit is clear become 0
                raw = b"".join(x.to_bytes(16, "little") for x in out)
                keep = self.mask_bytes(i, len(raw))
                raw = bytes(byte if keep[n] else 0 for n, byte in enumerate(raw))
                out = tuple(int.from_bytes(raw[16 * k:16 * k + 16], "little") for k in range(lanes))
        self.m.vec[i.dst.id] = tuple(x & M128 for x in out)


def _dwords(x: int) -> list[int]:
    return [(x >> (32 * k)) & M32 for k in range(4)]


def _from_dwords(ws: list[int]) -> int:
    return sum((w & M32) << (32 * k) for k, w in enumerate(ws))


def _pshufb(a: int, ctl: int, _imm) -> int:
    src, c = a.to_bytes(16, "little"), ctl.to_bytes(16, "little")
    return int.from_bytes(bytes(0 if c[n] & 0x80 else src[c[n] & 15] for n in range(16)), "little")


LANE_OPS = {
    "vmov": lambda a, _i: a,
    "vxor": lambda a, b, _i: a ^ b,
    "paddd": lambda a, b, _i: _from_dwords([x + y for x, y in zip(_dwords(a), _dwords(b))]),
    "pshufb": _pshufb,
    "aesenc": lambda a, k, _i: aesref.aesenc(a, k),
    "aesenclast": lambda a, k, _i: aesref.aesenclast(a, k),
    "aesdec": lambda a, k, _i: aesref.aesdec(a, k),
    "aesdeclast": lambda a, k, _i: aesref.aesdeclast(a, k),
    "aesimc": lambda a, _i: aesref.aesimc(a),
    "aeskeygenassist": lambda a, imm: aesref.aeskeygenassist(a, imm),
    "pshufd": lambda a, imm: _from_dwords([_dwords(a)[(imm >> (2 * k)) & 3] for k in range(4)]),
    "pslldq": lambda a, imm: (a << (8 * imm)) & M128 if imm < 16 else 0,
    "punpcklqdq": lambda a, b, _i: (a & M64) | ((b & M64) << 64),
    "palignr": lambda hi, lo, imm: (((hi << 128) | lo) >> (8 * imm)) & M128,
    "clmul": lambda a, b, imm: gf128.clmul((a >> (64 * (imm & 1))) & M64, (b >> (64 * ((imm >> 4) & 1))) & M64),
    "psllq": lambda a, imm: _qwords_map(a, lambda q: (q << imm) & M64),
    "psrlq": lambda a, imm: _qwords_map(a, lambda q: q >> imm),
    "psrad": lambda a, imm: _from_dwords([(d >> min(imm, 31)) | (-(d >> 31) << (32 - min(imm, 31)) if d >> 31
                                           else d >> min(imm, 31)) for d in _dwords(a)]),
    "pand": lambda a, b, _i: a & b,
    "gf2p8affineqb": lambda a, m, imm: _affine_bytes(a, m, imm, invert=False),
    "gf2p8affineinvqb": lambda a, m, imm: _affine_bytes(a, m, imm, invert=True),
    "prord": lambda a, imm: _from_dwords([((d >> imm) | (d << (32 - imm))) & M32 for d in _dwords(a)]),
    "paddq": lambda a, b, _i: _qwords_zip(a, b, lambda x, y: (x + y) & M64),
    "psrldq": lambda a, imm: a >> (8 * imm) if imm < 16 else 0,
    "psllvq": lambda a, n, _i: _qwords_zip(a, n, lambda x, c: (x << c) & M64 if c < 64 else 0),
    "psrlvq": lambda a, n, _i: _qwords_zip(a, n, lambda x, c: x >> c if c < 64 else 0),
    "ternlog": lambda a, b, c, imm: _ternlog(a, b, c, imm),
    "blendv": lambda a, b, m, _i: _blendv(a, b, m),
}


def _blendv(a: int, b: int, mask: int) -> int:
    """Byte k from b where bit 7 of mask byte k is set, else from a (vpblendvb)."""
    out = 0
    for k in range(16):
        src = b if mask >> (8 * k + 7) & 1 else a
        out |= src & (0xFF << 8 * k)
    return out


def _ternlog(a: int, b: int, c: int, imm: int) -> int:
    """Bit i of the result is bit (a_i b_i c_i) of imm (a the most significant)."""
    out = 0
    for k in range(8):
        if imm >> k & 1:
            ma = a if k & 4 else ~a
            mb = b if k & 2 else ~b
            mc = c if k & 1 else ~c
            out |= ma & mb & mc
    return out & M128


def _qwords_map(a: int, f) -> int:
    return f(a & M64) | (f(a >> 64) << 64)


def _affine_bytes(a: int, m: int, imm: int, invert: bool) -> int:
    """vgf2p8affine(inv)qb on one 128-bit lane: byte b uses the matrix in qword b // 8."""
    out = 0
    for b in range(16):
        x = (a >> (8 * b)) & 0xFF
        if invert:
            x = aesref.gf256_inv(x)
        out |= gfni.affine_byte((m >> (64 * (b // 8))) & M64, x, imm) << (8 * b)
    return out


def _qwords_zip(a: int, b: int, f) -> int:
    return f(a & M64, b & M64) | (f(a >> 64, b >> 64) << 64)


def _movmskpd(it: "Interpreter", i: Insn) -> None:
    v = it.value(i.srcs[0], 1)[0]
    it.m.put(i.dst, ((v >> 63) & 1) | ((v >> 127) << 1))


def _alu(it: Interpreter, i: Insn, fn, bits: int = 64, write: bool = True) -> None:
    a = it.m.get(i.dst)
    b = i.imm if i.imm is not None else it.m.get(i.srcs[0])
    mask = (1 << bits) - 1
    raw = fn(a, b & mask)
    res = raw & mask
    it.m.flags = (raw < 0 or raw > mask, res == 0)
    if write:
        it.m.put(i.dst, res)


def _load(it: Interpreter, i: Insn, nbytes: int) -> int:
    return int.from_bytes(it.m.read(it.m.addr(i.srcs[0]), nbytes), "little")


def _store(it: Interpreter, i: Insn, value: int, nbytes: int) -> None:
    it.m.write(it.m.addr(i.dst), (value & ((1 << (8 * nbytes)) - 1)).to_bytes(nbytes, "little"))


def _neg(it: Interpreter, i: Insn) -> None:
    v = it.m.get(i.dst)
    it.m.put(i.dst, (-v) & M64)
    it.m.flags = (v != 0, v == 0)  # CF = (source != 0)


def _bzhi(it: Interpreter, i: Insn) -> None:
    n = it.m.get(i.srcs[1]) & 0xFF
    src = it.m.get(i.srcs[0])
    it.m.put(i.dst, src if n >= 64 else src & ((1 << n) - 1))


def _sarx(it: Interpreter, i: Insn) -> None:
    c = it.m.get(i.srcs[1]) & 63
    it.m.put(i.dst, ((it.m.get(i.srcs[0]) ^ 1 << 63) - (1 << 63) >> c) & M64)


def _shld(it: Interpreter, i: Insn, count: int) -> None:
    c = count & 63
    d = it.m.get(i.dst)
    if c:
        d = ((d << c) | (it.m.get(i.srcs[0]) >> (64 - c))) & M64
    it.m.put(i.dst, d)


def _bsf(it: Interpreter, i: Insn) -> None:
    v = it.m.get(i.srcs[0])
    it.m.put(i.dst, (v & -v).bit_length() - 1 if v else it.m.get(i.dst))


def _cpuid(it: Interpreter, i: Insn) -> None:
    # A model CPU that has every feature the kernels know about.
    leaf = it.m.get("eax")
    if leaf == 0:
        vals = (0x20, 0, 0, 0)
    elif leaf in (1, 7):
        vals = (0, M32, M32, M32)
    else:
        vals = (0, 0, 0, 0)
    for reg, v in zip(("eax", "ebx", "ecx", "edx"), vals):
        it.m.put(reg, v)


def _push(it: Interpreter, i: Insn) -> None:
    it.m.gpr["rsp"] -= 8
    it.m.write(it.m.gpr["rsp"], it.m.get(i.dst).to_bytes(8, "little"))


def _pop(it: Interpreter, i: Insn) -> None:
    it.m.put(i.dst, int.from_bytes(it.m.read(it.m.gpr["rsp"], 8), "little"))
    it.m.gpr["rsp"] += 8


SCALAR = {
    "mov": lambda it, i: it.m.put(i.dst, it.m.get(i.srcs[0])),
    "movi": lambda it, i: it.m.put(i.dst, i.imm & M64),
    "mov32i": lambda it, i: it.m.put(i.dst, i.imm & M32),
    "mov32": lambda it, i: it.m.put(i.dst, _load(it, i, 4)),
    "mov32r": lambda it, i: it.m.put(i.dst, it.m.get(i.srcs[0])),
    "store32": lambda it, i: _store(it, i, it.m.get(i.srcs[0]), 4),
    "store32i": lambda it, i: _store(it, i, i.imm, 4),
    "movzb": lambda it, i: it.m.put(i.dst, _load(it, i, 1)),
    "xor8m": lambda it, i: it.m.put(i.dst, it.m.get(i.dst) ^ _load(it, i, 1)),
    "store8": lambda it, i: _store(it, i, it.m.get(i.srcs[0]), 1),
    "add": lambda it, i: _alu(it, i, lambda a, b: a + b),
    "add32r": lambda it, i: _alu(it, i, lambda a, b: a + b, 32),
    "load64": lambda it, i: it.m.put(i.dst, _load(it, i, 8)),
    "store64": lambda it, i: _store(it, i, it.m.get(i.srcs[0]), 8),
    "movbe_store64": lambda it, i: _store(it, i, int.from_bytes(it.m.get(i.srcs[0]).to_bytes(8, "little"), "big"), 8),
    "bswap64": lambda it, i: it.m.put(i.dst, int.from_bytes(it.m.get(i.dst).to_bytes(8, "little"), "big")),
    "neg": lambda it, i: _neg(it, i),
    "adc_r": lambda it, i: _alu(it, i, lambda a, b: a + b + it.m.flags[0]),
    "sbb_r": lambda it, i: it.m.put(i.dst, (-1 if it.m.flags[0] else 0) & M64),  # sbb r, r: -CF
    "or8r": lambda it, i: it.m.put(i.dst, it.m.get(i.dst) | it.m.get(i.srcs[0])),
    "or_r": lambda it, i: _alu(it, i, lambda a, b: a | b),
    "xor_r": lambda it, i: _alu(it, i, lambda a, b: a ^ b),
    "shld": lambda it, i: _shld(it, i, i.imm),
    "shld_cl": lambda it, i: _shld(it, i, it.m.get("rcx")),
    "bsf": _bsf,
    "add_r": lambda it, i: _alu(it, i, lambda a, b: a + b),
    "sub_r": lambda it, i: _alu(it, i, lambda a, b: a - b),
    "and": lambda it, i: _alu(it, i, lambda a, b: a & b),
    "sub": lambda it, i: _alu(it, i, lambda a, b: a - b),
    "cmp": lambda it, i: _alu(it, i, lambda a, b: a - b, write=False),
    "cmpr": lambda it, i: _alu(it, i, lambda a, b: a - b, write=False),
    "cmp32": lambda it, i: _alu(it, i, lambda a, b: a - b, 32, write=False),
    "and32i": lambda it, i: _alu(it, i, lambda a, b: a & b, 32),
    "test": lambda it, i: _alu(it, i, lambda a, b: a & b, write=False),
    "xor32": lambda it, i: _alu(it, i, lambda a, b: a ^ b, 32),
    "shl": lambda it, i: it.m.put(i.dst, (it.m.get(i.dst) << i.imm) & M64),
    "shr": lambda it, i: it.m.put(i.dst, it.m.get(i.dst) >> i.imm),
    "bswap32": lambda it, i: it.m.put(i.dst, int.from_bytes(it.m.get(i.dst).to_bytes(4, "little"), "big")),
    "lea": lambda it, i: it.m.put(i.dst, it.m.const_addr(i.srcs[0]) if isinstance(i.srcs[0], Const)
                                  else it.m.addr(i.srcs[0])),
    "bzhi": _bzhi,
    "sarx": _sarx,
    "movmskpd": _movmskpd,
    "kmovq": lambda it, i: it.m.kreg.__setitem__(i.dst, it.m.get(i.srcs[0])),
    "cpuid": _cpuid,
    "xgetbv": lambda it, i: (it.m.put("eax", 0xE7), it.m.put("edx", 0)),
    "push": _push,
    "pop": _pop,
    "vzeroupper": lambda it, i: None,
    "endbr64": lambda it, i: None,
}


def call(machine: Machine, fn: Function, *args: int) -> int:
    """Run `fn` with SysV integer arguments: six in registers, the rest on the stack above
    a (simulated) return address, as a `call` leaves them. Returns rax."""
    for reg, value in zip(("rdi", "rsi", "rdx", "rcx", "r8", "r9"), args):
        machine.put(reg, value & M64)
    saved = machine.gpr["rsp"]
    extra = args[6:]
    frame = (8 * len(extra) + 15) // 16 * 16  # the caller keeps rsp 16-aligned at the call
    machine.gpr["rsp"] = saved - frame - 8
    for k, value in enumerate(extra):
        machine.write(machine.gpr["rsp"] + 8 + 8 * k, (value & M64).to_bytes(8, "little"))
    try:
        return Interpreter(machine, fn).run()
    finally:
        machine.gpr["rsp"] = saved
