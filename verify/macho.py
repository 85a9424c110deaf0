"""Mach-O files (`--format macho`): assemble them for macOS and check the object.

This machine runs ELF, so a Mach-O file cannot be loaded here. What is checked on the file
itself: it assembles for x86-64 macOS (`llvm-mc -triple x86_64-apple-macosx`, after the C
preprocessor with Apple's predefined macros, as `cc -c` on macOS does); its symbol table
holds each function as `_P_f`, external (private-extern with `--hidden`) and defined in
`__TEXT,__text`, and nothing undefined; and its `__text` decodes to exactly the
instructions the generator intended (the round trip, as `roundtrip.py` compares them).
Every other check runs on the file's ELF twin, the same spec with `--format elf`, whose
round trip compares its object with the same intended list: both objects hold the same
machine code.
"""
from __future__ import annotations

import os
import struct
import subprocess
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from iced_x86 import EncodingKind, Instruction, Mnemonic, OpKind

from aesgen.pipeline import generate

from .build import llvm_tool
from .disasm import decode
from .results import CheckResult
from .roundtrip import compare

MH_MAGIC_64 = 0xFEEDFACF
LC_SYMTAB, LC_SEGMENT_64 = 0x2, 0x19
N_STAB, N_PEXT, N_TYPE, N_EXT = 0xE0, 0x10, 0x0E, 0x01
N_UNDF, N_SECT = 0x0, 0xE
TRIPLE = "x86_64-apple-macosx"
# What clang predefines on x86-64 macOS that the file's guard reads.
APPLE_DEFINES = ("__x86_64__", "__APPLE__", "__MACH__")


class MachOError(ValueError):
    """Not a 64-bit little-endian Mach-O object we can read."""


@dataclass(frozen=True)
class MachSection:
    index: int  # 1-based, as n_sect counts
    segment: str
    name: str
    addr: int
    size: int
    offset: int


@dataclass(frozen=True)
class MachSymbol:
    name: str
    type: int
    section: int  # 1-based section index, 0 for none
    value: int

    @property
    def defined(self) -> bool:
        return not self.type & N_STAB and self.type & N_TYPE == N_SECT

    @property
    def external(self) -> bool:
        return bool(self.type & N_EXT)

    @property
    def private_extern(self) -> bool:
        return bool(self.type & N_PEXT)


@dataclass(frozen=True)
class MachObject:
    data: bytes
    sections: tuple[MachSection, ...]
    symbols: tuple[MachSymbol, ...]

    def section(self, segment: str, name: str) -> MachSection | None:
        return next((s for s in self.sections if (s.segment, s.name) == (segment, name)), None)

    def section_bytes(self, s: MachSection) -> bytes:
        return self.data[s.offset:s.offset + s.size]


def _name(raw: bytes) -> str:
    return raw.split(b"\0", 1)[0].decode("ascii", "replace")


def read_macho(data: bytes) -> MachObject:
    """Sections and symbols of an MH_OBJECT (mach_header_64, LC_SEGMENT_64, LC_SYMTAB)."""
    if len(data) < 32 or struct.unpack_from("<I", data, 0)[0] != MH_MAGIC_64:
        raise MachOError("not a 64-bit Mach-O file")
    ncmds, _sizeofcmds = struct.unpack_from("<II", data, 16)
    sections: list[MachSection] = []
    symbols: list[MachSymbol] = []
    at = 32
    for _ in range(ncmds):
        cmd, size = struct.unpack_from("<II", data, at)
        if cmd == LC_SEGMENT_64:
            nsects = struct.unpack_from("<I", data, at + 64)[0]
            for k in range(nsects):
                s = at + 72 + 80 * k
                addr, sz, offset = struct.unpack_from("<QQI", data, s + 32)
                sections.append(MachSection(len(sections) + 1, _name(data[s + 16:s + 32]), _name(data[s:s + 16]),
                                            addr, sz, offset))
        elif cmd == LC_SYMTAB:
            symoff, nsyms, stroff, strsize = struct.unpack_from("<IIII", data, at + 8)
            strings = data[stroff:stroff + strsize]
            for k in range(nsyms):
                strx, ntype, nsect, _desc, value = struct.unpack_from("<IBBHQ", data, symoff + 16 * k)
                symbols.append(MachSymbol(_name(strings[strx:]), ntype, nsect, value))
        at += size
    return MachObject(data, tuple(sections), tuple(symbols))


def llvm_mc() -> str | None:
    return llvm_tool("llvm-mc")


def assemble(asm_path: Path | str, out_dir: Path) -> Path:
    """The file as macOS's `cc -c` builds it: preprocessed for x86-64 Apple, then llvm-mc.
    Raises MachOError with the tool's message."""
    mc = llvm_mc()
    if mc is None:
        raise FileNotFoundError("llvm-mc")
    cc = os.environ.get("CC", "cc")
    pre, obj = out_dir / "macho.s", out_dir / "macho.o"
    steps = ([cc, "-E", "-P", "-undef", *(f"-D{d}" for d in APPLE_DEFINES), "-x", "assembler-with-cpp",
              str(asm_path), "-o", str(pre)],
             [mc, "-triple", TRIPLE, "-filetype=obj", str(pre), "-o", str(obj)])
    for cmd in steps:
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            raise MachOError(f"`{' '.join(cmd[:3])} ...` failed (exit {p.returncode})\n{p.stderr.strip()[:2000]}")
    return obj


