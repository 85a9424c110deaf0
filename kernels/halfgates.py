"""Half-gates garbling and evaluation of a batch of AND gates (Zahur, Rosulek, Evans 2015), free-XOR.

Gate i of a call (i = 0 .. n-1, id = first_gate_id + i) has the tweaks j = 2 id and j' = 2 id + 1,
each a 128-bit block holding the 64-bit value little-endian in bytes 0..7 and zeros in bytes 8..15.
H(x, t) = pi(sigma(x) ^ t) ^ sigma(x) ^ t, pi = AES under the fixed key, sigma as in mpc.sigma.
The garbler (delta with its lowest bit set; pa, pb the lowest bits of A0, B0):

    TG = H(A0, j) ^ H(A0 ^ delta, j) ^ pb * delta        WG = H(A0, j) ^ pa * TG
    TE = H(B0, j') ^ H(B0 ^ delta, j') ^ A0              WE = H(B0, j') ^ pb * (TE ^ A0)
    table = TG || TE,  C0 = WG ^ WE

and the evaluator, from labels A, B with lowest bits sa, sb:
    C = H(A, j) ^ sa * TG ^ H(B, j') ^ sb * (TE ^ A).

A vector holds L gates, lane l gate l; sigma is linear, so sigma(A0 ^ delta) = sigma(A0) ^ sigma(delta)
is one XOR. With x the hash inputs sigma(A0) ^ j, sigma(B0) ^ j' and E = pi(x) (so H = E ^ x):
    TG = E(A0) ^ E(A0 ^ delta) ^ sigma(delta) ^ pb * delta,   hB = E(B0) ^ E(B0 ^ delta) ^ sigma(delta),
    TE = hB ^ A0,   C0 = E(A0) ^ E(B0) ^ u ^ pa * TG ^ pb * hB,   u = x(A0) ^ x(B0)
(the x of a hash pair differ by sigma(delta)), and C = E(A) ^ E(B) ^ u ^ sa * TG ^ sb * (TE ^ A): only u
waits through the rounds. A lowest bit becomes a whole-lane mask (no branch, no address depends on a
label). The four (two) hashes of every gate of D vectors run interleaved. The tables are
32-byte "blocks" whose halves are TG and TE: wideblock.Halves deals and zips them lane by lane.

The _gather functions take a gate's inputs from a label array, as a circuit keeps its wires: two uint32
per gate, the byte offsets of A and B there (16 times the wire's number: an address needs no shift, a
port the rounds want). A vector of them is one 16-byte load and an insertion per further lane (a blend
on any vector port), before the batch's rounds. The offsets come from the circuit, not from labels or
keys: public, as the addresses they make.
"""
from __future__ import annotations

from aesgen.dsl import FunctionBuilder, key
from aesgen.ir import Const, Mem, VReg

from .aes import encrypt_rounds, finish
from .frame import aligned, drop_frame, open_frame
from .gfdouble import A_XOR_B_AND_C
from .mpc import sigma
from .modes import group_counts, return_if_zero, vector_loops
from .registry import describes
from .regs import r32
from .wideblock import Halves
from .xors import ternary, xor_all

# Register roles beside the arguments (b.reg); all public (counts, pointers, the gate id).
COUNT = "r11"  # n, read from the stack
C_OUT = "r10"  # garble: c0, read from the stack
TWICE_ID = "rax"  # 2 * first_gate_id on its way to the stack (before the round-count dispatch)
GATHER_INDEX = 8  # _gather: bytes of `in` per gate (two uint32 byte offsets)


