"""`aesgen probe`: the main loops of a generated file timed by themselves on this CPU, whole and
with each port class left out, beside the AES/CLMUL bound and llvm-mca's model of the same text."""
from __future__ import annotations

import shutil
import subprocess

from rich.table import Table

from ..bench.loop_probe import ProbeResult, measure
from ..dsl import BuildError
from ..functions import TIMED_FUNCTIONS, mode_of
from ..mainloop import main_loop
from ..pipeline import generate
from ..spec import KernelSpec
from ..target import cpu_signature, native
from .explore import LLVM_MCA, llvm_mca
from .report import console


def probed_functions(spec: KernelSpec) -> list[str]:
    """The timed functions of the file's modes (what `aesgen bench` times); for a mode the bench
    does not time (cfb, halfgates), its own functions."""
    return [f for m in spec.modes for f in TIMED_FUNCTIONS.get(m) or
            [g for g in spec.functions if mode_of(g) == m and not g.endswith("set_key")] if f in spec.functions]


def mca_cycles(text: str) -> tuple[str, float] | None:
    """llvm-mca's cycles per iteration on its model of this CPU (the target it is modelled as)."""
    cpu = native().llvm_mca_cpu
    if not cpu or not any(shutil.which(t) for t in LLVM_MCA):
        return None
    return cpu, llvm_mca(text, cpu)


def table(function: str, spec: KernelSpec, key_bits: int, result: ProbeResult, mca) -> Table:
    vendor, family, model, _ = cpu_signature()
    t = Table(title=f"{function} main loop, AES-{key_bits}, {spec.isa} {spec.width_for(mode_of(function))}-bit: "
                    f"held still on {vendor} family {family} model {model}")
    for col in ("variant", "instructions", "cycles/iteration", "of the AES+CLMUL bound"):
        t.add_column(col, justify="left" if col == "variant" else "right")
    for variant, cycles in result.variants:
        best, worst = min(cycles), max(cycles)
        share = f"{100 * result.bound / best:.0f}%" if result.bound else "n/a"
        t.add_row(variant.name, str(variant.instructions), f"{best:.1f} (..{worst:.1f})", share)
    if result.bound:
        t.add_row("AES+CLMUL instructions alone", "", f"{result.bound:.1f}", "100%")
    if mca:
        cpu, cycles = mca
        t.add_row(f"llvm-mca -mcpu={cpu}, as generated", "", f"{cycles:.1f}",
                  f"{100 * result.bound / cycles:.0f}%" if result.bound else "n/a")
    return t


def run(spec: KernelSpec, key_bits: int) -> None:
    asm = generate(spec).asm
    for function in probed_functions(spec):
        try:
            loop = main_loop(asm, function, key_bits)
        except BuildError:
            console.print(f"{function}: no loop to time")
            continue
        try:
            result = measure(loop)
        except subprocess.CalledProcessError as e:
            raise BuildError(f"{function}: its loop body did not run by itself ({e.returncode}); "
                             "the probe cannot hold this loop still") from None
        console.print(table(function, spec, key_bits, result, mca_cycles(loop.text())))
    console.print("cycles: fastest of 101 runs of 500 iterations, three times in alternation (the range "
                  "after it: the slowest of those three); pointers held still (\'pointers advancing\': they step "
                  "through 16 KiB and start over), data constant; a variant leaves "
                  "one port class out (perfmodel's classes); the bound runs the loop's vaesenc and "
                  "vpclmulqdq alone, together (docs/tuning.md, 'Loops timed by themselves')")
