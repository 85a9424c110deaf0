// An independent testbench for any core aesgen hdl writes: it drives only the fixed interface of
// `CORE (a macro naming the top module), with random gaps on in_valid, random back-pressure on
// out_ready and random values on the buses while they are not valid. Each line of the file named
// by +vectors=PATH is one case in hex: key (KB bits), input block, expected output block. A new
// key is loaded (one key_load pulse) only when nothing is in flight. It prints "PASS n" when every
// result arrived, in order and equal to the file's, else "FAIL ..." lines.
`timescale 1ns/1ps
module tb;
  parameter KB = 128;       // key bits
  parameter N = 1;          // cases in the file
  parameter SEED = 1;
  parameter GAP = 30;       // percent of clocks in_valid is held low before a block
  parameter STALL = 40;     // percent of clocks out_ready is low
  parameter LIMIT = 2000000;

  reg clk = 1'b0;
  always #5 clk = ~clk;
  reg rst_n = 1'b0, key_load = 1'b0, in_valid = 1'b0, out_ready = 1'b0;
  reg [KB-1:0] key = {KB{1'b0}};
  reg [127:0] in_block = 128'd0;
`ifdef CTR
  localparam IVB = 128;
  reg iv_load = 1'b0;
  reg [127:0] iv = 128'd0;
`else
  localparam IVB = 0;
`endif
  wire in_ready, out_valid;
  wire [127:0] out_block;

  `CORE dut (.clk(clk), .rst_n(rst_n), .key_load(key_load), .key(key),
`ifdef CTR
             .iv_load(iv_load), .iv(iv),
`endif
             .in_valid(in_valid),
             .in_ready(in_ready), .in_block(in_block), .out_valid(out_valid), .out_ready(out_ready),
             .out_block(out_block));

  reg [KB+IVB+255:0] cases [0:N-1];
  reg [8*512-1:0] path;
  integer seed, cycle = 0, sent = 0, got = 0, errors = 0;
  reg have_key = 1'b0;
  reg [KB+IVB-1:0] loaded;
  integer first_in = -1, last_out = 0;
  reg held = 1'b0;
  reg [127:0] held_block;

  function [KB+IVB-1:0] setup_of(input integer i);  setup_of = cases[i][KB+IVB+255:256]; endfunction
  function [127:0] in_of(input integer i);    in_of = cases[i][255:128];     endfunction
  function [127:0] want_of(input integer i);  want_of = cases[i][127:0];     endfunction
  function chance(input integer percent);
    chance = ($random(seed) & 32'h7fffffff) % 100 < percent;
  endfunction

  initial begin
    seed = SEED;
    if (!$value$plusargs("vectors=%s", path)) begin
      $display("FAIL no +vectors=PATH");
      $finish;
    end
    $readmemh(path, cases);
  end

  always @(posedge clk) begin : step
    integer next;
    cycle = cycle + 1;
    if (cycle > LIMIT) begin
      $display("FAIL timeout: %0d sent, %0d received of %0d", sent, got, N);
      $finish;
    end
    if (cycle < 4) begin
      rst_n <= 1'b0;
    end else begin
      rst_n <= 1'b1;
      // What this edge transfers (the values before it).
      if (out_valid && got >= sent) begin
        $display("FAIL a result with nothing in flight at clock %0d", cycle);
        errors = errors + 1;
      end
      if (held && (!out_valid || out_block !== held_block)) begin
        $display("FAIL a result waiting for out_ready changed or vanished at clock %0d", cycle);
        errors = errors + 1;
      end
      held = out_valid && !out_ready;
      held_block = out_block;
      if (in_valid && in_ready) begin
        if (first_in < 0) first_in = cycle;
        sent = sent + 1;
      end
      if (out_valid && out_ready) begin
        if (out_block !== want_of(got)) begin
          if (errors < 10) $display("FAIL case %0d: got %h, want %h", got, out_block, want_of(got));
          errors = errors + 1;
        end
        got = got + 1;
        last_out = cycle;
      end
      if (got == N) begin
        if (errors == 0) $display("PASS %0d in %0d clocks", N, last_out - first_in);
        else $display("FAIL %0d errors in %0d cases", errors, N);
        $finish;
      end
      // What the next edge sees.
      key_load <= 1'b0;
      key <= {(KB + 31) / 32 {$random(seed)}};
`ifdef CTR
      iv_load <= 1'b0;
      iv <= {4{$random(seed)}};
`endif
      out_ready <= !chance(STALL);
      if (!(in_valid && !in_ready)) begin
        next = sent;
        in_valid <= 1'b0;
        in_block <= {4{$random(seed)}};
        if (next < N) begin
          if (!have_key || setup_of(next) !== loaded) begin
            if (got == sent && !key_load) begin
              key_load <= 1'b1;
              key <= setup_of(next) >> IVB;  // the top KB bits
              loaded = setup_of(next);
`ifdef CTR
              iv_load <= 1'b1;
              iv <= setup_of(next);  // the low 128 bits
`endif
              have_key = 1'b1;
            end
          end else if (!chance(GAP)) begin
            in_valid <= 1'b1;
            in_block <= in_of(next);
          end
        end
      end
    end
  end
endmodule