def symbol_check(spec, obj: MachObject) -> CheckResult:
    """Each function defined in __TEXT,__text as `_P_f`, external, private-extern iff --hidden;
    nothing undefined."""
    text = obj.section("__TEXT", "__text")
    by_name = {s.name: s for s in obj.symbols if not s.type & N_STAB}
    hidden = bool(getattr(spec, "hidden", False))
    problems = []
    for f in spec.functions:
        name = spec.asm_symbol(f)
        s = by_name.get(name)
        if s is None or not s.defined or text is None or s.section != text.index:
            problems.append(f"{name}: not defined in __TEXT,__text")
        elif not s.external or s.private_extern != hidden:
            problems.append(f"{name}: {'private extern' if s.private_extern else 'external' if s.external else 'local'}"
                            f", expected {'private extern' if hidden else 'external'}")
    undefined = sorted(s.name for s in by_name.values() if s.type & N_TYPE == N_UNDF and s.external)
    if undefined:
        problems.append(f"undefined: {', '.join(undefined)}")
    if problems:
        return CheckResult("macho symbols", "fail", "\n".join(problems))
    kind = "private extern (--hidden)" if hidden else "external"
    return CheckResult("macho symbols", "pass", f"{len(spec.functions)} functions _{spec.prefix}_*, {kind}")


# LLVM's assembler (llvm-mc, and clang on macOS) swaps the two sources of a commutable VEX op
# of the 0F opcode map when that gives the shorter 2-byte VEX prefix (X86EncodingOptimization:
# optimizeInstFromVEX3ToVEX2, e.g. `vpxor %ymm15,%ymm0,%ymm0` -> `vpxor %ymm0,%ymm15,%ymm0`);
# GNU as does not. The same operation, so the round trip compares these ops with sorted sources.
COMMUTED_BY_LLVM = frozenset({
    Mnemonic.VPXOR, Mnemonic.VPAND, Mnemonic.VPOR, Mnemonic.VPADDB, Mnemonic.VPADDW, Mnemonic.VPADDD,
    Mnemonic.VPADDQ, Mnemonic.VPCMPEQB, Mnemonic.VPCMPEQW, Mnemonic.VPCMPEQD, Mnemonic.VPMULUDQ, Mnemonic.VPMULLW,
    Mnemonic.VXORPS, Mnemonic.VXORPD, Mnemonic.VANDPS, Mnemonic.VANDPD, Mnemonic.VORPS, Mnemonic.VORPD,
})


def sources_sorted(ins: Instruction) -> Instruction:
    """A VEX op of COMMUTED_BY_LLVM on three registers, with its two sources in register order."""
    if ins.mnemonic not in COMMUTED_BY_LLVM or ins.encoding != EncodingKind.VEX or ins.op_count != 3 or \
            any(ins.op_kind(k) != OpKind.REGISTER for k in range(3)) or ins.op1_register <= ins.op2_register:
        return ins
    out = ins.copy()
    out.op1_register, out.op2_register = ins.op2_register, ins.op1_register
    return out


def check(spec, asm_path: Path | str) -> list[CheckResult]:
    """`macho assemble`, `macho symbols` and `macho roundtrip` on the file itself."""
    with tempfile.TemporaryDirectory(prefix="aesgen-macho-") as tmp:
        try:
            obj = read_macho(assemble(asm_path, Path(tmp)).read_bytes())
        except FileNotFoundError:
            why = "needs llvm-mc (LLVM 19: apt-get install llvm-19) to assemble for macOS"
            return [CheckResult(name, "skip", why) for name in ("macho assemble", "macho symbols", "macho roundtrip")]
        except (MachOError, OSError) as e:
            return [CheckResult("macho assemble", "fail", str(e))]
    results = [CheckResult("macho assemble", "pass", f"{TRIPLE}: {len(obj.sections)} sections")]
    results.append(symbol_check(spec, obj))
    text = obj.section("__TEXT", "__text")
    intended = list(generate(spec).instructions)
    decoded = [sources_sorted(i) for i in decode(obj.section_bytes(text), text.addr)] if text else []
    mismatches = compare([sources_sorted(i) for i in intended], decoded) if text else ["no __TEXT,__text"]
    results.append(CheckResult("macho roundtrip", "fail", "\n".join(mismatches)) if mismatches else
                   CheckResult("macho roundtrip", "pass", f"{len(intended)} instructions match; the checks below "
                               "run on the ELF build of the same spec (--format elf), which holds them too"))
    return results


def elf_twin(spec, folder: Path) -> tuple[object, Path]:
    """The same spec as ELF, generated into folder: what the other checks load and scan."""
    twin = replace(spec, object_format="elf")
    path = folder / f"{twin.prefix}.S"
    path.write_text(generate(twin, path.name).asm, encoding="utf-8")
    return twin, path
