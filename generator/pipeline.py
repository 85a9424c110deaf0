"""The pipeline: kernels (DSL) -> lower -> schedule -> regalloc -> isa -> templates.

`generate(spec)` returns the `.S` text, the `.h` text and the list of iced
instructions in `.text` order (what the round-trip check compares with the
assembled object).
"""
from __future__ import annotations

import hashlib
import textwrap
from dataclasses import dataclass, field
from importlib import resources
from typing import Callable, TypeVar

import jinja2
from iced_x86 import Instruction

from . import __version__
from .bitsliced_code import circuit_pass
from .dsl import BuildError, key_bits
from .functions import FUNCTIONS, MODE_TITLES
from .ir import Branch, Const, Function, GroupBlock, Insn, Label, Mark, MarkKind, Path, pinned_vregs
from .isa import Assembler, Emitted
from .kernels import build_function, build_functions
from .list_schedule import list_schedule, target_costs
from .lower import Lowerer
from .regalloc import Allocation, RegisterPressure, allocate_path
from .schedule import flatten
from .spec import MULTIKEY_BYTES, SPEC_MARKER, KernelSpec
from .target import load as load_target
from .unwind import Unwind
from .win64 import Directive, bytes_below_rsp, check_body, wrap as wrap_win64

T = TypeVar("T")

ISA_LINES = {
    "sse": "sse: legacy AES-NI, two-operand SSE encoding, 16 xmm registers",
    "avx": "avx: VEX-encoded AES-NI, three-operand, 16 xmm registers",
    "avx2": "avx2: VEX-encoded VAES on ymm, 16 registers",
    "avx512": "avx512: VAES with EVEX where needed, 32 registers, opmask tails",
}


def isa_line(spec: KernelSpec) -> str:
    if spec.backend != "bitsliced":
        return ISA_LINES[spec.isa]
    regs = spec.vector_registers
    return (f"{spec.isa}: bitsliced AES from logic ops and byte shuffles ({circuit_pass(spec)} S-box "
            f"circuit), {regs} registers; no AES-NI")


@dataclass
class GeneratedKernel:
    spec: KernelSpec
    asm: str
    header: str
    instructions: list[Instruction] = field(default_factory=list)
    register_notes: list[str] = field(default_factory=list)


# The preprocessor condition around a file's code, and what it names: the code assembles only
# where it belongs, so a multi-arch build that compiles every .S gets an empty object elsewhere.
ARCH_GUARDS = {
    ("sysv", "elf"): ("x86-64 ELF", "defined(__x86_64__) && defined(__ELF__)"),
    ("sysv", "macho"): ("x86-64 Mach-O (macOS)", "defined(__x86_64__) && defined(__APPLE__)"),
    # COFF under MinGW (_WIN32, no __ELF__), ELF for testing on Linux
    ("win64", "elf"): ("x86-64 COFF (Windows) or ELF",
                       "defined(__x86_64__) && (defined(__ELF__) || defined(_WIN32))"),
}


def red_zone_note(spec: KernelSpec, below_rsp: dict[str, int], c_names: bool = False) -> str:
    """What the file's functions do below rsp (SysV files; win64 has no red zone), for the
    headers of the .S and the .h; below_rsp: function -> bytes, from the emitted code."""
    if not below_rsp:
        why = "--no-red-zone: " if spec.no_red_zone else ""
        return f"not used ({why}no function touches memory below the stack pointer)"
    by_size: dict[int, list[str]] = {}
    for fn, n in below_rsp.items():
        by_size.setdefault(n, []).append(spec.symbol(fn) if c_names else fn)
    uses = "; ".join(f"{', '.join(fns)} use{'s' if len(fns) == 1 else ''} {n} bytes below the stack pointer"
                     for n, fns in by_size.items())
    return (f"{uses} (the SysV red zone; wiped before return). Code that runs where the red zone is not "
            f"kept (an OS kernel built with -mno-red-zone) needs a --no-red-zone file.")


