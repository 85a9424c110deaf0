"""Kernel descriptions written in the DSL, one per C function of aesgen.functions; `build_functions`
builds a file's functions."""
from __future__ import annotations

from aesgen.dsl import FunctionBuilder
from aesgen.functions import FUNCTIONS as C_FUNCTIONS
from aesgen.ir import Function
from aesgen.spec import KernelSpec

from .aes import set_key_function
from .bitsliced import FUNCTIONS as BITSLICED, check_config
from .cpu import cpu_supported_function
from .gcm import gcm_function
from .gcm_stream import gcm_aad_function, gcm_finish_function, gcm_start_function, gcm_update_function
from .gcmsiv import gcmsiv_function, gcmsiv_set_key_function
from .ghash import gcm_set_key_function, ghash_function, polyval_function
from .modes import (Describe, block_cipher_functions, cbc_decrypt_function, cbc_encrypt_function, ctr32_function,
                    ecb_function)
from .mpc import cbc_multi_function, ecb_multikey_function, fixed_key_hash_function, set_encrypt_keys_function
from .ocb import ocb_function, ocb_set_key_function
from .otr import otr_function, otr_set_key_function
from .wideblock import rijndael256_ecb_function, rijndael256_set_key_function, simpira256_function
from .xts import gfdouble_function, xts_function, xts_set_key_function

# C function -> its description (what it computes, through the builder). Its C contract (argument
# names, types, summary, modes) is its record in aesgen.functions; tests/test_functions.py checks
# that every record has a description here and every description a record.
FUNCTIONS: dict[str, Describe] = {
    "cpu_supported": cpu_supported_function,
    **block_cipher_functions(set_key_function, ecb_function, ctr32_function, cbc_encrypt_function,
                             cbc_decrypt_function),
    "gcm_set_key": gcm_set_key_function,
    "ghash": lambda b: ghash_function(b, b.spec.karatsuba),
    "polyval": lambda b: polyval_function(b, b.spec.karatsuba),
    "gcm_encrypt": lambda b: gcm_function(b, False),
    "gcm_decrypt": lambda b: gcm_function(b, True),
    "gcm_start": gcm_start_function,
    "gcm_aad": gcm_aad_function,
    "gcm_encrypt_update": lambda b: gcm_update_function(b, False),
    "gcm_decrypt_update": lambda b: gcm_update_function(b, True),
    "gcm_finish": gcm_finish_function,
    "gcmsiv_set_key": gcmsiv_set_key_function,
    "gcmsiv_encrypt": lambda b: gcmsiv_function(b, False),
    "gcmsiv_decrypt": lambda b: gcmsiv_function(b, True),
    "xts_set_key": xts_set_key_function,
    "xts_encrypt": lambda b: xts_function(b, False),
    "xts_decrypt": lambda b: xts_function(b, True),
    "ocb_set_key": ocb_set_key_function,
    "ocb_encrypt": lambda b: ocb_function(b, False),
    "ocb_decrypt": lambda b: ocb_function(b, True),
    "otr_set_key": otr_set_key_function,
    "otr_encrypt": lambda b: otr_function(b, False),
    "otr_decrypt": lambda b: otr_function(b, True),
    "rijndael256_set_encrypt_key": lambda b: rijndael256_set_key_function(b, False),
    "rijndael256_set_decrypt_key": lambda b: rijndael256_set_key_function(b, True),
    "rijndael256_ecb_encrypt": lambda b: rijndael256_ecb_function(b, False),
    "rijndael256_ecb_decrypt": lambda b: rijndael256_ecb_function(b, True),
    "simpira256_permute": lambda b: simpira256_function(b, False),
    "simpira256_inverse": lambda b: simpira256_function(b, True),
    "gfdouble_le": lambda b: gfdouble_function(b, False),
    "gfdouble_be": lambda b: gfdouble_function(b, True),
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
