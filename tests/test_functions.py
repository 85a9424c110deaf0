"""The function registry (aesgen.functions): one record per C function, and everything derived
from it -- the header's prototypes, the kernel binding, the verifier's signatures and the
function table of docs/abi.md -- agrees with it."""
from __future__ import annotations

import ctypes
import re
from pathlib import Path

import pytest

from aesgen import kernels
from aesgen.functions import (COMMON_FUNCTIONS, EVERY_FILE, FUNCTIONS, MODE_FUNCTIONS, MODE_TITLES, MODES,
                              CFunction, Param, mode_of)
from aesgen.kernels.regs import arg
from aesgen.pipeline import generate
from aesgen.spec import KernelSpec
from aesgen.verify import signatures

ABI_MD = Path(__file__).resolve().parent.parent / "docs" / "abi.md"
# What a C type means to ctypes, written out here rather than taken from the verifier.
C_SCALARS = {"size_t": ctypes.c_size_t, "unsigned": ctypes.c_uint, "int": ctypes.c_int}
PROTOTYPE = re.compile(r"^(int|void) (?:AESGEN_MS_ABI )?(\w+)\((.*)\);$", re.M)


def parse_prototypes(header: str) -> dict[str, tuple[str, list[tuple[str, str, int | None]]]]:
    """symbol -> (return type, [(C type, name, array length or None)]) for every prototype."""
    out = {}
    for ret, symbol, args in PROTOTYPE.findall(header):
        params = []
        for decl in ([] if args == "void" else args.split(", ")):
            m = re.fullmatch(r"(.*?)\s*(\w+)(?:\[(\d+)\])?", decl)
            assert m, decl
            params.append((m.group(1), m.group(2), int(m.group(3)) if m.group(3) else None))
        out[symbol] = (ret, params)
    return out


def pointee_is_const(ctype: str, array: int | None) -> bool:
    """`const uint8_t *`, `const uint8_t x[16]`, `uint8_t *const *`: what the pointer points at is const."""
    if array is not None:
        return ctype.startswith("const ")
    inner = ctype[:ctype.rindex("*")].strip()
    return inner.endswith("const") or ("*" not in inner and inner.startswith("const "))


# ------------------------------------------------------------------- the registry itself


def test_every_record_has_a_kernel_description_and_every_description_a_record() -> None:
    assert set(kernels.FUNCTIONS) == set(FUNCTIONS)


def test_every_mode_has_functions_a_title_and_every_record_known_modes() -> None:
    assert set(MODE_TITLES) == set(MODES) and len(set(MODES)) == len(MODES)
    for mode in MODES:
        assert MODE_FUNCTIONS[mode], mode
    for f in FUNCTIONS.values():
        assert set(f.modes) <= set(MODES), f.name
    assert COMMON_FUNCTIONS == ("cpu_supported", "set_encrypt_key", "set_decrypt_key")


def test_a_function_s_key_setup_is_in_every_file_that_has_the_function() -> None:
    for mode, names in MODE_FUNCTIONS.items():
        for name in names:
            setup = FUNCTIONS[name].key_setup
            assert setup is None or setup in COMMON_FUNCTIONS + names, (mode, name, setup)


def test_key_setup_functions_run_at_the_file_width_and_fill_a_sized_key() -> None:
    for f in FUNCTIONS.values():
        if f.is_key_setup:
            assert mode_of(f.name) is None and f.returns == "int" and f.schedule_attr, f.name
            assert hasattr(KernelSpec, f.schedule_attr), f.name
        elif f.modes != EVERY_FILE:
            assert mode_of(f.name) == f.modes[0]


def test_sizes_name_parameters_or_spec_attributes_and_const_matches_access() -> None:
    for f in FUNCTIONS.values():
        scalars = {p.name for p in f.params if not p.is_pointer}
        assert len({p.name for p in f.params}) == f.nargs and len(set(f.kernel_args)) == f.nargs, f.name
        for p in f.pointers:
            size = p.size
            if isinstance(size, str) and p.spec_attr:
                assert hasattr(KernelSpec, p.spec_attr), (f.name, p.name)
            elif isinstance(size, str):
                assert re.sub(r"^(16|32)\*|/8$", "", size) in scalars, (f.name, p.name, size)
            array = re.search(r"\[(\d+)\]$", p.ctype)
            const = pointee_is_const(p.ctype, int(array.group(1)) if array else None)
            assert const == (p.access == "r"), (f.name, p.name, p.ctype, p.access)


def test_a_param_refuses_what_it_cannot_mean() -> None:
    with pytest.raises(ValueError):
        Param("len", "size_t", access="r")
    with pytest.raises(ValueError):
        Param("in", "const uint8_t *")
    with pytest.raises(ValueError):
        Param("iv", "uint8_t[16]", 32, "rw")
    with pytest.raises(ValueError):
        CFunction("f", "long", (), "", (), "block")
    assert Param("iv", "uint8_t[16]", access="rw").size == 16


