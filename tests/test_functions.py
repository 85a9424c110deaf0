"""The function registry (aesgen.functions): one record per C function, and everything derived
from it -- the header's prototypes, the kernel binding, the verifier's signatures, what the
benchmark times and the function table of docs/abi.md -- agrees with it."""
from __future__ import annotations

import ctypes
import re
import types
from pathlib import Path

import pytest

from aesgen import kernels
from aesgen.declassify import REASONS
from aesgen.functions import (COMMON_FUNCTIONS, EVERY_FILE, EXPLORED_FUNCTIONS, FUNCTIONS, KEY_BITS_TRIED,
                              MODE_FUNCTIONS, MODE_TITLES, MODES, TIMED_FUNCTIONS, CFunction, Param, StandardMode,
                              mode_of)
from aesgen.kernels.regs import arg
from aesgen.pipeline import generate
from aesgen.spec import KernelSpec
from aesgen.kernels.registry import described_in, describes
from aesgen.tools import abi_doc
from aesgen.verify import differential, signatures
from aesgen.verify.reference import standard

ABI_MD = Path(__file__).resolve().parent.parent / "docs" / "abi.md"
# What a C type means to ctypes, written out here rather than taken from the verifier.
C_SCALARS = {"size_t": ctypes.c_size_t, "unsigned": ctypes.c_uint, "int": ctypes.c_int, "uint64_t": ctypes.c_uint64}
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
                assert re.sub(r"^(8|16|32)\*|/8$", "", size) in scalars, (f.name, p.name, size)
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
    """The committed table is what `make regen-docs` writes from the records (regenerate on a change)."""
    text = ABI_MD.read_text()
    assert abi_doc.rewrite(text) == text, "docs/abi.md: the function table is stale; run `make regen-docs`"
    table = re.search(r"^\| mode \| function \| what it does \|\n\|---\|---\|---\|\n((?:\|.*\n)+)", text, re.M)
    assert table, "docs/abi.md: no '| mode | function | what it does |' table"
    listed, mode = {}, None
    for first, fn in re.findall(r"^\| (.*?) \| `P_(\w+)` \|", table.group(1), re.M):
        mode = re.sub(r"`([\w-]+)`.*", r"\1", first) if first else mode
        listed.setdefault(mode, []).append(fn)
    assert listed == {"every file": list(COMMON_FUNCTIONS), **{m: list(fs) for m, fs in MODE_FUNCTIONS.items()}}


def test_abi_md_rewrite_replaces_only_its_blocks() -> None:
    text = (f"before\n{abi_doc.BEGIN}\nold rows\n{abi_doc.END}\nbetween\n"
            f"{abi_doc.PUBLIC_BEGIN}\nold list\n{abi_doc.PUBLIC_END}\nafter\n")
    assert abi_doc.rewrite(text) == (f"before\n{abi_doc.function_table()}\nbetween\n"
                                     f"{abi_doc.public_by_design()}\nafter\n")
    with pytest.raises(ValueError):
        abi_doc.rewrite("no markers")
    with pytest.raises(ValueError):  # one part without the other
        abi_doc.rewrite(f"{abi_doc.BEGIN}\n{abi_doc.END}\n")


def test_abi_md_public_list_names_every_reason_and_its_functions() -> None:
    """Each declassify reason is a row naming exactly the functions whose records give it."""
    text = ABI_MD.read_text()
    for reason in REASONS:
        row = re.search(rf"^\|.*\| `_ct_declassify_{reason}_` \| (.*) \|$", text, re.M)
        assert row, reason
        users = {n for n, f in FUNCTIONS.items() if reason in f.public_by_design}
        assert set(re.findall(r"`P_(\w+)`", row.group(1))) == users, reason


def test_abi_md_headings_are_the_registry_prototypes() -> None:
    """A function with a section of its own heads it with the record's prototype (the table above
    lists every function; the header gives every prototype)."""
    headings = re.findall(r"^#+ `((?:int|void) P_(\w+)\(.*\))`$", ABI_MD.read_text(), re.M)
    assert headings
    for proto, name in headings:
        assert proto == FUNCTIONS[name].prototype(f"P_{name}"), name


def test_block_checks_take_the_length_unit_and_chaining_value_from_the_record() -> None:
    sigs = signatures.SIGNATURES
    assert (sigs["ctr32_encrypt"].chain, sigs["ctr32_encrypt"].bytewise) == ("ctr", True)
    assert (sigs["cbc_decrypt"].chain, sigs["cbc_decrypt"].bytewise) == ("iv", False)
    assert sigs["ecb_encrypt"].chain is None and sigs["ghash"].chain is None  # acc is no chaining value


