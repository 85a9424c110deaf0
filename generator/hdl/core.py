"""The top module P_core: the fixed interface, the key store and the architecture's control.

The control is ordinary handshake logic; what a round computes comes from the `sub`, `mix` and
`keystep` modules. Every architecture keeps the same contract: a block enters on a rising edge
with in_valid && in_ready, results leave in order on a rising edge with out_valid && out_ready,
and a result not yet taken holds (out_block does not change while out_valid && !out_ready).
"""
from __future__ import annotations

from dataclasses import dataclass

from .datapath import J_BITS
from .spec import HdlSpec
from .structure import WORD_BITS, key_words
from .verilog import dec_const, module

PORTS = (
    "input  wire clk",
    "input  wire rst_n",
    "input  wire key_load",
    "input  wire [{kb}:0] key",
    "input  wire in_valid",
    "output wire in_ready",
    "input  wire [127:0] in_block",
    "output wire out_valid",
    "input  wire out_ready",
    "output wire [127:0] out_block",
)


@dataclass(frozen=True)
class Names:
    """The module names of one core's files."""
    prefix: str

    def __getattr__(self, role: str) -> str:
        if role.startswith("_"):
            raise AttributeError(role)
        return f"{self.prefix}_{role}"


def ports(spec: HdlSpec) -> tuple[str, ...]:
    return tuple(p.format(kb=spec.bits - 1) for p in PORTS)


def window_bits(spec: HdlSpec) -> int:
    return key_words(spec.bits) * WORD_BITS


def j_of(spec: HdlSpec, r: str | int) -> str:
    """The key window a round uses: round r encrypting, Nr - r decrypting (a Verilog expression)."""
    nr = spec.rounds
    if isinstance(r, int):
        return dec_const(J_BITS, nr - r if spec.decrypt else r)
    return f"{dec_const(J_BITS, nr)} - {r}" if spec.decrypt else r


def key_store(spec: HdlSpec, n: Names) -> list[str]:
    """key_ready, and `master` (otf: window 0 encrypting, window Nr decrypting) or rk[0..Nr]."""
    w = window_bits(spec)
    if spec.otf and not spec.decrypt:
        # An iterative core's window copies master while idle: ready one clock after that copy.
        settle = not spec.pipelined
        lines = [f"reg [{w - 1}:0] master;", "reg key_ready;"] + ["reg key_settle;"] * settle
        lines += ["always @(posedge clk) begin",
                  "  if (!rst_n) begin key_ready <= 1'b0;" + (" key_settle <= 1'b0;" if settle else "") + " end"]
        lines += (["  else begin key_settle <= key_load; key_ready <= key_settle | (key_ready & ~key_load); end"] if settle
                  else ["  else if (key_load) key_ready <= 1'b1;"])
        return lines + ["  if (key_load) master <= key;", "end"]
    nr = spec.rounds
    lines = ["// The key is expanded once per key_load, one window a clock (in_ready stays low meanwhile).",
             f"reg [{w - 1}:0] kwin;", f"reg [{J_BITS - 1}:0] kcnt;", "reg prep;", "reg key_ready;",
             f"wire [{w - 1}:0] kwin_next;", f"{n.keyfwd} u_kprep (.w(kwin), .j(kcnt), .w_next(kwin_next));"]
    if spec.otf:
        lines.append(f"wire [{w - 1}:0] master = kwin;  // window {nr}: decryption starts from the last round key")
    else:
        lines.append(f"reg [127:0] rk [0:{nr}];")
    lines += ["always @(posedge clk) begin",
              "  if (!rst_n) begin prep <= 1'b0; key_ready <= 1'b0; end",
              "  else if (key_load) begin prep <= 1'b1; key_ready <= 1'b0; end",
              f"  else if (prep && kcnt == {dec_const(J_BITS, nr)}) begin prep <= 1'b0; key_ready <= 1'b1; end",
              f"  if (key_load) begin kwin <= key; kcnt <= {dec_const(J_BITS, 0)}; end",
              f"  else if (prep && kcnt != {dec_const(J_BITS, nr)}) begin kwin <= kwin_next; kcnt <= kcnt + 1'b1; end"]
    if not spec.otf:
        lines.append(f"  if (prep) rk[kcnt] <= kwin[{w - 1}:{w - 128}];")
    lines.append("end")
    return lines


