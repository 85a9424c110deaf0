"""Reference semantics of the IR: run a kernel description on plain Python ints.

The simulator executes the DSL-level program (before lowering and register
allocation) on a flat byte memory; each op means what its entry in the op
table (`ops.OPS`) points at in `semantics.py`. Block groups run in the documented
interleave (`schedule.flatten`: lockstep streams, then each group's closing
ops), which is part of what `groups()` means: a kernel may rely on every
group's loads coming before any group's stores.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .ir import GPR64, SYSV_ARGS, Branch, Const, Function, Insn, KeyRef, Label, Mark, Mem, Phys, VReg
from .ops import info
from .schedule import flatten
from .semantics import M64, M128
from .spec import KernelSpec



def _gpr_alias(name: str) -> tuple[str, int]:
    """Map a GPR name of any size to (64-bit name, bits)."""
    if name in GPR64:
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
    vec: dict[int | str, tuple[int, ...]] = field(default_factory=dict)  # register_key -> lanes
    kreg: dict[str, int] = field(default_factory=dict)
    flags: tuple[bool, bool] = (False, False)  # (CF, ZF)
    _brk: int = 4096
    _consts: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.mem = bytearray(self.size)
        self.gpr = {r: 0 for r in GPR64}
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

    def addr(self, m: Mem | Const) -> int:
        if isinstance(m, Const):  # a scalar op's rip-relative constant
            return self.const_addr(m)
        a = self.get(m.base) + m.disp
        if m.index:
            a += self.get(m.index) * m.scale
        return a & M64


def register_key(reg: VReg | Phys) -> int | str:
    """Where a vector register's value is kept: a virtual one by its id; a physical one
    (code written on registers: bitsliced) by its number, apart from the virtual ones."""
    return reg.id if isinstance(reg, VReg) else f"phys{reg.num}"


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
    def load_lanes(self, addr: int, lanes: int) -> tuple[int, ...]:
        raw = self.m.read(addr, 16 * lanes)
        return tuple(int.from_bytes(raw[16 * i:16 * i + 16], "little") for i in range(lanes))

    def value(self, op, lanes: int) -> tuple[int, ...]:
        if isinstance(op, (VReg, Phys)):
            v = self.m.vec.get(register_key(op))
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
            if isinstance(item, (Label, Mark)):
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
        op = info(i.op)
        if op.semantics is None:
            raise SimError(f"{i.op} has no reference semantics (lowering produces it)")
        out = op.semantics(self, i)
        if op.vector and out is not None:
            self.m.vec[register_key(i.dst)] = tuple(x & M128 for x in out)


def call(machine: Machine, fn: Function, *args: int) -> int:
    """Run `fn` with SysV integer arguments: six in registers, the rest on the stack above
    a (simulated) return address, as a `call` leaves them. Returns rax."""
    for reg, value in zip(SYSV_ARGS, args):
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
