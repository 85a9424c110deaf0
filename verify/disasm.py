"""Assemble a `.S` with the system compiler and decode its object file with iced-x86.

The ELF64 object is read directly with `struct` (no binutils parsing): executable sections,
function symbols and the relocations that patch instruction bytes. Each function's byte range
is decoded on its own, so alignment padding between functions can never shift a function's
first instruction; the padding itself is decoded too and kept in the section listing.
"""
from __future__ import annotations

import bisect
import hashlib
import os
import shutil
import struct
import subprocess
import tempfile
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from iced_x86 import Code, Decoder, Formatter, FormatterSyntax, Instruction, Mnemonic

SHT_SYMTAB, SHT_RELA, SHT_NOBITS, SHT_DYNSYM = 2, 4, 8, 11
SHF_EXECINSTR = 0x4
STT_FUNC, STT_SECTION = 2, 3
STB_LOCAL = 0
SHN_UNDEF, SHN_XINDEX = 0, 0xFFFF

# The x86-64 relocation types an assembler emits for code; others print as a number.
RELOC_NAMES = {
    1: "R_X86_64_64", 2: "R_X86_64_PC32", 4: "R_X86_64_PLT32", 9: "R_X86_64_GOTPCREL",
    10: "R_X86_64_32", 11: "R_X86_64_32S", 24: "R_X86_64_PC64",
    41: "R_X86_64_GOTPCRELX", 42: "R_X86_64_REX_GOTPCRELX",
}

PADDING_MNEMONICS = frozenset({Mnemonic.NOP, Mnemonic.INT3})


class AssembleError(RuntimeError):
    """`cc -c` rejected the file; the message is one line, then the compiler's stderr."""


class ElfError(ValueError):
    """The object is not an ELF64 little-endian relocatable file we can read."""


# ---------------------------------------------------------------------------- assembling

def _cache_dir() -> Path:
    d = Path(tempfile.gettempdir()) / f"aesgen-objcache-{os.getuid()}"
    d.mkdir(mode=0o700, exist_ok=True)
    return d


def assemble(asm_path: Path | str, *, cc: str | None = None,
             flags: tuple[str, ...] = ()) -> Path:
    """`cc -c asm_path` into a cache keyed by the compiler, flags and file content.

    Files the `.S` includes are not part of the key: generated kernels include nothing.
    """
    asm_path = Path(asm_path)
    cc = cc or os.environ.get("CC", "cc")
    source = asm_path.read_bytes()
    key = hashlib.sha256(
        b"\0".join([cc.encode(), *(f.encode() for f in flags), str(asm_path.parent).encode(), source])
    ).hexdigest()
    obj = _cache_dir() / f"{key}.o"
    if obj.exists():
        return obj
    if shutil.which(cc) is None:
        raise AssembleError(f"{asm_path}: compiler {cc!r} not found")
    # Compile to a private name and rename, so concurrent runs never see a half-written file.
    fd, tmp = tempfile.mkstemp(suffix=".o", dir=obj.parent)
    os.close(fd)
    cmd = [cc, "-c", *flags, f"-I{asm_path.parent}", str(asm_path), "-o", tmp]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        Path(tmp).unlink(missing_ok=True)  # cc removes its output on failure
        raise AssembleError(
            f"{asm_path}: `{' '.join(cmd[:2])} ...` failed (exit {proc.returncode})\n"
            f"{proc.stderr.strip()}"
        )
    os.replace(tmp, obj)
    return obj


# ---------------------------------------------------------------------------- ELF64 reading

@dataclass(frozen=True)
class Section:
    index: int
    name: str
    type: int
    flags: int
    offset: int
    size: int
    link: int
    info: int
    entsize: int

    @property
    def executable(self) -> bool:
        return bool(self.flags & SHF_EXECINSTR)


@dataclass(frozen=True)
class Symbol:
    name: str
    type: int
    bind: int
    section: int  # index into the section table
    value: int
    size: int


@dataclass(frozen=True)
class Relocation:
    offset: int  # byte offset in the target section
    type: int
    symbol: str
    addend: int

    @property
    def type_name(self) -> str:
        return RELOC_NAMES.get(self.type, f"R_X86_64_{self.type}")

    def __str__(self) -> str:
        sign = "+" if self.addend >= 0 else "-"
        return f"{self.type_name} {self.symbol}{sign}{abs(self.addend):#x}"


