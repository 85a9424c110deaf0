"""Canright's S-box circuits, built from the field arithmetic (D. Canright, "A Very Compact S-Box
for AES", CHES 2005) rather than copied: `python -m aesgen.circuits.canright` rewrites the data files.

The inversion in GF(2^8) (AES polynomial) runs in the tower GF(((2^2)^2)^2) with a normal basis at
every level: [Y^16, Y] over GF(2^4) with Y^2 + Y + nu = 0, [Z^4, Z] over GF(2^2) with
Z^2 + Z + N = 0, [W^2, W] over GF(2) with W^2 + W + 1 = 0 (traces 1 at every level, Canright's
choice). With g = G1 Y^16 + G0 Y: g^-1 = (theta G0) Y^16 + (theta G1) Y where
theta = (G1 G0 + nu (G1 + G0)^2)^-1 in GF(2^4); the GF(2^4) inverse is the same formula a level
down, and inversion in GF(2^2) is squaring (a swap of the two bits). A product in a normal basis
[X^q, X] needs three subfield products, a1 b1, a0 b0 and (a1 + a0)(b1 + b0) (9 ANDs in GF(2^4),
27 for the three GF(2^4) products, 9 for the GF(2^4) inverse: 36 in all); the operand sums of G1,
G0 and theta are computed once and shared by the products that read them.

Field elements are ints in the AES polynomial basis throughout; the roots W, Z, Y are found by
search in GF(2^8), every constant (the basis changes, the scalings, the affine map) follows from
them, so no matrix is written down by hand. The circuit is emitted layer by layer: the GF(2)-linear
parts between two layers of ANDs are one matrix each (the first holds the change of basis, the
operand sums and nu (G1 + G0)^2; the last the products' recombination, the change of basis back and
the affine map), made of XORs by `linear.xor_program` (Paar's greedy, or Boyar and Peralta's
distance heuristic where the matrix is narrow). Of the 2 x 8 choices of N and nu, the one with the
fewest gates (S-box and inverse together) is kept.
"""
from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from itertools import product
from pathlib import Path

from ..aesref import gf256_mul
from .algebra import AFFINE_CONSTANT, affine_matrix, inverse_affine, linear_map
from .linear import BP_MAX_COLUMNS, xor_program
from .netlist import Circuit, Gate

PAPER = 'D. Canright, "A Very Compact S-Box for AES", CHES 2005'
DATA_FILES = {"sbox_canright": ("sbox_canright.txt", False), "inv_sbox_canright": ("inv_sbox_canright.txt", True)}
ONE = 0  # the base signal index of the constant 1 (forms are bitmasks over base signals)


# -- GF(2^8) and its subfields --------------------------------------------------------------
def power(a: int, n: int) -> int:
    r = 1
    for _ in range(n):
        r = gf256_mul(r, a)
    return r


def subfield(size: int) -> list[int]:
    """GF(size) inside GF(2^8): the x with x^size = x."""
    return [x for x in range(256) if power(x, size) == x]


def roots(trace: int, norm: int) -> list[int]:
    """The roots in GF(2^8) of x^2 + trace x + norm."""
    return [x for x in range(256) if gf256_mul(x, x) ^ gf256_mul(trace, x) ^ norm == 0]


@dataclass(frozen=True)
class Tower:
    """The normal bases: W over GF(2), Z over GF(4) (Z^2 + Z + N), Y over GF(16) (Y^2 + Y + nu)."""
    w: int
    z: int
    y: int

    @property
    def n(self) -> int:
        return gf256_mul(self.z, power(self.z, 4))

    @property
    def nu(self) -> int:
        return gf256_mul(self.y, power(self.y, 16))

    def level(self, size: int) -> tuple[int, int, int]:
        """(X^q, X, q) of the normal basis of GF(size^2) over GF(size)."""
        x = {2: self.w, 4: self.z, 16: self.y}[size]
        return power(x, size), x, size

    def split(self, c: int, size: int) -> tuple[int, int]:
        """c in GF(size^2) as c1 X^q + c0 X with c1, c0 in GF(size)."""
        hi, lo, _ = self.level(size)
        return _split(hi, lo, size, c)

    def bits(self, c: int) -> tuple[int, ...]:
        """c's 8 coordinates in the tower basis, most significant level first."""
        out = []
        for half in self.split(c, 16):
            for quarter in self.split(half, 4):
                out += self.split(quarter, 2)
        return tuple(out)


