"""The round and the key step as Verilog modules, wired from the facts of `structure`.

`sub`: (Inv)ShiftRows as wiring, then 16 S-box instances. `mix`: (Inv)MixColumns as the XOR of
the input bits its GF(2) matrix lists, and AddRoundKey; on the last round the matrix is skipped.
`keystep`: one step of the key window, forward or backward, with one shared SubWord.
"""
from __future__ import annotations

from .structure import (WORD_BITS, WordRule, backward_rules, byte_bit, column_matrix, forward_rules,
                        key_words, rounds, row_permutation)
from .verilog import dec_const, hex_const, module, xor

BLOCK_PORTS = ("input  wire [127:0] x", "output wire [127:0] y")
J_BITS = 4  # window index 0..14


def byte_slice(vec: str, byte: int, nbytes: int = 16) -> str:
    lo = byte_bit(byte, 0, nbytes)
    return f"{vec}[{lo + 7}:{lo}]"


def sub_module(name: str, sbox_name: str, decrypt: bool) -> str:
    perm = row_permutation(decrypt)
    body = [f"{sbox_name} u_s{b} (.x({byte_slice('x', perm[b])}), .y({byte_slice('y', b)}));" for b in range(16)]
    doc = (f"{'InvShiftRows' if decrypt else 'ShiftRows'} (wiring: out byte b is in byte perm[b], from aesref), "
           f"then {'InvSubBytes' if decrypt else 'SubBytes'}: 16 {sbox_name}.",)
    return module(name, BLOCK_PORTS, body, doc)


def matrix_assigns(dst: str, src: str, decrypt: bool) -> list[str]:
    """reg dst = (Inv)MixColumns(src), a bit a line in one always block (a simulator evaluates it
    once per change of src, not once per bit)."""
    rows = column_matrix(decrypt)
    lines = [f"reg [127:0] {dst};", "always @* begin"]
    for c in range(4):
        for o in range(32):
            terms = [f"{src}[{byte_bit(4 * c + i // 8, i % 8)}]" for i in rows[o]]
            lines.append(f"  {dst}[{byte_bit(4 * c + o // 8, o % 8)}] = {xor(terms)};")
    return lines + ["end"]


def mix_module(name: str, decrypt: bool, load: bool = False) -> str:
    """With `load`, the module also takes a new block: y = in ^ k (the whitening) when load is
    high, so an iterative core needs no separate input multiplexer in front of its state."""
    ports = ["input  wire [127:0] x", "input  wire [127:0] k", "input  wire last"]
    ports += ["input  wire load", "input  wire [127:0] in"] if load else []
    ports.append("output wire [127:0] y")
    if decrypt:
        body = ["wire [127:0] t = x ^ k;", *matrix_assigns("m", "t", True),
                f"assign y = {'load ? in ^ k : ' if load else ''}last ? t : m;"]
        doc = ("AddRoundKey, then InvMixColumns (skipped in the last round): the standard inverse cipher's order.",)
    else:
        body = [*matrix_assigns("m", "x", False),
                f"assign y = ({'load ? in : ' if load else ''}last ? x : m) ^ k;"]
        doc = ("MixColumns (skipped in the last round), then AddRoundKey.",)
    doc += ("MixColumns bit o of a column is the XOR of the input bits its GF(2) matrix lists "
            "(derived from aesref.mix_columns on unit columns).",)
    return module(name, ports, body, doc)


# -- the key step ---------------------------------------------------------------------------
def word_slice(vec: str, q: int, nk: int) -> str:
    hi = nk * WORD_BITS - 1 - WORD_BITS * q
    return f"{vec}[{hi}:{hi - WORD_BITS + 1}]"


def step_rules(bits: int, backward: bool) -> dict[int, tuple[WordRule, ...]]:
    """Window index j -> the rules of the step from it, over the windows a core steps from."""
    nk, nr = key_words(bits), rounds(bits)
    if backward:
        return {j: backward_rules(j, nk) for j in range(1, nr + 1)}
    return {j: forward_rules(j, nk) for j in range(nr)}


