"""Kernel descriptions written in the DSL, one per C function of aesgen.functions; `build_functions`
builds a file's functions."""
from __future__ import annotations

from aesgen.dsl import FunctionBuilder
from aesgen.functions import FUNCTIONS as C_FUNCTIONS
from aesgen.ir import Function
from aesgen.spec import KernelSpec

from . import aes, gcm, gcm_stream, gcmsiv, modes, otr, xts
from .bitsliced import FUNCTIONS as BITSLICED, check_config
from .cpu import cpu_supported_function
from .ghash import gcm_set_key_function, ghash_function, polyval_function
from .mpc import cbc_multi_function, ecb_multikey_function, fixed_key_hash_function, set_encrypt_keys_function
from .ocb import ocb_function, ocb_set_key_function
from .registry import Describe, described_in
from .wideblock import rijndael256_ecb_function, rijndael256_set_key_function, simpira256_function

# C function -> its description (what it computes, through the builder). Its C contract (argument
# names, types, summary, modes) is its record in aesgen.functions; tests/test_functions.py checks
# that every record has a description here and every description a record. The descriptions of
# these modules mark themselves (`@describes`, kernels/registry.py); the others are paired here.
FUNCTIONS: dict[str, Describe] = {
    **described_in(aes, modes, gcm, gcm_stream, gcmsiv, xts, otr),
    "cpu_supported": cpu_supported_function,
    "gcm_set_key": gcm_set_key_function,
    "ghash": lambda b: ghash_function(b, b.spec.karatsuba),
    "polyval": lambda b: polyval_function(b, b.spec.karatsuba),
    "ocb_set_key": ocb_set_key_function,
    "ocb_encrypt": lambda b: ocb_function(b, False),
    "ocb_decrypt": lambda b: ocb_function(b, True),
    "rijndael256_set_encrypt_key": lambda b: rijndael256_set_key_function(b, False),
    "rijndael256_set_decrypt_key": lambda b: rijndael256_set_key_function(b, True),
    "rijndael256_ecb_encrypt": lambda b: rijndael256_ecb_function(b, False),
    "rijndael256_ecb_decrypt": lambda b: rijndael256_ecb_function(b, True),
    "simpira256_permute": lambda b: simpira256_function(b, False),
    "simpira256_inverse": lambda b: simpira256_function(b, True),
    "set_encrypt_keys": set_encrypt_keys_function,
    "ecb_encrypt_multikey": ecb_multikey_function,
    "fixed_key_hash": fixed_key_hash_function,
    "cbc_encrypt_multi": cbc_multi_function,
}


def build_function(spec: KernelSpec, name: str, compact: bool = False) -> Function:
    """`compact`: the variant for when the default's schedule needs too many registers."""
    record, describe = C_FUNCTIONS[name], FUNCTIONS[name]
    if spec.backend == "bitsliced" and name != "cpu_supported":
        check_config(spec)
        describe = BITSLICED[name]
    b = FunctionBuilder(spec, name, record.kernel_args, comment=record.summary, compact=compact)
    describe(b)
    return b.fn


def build_functions(spec: KernelSpec) -> list[Function]:
    return [build_function(spec, name) for name in spec.functions]