@cache
def _split(hi: int, lo: int, size: int, c: int) -> tuple[int, int]:
    for c1, c0 in product(subfield(size), repeat=2):
        if gf256_mul(c1, hi) ^ gf256_mul(c0, lo) == c:
            return c1, c0
    raise ValueError(f"{c:#x} is not in the span of {hi:#x}, {lo:#x} over GF({size})")


def towers() -> list[Tower]:
    """Every normal-basis tower with traces 1 (one root per conjugate pair: the smaller)."""
    w = min(roots(1, 1))
    found = []
    for n in (gf256_mul(w, w), w):  # z^2 + z + N is irreducible over GF(4) for N = W^2, W
        z = min(roots(1, n))
        for nu in subfield(16):
            ys = roots(1, nu)
            if ys and not set(ys) & set(subfield(16)):
                found.append(Tower(w, z, min(ys)))
    return found


# -- values: GF(2^8) elements as sums of (signal x constant) ----------------------------------
Value = dict  # base signal index -> GF(2^8) coefficient; the value is the sum of signal * coefficient


def add(*values: Value) -> Value:
    out: Value = {}
    for v in values:
        for s, c in v.items():
            out[s] = out.get(s, 0) ^ c
    return {s: c for s, c in out.items() if c}


def scale(v: Value, k: int) -> Value:
    return {s: gf256_mul(c, k) for s, c in v.items() if gf256_mul(c, k)}


def square(v: Value) -> Value:
    """Frobenius is additive and a bit squared is itself."""
    return {s: gf256_mul(c, c) for s, c in v.items()}


def linear(v: Value, f: Callable[[int], int]) -> Value:
    return {s: f(c) for s, c in v.items() if f(c)}