def keystep_module(name: str, sbox_name: str, bits: int, backward: bool, home: bool = False) -> str:
    nk = key_words(bits)
    width = nk * WORD_BITS
    table = step_rules(bits, backward)
    order = next(iter(table.values()))

    def pos(q: int) -> str:
        """A window position: a word of w, or a new word (n_p) of this step."""
        if backward and q < 0:
            return f"n{q + 4}"
        if not backward and q >= nk:
            return f"n{q - nk}"
        return f"w{q}"

    specials = {j: [r.p for r in rules if r.kind != "plain"] for j, rules in table.items()}
    assert all(len(s) <= 1 for s in specials.values()), "one SubWord a step"
    candidates = sorted({p for s in specials.values() for p in s})
    body = [f"wire [31:0] w{q} = {word_slice('w', q, nk)};" for q in range(nk)]
    # The SubWord input assuming every other word of the step plain: true, as a step has one special word.
    srcs = {r.p: pos(r.src).replace("n", "p") for r in order}
    needed = plain_chain(order, srcs, {srcs[p] for p in candidates})
    body += [f"wire [31:0] p{r.p} = {pos(r.base)} ^ {srcs[r.p]};" for r in order if f"p{r.p}" in needed]
    muxed = len(candidates) > 1
    assert len(candidates) <= 2, "a one-bit SubWord input select"
    controls = {}
    for j, rules in table.items():
        r = next(r for r in rules if r.kind != "plain") if specials[j] else None
        controls[j] = {"sel": f"1'd{candidates.index(r.p) if r and muxed else 0}",
                       "rot": f"1'b{int(bool(r) and r.kind == 'rotsub')}",
                       "rc": hex_const(8, r.rcon if r else 0),
                       "hit": f"4'b{(1 << (3 - r.p)) if r else 0:04b}"}
    body += control_logic(controls, {"sel": 1, "rot": 1, "rc": 8, "hit": 4}, skip=() if muxed else ("sel",))
    mux = srcs[candidates[0]]
    for i, p in enumerate(candidates[1:], 1):
        mux = f"sel ? {srcs[p]} : {mux}"
    body += [f"wire [31:0] sin = {mux};", "wire [31:0] rin = rot ? {sin[23:0], sin[31:24]} : sin;",
             "wire [31:0] sout;"]
    body += [f"{sbox_name} u_s{b} (.x(rin[{31 - 8 * b}:{24 - 8 * b}]), .y(sout[{31 - 8 * b}:{24 - 8 * b}]));"
             for b in range(4)]
    body.append("wire [31:0] t = sout ^ {rc, 24'h000000};")
    body += [f"wire [31:0] n{r.p} = {pos(r.base)} ^ (hit[{3 - r.p}] ? t : {pos(r.src)});" for r in order]
    words = ([f"n{p}" for p in range(4)] + [f"w{q}" for q in range(nk - 4)] if backward
             else [f"w{q}" for q in range(4, nk)] + [f"n{p}" for p in range(4)])
    ports = [f"input  wire [{width - 1}:0] w", f"input  wire [{J_BITS - 1}:0] j"]
    if home:  # the window to return to after a block's last round, chosen here beside the XORs
        ports += ["input  wire restore", f"input  wire [{width - 1}:0] home", f"output wire [{width - 1}:0] w_keep"]
        body += [f"wire [{width - 1}:0] w_next = {{{', '.join(words)}}};", "assign w_keep = restore ? home : w_next;"]
    else:
        ports.append(f"output wire [{width - 1}:0] w_next")
        body.append(f"assign w_next = {{{', '.join(words)}}};")
    doc = (f"AES-{bits} key window step {'backward (j -> j-1)' if backward else 'forward (j -> j+1)'}: "
           f"the window j is words w[4j .. 4j+{nk - 1}];",
           "round key j is its first four words (FIPS-197 KeyExpansion, rcon from aesref).")
    return module(name, ports, body, doc)



def plain_chain(order: tuple[WordRule, ...], srcs: dict[int, str], roots: set[str]) -> set[str]:
    """The plain-chain words p_i the SubWord's candidate inputs read, directly or through others."""
    needed = {r for r in roots if r.startswith("p")}
    for r in reversed(order):
        if f"p{r.p}" in needed and srcs[r.p].startswith("p"):
            needed.add(srcs[r.p])
    return needed


def control_logic(values: dict[int, dict[str, str]], widths: dict[str, int], skip: tuple[str, ...]) -> list[str]:
    """Per window index j, the step's control signals: a constant wire where no j changes it,
    else a case on j whose default is its commonest value."""
    lines, varying = [], []
    for sig, width in widths.items():
        if sig in skip:
            continue
        seen = [v[sig] for v in values.values()]
        if len(set(seen)) == 1:
            lines.append(f"wire {f'[{width - 1}:0] ' if width > 1 else ''}{sig} = {seen[0]};")
        else:
            varying.append(sig)
            lines.append(f"reg {f'[{width - 1}:0] ' if width > 1 else ''}{sig};")
    if not varying:
        return lines
    common = {sig: max(sorted({v[sig] for v in values.values()}), key=[v[sig] for v in values.values()].count)
              for sig in varying}
    lines += ["always @* begin", "  " + " ".join(f"{sig} = {common[sig]};" for sig in varying), "  case (j)"]
    for j, v in values.items():
        changes = [f"{sig} = {v[sig]};" for sig in varying if v[sig] != common[sig]]
        if changes:
            lines.append(f"    {dec_const(J_BITS, j)}: begin {' '.join(changes)} end")
    lines += ["    default: ;", "  endcase", "end"]
    return lines