class Frame:
    """The stack frame (rsp-relative slots, so no load there can alias a caller's buffer): the first
    tweak at 0 (as vload64 takes it); with 16 vector registers delta and sigma(delta) in every lane;
    then per vector of a batch `per_vector` slots: u (the XOR of its hash inputs, so they need not stay
    live through the rounds) and the vector's labels, read back after the rounds. Label-derived
    slots and delta are wiped before return."""

    def __init__(self, b: FunctionBuilder, per_vector: int) -> None:
        self.vec = b.width // 8
        self.spilled = b.spec.vector_registers < 32
        self.delta_at = 16
        self.batch_at = self.delta_at + (2 * self.vec if self.spilled else 0)
        self.per_vector = per_vector
        self.size = aligned(self.batch_at + b.depth * per_vector * self.vec, pushes=0)

    def slot(self, j: int, k: int) -> Mem:
        return Mem("rsp", self.batch_at + (j * self.per_vector + k) * self.vec)

    def secrets(self) -> range:
        return range(self.delta_at, self.size - self.vec + 1, self.vec)


def qword0(name: str, values: list[int]) -> Const:
    """One lane per value: the value in qword 0 (little-endian), zeros in qword 1."""
    return Const(name, b"".join(v.to_bytes(8, "little") + bytes(8) for v in values))


def tweak_step(step: int, lanes: int) -> Const:
    """`step` added to every lane's tweak."""
    return qword0(f"halfgates_step{step}_x{lanes}", [step] * lanes)


def xor_and(b: FunctionBuilder, x: VReg, m: VReg, y: VReg | Mem, width: int, comment: str = "") -> VReg:
    """x ^ (m & y): one vpternlogd on AVX-512."""
    if ternary(b):
        return b.v("ternlog", x, m, y, imm=A_XOR_B_AND_C, width=width, comment=comment)
    return b.v("vxor", x, b.v("pand", m, y, width=width), width=width, comment=comment)


def lowest_bit_mask(b: FunctionBuilder, x: VReg, width: int) -> VReg:
    """Per lane: all ones if bit 0 of byte 0 is set, else zeros. At 512 bits the shifts run on one port
    only, the one the AES rounds keep busy: there two byte shuffles (a table lookup) and an AND do it."""
    if width == 512:
        lanes = width // 128
        t = b.v("pand", x, Const(f"halfgates_bit0_x{lanes}", (b"\x01" + bytes(15)) * lanes), width=width,
                comment="bit 0 of byte 0")
        t = b.v("pshufb", t, Const(f"halfgates_zeros_x{lanes}", bytes(16 * lanes)), width=width, comment="in every byte")
        table = b.v("vload", Const(f"halfgates_odd_ff_x{lanes}", bytes((0, 0xFF) + (0,) * 14) * lanes), width=width)
        return b.v("pshufb", table, t, width=width, comment="0, 1 to 0, 0xff: the point-and-permute bit as a lane mask")
    t = b.v("psllq", x, imm=63, width=width, comment="bit 0 to the top of qword 0")
    t = b.v("pshufd", t, imm=0x55, width=width, comment="dword 1 everywhere")
    return b.v("psrad", t, imm=31, width=width, comment="point-and-permute bit as a lane mask")


class Gather:
    """_gather: each gate's inputs from the label array `labels` at their byte offsets (`idx`: two uint32
    per gate), through `index`, a register free once the entry code is done and public all along."""

    def __init__(self, b: FunctionBuilder, labels: str, idx: str, index: str) -> None:
        self.b, self.labels, self.idx, self.index = b, labels, idx, index

    def vector(self, j: int, width: int) -> tuple[VReg, VReg]:
        """Vector j's A and B, lane l gate l."""
        b, lanes = self.b, width // 128
        out = []
        for k, name in enumerate("AB"):
            v = None
            for lane in range(lanes):
                b.declassify_mark("wire_place", values_live_across=True)  # a wire's place: the circuit's, not a secret
                b.s("mov.r32.m32", r32(self.index), Mem(self.idx, GATHER_INDEX * (lanes * j + lane) + 4 * k, bits=32),
                    comment=f"vector {j} lane {lane}: {name}'s offset")
                at = Mem(self.labels, 0, index=self.index, bits=128)
                if v is None:
                    with b.at_width(128):
                        v = b.v("vload", at, role="lbl", comment=f"vector {j}: {name}")
                else:
                    v = b.v("insert_lane", v, at, imm=lane, width=width, role="lbl")
            out.append(v)
        return out[0], out[1]