def command_line(spec: KernelSpec, output: str = "FILE.S") -> str:
    per_mode = "".join(f" --per-mode {m}={w}x{d}" for m, w, d in spec.overrides)
    per_mode += " --karatsuba" if spec.karatsuba else ""
    per_mode += f" --gfmul {spec.gfmul}" if spec.gfmul != spec.default_gfmul else ""
    per_mode += f" --gfdouble {spec.gfdouble}" if spec.gfdouble else ""
    per_mode += " --allow-table-lookups" if spec.table_lookups else ""
    per_mode += " --no-ternlog" if spec.no_ternlog else ""
    per_mode += " --no-red-zone" if spec.no_red_zone else ""
    per_mode += " --hidden" if spec.hidden else ""
    per_mode += f" --format {spec.object_format}" if spec.object_format != "elf" else ""
    per_mode += f" --abi {spec.abi}" if spec.abi != "sysv" else ""
    per_mode += f" --schedule list:{spec.schedule}" if spec.schedule else ""
    return (f"aesgen generate {','.join(spec.modes)} --isa {spec.isa} --width {spec.width} "
            f"--depth {spec.depth}{per_mode} --backend {spec.backend} --prefix {spec.prefix} -o {output}")


def prototype(spec: KernelSpec, fn: Function) -> str:
    """The C prototype, from the function's record; win64 files mark the convention
    (AESGEN_MS_ABI, defined in the header)."""
    convention = "AESGEN_MS_ABI " if spec.abi == "win64" else ""
    return FUNCTIONS[fn.name].prototype(convention + spec.symbol(fn.name))


def _constants(functions: list[Function]) -> dict[str, Const]:
    found: dict[str, Const] = {}

    def scan(items: list) -> None:
        for it in items:
            if isinstance(it, GroupBlock):
                for s in it.streams + it.finals + [it.riders]:
                    scan(s)
            elif isinstance(it, Insn):
                for o in it.srcs:
                    if isinstance(o, Const):
                        found.setdefault(o.name, o)

    for fn in functions:
        scan(fn.entry)
        for p in fn.paths:
            scan(p.items)
    return dict(sorted(found.items()))


def _const_rows(data: bytes) -> list[str]:
    return [", ".join(f"0x{b:02x}" for b in data[i:i + 16]) for i in range(0, len(data), 16)]


def const_alignment(size: int) -> int:
    """log2 of a constant's alignment: its size's largest power of two, at most a cache line, so a
    vector load of the whole constant never splits a line (a ymm constant after an xmm one sat
    16 bytes off: one split load a batch cost CTR32 4% on Golden Cove)."""
    return min(6, size.bit_length() - 1)


CONST_COMMENTS = {
    "bswap": "pshufb control: reverse the bytes of each 128-bit lane",
    "lane_index": "lane l: l in dword 0 (consecutive counters across lanes)",
    "ctr_step": "added to dword 0 of each lane: advance every lane's counter",
    "msb_clear": "every bit but bit 7 of byte 15 (GCM-SIV's tag input)",
    "msb_set": "bit 7 of byte 15 (GCM-SIV's counter block)",
}


