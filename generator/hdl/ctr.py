"""P_ctr: CTR mode around P_core (the project's ctr32: the counter block's last four bytes,
big-endian, advance by one a block, mod 2^32, as the .S files' P_ctr32_encrypt does).

Its ports are P_core's plus the counter: `iv_load` (a one-cycle pulse while nothing is in flight,
like key_load) sets the counter block to `iv`. A text block is taken with in_valid && in_ready
(the core takes the counter block in the same clock); a FIFO as deep as the core can hold
blocks keeps the text until its keystream block leaves the core, in order.
"""
from __future__ import annotations

from .core import Names, ports
from .spec import HdlSpec
from .verilog import module


def capacity(spec: HdlSpec) -> int:
    """Blocks the core holds at most: one per stage when pipelined, else one."""
    return spec.stages if spec.pipelined else 1


def ctr_module(spec: HdlSpec) -> str:
    n = Names(spec.prefix)
    depth = max(2, 1 << (capacity(spec) - 1).bit_length())  # a power of two >= capacity
    aw = max(depth.bit_length() - 1, 1)
    core_ports = list(ports(spec))
    all_ports = core_ports[:5] + ["input  wire iv_load", "input  wire [127:0] iv"] + core_ports[5:]
    body = [
        "reg [127:0] ctr;",
        "wire core_in_ready, core_out_valid;",
        "wire [127:0] stream;",
        f"{n.core} u_core (.clk(clk), .rst_n(rst_n), .key_load(key_load), .key(key), .in_valid(in_valid),",
        "  .in_ready(core_in_ready), .in_block(ctr), .out_valid(core_out_valid), .out_ready(out_ready),",
        "  .out_block(stream));",
        "assign in_ready = core_in_ready;",
        "wire take = in_valid & core_in_ready;",
        "wire give = core_out_valid & out_ready;",
        f"reg [127:0] text [0:{depth - 1}];",
        f"reg [{aw}:0] head, tail;  // one bit more than an index: full and empty differ",
        "always @(posedge clk) begin",
        f"  if (!rst_n) begin head <= {aw + 1}'d0; tail <= {aw + 1}'d0; end",
        "  else begin",
        "    if (take) tail <= tail + 1'b1;",
        "    if (give) head <= head + 1'b1;",
        "  end",
        f"  if (take) text[tail[{aw - 1}:0]] <= in_block;",
        "  if (iv_load) ctr <= iv;",
        "  else if (take) ctr[31:0] <= ctr[31:0] + 32'd1;",
        "end",
        "assign out_valid = core_out_valid;",
        f"assign out_block = stream ^ text[head[{aw - 1}:0]];",
    ]
    doc = (f"AES-{spec.bits} CTR (ctr32) around {n.core}: out = in ^ E(counter); the counter's last 32 bits "
           "(big-endian) advance a block.",)
    return module(n.ctr, all_ports, body, doc)