def test_prototypes_and_kernel_names_come_from_the_record() -> None:
    ghash = FUNCTIONS["ghash"]
    assert ghash.prototype("P_ghash") == \
        "void P_ghash(const void *gkey, uint8_t acc[16], const uint8_t *data, size_t nblocks)"
    assert ghash.kernel_args == ("key", "acc", "data", "nblocks")
    assert FUNCTIONS["cpu_supported"].prototype("P_cpu_supported") == "int P_cpu_supported(void)"
    assert FUNCTIONS["cbc_encrypt_multi"].params[2].declaration == "uint8_t *const *out"


def test_a_kernel_s_argument_registers_come_from_the_record() -> None:
    # SysV: rdi, rsi, rdx, rcx, r8, r9 in parameter order, by the names the kernels bind
    assert [arg("ocb_encrypt", a) for a in ("okey", "nonce", "noncelen", "aad", "aadlen", "in")] == \
        ["rdi", "rsi", "rdx", "rcx", "r8", "r9"]
    assert arg("set_decrypt_key", "key") == "rdx"
    assert arg("ghash", "key") == "rdi"  # gkey, bound as `key`
    with pytest.raises(ValueError, match="stack argument"):
        arg("ocb_encrypt", "out")  # the seventh


# ------------------------------------------------------------------- header == verifier


def check_header_against_verifier(spec: KernelSpec) -> None:
    header = generate(spec).header
    protos = parse_prototypes(header)
    fset = signatures.function_set(spec)
    assert not fset.problems and not fset.unusable
    assert list(protos) == [spec.symbol(fn) for fn in fset.functions]
    for fn in fset.functions:
        sig = signatures.SIGNATURES[fn]
        ret, params = protos[spec.symbol(fn)]
        assert sig.restype == (ctypes.c_int if ret == "int" else None), fn
        assert sig.nargs == len(params), fn
        assert [p.name for p in sig.params] == [name for _, name, _ in params], fn
        want = [ctypes.c_void_p if ("*" in ctype or n is not None) else C_SCALARS[ctype] for ctype, _, n in params]
        assert sig.argtypes == want, fn
        assert sig.mask32 == sum(1 << i for i, t in enumerate(want) if t in (ctypes.c_uint, ctypes.c_int)), fn
        for (ctype, name, n), p in zip(params, sig.params):
            if n is not None:
                assert p.size == n, (fn, name)
            if p.is_pointer:
                assert pointee_is_const(ctype, n) == (p.access == "r"), (fn, name, ctype, p.access)


@pytest.mark.parametrize("mode", MODES)
def test_header_prototypes_agree_with_the_verifier(mode: str) -> None:
    check_header_against_verifier(KernelSpec((mode,), "sse", 128, 1, prefix=f"t_{mode.replace('-', '')}"))


def test_win64_header_prototypes_agree_with_the_verifier() -> None:
    check_header_against_verifier(KernelSpec(("gcm", "ocb"), "avx2", 256, 1, prefix="w", abi="win64"))


# ------------------------------------------------------------------- docs/abi.md


def test_abi_md_function_table_is_the_registry() -> None:
    text = ABI_MD.read_text()
    table_text = re.search(r"^\| mode \| functions \|\n\|---\|---\|\n((?:\|.*\n)+)", text, re.M)
    assert table_text, "docs/abi.md: no '| mode | functions |' table"
    rows = dict(re.findall(r"^\| `([\w-]+)` \| (.*) \|$", table_text.group(1), re.M))
    table = {mode: tuple(re.findall(r"`P_(\w+)`", cell)) for mode, cell in rows.items()}
    assert table == MODE_FUNCTIONS
    always = re.search(r"A file always contains (.*?), followed by", text, re.S)
    assert always and tuple(re.findall(r"`P_(\w+)`", always.group(1))) == COMMON_FUNCTIONS


def test_abi_md_headings_are_the_registry_prototypes() -> None:
    headings = re.findall(r"^#+ `((?:int|void) P_(\w+)\(.*\))`$", ABI_MD.read_text(), re.M)
    assert {name: proto for proto, name in headings} == \
        {name: f.prototype(f"P_{name}") for name, f in FUNCTIONS.items()}


def test_block_checks_take_the_length_unit_and_chaining_value_from_the_record() -> None:
    sigs = signatures.SIGNATURES
    assert (sigs["ctr32_encrypt"].chain, sigs["ctr32_encrypt"].bytewise) == ("ctr", True)
    assert (sigs["cbc_decrypt"].chain, sigs["cbc_decrypt"].bytewise) == ("iv", False)
    assert sigs["ecb_encrypt"].chain is None and sigs["ghash"].chain is None  # acc is no chaining value