class FunctionEmitter:
    def __init__(self, spec: KernelSpec, asm: Assembler) -> None:
        self.spec, self.asm = spec, asm
        self.nregs = spec.vector_registers
        self.notes: list[str] = []
        self.red_zone: dict[str, int] = {}  # function -> bytes it uses below rsp (SysV red zone)

    def path_items(self, fn: Function, path: Path, lower: Lowerer, emit: bool = True) -> list:
        lowered = lower.items(path.items)
        what = f"{fn.name}" + (f" (AES-{key_bits(path.nr)})" if path.nr else "")
        keys = path.schedule

        def allocate(items: list) -> Allocation:
            return allocate_path(items, nregs=self.nregs, legacy=self.spec.isa == "sse",
                                 key_base=keys.base if keys else fn.key_base,
                                 key_stride=keys.stride if keys else self.spec.key_stride, width=fn.width,
                                 what=what, key_disp=keys.disp if keys else 0,
                                 key_aligned=keys.aligned if keys else True, emit=emit)
        alloc = None
        if self.spec.schedule:  # list-scheduled; where that needs more registers than lockstep, lockstep
            try:
                alloc = allocate(flatten(lowered, self.scheduler(lowered)))
            except RegisterPressure:
                alloc = None
        if alloc is None:
            alloc = allocate(flatten(lowered))
        if alloc.key_regs or alloc.spilled_keys:
            how = "loaded once per round, shared by the groups" if alloc.shared_key_loads else "as memory operands"
            mem = f"; keys {','.join(map(str, alloc.spilled_keys))} {how}" if alloc.spilled_keys else ""
            self.notes.append(f"{what}: {alloc.registers_used} vector registers, "
                              f"{len(alloc.key_regs)} round keys in registers{mem}")
        return alloc.insns

    def scheduler(self, items: list) -> Callable[[GroupBlock], list[Insn]]:
        """The list scheduler for the spec's target, leaving a register for a shared round key
        beside the path's pinned values."""
        costs = target_costs(load_target(self.spec.schedule))
        pinned = pinned_vregs(items)
        return lambda block: list_schedule(block, costs, self.nregs - len(pinned) - 1)

    def function(self, fn: Function) -> tuple[list[str], list[Emitted]]:
        lower = Lowerer(self.spec, fn.width)
        items: list = [Insn("endbr64")] + flatten(lower.items(fn.entry))
        for path in fn.paths:
            items.extend(self.path_items(fn, path, lower))
        win64 = self.spec.abi == "win64"
        if bytes_below_rsp(items):
            if self.spec.no_red_zone:
                check_body(items, "--no-red-zone")
            self.red_zone[fn.name] = bytes_below_rsp(items)
        if win64:
            items = wrap_win64(items, len(fn.args), f"{self.spec.prefix}_{fn.name}")

        def directive(text: str, flavour: str = "elf") -> str:
            """ELF-only (CFI) or COFF-only (SEH) lines; a win64 file is preprocessed for either."""
            return f"\tAESGEN_{flavour.upper()}({text.strip()})" if win64 else text

        lines, emitted = [], []
        unwind = Unwind(fn.name)
        heads = loop_heads(items)
        for it in items:
            if isinstance(it, Directive):
                lines.append(directive(it.text, it.flavour))
                continue
            cfi = [directive(f"\t{d}") for d in unwind.item(it)]
            e = self.asm.emit(it)
            emitted.append(e)
            if e.label:
                lines += [f"\t.p2align {LOOP_ALIGN}"] * (isinstance(it, Label) and it.name in heads) + [e.text, *cfi]
                continue
            text = f"\t{e.text}"
            if e.comment:
                text = f"{text:<47} # {e.comment}"
            lines += [text.rstrip(), *cfi]
        return lines, emitted


# Loop heads start on a 32-byte boundary (as the functions do): where a loop sits otherwise
# depends on all the code before it, and an unrelated change then moved GCM's single-vector
# loop across a line and read its 256-byte decryption 10% slower (family 6 model 207,
# 2026-11-28; the same code at two places in one binary: 67 and 74 TSC ticks). The padding
# runs once, on the way into the loop.
LOOP_ALIGN = 5


def loop_heads(items: list) -> set[str]:
    """Labels a later branch jumps back to."""
    seen: set[str] = set()
    heads: set[str] = set()
    for it in items:
        if isinstance(it, Label):
            seen.add(it.name)
        elif isinstance(it, Branch) and it.target in seen:
            heads.add(it.target)
    return heads


def template_environment() -> jinja2.Environment:
    """The Jinja environment over aesgen/templates/ that renders the kernel files and the export folder."""
    loader = jinja2.FunctionLoader(
        lambda name: resources.files("aesgen.templates").joinpath(name).read_text(encoding="utf-8"))
    return jinja2.Environment(loader=loader, keep_trailing_newline=True, trim_blocks=False,
                              undefined=jinja2.StrictUndefined, autoescape=False)


def _resolve_branches(emitted: list[Emitted]) -> list[Instruction]:
    """Give each instruction its index as ip and point branches at their label's instruction."""
    out: list[Instruction] = []
    label_at: dict[str, int] = {}
    for e in emitted:
        if e.label:
            label_at[e.label] = len(out)
        elif e.instruction is not None:
            out.append(e.instruction)
    n = 0
    for e in emitted:
        if e.instruction is None:
            continue
        e.instruction.ip = n
        if e.branch_target:
            e.instruction.near_branch64 = label_at[e.branch_target]
        n += 1
    return out