# -- the builder: linear layers of XORs, ANDs between them --------------------------------------
@dataclass
class Builder:
    inputs: tuple[str, ...]
    names: list[str] = field(default_factory=lambda: ["ONE"])  # base signal index -> signal name
    forms: dict[str, int] = field(default_factory=dict)        # signal name -> its form (base bitmask)
    known: dict[int, str] = field(default_factory=dict)        # form -> a signal computing it
    gates: list[Gate] = field(default_factory=list)
    temps: int = 0
    ands: int = 0

    def __post_init__(self) -> None:
        for name in self.inputs:
            self.base(name)

    def base(self, name: str) -> int:
        """A new GF(2) variable (an input or an AND output)."""
        self.names.append(name)
        form = 1 << (len(self.names) - 1)
        self.forms[name] = form
        self.known[form] = name
        return len(self.names) - 1

    def signal(self, index: int) -> Value:
        return {index: 1}

    def materialize(self, targets: list[int], frontier: list[str], names: list[str] | None = None) -> list[str]:
        """Signals computing the forms `targets` from `frontier` (one GF(2) matrix of XORs)."""
        todo = [f for f in dict.fromkeys(targets) if f not in self.known]
        rows = [self.express(f, frontier) for f in todo]
        columns, vectors = list(frontier), [1 << i for i in range(len(frontier))]
        for a, b in xor_program(rows, len(columns)):
            columns.append(self.xor(columns[a], columns[b]))
            vectors.append(vectors[a] ^ vectors[b])
        sources = [columns[vectors.index(row)] for row in rows]
        claimed = {s for f, s in zip(todo, sources) if f & 1 == self.forms[s] & 1}
        for form, source in zip(todo, sources):  # the constant-matching ones first: they claim
            if source in claimed:                  # their XOR before another may turn it to XNOR
                self.known[form] = source
        for form, source in zip(todo, sources):
            if form not in self.known:
                self.known[form] = self.invert(source, claimed)
        done = [self.known[f] for f in targets]
        if names:
            self.rename(dict(zip(done, names)))
            done = list(names)
        return done

    def express(self, form: int, frontier: list[str]) -> int:
        """The frontier columns whose forms XOR to `form` (the constant aside)."""
        basis: dict[int, tuple[int, int]] = {}  # pivot bit -> (form, columns)
        for i, name in enumerate(frontier):
            f, cols = self.forms[name] & ~1, 1 << i
            for pivot, (bf, bc) in sorted(basis.items(), reverse=True):
                if f >> pivot & 1:
                    f, cols = f ^ bf, cols ^ bc
            if f:
                basis[f.bit_length() - 1] = (f, cols)
        f, cols = form & ~1, 0
        for pivot, (bf, bc) in sorted(basis.items(), reverse=True):
            if f >> pivot & 1:
                f, cols = f ^ bf, cols ^ bc
        if f:
            raise ValueError("a form outside the frontier's span")
        return cols

    def new_name(self) -> str:
        self.temps += 1
        return f"t{self.temps}"

    def xor(self, a: str, b: str) -> str:
        out = self.new_name()
        self.gates.append(Gate(out, "XOR", (a, b)))
        self.forms[out] = self.forms[a] ^ self.forms[b]
        self.known.setdefault(self.forms[out], out)
        return out

    def invert(self, a: str, claimed: set[str]) -> str:
        """a ^ 1: the XOR that made `a` becomes an XNOR when nothing else reads or claims it, else a NOT."""
        form = self.forms[a] ^ 1
        if form in self.known:
            return self.known[form]
        k = next((k for k, g in enumerate(self.gates) if g.out == a), None)
        readers = any(a in g.ins for g in self.gates)
        if (k is not None and self.gates[k].op == "XOR" and not readers and a not in claimed
                and self.known.get(self.forms[a]) == a):
            self.gates[k] = Gate(a, "XNOR", self.gates[k].ins)
            del self.known[self.forms[a]]
            self.forms[a] = form
        else:
            out = self.new_name()
            self.gates.append(Gate(out, "NOT", (a,)))
            self.forms[out] = form
            a = out
        self.known[form] = a
        return a

    def rename(self, mapping: dict[str, str]) -> None:
        def r(n: str) -> str:
            return mapping.get(n, n)
        self.gates = [Gate(r(g.out), g.op, tuple(r(s) for s in g.ins), g.table) for g in self.gates]
        self.forms = {r(n): f for n, f in self.forms.items()}
        self.known = {f: r(n) for f, n in self.known.items()}

    def and_(self, a: str, b: str) -> int:
        self.ands += 1
        out = f"m{self.ands}"
        self.gates.append(Gate(out, "AND", (a, b)))
        return self.base(out)


# -- the inversion, level by level ---------------------------------------------------------------
def coordinate_forms(v: Value, tower: Tower, size: int) -> list[int]:
    """The forms of v's coordinates over GF(2) (v in GF(size)), highest basis element first."""
    if size == 2:
        return [sum(1 << s for s, c in v.items() if c & 1)]
    width = {4: 2, 16: 4, 256: 8}[size]
    forms = [0] * width
    for s, c in v.items():
        for j, bit in enumerate(tower.bits(c)[8 - width:]):
            forms[j] |= bit << s
    return forms


def halves(v: Value, tower: Tower, size: int) -> tuple[Value, Value]:
    """v in GF(size^2) as V1 X^q + V0 X, V1 and V0 values in GF(size)."""
    hi: Value = {}
    lo: Value = {}
    for s, c in v.items():
        c1, c0 = tower.split(c, size)
        if c1:
            hi[s] = c1
        if c0:
            lo[s] = c0
    return hi, lo


