"""The pipeline: kernels (DSL) -> lower -> schedule -> regalloc -> isa -> templates.

`generate(spec)` returns the `.S` text, the `.h` text and the list of iced
instructions in `.text` order (what the round-trip check compares with the
assembled object).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from importlib import resources
from typing import Callable, TypeVar

import jinja2
from iced_x86 import Instruction

from . import __version__
from .dsl import BuildError
from .ir import Const, Function, GroupBlock, Insn, Mark, MarkKind, Path
from .isa import Assembler, Emitted
from .lower import Lowerer
from .regalloc import RegisterPressure, allocate_path
from .schedule import flatten
from .spec import MULTIKEY_BYTES, SPEC_MARKER, KernelSpec
from .win64 import Directive, wrap as wrap_win64

T = TypeVar("T")

MODE_TITLES = {"ecb": "ECB", "ctr32": "CTR32", "cbc": "CBC", "ghash": "GHASH", "polyval": "POLYVAL",
               "gcm": "GCM", "gcm-siv": "GCM-SIV", "xts": "XTS", "gfdouble": "GF(2^128) doubling",
               "ocb": "OCB3", "otr": "OTR", "rijndael256": "Rijndael-256", "simpira": "Simpira-256",
               "multikey": "multi-key ECB", "fixed-key-hash": "fixed-key hash", "cbc-multi": "multi-stream CBC"}
ISA_LINES = {
    "sse": "sse: legacy AES-NI, two-operand SSE encoding, 16 xmm registers",
    "avx": "avx: VEX-encoded AES-NI, three-operand, 16 xmm registers",
    "avx2": "avx2: VEX-encoded VAES on ymm, 16 registers",
    "avx512": "avx512: VAES with EVEX where needed, 32 registers, opmask tails",
}


def isa_line(spec: KernelSpec) -> str:
    if spec.backend != "bitsliced":
        return ISA_LINES[spec.isa]
    from .bitsliced_code import circuit_pass

    regs = 32 if spec.isa == "avx512" else 16
    return (f"{spec.isa}: bitsliced AES from logic ops and byte shuffles ({circuit_pass(spec)} S-box "
            f"circuit), {regs} registers; no AES-NI")


C_TYPES = {
    "user_key": "const uint8_t *user_key", "bits": "unsigned bits", "key": "const void *key",
    "in": "const uint8_t *in", "out": "uint8_t *out", "nblocks": "size_t nblocks", "len": "size_t len",
    "ctr": "uint8_t ctr[16]", "iv": "uint8_t iv[16]", "acc": "uint8_t acc[16]", "data": "const uint8_t *data",
    "h": "const uint8_t h[16]",
}
RETURNS_INT = {"cpu_supported", "set_encrypt_key", "set_decrypt_key", "gcm_set_key", "gcm_encrypt", "gcm_decrypt",
               "gcm_start", "gcmsiv_set_key", "gcmsiv_encrypt", "gcmsiv_decrypt", "xts_set_key",
               "ocb_set_key", "ocb_encrypt", "ocb_decrypt", "otr_set_key", "otr_encrypt", "otr_decrypt",
               "rijndael256_set_encrypt_key", "rijndael256_set_decrypt_key", "set_encrypt_keys"}
# Functions whose C parameters are not the shared names above.
PROTOTYPE_ARGS = {
    "gcm_encrypt": ("const void *gkey, const uint8_t *iv, size_t ivlen, const uint8_t *aad, size_t aadlen, "
                    "const uint8_t *in, uint8_t *out, size_t len, uint8_t *tag, size_t taglen"),
    "gcm_decrypt": ("const void *gkey, const uint8_t *iv, size_t ivlen, const uint8_t *aad, size_t aadlen, "
                    "const uint8_t *in, uint8_t *out, size_t len, const uint8_t *tag, size_t taglen"),
    "gcm_start": "void *ctx, const void *gkey, const uint8_t *iv, size_t ivlen",
    "gcm_aad": "void *ctx, const uint8_t *aad, size_t len",
    "gcm_encrypt_update": "void *ctx, const uint8_t *in, uint8_t *out, size_t len",
    "gcm_decrypt_update": "void *ctx, const uint8_t *in, uint8_t *out, size_t len",
    "gcm_finish": "void *ctx, uint8_t tag[16]",
    "gcmsiv_set_key": "const uint8_t *user_key, unsigned bits, void *skey",
    "gcmsiv_encrypt": ("const void *skey, const uint8_t nonce[12], const uint8_t *aad, size_t aadlen, "
                       "const uint8_t *in, uint8_t *out, size_t len, uint8_t tag[16]"),
    "gcmsiv_decrypt": ("const void *skey, const uint8_t nonce[12], const uint8_t *aad, size_t aadlen, "
                       "const uint8_t *in, uint8_t *out, size_t len, const uint8_t tag[16]"),
    "xts_set_key": "const uint8_t *key1, const uint8_t *key2, unsigned bits, void *xkey, int enc",
    "xts_encrypt": "const void *xkey, const uint8_t *in, uint8_t *out, size_t len, const uint8_t tweak[16]",
    "xts_decrypt": "const void *xkey, const uint8_t *in, uint8_t *out, size_t len, const uint8_t tweak[16]",
    "ocb_set_key": "const uint8_t *user_key, unsigned bits, void *okey",
    "ocb_encrypt": ("const void *okey, const uint8_t *nonce, size_t noncelen, const uint8_t *aad, size_t aadlen, "
                    "const uint8_t *in, uint8_t *out, size_t len, uint8_t *tag, size_t taglen"),
    "ocb_decrypt": ("const void *okey, const uint8_t *nonce, size_t noncelen, const uint8_t *aad, size_t aadlen, "
                    "const uint8_t *in, uint8_t *out, size_t len, const uint8_t *tag, size_t taglen"),
    "otr_set_key": "const uint8_t *user_key, unsigned bits, void *tkey",
    "otr_encrypt": ("const void *tkey, const uint8_t *nonce, size_t noncelen, const uint8_t *aad, size_t aadlen, "
                    "const uint8_t *in, uint8_t *out, size_t len, uint8_t tag[16]"),
    "otr_decrypt": ("const void *tkey, const uint8_t *nonce, size_t noncelen, const uint8_t *aad, size_t aadlen, "
                    "const uint8_t *in, uint8_t *out, size_t len, const uint8_t tag[16]"),
    "set_encrypt_keys": "const uint8_t *user_keys, unsigned bits, unsigned nkeys, void *keys",
    "ecb_encrypt_multikey": ("const void *keys, unsigned nkeys, const uint8_t *in, uint8_t *out, "
                             "size_t blocks_per_key"),
    "fixed_key_hash": "const void *key, const uint8_t *in, uint8_t *out, size_t nblocks",
    "cbc_encrypt_multi": ("const void *const *keys, const uint8_t *const *in, uint8_t *const *out, "
                          "size_t nblocks, uint8_t *const *ivs, unsigned nstreams"),
    "gfdouble_le": "const uint8_t tweak[16], uint8_t *out, size_t nblocks",
    "gfdouble_be": "const uint8_t tweak[16], uint8_t *out, size_t nblocks",
    "rijndael256_set_encrypt_key": "const uint8_t *user_key, unsigned bits, void *rkey",
    "rijndael256_set_decrypt_key": "const uint8_t *user_key, unsigned bits, void *rkey",
    "rijndael256_ecb_encrypt": "const void *rkey, const uint8_t *in, uint8_t *out, size_t nblocks",
    "rijndael256_ecb_decrypt": "const void *rkey, const uint8_t *in, uint8_t *out, size_t nblocks",
    "simpira256_permute": "const uint8_t *in, uint8_t *out, size_t nblocks",
    "simpira256_inverse": "const uint8_t *in, uint8_t *out, size_t nblocks",
}


@dataclass
class GeneratedKernel:
    spec: KernelSpec
    asm: str
    header: str
    instructions: list[Instruction] = field(default_factory=list)
    register_notes: list[str] = field(default_factory=list)


def command_line(spec: KernelSpec, output: str = "FILE.S") -> str:
    per_mode = "".join(f" --per-mode {m}={w}x{d}" for m, w, d in spec.overrides)
    per_mode += " --karatsuba" if spec.karatsuba else ""
    per_mode += f" --gfdouble {spec.gfdouble}" if spec.gfdouble else ""
    per_mode += " --allow-table-lookups" if spec.table_lookups else ""
    per_mode += " --no-ternlog" if spec.no_ternlog else ""
    per_mode += f" --abi {spec.abi}" if spec.abi != "sysv" else ""
    return (f"aesgen generate {','.join(spec.modes)} --isa {spec.isa} --width {spec.width} "
            f"--depth {spec.depth}{per_mode} --backend {spec.backend} --prefix {spec.prefix} -o {output}")


def prototype(spec: KernelSpec, fn: Function) -> str:
    """The C prototype; win64 files mark the convention (AESGEN_MS_ABI, defined in the header)."""
    text = _prototype(spec, fn)
    if spec.abi == "win64":
        text = text.replace(f" {spec.symbol(fn.name)}(", f" AESGEN_MS_ABI {spec.symbol(fn.name)}(", 1)
    return text


def _prototype(spec: KernelSpec, fn: Function) -> str:
    if fn.name in PROTOTYPE_ARGS:
        ret = "int" if fn.name in RETURNS_INT else "void"
        return f"{ret} {spec.symbol(fn.name)}({PROTOTYPE_ARGS[fn.name]})"
    args = [C_TYPES[a] for a in fn.args] or ["void"]
    if fn.name in ("set_encrypt_key", "set_decrypt_key"):
        args[2] = "void *key"
    if fn.name == "gcm_set_key":
        args[2] = "void *gkey"
    if fn.name == "ghash":
        args[0] = "const void *gkey"
    if fn.name in ("ecb_decrypt", "cbc_decrypt"):
        args[0] = "const void *dkey"
    ret = "int" if fn.name in RETURNS_INT else "void"
    return f"{ret} {spec.symbol(fn.name)}({', '.join(args)})"


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
        self.nregs = 32 if spec.isa == "avx512" else 16
        self.notes: list[str] = []

    def path_items(self, fn: Function, path: Path, lower: Lowerer) -> list:
        items = flatten(lower.items(path.items))
        what = f"{fn.name}" + (f" (AES-{path.nr * 32 - 192})" if path.nr else "")
        keys = path.schedule
        alloc = allocate_path(items, nregs=self.nregs, legacy=self.spec.isa == "sse",
                              key_base=keys.base if keys else fn.key_base,
                              key_stride=keys.stride if keys else self.spec.key_stride, width=fn.width, what=what,
                              key_disp=keys.disp if keys else 0, key_aligned=keys.aligned if keys else True)
        if alloc.key_regs or alloc.spilled_keys:
            mem = f"; keys {','.join(map(str, alloc.spilled_keys))} as memory operands" if alloc.spilled_keys else ""
            self.notes.append(f"{what}: {alloc.registers_used} vector registers, "
                              f"{len(alloc.key_regs)} round keys in registers{mem}")
        return alloc.insns

    def function(self, fn: Function) -> tuple[list[str], list[Emitted]]:
        lower = Lowerer(self.spec, fn.width)
        items: list = [Insn("endbr64")] + flatten(lower.items(fn.entry))
        for path in fn.paths:
            items.extend(self.path_items(fn, path, lower))
        win64 = self.spec.abi == "win64"
        if win64:
            items = wrap_win64(items, len(fn.args))

        def directive(text: str, flavour: str = "elf") -> str:
            """ELF-only (CFI) or COFF-only (SEH) lines; a win64 file is preprocessed for either."""
            return f"\tAESGEN_{flavour.upper()}({text.strip()})" if win64 else text

        lines, emitted = [], []
        pending_restore = False
        for it in items:
            if isinstance(it, Directive):
                lines.append(directive(it.text, it.flavour))
                continue
            # Unwind info: the state before an epilogue is remembered and restored after its
            # ret, so code placed after it (another exit path) unwinds like the body.
            epilogue = isinstance(it, Mark) and it.kind is MarkKind.EPILOGUE
            if (epilogue or isinstance(it, Insn) and it.op == "pop.r64") and not pending_restore:
                lines.append(directive("\t.cfi_remember_state"))
                pending_restore = True
            if epilogue:
                continue
            e = self.asm.emit(it)
            emitted.append(e)
            if e.label:
                lines.append(e.text)
                continue
            if isinstance(it, Insn) and it.op == "mov.r64.r64" and (it.dst, it.srcs[0]) == ("rsp", "rbp") \
                    and not pending_restore:
                lines.append(directive("\t.cfi_remember_state"))
                pending_restore = True
            text = f"\t{e.text}"
            if e.comment:
                text = f"{text:<47} # {e.comment}"
            lines.append(text.rstrip())
            if isinstance(it, Insn) and it.op == "push.r64":
                lines += [directive("\t.cfi_adjust_cfa_offset 8"), directive(f"\t.cfi_rel_offset %{it.dst}, 0")]
            if isinstance(it, Insn) and it.op == "pop.r64":
                lines += [directive("\t.cfi_adjust_cfa_offset -8"), directive(f"\t.cfi_restore %{it.dst}")]
            if isinstance(it, Insn) and it.op == "mov.r64.r64" and (it.dst, it.srcs[0]) == ("rbp", "rsp"):
                lines.append(directive("\t.cfi_def_cfa_register %rbp"))  # the frame is realigned below: unwind via rbp
            if isinstance(it, Insn) and it.op == "mov.r64.r64" and (it.dst, it.srcs[0]) == ("rsp", "rbp"):
                lines.append(directive("\t.cfi_def_cfa_register %rsp"))
            if isinstance(it, Insn) and it.op == "ret" and pending_restore:
                lines.append(directive("\t.cfi_restore_state"))
                pending_restore = False
        return lines, emitted


def _env() -> jinja2.Environment:
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
    from aesgen.kernels import build_function

    notes = len(emitter.notes)
    try:
        return run(fn)
    except RegisterPressure:
        del emitter.notes[notes:]
        return run(build_function(spec, fn.name, compact=True))


def check_fits(spec: KernelSpec) -> None:
    """Raise BuildError unless every function of spec builds and fits the register file:
    generate() without encoding or rendering (what depth searches need)."""
    from aesgen.kernels import build_functions

    emitter = FunctionEmitter(spec, None)  # type: ignore[arg-type]  # allocation only
    for fn in build_functions(spec):
        _fitting(spec, emitter, fn, lambda f: _allocate_all(emitter, f))


def _allocate_all(emitter: FunctionEmitter, fn: Function) -> None:
    lower = Lowerer(emitter.spec, fn.width)
    for path in fn.paths:
        emitter.path_items(fn, path, lower)


def generate(spec: KernelSpec, output_name: str = "FILE.S") -> GeneratedKernel:
    from aesgen.kernels import FUNCTIONS, build_functions

    functions = build_functions(spec)
    consts = _constants(functions)
    const_labels = {name: f".L{spec.prefix}_{name}" for name in consts}
    asm = Assembler(spec.isa, const_labels, f".L{spec.prefix}_")
    emitter = FunctionEmitter(spec, asm)
    fn_views, emitted_all = [], []
    for fn in functions:
        lines, emitted = _fitting(spec, emitter, fn, emitter.function)
        emitted_all.extend(emitted)
        fn_views.append({"symbol": spec.symbol(fn.name), "args": fn.args, "summary": FUNCTIONS[fn.name][2],
                         "lines": lines, "prototype": prototype(spec, fn)})
    instructions = _resolve_branches(emitted_all)
    consts = dict(sorted({**consts, **asm.late_consts}.items()))
    const_views = [{"label": const_labels[n], "rows": _const_rows(c.data),
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
        "per_mode": ", ".join(f"{MODE_TITLES[m]} {spec.width_for(m)}-bit x depth {spec.depth_for(m)}"
                              + (" (serial encrypt)" if m == "cbc" else "")
                              + (f" ({'Karatsuba' if spec.karatsuba else 'schoolbook'} products, "
                                 f"{spec.depth_for(m) * spec.width_for(m) // 128} blocks per reduction)"
                                 if m in ("ghash", "polyval") else "") for m in spec.modes),
    }
    env = _env()
    return GeneratedKernel(spec, env.get_template("kernel.S.j2").render(context),
                           env.get_template("kernel.h.j2").render(context), instructions, emitter.notes)


__all__ = ["generate", "check_fits", "GeneratedKernel", "BuildError", "command_line"]