class HalfGates:
    """What both functions share: the frame, the tweaks, the hashes, the vector loops over gates and
    the tail of fewer than L gates on xmm."""

    def __init__(self, b: FunctionBuilder, gate_id: str, inputs: "tuple[str, str] | Gather", out: str,
                 tables: str) -> None:
        """`inputs`: the two label streams, or the Gather of the _gather functions; `out` the output labels."""
        self.b, self.gate_id, self.tables = b, gate_id, tables
        self.gather = inputs if isinstance(inputs, Gather) else None
        self.sources = () if self.gather else inputs
        self.streams = (*self.sources, out)  # what the loops advance
        self.frame = Frame(b, 3)  # u, then the two labels (kept for after the rounds)
        self.pre: list[tuple[VReg, VReg]] = []  # _gather: this batch's labels, loaded before its rounds

    def enter(self) -> None:
        """n == 0: return touching nothing; else the first tweak 2 * first_gate_id onto the stack."""
        b = self.b
        b.s("mov.r64.m64", COUNT, b.stack_arg("n"), comment="n")
        return_if_zero(b, COUNT)
        b.s("lea.r64.m", TWICE_ID, Mem(self.gate_id, 0, index=self.gate_id, scale=1), comment="j = 2 * first_gate_id")
        open_frame(b, self.frame.size, comment="the first tweak, a batch's last round keys and labels")
        b.s("mov.m64.r64", Mem("rsp", 0, bits=64), TWICE_ID)

    def delta(self, delta: str) -> tuple[VReg | Mem, VReg | Mem]:
        """delta and sigma(delta) in every lane: pinned, or in the frame."""
        b, f = self.b, self.frame
        r = b.v("vload_bcast", Mem(delta, 0), role="dlt", comment="delta in every lane")
        sr = sigma(b, r)
        if not f.spilled:
            pins = b.pinned("DELTA"), b.pinned("SIGMA_DELTA")
            b.assign(pins[0], r)
            b.assign(pins[1], sr)
            return pins
        slots = Mem("rsp", f.delta_at), Mem("rsp", f.delta_at + f.vec)
        b.store(slots[0], r, comment="delta")
        b.store(slots[1], sr, comment="sigma(delta)")
        return slots

    def tweaks(self) -> VReg:
        """TWEAK: lane l holds gate l's j (qword 0), moved on after every vector."""
        b, L = self.b, self.b.lanes
        t = b.v("vload64", Mem("rsp", 0, bits=64), width=128, role="twk", comment="j of the first gate")
        tw = b.pinned("TWEAK")
        if L > 1:
            t = b.v("widen", t)
            t = b.v("paddq", t, qword0(f"halfgates_lanes_x{L}", [2 * l for l in range(L)]),
                    comment="lane l: gate l's j")
        b.assign(tw, t)
        self.tw = tw
        return tw

    def labels(self, j: int, width: int, names: str) -> tuple[VReg, VReg, VReg, VReg]:
        """Vector j's two labels (kept in the frame for after the rounds) and sigma(label) ^ tweak ^ k_0
        of each (j for the first, j' = j + 1 = j ^ 1 for the second: j is even), the hash inputs with
        round 0 done; u, their XOR, to the frame."""
        b, lanes = self.b, width // 128
        off = 16 * lanes * j
        tw = self.tw
        t = tw if j == 0 else b.v("paddq", tw, tweak_step(2 * lanes * j, lanes), width=width, comment=f"vector {j}: j")
        t = b.v("vxor", t, key(0), width=width, comment="j ^ k_0: round 0 of both of j's hashes")
        ts = (t, b.v("vxor", t, tweak_step(1, lanes), width=width, comment="j' ^ k_0"))
        out = []
        for k, name in enumerate(names.split()):
            if self.gather:  # gathered before the rounds
                v = self.pre[j][k]
            else:
                v = b.v("vload", Mem(self.sources[k], off), width=width, role="lbl", comment=f"vector {j}: {name}")
            b.store(self.frame.slot(j, 1 + k), v, width=width)
            out.append(v)
        xs = [sigma(b, v, width, extra=t) for v, t in zip(out, ts)]
        b.store(self.frame.slot(j, 0), b.v("vxor", xs[0], xs[1], width=width), width=width,
                comment="u: what the hashes' feed-forward XORs add to C")
        return out[0], out[1], xs[0], xs[1]

    def hash_rounds(self, xs: tuple[VReg, ...], nr: int, width: int) -> list[VReg]:
        """Rounds 1 .. nr-1 of pi(x) for each x ^ k_0."""
        return [encrypt_rounds(self.b, x, nr, width=width, whiten=False, last=False) for x in xs]

    def hash_last(self, ys: list[VReg], nr: int, width: int) -> list[VReg]:
        """pi(x): the last round."""
        return [self.b.v("aesenclast", y, key(nr), width=width, comment=f"round {nr} (last): pi(x)") for y in ys]

    def saved_labels(self, j: int, width: int) -> tuple[VReg, VReg]:
        return tuple(self.b.v("vload", self.frame.slot(j, 1 + k), width=width, role="lbl")
                     for k in (0, 1))  # type: ignore[return-value]

    def u(self, j: int) -> Mem:
        return self.frame.slot(j, 0)

    def loops(self, body) -> None:
        """body(g, width) does g vectors of gates (width // 128 each) from the pointers' current place."""
        b, L, tw = self.b, self.b.lanes, self.tw

        def advance(width: int):
            lanes = width // 128

            def step(g: int) -> None:
                b.s("add.r64.imm", self.tables, imm=32 * lanes * g)
                b.v("paddq", tw, tweak_step(2 * lanes * g, lanes), dst=tw, width=width,
                    comment="the next gates' tweaks")
            return step

        def run(width: int):
            def batch(g: int) -> None:
                if self.gather:  # before the groups: their streams interleave, the index register would clash
                    self.pre = [self.gather.vector(j, width) for j in range(g)]
                body(g, width)
            return batch

        def step(width: int):
            def go(g: int) -> None:
                advance(width)(g)
                if self.gather:
                    b.s("add.r64.imm", self.gather.idx, imm=GATHER_INDEX * width // 128 * g)
            return go

        vector_loops(b, COUNT, L, self.streams, run(b.width), step(b.width), sizes=group_counts(b.depth), stride=16 * L)
        if L > 1:
            with b.at_width(128):  # fewer than L gates left: one at a time
                vector_loops(b, COUNT, 1, self.streams, run(128), step(128), sizes=(1,), stride=16)

    def leave(self) -> None:
        b = self.b
        z = b.v("vzero")
        for off in self.frame.secrets():
            b.store(Mem("rsp", off), z, comment="leave no label or delta behind" if off == self.frame.delta_at else "")
        drop_frame(b, self.frame.size)
        finish(b)


def inputs(b: FunctionBuilder, gather: bool, names: tuple[str, str]) -> tuple[str, str] | Gather:
    """The two label streams (arguments `names`), or for _gather the Gather: the label array and the
    offsets in their argument places, the gate id's register (done with after the entry) for an offset."""
    if not gather:
        return b.reg[names[0]], b.reg[names[1]]
    return Gather(b, b.reg["labels"], b.reg["in"], b.reg["first_gate_id"])


@describes("halfgates_garble")
@describes("halfgates_garble_gather", gather=True)
def garble_function(b: FunctionBuilder, gather: bool = False) -> None:
    """P_halfgates_garble(fixed_key, delta, a0, b0, first_gate_id, tables, c0, n) and
    P_halfgates_garble_gather(fixed_key, delta, labels, in, first_gate_id, tables, c0, n)."""
    delta, tables = b.reg["delta"], b.reg["tables"]
    hg = HalfGates(b, b.reg["first_gate_id"], inputs(b, gather, ("a0", "b0")), C_OUT, tables)
    b.s("mov.r64.m64", C_OUT, b.stack_arg("c0"), comment="c0")
    hg.enter()
    halves = Halves(b)

    def path(nr: int) -> None:
        hg.tweaks()
        r, sr = hg.delta(delta)

        def body(g: int, width: int) -> None:
            lanes = width // 128

            def gate(j: int) -> None:
                _, _, xa, xb = hg.labels(j, width, "A0 B0")
                x = (xa, b.v("vxor", xa, sr, width=width, comment="sigma(A0 ^ delta) ^ j ^ k_0"),
                     xb, b.v("vxor", xb, sr, width=width, comment="sigma(B0 ^ delta) ^ j' ^ k_0"))
                ys = hg.hash_rounds(x, nr, width)
                b.final()
                e = hg.hash_last(ys, nr, width)
                a, bb = hg.saved_labels(j, width)
                pa, pb = lowest_bit_mask(b, a, width), lowest_bit_mask(b, bb, width)
                tg = xor_and(b, xor_all(b, [e[0], e[1], sr], width), pb, r, width, comment="TG")
                hb = xor_all(b, [e[2], e[3], sr], width, comment="hB")
                te = b.v("vxor", hb, a, width=width, comment="TE")
                c = xor_all(b, [e[0], e[2], hg.u(j)], width)
                c = xor_and(b, c, pa, tg, width)
                off = 16 * lanes * j
                b.store(Mem(C_OUT, off), xor_and(b, c, pb, hb, width), width=width, comment="C0")
                halves.store(tables, 2 * off, lanes, width, (tg, te))
            b.groups(g, gate, comment=f"{g} vector(s) of {lanes} AND gate(s)")

        hg.loops(body)
        hg.leave()

    b.key_paths("key", path)


@describes("halfgates_eval")
@describes("halfgates_eval_gather", gather=True)
def eval_function(b: FunctionBuilder, gather: bool = False) -> None:
    """P_halfgates_eval(fixed_key, a, b, first_gate_id, tables, c, n) and
    P_halfgates_eval_gather(fixed_key, labels, in, first_gate_id, tables, c, n)."""
    tables, c_out = b.reg["tables"], b.reg["c"]
    hg = HalfGates(b, b.reg["first_gate_id"], inputs(b, gather, ("a", "b")), c_out, tables)
    hg.enter()
    halves = Halves(b)

    def path(nr: int) -> None:
        hg.tweaks()

        def body(g: int, width: int) -> None:
            lanes = width // 128

            def gate(j: int) -> None:
                _, _, xa, xb = hg.labels(j, width, "A B")
                ys = hg.hash_rounds((xa, xb), nr, width)
                b.final()
                ea, eb = hg.hash_last(ys, nr, width)
                a, bb = hg.saved_labels(j, width)
                off = 16 * lanes * j
                tg, te = halves.load(tables, 2 * off, lanes, width)
                sa, sb = lowest_bit_mask(b, a, width), lowest_bit_mask(b, bb, width)
                c = xor_and(b, xor_all(b, [ea, eb, hg.u(j)], width), sa, tg, width)
                c = xor_and(b, c, sb, b.v("vxor", te, a, width=width), width)
                b.store(Mem(c_out, off), c, width=width, comment="C")
            b.groups(g, gate, comment=f"{g} vector(s) of {lanes} AND gate(s)")

        hg.loops(body)
        hg.leave()

    b.key_paths("key", path)