def operand_forms(v: Value, tower: Tower, size: int) -> list[int]:
    """What a product in GF(size^2) (size 2 or 4) reads of one operand: the bits of V1, V0 and
    V1 + V0 in GF(4); in GF(16), those three forms of each of V1, V0 and V1 + V0 (9)."""
    v1, v0 = halves(v, tower, size)
    parts = (v1, v0, add(v1, v0))
    if size == 2:
        return [coordinate_forms(p, tower, 2)[0] for p in parts]
    return [f for p in parts for f in operand_forms(p, tower, 2)]


def multiply(b: Builder, x: Value, y: Value, tower: Tower, size: int) -> Value:
    """x * y in GF(size^2), size 2 or 4 (GF(4) or GF(16) products): the ANDs of the operands'
    materialized forms, recombined as values. The forms must be known to the builder."""
    hi, lo, _ = tower.level(size)
    # normal basis: (a1 X^q + a0 X)(b1 X^q + b0 X) = a1 b1 (X^2q + X^(q+1)) + a0 b0 (X^2 + X^(q+1))
    #                                                 + (a1 + a0)(b1 + b0) X^(q+1)
    cross = gf256_mul(hi, lo)
    weights = (gf256_mul(hi, hi) ^ cross, gf256_mul(lo, lo) ^ cross, cross)
    x_parts, y_parts = halves(x, tower, size), halves(y, tower, size)
    pairs = ((x_parts[0], y_parts[0]), (x_parts[1], y_parts[1]),
             (add(*x_parts), add(*y_parts)))
    out: list[Value] = []
    for (xp, yp), weight in zip(pairs, weights):
        if size == 2:
            fx, fy = coordinate_forms(xp, tower, 2)[0], coordinate_forms(yp, tower, 2)[0]
            prod = b.signal(b.and_(b.known[fx], b.known[fy]))
        else:
            prod = multiply(b, xp, yp, tower, 2)
        out.append(scale(prod, weight))
    return add(*out)


def inverter(b: Builder, g: Value, tower: Tower) -> Value:
    """g^-1 in GF(2^8), g a value over the builder's inputs; returns a value over the last ANDs."""
    g1, g0 = halves(g, tower, 16)
    s = scale(square(add(g1, g0)), tower.nu)
    s_sig = b.materialize(operand_forms(g1, tower, 4) + operand_forms(g0, tower, 4) + coordinate_forms(s, tower, 16),
                          list(b.inputs))[-4:]
    d = add(multiply(b, g1, g0, tower, 4), s)                      # theta^-1
    and1 = [n for n in b.names if n.startswith("m")]
    d1, d0 = halves(d, tower, 4)
    d_sig = b.materialize(operand_forms(d1, tower, 2) + operand_forms(d0, tower, 2), and1 + s_sig)
    before = b.ands
    t = scale(square(add(d1, d0)), tower.n)                        # linear in d: read from d_sig
    theta_prime = square(add(multiply(b, d1, d0, tower, 2), t))   # (the norm)^-1 = (the norm)^2 in GF(4)
    b.materialize(operand_forms(theta_prime, tower, 2), [f"m{k}" for k in range(before + 1, b.ands + 1)] + d_sig)
    hi4, lo4, _ = tower.level(4)
    before = b.ands
    theta = add(scale(multiply(b, theta_prime, d0, tower, 2), hi4), scale(multiply(b, theta_prime, d1, tower, 2), lo4))
    b.materialize(operand_forms(theta, tower, 4), [f"m{k}" for k in range(before + 1, b.ands + 1)])
    hi8, lo8, _ = tower.level(16)
    return add(scale(multiply(b, theta, g0, tower, 4), hi8), scale(multiply(b, theta, g1, tower, 4), lo8))


# -- the S-box and its inverse ----------------------------------------------------------------------
@cache
def affine_linear(c: int) -> int:
    """The affine map's linear part (algebra.affine_matrix)."""
    return linear_map(affine_matrix(), c)


@cache
def inverse_affine_linear(c: int) -> int:
    return linear_map(inverse_affine()[0], c)


