"""The S-box as a Verilog module: a circuit of the circuits library as one assign per gate, or
the table aesref computes as a case statement (for the synthesizer to map to LUTs or ROM)."""
from __future__ import annotations

from ..aesref import inv_sbox, sbox
from ..circuits import load
from ..circuits.netlist import Circuit, Gate
from .verilog import hex_const, module

PORTS = ("input  wire [7:0] x", "output wire [7:0] y")


def wire_name(circuit: Circuit, name: str) -> str:
    """Circuit inputs are the bits of x (U0 the top bit), everything else a wire g_NAME."""
    if name in circuit.inputs:
        return f"x[{7 - circuit.inputs.index(name)}]"
    return f"g_{name}"


def gate_expr(circuit: Circuit, g: Gate) -> str:
    a = [wire_name(circuit, s) for s in g.ins]
    if g.op == "XOR":
        return f"{a[0]} ^ {a[1]}"
    if g.op == "XNOR":
        return f"~({a[0]} ^ {a[1]})"
    if g.op == "AND":
        return f"{a[0]} & {a[1]}"
    if g.op == "OR":
        return f"{a[0]} | {a[1]}"
    if g.op == "NOT":
        return f"~{a[0]}"
    minterms = [f"({'' if i & 4 else '~'}{a[0]} & {'' if i & 2 else '~'}{a[1]} & {'' if i & 1 else '~'}{a[2]})"
                for i in range(8) if (g.table or 0) >> i & 1]
    return " | ".join(minterms) if minterms else "1'b0"


def circuit_module(name: str, circuit_name: str) -> str:
    c = load(circuit_name)
    m = c.metrics()
    # One always block in gate order: a simulator evaluates the circuit once per input change
    # (continuous assigns let glitches run through the reconvergent XOR network many times).
    body = [f"reg g_{g.out};" for g in c.gates]
    body += ["always @* begin", *[f"  g_{g.out} = {gate_expr(c, g)};" for g in c.gates], "end"]
    body.append(f"assign y = {{{', '.join(wire_name(c, out) for out in c.outputs)}}};")
    doc = (f"S-box from circuit {c.name} of the circuits library: {m.gates} gates "
           f"({', '.join(f'{n} {op}' for op, n in m.by_op.items())}), depth {m.depth}.",
           "x[7] is the circuit's input U0, y[7] its output S0.")
    return module(name, PORTS, body, doc)


def table_module(name: str, inverse: bool) -> str:
    table = inv_sbox() if inverse else sbox()
    body = ["reg [7:0] t;", "assign y = t;", "always @* begin", "  case (x)"]
    body += [f"    {hex_const(8, i)}: t = {hex_const(8, v)};" for i, v in enumerate(table)]
    body += ["    default: t = 8'h00;", "  endcase", "end"]
    doc = (f"The {'inverse ' if inverse else ''}S-box as a table (aesref: inversion in GF(2^8), then the "
           "FIPS-197 affine map), one case per byte.",)
    return module(name, PORTS, body, doc)