def _fitting(spec: KernelSpec, emitter: FunctionEmitter, fn: Function, run: Callable[[Function], T]) -> T:
    """run(fn); if fn's schedule needs more registers than the file has, run the compact
    variant instead (riders before the rounds, not spread over them: the same computation)."""
    notes = len(emitter.notes)
    try:
        return run(fn)
    except RegisterPressure:
        del emitter.notes[notes:]
        return run(build_function(spec, fn.name, compact=True))


def check_fits(spec: KernelSpec) -> None:
    """Raise BuildError unless every function of spec builds and fits the register file:
    generate() without encoding or rendering (what depth searches need)."""
    emitter = FunctionEmitter(spec, None)  # type: ignore[arg-type]  # allocation only
    for fn in build_functions(spec):
        _fitting(spec, emitter, fn, lambda f: _allocate_all(emitter, f))


def _allocate_all(emitter: FunctionEmitter, fn: Function) -> None:
    lower = Lowerer(emitter.spec, fn.width)
    for path in fn.paths:
        emitter.path_items(fn, path, lower, emit=False)


def generate(spec: KernelSpec, output_name: str = "FILE.S") -> GeneratedKernel:
    functions = build_functions(spec)
    consts = _constants(functions)
    local = f"{spec.local_label_prefix}{spec.prefix}_"
    const_labels = {name: f"{local}{name}" for name in consts}
    asm = Assembler(spec.isa, const_labels, local)
    emitter = FunctionEmitter(spec, asm)
    fn_views, emitted_all = [], []
    for fn in functions:
        lines, emitted = _fitting(spec, emitter, fn, emitter.function)
        emitted_all.extend(emitted)
        fn_views.append({"symbol": spec.asm_symbol(fn.name), "args": fn.args, "summary": FUNCTIONS[fn.name].summary,
                         "lines": lines, "prototype": prototype(spec, fn)})
    instructions = _resolve_branches(emitted_all)
    consts = dict(sorted({**consts, **asm.late_consts}.items()))
    const_views = [{"label": const_labels[n], "rows": _const_rows(c.data), "align": const_alignment(len(c.data)),
                    "comment": next((v for k, v in CONST_COMMENTS.items() if n.startswith(k)), n)}
                   for n, c in consts.items()]
    modes = ", ".join(MODE_TITLES[m] for m in spec.modes)
    doubling = f", doubling: {spec.gfdouble}" if spec.gfdouble else ""
    title = (f"AES-128/192/256 {modes} for x86-64 ({spec.backend}, {spec.isa}, {spec.width}-bit, "
             f"depth {spec.depth}{doubling})")
    spec_json = spec.to_json()
    context = {
        "title": title, "version": __version__, "command": command_line(spec, output_name), "spec": spec,
        "isa_line": isa_line(spec), "bitsliced": spec.backend == "bitsliced", "register_notes": emitter.notes, "spec_line": SPEC_MARKER + spec_json,
        "functions": fn_views, "constants": const_views, "multikey_bytes": MULTIKEY_BYTES,
        "spec_hash": hashlib.sha256(spec_json.encode()).hexdigest()[:16],
        "instruction_count": len(instructions), "guard": f"AESGEN_{spec.prefix}",  # as the prefix is spelled: guards differ when prefixes do
        "arch_what": ARCH_GUARDS[spec.abi, spec.object_format][0],
        "arch_condition": ARCH_GUARDS[spec.abi, spec.object_format][1], "macho": spec.object_format == "macho",
        "red_zone": textwrap.wrap(red_zone_note(spec, emitter.red_zone), 96),
        "red_zone_c": textwrap.wrap(red_zone_note(spec, emitter.red_zone, c_names=True), 92),
        "per_mode": ", ".join(f"{MODE_TITLES[m]} {spec.width_for(m)}-bit x depth {spec.depth_for(m)}"
                              + (" (serial encrypt)" if m == "cbc" else "")
                              + (f" ({'Karatsuba' if spec.karatsuba else 'schoolbook'} products, "
                                 f"{spec.depth_for(m) * spec.width_for(m) // 128} blocks per reduction)"
                                 if m in ("ghash", "polyval") else "") for m in spec.modes),
    }
    env = template_environment()
    return GeneratedKernel(spec, env.get_template("kernel.S.j2").render(context),
                           env.get_template("kernel.h.j2").render(context), instructions, emitter.notes)


__all__ = ["generate", "check_fits", "GeneratedKernel", "BuildError", "command_line", "template_environment"]