def build(tower: Tower, inverse: bool) -> Circuit:
    """The S-box (or inverse S-box) circuit on this tower. U0 is the input's top bit, S0 the output's."""
    inputs = tuple(f"U{i}" for i in range(8))
    b = Builder(inputs)
    top = {b.names.index(f"U{i}"): 1 << (7 - i) for i in range(8)}  # U0 is bit 7
    if inverse:  # InvSubBytes: x = A^-1 y + A^-1 c, then inversion
        g = add(linear(top, inverse_affine_linear), {ONE: inverse_affine()[1]})
        out = inverter(b, g, tower)
    else:  # SubBytes: inversion, then y = A x + c
        out = add(linear(inverter(b, top, tower), affine_linear), {ONE: AFFINE_CONSTANT})
    last = [n for n in b.names if n.startswith("m")][-18:]
    outputs = tuple(f"S{i}" for i in range(8))
    forms = [sum(1 << s for s, c in out.items() if c >> (7 - i) & 1) for i in range(8)]
    b.materialize(forms, last, list(outputs))
    name = "inv_sbox_canright" if inverse else "sbox_canright"
    return Circuit(name, inputs, outputs, tuple(b.gates))


@cache
def best_tower() -> Tower:
    """The tower with the fewest gates in both circuits (then in the S-box)."""
    def cost(t: Tower) -> tuple[int, int]:
        forward, inverse = (len(build(t, inv).gates) for inv in (False, True))
        return forward + inverse, forward
    return min(towers(), key=cost)


def header(circuit: Circuit, tower: Tower, inverse: bool) -> str:
    m = circuit.metrics()
    ops = ", ".join(f"{n} {op}" for op, n in m.by_op.items())
    n_name = "W" if tower.n == tower.w else "W^2"
    what = (["The AES inverse S-box as a straight-line program: the inverse affine map (and its",
             "constant A^-1 {63} = {05}) merged into the change to the tower basis, inversion in",
             "the tower, the change back."] if inverse else
            ["The AES S-box as a straight-line program: the change to the tower basis, inversion in",
             "the tower, the change back merged with the affine map (its constant {63} as XNOR/NOT)."])
    return "\n".join([
        *what,
        f"{m.gates} gates ({ops}), depth {m.depth}.",
        f"Canright's construction ({PAPER}):",
        "inversion in GF(((2^2)^2)^2) with a normal basis at every level, built from the field",
        "arithmetic by aesgen.circuits.canright (nothing copied; `python -m aesgen.circuits.canright`",
        "rewrites this file). The bases, elements in the AES polynomial basis:",
        f"  [Y^16, Y] over GF(2^4), Y = {{{tower.y:02x}}}, Y^2 + Y + nu = 0, nu = {{{tower.nu:02x}}};",
        f"  [Z^4, Z] over GF(2^2), Z = {{{tower.z:02x}}}, Z^2 + Z + N = 0, N = {{{tower.n:02x}}} = {n_name};",
        f"  [W^2, W] over GF(2), W = {{{tower.w:02x}}}, W^2 + W + 1 = 0.",
        "36 ANDs: three GF(2^4) products of 9 and the GF(2^4) inverse's 9. Each linear layer",
        "between two layers of ANDs is one GF(2) matrix, its XORs found by Paar's greedy heuristic",
        f"or, for a matrix at most {BP_MAX_COLUMNS} columns wide, Boyar-Peralta's (SEA 2010), whichever",
        "is shorter.",
        "Bits: U0 is the input byte's top bit, U7 its lowest; S0 the output's top bit, S7 its lowest.",
    ])


def texts() -> dict[str, str]:
    """File name -> contents of both data files."""
    tower = best_tower()
    out = {}
    for name, (file, inverse) in DATA_FILES.items():
        c = build(tower, inverse)
        out[file] = c.text(header(c, tower, inverse))
    return out


def main(argv: list[str]) -> int:
    target = Path(argv[0]) if argv else Path(__file__).parent / "data"
    for file, text in texts().items():
        (target / file).write_text(text)
        print(f"wrote {target / file}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
