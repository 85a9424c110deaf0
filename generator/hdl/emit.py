"""One core's files: name -> Verilog text, in a fixed order, byte-identical on every run."""
from __future__ import annotations

from ..circuits import load
from .core import Names, core_module
from .ctr import ctr_module
from .datapath import keystep_module, mix_module, sub_module
from .sbox import circuit_module, table_module
from .spec import HdlSpec
from .testbench import testbench
from .verilog import header


def sbox_file(spec: HdlSpec, name: str, inverse: bool) -> str:
    circuit = spec.circuit(inverse)
    return circuit_module(name, circuit) if circuit else table_module(name, inverse)


def sbox_note(spec: HdlSpec, inverse: bool) -> str:
    circuit = spec.circuit(inverse)
    if circuit is None:
        return "table (a case statement of aesref's table)"
    m = load(circuit).metrics()
    return f"circuit {circuit} ({m.gates} gates, {m.nonlinear} nonlinear, depth {m.depth})"


def notes(spec: HdlSpec) -> list[str]:
    lines = [f"Core:      AES-{spec.bits} {'decryption' if spec.decrypt else 'encryption'}, --arch {spec.arch}"
             + (f", {spec.stages_per_round} stage(s) a round" if spec.pipelined else ""),
             f"Timing:    latency {spec.latency()} clocks, {spec.clocks_per_block():g} clock(s) a block (out_ready high)",
             f"S-box:     {sbox_note(spec, False)}"]
    if spec.decrypt:
        lines.append(f"Inverse:   {sbox_note(spec, True)}")
    lines += [f"Keys:      {spec.key_schedule}" + (" (one window step a round, beside the data)" if spec.otf
                                                   else " (round keys expanded once per key_load, kept in registers)"),
              "Interface: see P_core's ports; a block is taken on in_valid && in_ready, a result given on",
              "           out_valid && out_ready, in order; key_load only while nothing is in flight."]
    return lines


def generate(spec: HdlSpec, smoke: tuple[bytes, bytes, bytes], out_dir: str = "DIR") -> dict[str, str]:
    """The files of one core, keyed by file name; the header's command names `out_dir`; `smoke`
    (key, plaintext, ciphertext) is the known answer tb_P.v checks."""
    n = Names(spec.prefix)
    cmd = spec.command(out_dir)
    data_sbox = n.inv_sbox if spec.decrypt else n.sbox
    # Every module a core could use, in file order; only those instantiated are written.
    candidates = [(n.ctr, lambda: ctr_module(spec))] if spec.ctr else []
    candidates += [
        (n.core, lambda: core_module(spec)),
        (n.sub, lambda: sub_module(n.sub, data_sbox, spec.decrypt)),
        (n.mix, lambda: mix_module(n.mix, spec.decrypt)),
        (n.mix_load, lambda: mix_module(n.mix_load, spec.decrypt, load=True)),
        (n.keyfwd, lambda: keystep_module(n.keyfwd, n.sbox, spec.bits, backward=False)),
        (n.keyfwd_home, lambda: keystep_module(n.keyfwd_home, n.sbox, spec.bits, backward=False, home=True)),
        (n.keyback, lambda: keystep_module(n.keyback, n.sbox, spec.bits, backward=True)),
        (n.keyback_home, lambda: keystep_module(n.keyback_home, n.sbox, spec.bits, backward=True, home=True)),
        (n.sbox, lambda: sbox_file(spec, n.sbox, False)),
        (n.inv_sbox, lambda: sbox_file(spec, n.inv_sbox, True)),
    ]
    modules: list[tuple[str, str]] = []
    for name, build in candidates:
        if not modules or any(f"{name} u_" in text for _, text in modules):
            modules.append((name, build()))
    title = f"aesgen hdl: {n.core} and its submodules (Verilog-2005)"
    files = {f"{name}.v": header(title, cmd, notes(spec)) + "\n" + text for name, text in modules}
    files[f"tb_{spec.prefix}.v"] = header(f"aesgen hdl: a smoke testbench of {n.core} (FIPS-197 Appendix C)", cmd) + \
        "\n" + testbench(spec, smoke)
    return files