@dataclass(frozen=True)
class ElfObject:
    data: bytes
    sections: tuple[Section, ...]
    symbols: tuple[Symbol, ...]
    relocations: dict[int, tuple[Relocation, ...]]  # target section index -> its relocations
    dynamic_symbols: tuple[Symbol, ...] = ()  # .dynsym (a shared object's exports and imports)

    def section_bytes(self, s: Section) -> bytes:
        return b"" if s.type == SHT_NOBITS else self.data[s.offset:s.offset + s.size]


def _cstr(table: bytes, off: int) -> str:
    end = table.find(b"\0", off)
    return table[off:end if end >= 0 else len(table)].decode("utf-8", "replace")


def read_elf(data: bytes) -> ElfObject:
    """Sections, symbols and RELA relocations of an ELF64 little-endian object."""
    if len(data) < 64 or data[:4] != b"\x7fELF":
        raise ElfError("not an ELF file")
    if data[4] != 2 or data[5] != 1:
        raise ElfError("not ELF64 little-endian")
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    if shoff == 0 or shentsize != 64:
        raise ElfError("no section header table")

    def header(i: int) -> tuple[int, ...]:
        return struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize)

    if shnum == 0:  # more than 0xff00 sections: the real count lives in section 0
        shnum = header(0)[5]
    if shstrndx == SHN_XINDEX:
        shstrndx = header(0)[6]
    raw = [header(i) for i in range(shnum)]
    strtab_hdr = raw[shstrndx]
    names = data[strtab_hdr[4]:strtab_hdr[4] + strtab_hdr[5]]
    sections = tuple(
        Section(i, _cstr(names, h[0]), h[1], h[2], h[4], h[5], h[6], h[7], h[9])
        for i, h in enumerate(raw)
    )

    symtabs: dict[int, tuple[Symbol, ...]] = {}
    for s in sections:
        if s.type not in (SHT_SYMTAB, SHT_DYNSYM):
            continue
        strs = data[sections[s.link].offset:sections[s.link].offset + sections[s.link].size]
        syms = []
        for off in range(s.offset, s.offset + s.size, 24):
            name, info, _other, shndx, value, size = struct.unpack_from("<IBBHQQ", data, off)
            sym_name = _cstr(strs, name)
            if info & 0xF == STT_SECTION and shndx < len(sections):
                sym_name = sections[shndx].name
            syms.append(Symbol(sym_name, info & 0xF, info >> 4, shndx, value, size))
        symtabs[s.index] = tuple(syms)

    relocations: dict[int, tuple[Relocation, ...]] = {}
    for s in sections:
        if s.type != SHT_RELA:
            continue
        syms = symtabs.get(s.link, ())
        relocs = []
        for off in range(s.offset, s.offset + s.size, 24):
            r_offset, r_info, addend = struct.unpack_from("<QQq", data, off)
            idx = r_info >> 32
            name = syms[idx].name if idx < len(syms) else f"sym#{idx}"
            relocs.append(Relocation(r_offset, r_info & 0xFFFFFFFF, name, addend))
        relocations[s.info] = relocations.get(s.info, ()) + tuple(relocs)

    def of_type(kind: int) -> tuple[Symbol, ...]:
        return tuple(sym for i, syms in symtabs.items() if sections[i].type == kind for sym in syms)

    return ElfObject(data, sections, of_type(SHT_SYMTAB), relocations, of_type(SHT_DYNSYM))


# ---------------------------------------------------------------------------- decoding

@dataclass
class Function:
    """One function symbol's (or one stray code run's) decoded instructions."""
    name: str
    section: str
    offset: int
    size: int
    is_global: bool
    instructions: list[Instruction]
    # Relocations by the ip of the instruction whose bytes they patch.
    relocations: dict[int, Relocation] = field(default_factory=dict)
    is_symbol: bool = True  # False: bytes outside any function symbol that are not padding