def test_timed_and_explored_functions_come_from_the_records() -> None:
    for mode, op in EXPLORED_FUNCTIONS.items():
        assert op in TIMED_FUNCTIONS[mode], (mode, op)
        assert sum(FUNCTIONS[f].explored for f in MODE_FUNCTIONS[mode] if mode_of(f) == mode) == 1, mode
    assert TIMED_FUNCTIONS["gcm"] == ("gcm_encrypt", "gcm_decrypt")  # ghash is timed as its own mode's
    assert EXPLORED_FUNCTIONS["cbc"] == "cbc_decrypt" and TIMED_FUNCTIONS["gcm-siv"] == ("gcmsiv_encrypt",)
    assert set(TIMED_FUNCTIONS) == set(MODES)
    with pytest.raises(ValueError):
        CFunction("f", "void", (), "", (), "block", explored=True)


def test_descriptions_mark_the_function_they_describe() -> None:
    here = types.ModuleType("described_here")

    @describes("f_encrypt", decrypt=False)
    @describes("f_decrypt", decrypt=True)
    def describe(b: object, decrypt: bool) -> bool:
        return decrypt

    describe.__module__ = here.__name__
    here.describe = describe
    elsewhere = types.ModuleType("imports_it")
    elsewhere.describe = describe  # imported: counted in its own module only
    found = described_in(here, elsewhere)
    assert set(found) == {"f_encrypt", "f_decrypt"}
    assert found["f_decrypt"](None) is True and found["f_encrypt"](None) is False
    with pytest.raises(ValueError):
        described_in(here, here)


SP800_38A_PLAINTEXT = ("6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e51"
                       "30c81c46a35ce411e5fbc1191a0a52eff69f2445df4f9b17ad2b417be66c3710")
# NIST SP 800-38A Appendix F, AES-128 with IV 000102..0f: F.2.1 CBC, F.3.13 CFB128, F.4.1 OFB (encrypt).
SP800_38A_F = {
    "CBC": "7649abac8119b246cee98e9b12e9197d5086cb9b507219ee95db113a917678b2"
           "73bed6b8e3c1743b7116e69e222295163ff1caa1681fac09120eca307586e1a7",
    "CFB": "3b3fd92eb72dad20333449f8e83cfb4ac8a64537a0b3a93fcde3cdad9f1ce58b"
           "26751f67a3cbb140b1808cf187a4f4dfc04b05357c5d1c0eeac4c66f9ff7f2e6",
    "OFB": "3b3fd92eb72dad20333449f8e83cfb4a7789508d16918f03f53c52dac54ed825"
           "9740051e9c5fecf64344f7a82260edcc304c6528f659c77866a510d9c1d6ae5e",
}


@pytest.mark.parametrize("name", sorted(SP800_38A_F))
def test_a_named_standard_mode_is_checked_against_sp800_38a(name: str) -> None:
    """What the verifier derives from a record's StandardMode: the output, and the iv the next call
    continues from (CBC, CFB: the last ciphertext block; OFB: the last keystream block)."""
    key, iv = bytes.fromhex("2b7e151628aed2a6abf7158809cf4f3c"), bytes(range(16))
    pt, ct = bytes.fromhex(SP800_38A_PLAINTEXT), bytes.fromhex(SP800_38A_F[name])
    out, after = standard.expected(StandardMode(name), key, pt, iv)
    assert out == ct
    assert after == (bytes(a ^ b for a, b in zip(pt[-16:], ct[-16:])) if name == "OFB" else ct[-16:])
    back, after = standard.expected(StandardMode(name, decrypt=True), key, ct, iv)
    assert back == pt and after == (standard.next_iv(StandardMode(name), pt, ct, iv))
    assert standard.expected(StandardMode(name), key, b"", iv) == (b"", iv)


def test_block_functions_name_their_standard_mode_or_have_a_model() -> None:
    for name in signatures.in_family(FUNCTIONS, signatures.BLOCK):
        assert differential.has_reference(name), name
    assert FUNCTIONS["cbc_decrypt"].standard == StandardMode("CBC", decrypt=True)
    assert FUNCTIONS["ctr32_encrypt"].standard is None  # 32-bit counter: not cryptography's CTR


def test_every_key_setup_is_tried_with_the_sizes_it_refuses():
    """The refused sizes come from the record's accepted ones: GCM-SIV's setup must refuse 192,
    Rijndael-256's 128, an AES setup 255 and 257."""
    setups = {n: f for n, f in FUNCTIONS.items() if f.is_key_setup}
    assert setups
    for name, f in setups.items():
        assert set(f.rejected_bits) == set(KEY_BITS_TRIED) - set(f.key_bits), name
        assert 0 in f.rejected_bits and 512 in f.rejected_bits, name
    assert 192 in setups["gcmsiv_set_key"].rejected_bits and 255 in setups["set_encrypt_key"].rejected_bits