def first_key(window: str, width: int) -> str:
    """Round key j: the first four words of window j (a signal `width` bits wide)."""
    return window if width == 128 else f"{window}[{width - 1}:{width - 128}]"


def round_key(spec: HdlSpec, j: str, window: str | None) -> str:
    return first_key(str(window), window_bits(spec)) if spec.otf else f"rk[{j}]"


def whitening_key(spec: HdlSpec) -> str:
    return round_key(spec, j_of(spec, 0), "master")


def step_name(spec: HdlSpec, n: Names) -> str:
    return n.keyback if spec.decrypt else n.keyfwd


def iterative_body(spec: HdlSpec, n: Names) -> list[str]:
    """One block in flight. rnd is the next round to apply, 0 while idle, so round key j(rnd) is
    the whitening key whenever a block can be taken; with on-the-fly keys `win` is window j(rnd),
    back at the stored window after a block's last round. With one round a clock the mix module
    also takes the new block (in ^ k), so the state has no separate input multiplexer."""
    k, nr, w = spec.per_clock, spec.rounds, window_bits(spec)
    lines = key_store(spec, n) + [
        "", f"// The data path: a clock takes a block (whitening) or applies {k} round{'s' if k > 1 else ''}.",
        "reg [127:0] state;", f"reg [{J_BITS - 1}:0] rnd;", "reg busy;", "reg done;",
        "wire run = busy & ~done;", "wire give = done & out_ready;",
        "assign in_ready = key_ready & (~busy | give);", "wire take = in_valid & in_ready;",
        "assign out_valid = done;", "assign out_block = state;", "wire [127:0] s0 = state;",
        f"wire finish = run & (rnd == {dec_const(J_BITS, nr - k + 1)});"]
    if spec.otf:
        lines += [f"reg [{w - 1}:0] win;  // window j(rnd); the stored one (master) whenever no block runs",
                  f"wire [{w - 1}:0] v0 = win;", f"wire [{w - 1}:0] keep;",
                  "wire rest = finish | ~(take | run);  // the next clock starts from master"]
    for u in range(k):
        r = f"r{u}"
        key = round_key(spec, j_of(spec, r), f"v{u}")
        lines += [f"wire [{J_BITS - 1}:0] {r} = rnd + {dec_const(J_BITS, u)};", f"wire [127:0] b{u};",
                  f"wire [127:0] s{u + 1};", f"{n.sub} u_sub{u} (.x(s{u}), .y(b{u}));"]
        load = ".load(take), .in(in_block), " if k == 1 else ""
        lines.append(f"{n.mix_load if k == 1 else n.mix} u_mix{u} (.x(b{u}), .k({key}), "
                     f".last({r} == {dec_const(J_BITS, nr)}), {load}.y(s{u + 1}));")
        if spec.otf and u + 1 < k:
            lines += [f"wire [{w - 1}:0] v{u + 1};",
                      f"{step_name(spec, n)} u_step{u} (.w(v{u}), .j({j_of(spec, r)}), .w_next(v{u + 1}));"]
        elif spec.otf:
            lines.append(f"{step_name(spec, n)}_home u_step{u} (.w(v{u}), .j({j_of(spec, r)}), "
                         ".restore(rest), .home(master), .w_keep(keep));")
    state_next = f"s{k}" if k == 1 else f"take ? in_block ^ {round_key(spec, j_of(spec, 'r0'), 'v0')} : s{k}"
    lines += ["always @(posedge clk) begin",
              f"  if (!rst_n) begin busy <= 1'b0; done <= 1'b0; rnd <= {dec_const(J_BITS, 0)}; end",
              f"  else if (take) begin busy <= 1'b1; done <= 1'b0; rnd <= {dec_const(J_BITS, 1)}; end",
              "  else if (give) begin busy <= 1'b0; done <= 1'b0; end",
              f"  else if (run) begin rnd <= finish ? {dec_const(J_BITS, 0)} : rnd + {dec_const(J_BITS, k)}; "
              "done <= finish; end",
              f"  if (take | run) state <= {state_next};"]
    if spec.otf:
        lines += ["  win <= keep;"] if k == 1 else ["  if (take) win <= v1;", "  else win <= keep;"]
    lines.append("end")
    return lines