@dataclass
class Disassembly:
    obj_path: Path
    functions: list[Function]
    # Every executable section decoded in address order (functions and padding between them).
    sections: dict[str, list[Instruction]]
    relocations: dict[str, dict[int, Relocation]]

    @property
    def text(self) -> list[Instruction]:
        """All executable sections' instructions concatenated in section order."""
        return [ins for insns in self.sections.values() for ins in insns]

    def function(self, name: str) -> Function | None:
        return next((f for f in self.functions if f.name == name), None)


def decode(code: bytes, ip: int = 0) -> list[Instruction]:
    return list(Decoder(64, code, ip=ip))


@lru_cache(maxsize=1)
def _gas_formatter() -> Formatter:
    f = Formatter(FormatterSyntax.GAS)
    f.rip_relative_addresses = True  # show `x(%rip)` as written, not a computed address
    f.branch_leading_zeros = False
    return f


def gas_text(ins: Instruction, reloc: Relocation | None = None) -> str:
    """GAS text of one instruction; a relocated operand's symbol is appended as a comment."""
    text = "(bad)" if ins.code == Code.INVALID else _gas_formatter().format(ins)
    return f"{text}  # {reloc}" if reloc is not None else text


def gas_register(reg: int) -> str:
    return _gas_formatter().format_register(reg)


def is_padding(ins: Instruction) -> bool:
    return ins.mnemonic in PADDING_MNEMONICS


def _attach_relocs(insns: list[Instruction], relocs: list[Relocation]) -> dict[int, Relocation]:
    out: dict[int, Relocation] = {}
    starts = [ins.ip for ins in insns]
    for r in relocs:
        i = bisect.bisect_right(starts, r.offset) - 1
        if i >= 0 and r.offset < insns[i].next_ip:
            out[insns[i].ip] = r
    return out


def disassemble_object(obj_path: Path | str) -> Disassembly:
    obj_path = Path(obj_path)
    elf = read_elf(obj_path.read_bytes())
    functions: list[Function] = []
    sections: dict[str, list[Instruction]] = {}
    relocations: dict[str, dict[int, Relocation]] = {}
    for sec in elf.sections:
        if not sec.executable or sec.size == 0:
            continue
        code = elf.section_bytes(sec)
        relocs = sorted(elf.relocations.get(sec.index, ()), key=lambda r: r.offset)
        syms = sorted(
            (s for s in elf.symbols if s.type == STT_FUNC and s.section == sec.index),
            key=lambda s: (s.value, s.bind == STB_LOCAL),  # aliases: prefer the global name
        )
        # Function ranges; a symbol without .size runs to the next symbol or the section end.
        ranges: list[tuple[Symbol, int, int]] = []
        for i, s in enumerate(syms):
            if ranges and s.value < ranges[-1][2]:
                continue  # alias or nested symbol: already covered
            nxt = next((t.value for t in syms[i + 1:] if t.value > s.value), sec.size)
            end = min(s.value + s.size, sec.size) if s.size else nxt
            ranges.append((s, s.value, min(end, nxt)))

        listing: list[Instruction] = []
        pos = 0

        def gap(start: int, end: int) -> None:
            insns = decode(code[start:end], start)
            listing.extend(insns)
            if any(not is_padding(ins) for ins in insns):
                functions.append(Function(f"{sec.name}+{start:#x}", sec.name, start, end - start,
                                          False, insns, _attach_relocs(insns, relocs), False))

        for s, start, end in ranges:
            if start > pos:
                gap(pos, start)
            insns = decode(code[start:end], start)
            listing.extend(insns)
            functions.append(Function(s.name, sec.name, start, end - start, s.bind != STB_LOCAL,
                                      insns, _attach_relocs(insns, relocs)))
            pos = end
        if pos < sec.size:
            gap(pos, sec.size)
        sections[sec.name] = listing
        relocations[sec.name] = _attach_relocs(listing, relocs)
    return Disassembly(obj_path, functions, sections, relocations)


def load(asm_path: Path | str, **assemble_kw) -> Disassembly:
    """Assemble (cached) and decode one `.S` file."""
    return disassemble_object(assemble(asm_path, **assemble_kw))


def disassemble(asm_path: Path | str, **assemble_kw) -> list[Function]:
    """The functions of one `.S` file, each with its decoded instructions."""
    return load(asm_path, **assemble_kw).functions
