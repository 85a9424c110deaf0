"""Symbol visibility: does a shared object built from the file export its functions?

A `--hidden` file marks every global symbol `.hidden` (STV_HIDDEN in the object file): linked
into a shared object, the functions become local symbols there (in `.symtab`, not in `.dynsym`),
callable from that object's own code only. Any other file's functions are in `.dynsym`. The runtime checks
still call a hidden file's functions: `hidden_addresses` finds them in the shared object's
`.symtab` and adds the address it was loaded at.
"""
from __future__ import annotations

import ctypes
from pathlib import Path

from .disasm import SHN_UNDEF, STB_LOCAL, ElfError, read_elf
from .results import CheckResult
from .signatures import function_set

RTLD_DI_LINKMAP = 2


def check(spec, so_path: Path | str) -> CheckResult:
    """`visibility`: every function hidden (and not exported) in a --hidden file, exported otherwise."""
    try:
        elf = read_elf(Path(so_path).read_bytes())
    except (ElfError, OSError) as e:
        return CheckResult("visibility", "fail", str(e))
    exported = {s.name for s in elf.dynamic_symbols if s.section != SHN_UNDEF}
    local = {s.name: s for s in elf.symbols}
    names = symbols(spec)
    if getattr(spec, "hidden", False):
        leaked = [n for n in names if n in exported or (n in local and local[n].bind != STB_LOCAL)]
        if leaked:
            return CheckResult("visibility", "fail", f"--hidden, but exported: {', '.join(leaked)}")
        return CheckResult("visibility", "pass", f"{len(names)} functions hidden: none in the shared object's .dynsym")
    missing = [n for n in names if n not in exported]
    if missing:
        return CheckResult("visibility", "fail", f"not exported: {', '.join(missing)}")
    return CheckResult("visibility", "pass", f"{len(names)} functions exported (default visibility)")


def symbols(spec) -> list[str]:
    """The exported functions' symbols (unknown modes are the `spec` check's failure, not a crash here)."""
    return [spec.symbol(f) for f in function_set(spec).functions]


def hidden_addresses(so_path: Path | str, lib: ctypes.CDLL, names: list[str]) -> dict[str, int]:
    """Where the loaded shared object's local symbols `names` are (name -> address)."""
    elf = read_elf(Path(so_path).read_bytes())
    base = _load_base(lib)
    return {s.name: base + s.value for s in elf.symbols
            if s.name in names and s.bind == STB_LOCAL and s.section != SHN_UNDEF}


def _load_base(lib: ctypes.CDLL) -> int:
    """The address the dynamic loader put the shared object at (its link_map's l_addr)."""
    libc = ctypes.CDLL(None)
    link_map = ctypes.c_void_p()
    if libc.dlinfo(ctypes.c_void_p(lib._handle), RTLD_DI_LINKMAP, ctypes.byref(link_map)) != 0:
        raise OSError("dlinfo(RTLD_DI_LINKMAP) failed")
    return ctypes.c_size_t.from_address(link_map.value).value