def pipelined_body(spec: HdlSpec, n: Names) -> list[str]:
    s, nr, w, spr = spec.stages, spec.rounds, window_bits(spec), spec.stages_per_round
    lines = key_store(spec, n) + [
        "", f"// The data path: {s} stages ({spr} a round); the whole pipe advances unless its last "
        "result waits.", f"reg [{s - 1}:0] valid;", f"wire adv = ~valid[{s - 1}] | out_ready;",
        "assign in_ready = key_ready & adv;", "wire take = in_valid & in_ready;",
        f"assign out_valid = valid[{s - 1}];", f"assign out_block = d{s};",
        f"wire [127:0] d0 = in_block ^ {whitening_key(spec)};"]
    regs = []
    if spec.otf:
        lines += [f"wire [{w - 1}:0] k0;", f"{step_name(spec, n)} u_step0 (.w(master), .j({j_of(spec, 0)}), .w_next(k0));"]
    width = w  # of the window signal a round reads (only the key is carried into the last round)
    for r in range(1, nr + 1):
        first, second = spr * (r - 1) + 1, spr * r
        into = f"d{first - 1}"
        window = f"k{first - 1}"
        if spr == 2:
            lines += [f"reg [127:0] d{first};", f"wire [127:0] b{first};", f"{n.sub} u_sub{r} (.x({into}), .y(b{first}));"]
            regs.append(f"d{first} <= b{first};")
            if spec.otf:  # the window rides along with the data
                lines.append(f"reg [{width - 1}:0] k{first};")
                regs.append(f"k{first} <= {window};")
                window = f"k{first}"
            sub_out = f"d{first}"
        else:
            sub_out = f"b{r}s"
            lines += [f"wire [127:0] {sub_out};", f"{n.sub} u_sub{r} (.x({into}), .y({sub_out}));"]
        rkey = first_key(window, width) if spec.otf else round_key(spec, j_of(spec, r), window)
        lines += [f"reg [127:0] d{second};", f"wire [127:0] m{r};",
                  f"{n.mix} u_mix{r} (.x({sub_out}), .k({rkey}), .last(1'b{int(r == nr)}), .y(m{r}));"]
        regs.append(f"d{second} <= m{r};")
        if spec.otf and r < nr:
            width = 128 if r + 1 == nr else w
            declare = [f"wire [{w - 1}:0] kn{r};"]
            if width < w:  # the words after the last round key are dropped on purpose
                declare = ["// verilator lint_off UNUSEDSIGNAL", *declare, "// verilator lint_on UNUSEDSIGNAL"]
            lines += [f"reg [{width - 1}:0] k{second};", *declare,
                      f"{step_name(spec, n)} u_step{r} (.w({window}), .j({j_of(spec, r)}), .w_next(kn{r}));"]
            regs.append(f"k{second} <= {first_key(f'kn{r}', w) if width == 128 else f'kn{r}'};")
    shift = f"{{valid[{s - 2}:0], take}}" if s > 1 else "take"
    lines += ["always @(posedge clk) begin",
              f"  if (!rst_n) valid <= {s}'d0;", f"  else if (adv) valid <= {shift};", "end",
              "always @(posedge clk) begin", "  if (adv) begin", *[f"    {x}" for x in regs], "  end", "end"]
    return lines


def core_module(spec: HdlSpec) -> str:
    n = Names(spec.prefix)
    body = pipelined_body(spec, n) if spec.pipelined else iterative_body(spec, n)
    what = "decryption" if spec.decrypt else "encryption"
    doc = (f"AES-{spec.bits} {what}, {spec.arch}"
           + (f" ({spec.stages_per_round} stage{'s' if spec.stages_per_round > 1 else ''} a round)" if spec.pipelined else "")
           + f", key schedule {spec.key_schedule}.",
           f"Latency {spec.latency()} clocks; steady state {spec.clocks_per_block():g} clock(s) a block with out_ready high.")
    return module(n.core, ports(spec), body, doc)
