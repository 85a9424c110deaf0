"""tb_P.v: a smoke testbench shipped beside a core, one known answer through the fixed interface.

The answer is given by the caller (the tools pass FIPS-197 Appendix C from the verifier's
vectors); the test suite drives cores with its own, independent testbench.
"""
from __future__ import annotations

from .spec import HdlSpec


def testbench(spec: HdlSpec, vector: tuple[bytes, bytes, bytes]) -> str:
    key, plain, cipher = vector
    given, want = (cipher, plain) if spec.decrypt else (plain, cipher)
    kb = spec.bits
    return f"""`timescale 1ns/1ps
module tb_{spec.prefix};
  reg clk = 1'b0;
  always #5 clk = ~clk;
  reg rst_n = 1'b0, key_load = 1'b0, in_valid = 1'b0, out_ready = 1'b0;
  reg [{kb - 1}:0] key = {kb}'h{key.hex()};
  reg [127:0] in_block = 128'h{given.hex()};
  wire in_ready, out_valid;
  wire [127:0] out_block;
  {spec.prefix}_core dut (.clk(clk), .rst_n(rst_n), .key_load(key_load), .key(key), .in_valid(in_valid),
    .in_ready(in_ready), .in_block(in_block), .out_valid(out_valid), .out_ready(out_ready), .out_block(out_block));
  initial begin
    repeat (2) @(negedge clk);
    rst_n = 1'b1;
    @(negedge clk) key_load = 1'b1;
    @(negedge clk) key_load = 1'b0;
    in_valid = 1'b1;
    while (!in_ready) @(negedge clk);
    @(negedge clk) in_valid = 1'b0;
    out_ready = 1'b1;
    while (!out_valid) @(negedge clk);
    if (out_block === 128'h{want.hex()}) $display("PASS {spec.prefix}_core: %h", out_block);
    else $display("FAIL {spec.prefix}_core: %h, want {want.hex()}", out_block);
    $finish;
  end
  initial begin
    #100000 $display("FAIL {spec.prefix}_core: no result");
    $finish;
  end
endmodule
"""
