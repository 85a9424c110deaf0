"""Kernel descriptions written in the DSL; `build_functions` lists a file's functions."""
from __future__ import annotations

from aesgen.dsl import FunctionBuilder
from aesgen.ir import Function
from aesgen.spec import KernelSpec

from .aes import set_key_function
from .cpu import cpu_supported_function
from .gcm import gcm_function
from .gcm_stream import gcm_aad_function, gcm_finish_function, gcm_start_function, gcm_update_function
from .gcmsiv import gcmsiv_function, gcmsiv_set_key_function
from .ghash import gcm_set_key_function, ghash_function, polyval_function
from .modes import cbc_decrypt_function, cbc_encrypt_function, ctr32_function, ecb_function
from .mpc import cbc_multi_function, ecb_multikey_function, fixed_key_hash_function, set_encrypt_keys_function
from .ocb import ocb_function, ocb_set_key_function
from .otr import otr_function, otr_set_key_function
from .wideblock import rijndael256_ecb_function, rijndael256_set_key_function, simpira256_function
from .xts import gfdouble_function, xts_function, xts_set_key_function

GCM_ARGS = ("key", "iv", "ivlen", "aad", "aadlen", "in", "out", "len", "tag", "taglen")
OCB_ARGS = ("okey", "nonce", "noncelen", "aad", "aadlen", "in", "out", "len", "tag", "taglen")
OTR_ARGS = ("key", "nonce", "noncelen", "aad", "aadlen", "in", "out", "len", "tag")
GCMSIV_ARGS = ("key", "nonce", "aad", "aadlen", "in", "out", "len", "tag")
# name -> (C argument names, describe(builder), one-line summary)
FUNCTIONS = {
    "cpu_supported": ((), cpu_supported_function, "1 if CPUID and XGETBV allow this file's instructions"),
    "set_encrypt_key": (("user_key", "bits", "key"), lambda b: set_key_function(b, False),
                        "AES key expansion (FIPS-197)"),
    "set_decrypt_key": (("user_key", "bits", "key"), lambda b: set_key_function(b, True),
                        "equivalent inverse cipher key schedule"),
    "ecb_encrypt": (("key", "in", "out", "nblocks"), lambda b: ecb_function(b, False), "ECB encryption"),
    "ecb_decrypt": (("key", "in", "out", "nblocks"), lambda b: ecb_function(b, True), "ECB decryption"),
    "ctr32_encrypt": (("key", "in", "out", "len", "ctr"), ctr32_function,
                      "CTR with a 32-bit big-endian counter (encrypts and decrypts)"),
    "cbc_encrypt": (("key", "in", "out", "nblocks", "iv"), cbc_encrypt_function, "CBC encryption (serial)"),
    "cbc_decrypt": (("key", "in", "out", "nblocks", "iv"), cbc_decrypt_function, "CBC decryption (parallel)"),
    "gcm_set_key": (("user_key", "bits", "key"), gcm_set_key_function,
                    "GCM key: AES schedule and the powers of H"),
    "ghash": (("key", "acc", "data", "nblocks"), lambda b: ghash_function(b, b.spec.karatsuba),
              "GHASH (SP 800-38D) of whole blocks, continued from acc"),
    "polyval": (("h", "acc", "data", "nblocks"), lambda b: polyval_function(b, b.spec.karatsuba),
                "POLYVAL (RFC 8452) of whole blocks, continued from acc"),
    "gcm_encrypt": (GCM_ARGS, lambda b: gcm_function(b, False), "AES-GCM encryption and tag (one call)"),
    "gcm_decrypt": (GCM_ARGS, lambda b: gcm_function(b, True),
                    "AES-GCM decryption; -1 and out zeroed on a wrong tag"),
    "gcm_start": (("ctx", "gkey", "iv", "ivlen"), gcm_start_function,
                  "streaming AES-GCM: a new message (-1 for an empty IV)"),
    "gcm_aad": (("ctx", "aad", "len"), gcm_aad_function, "streaming AES-GCM: more AAD, before any text"),
    "gcm_encrypt_update": (("ctx", "in", "out", "len"), lambda b: gcm_update_function(b, False),
                           "streaming AES-GCM: encrypt len more bytes (any chunking)"),
    "gcm_decrypt_update": (("ctx", "in", "out", "len"), lambda b: gcm_update_function(b, True),
                           "streaming AES-GCM: decrypt len more bytes (any chunking)"),
    "gcm_finish": (("ctx", "tag"), gcm_finish_function,
                   "streaming AES-GCM: the 16-byte tag; the context's secrets are wiped"),
    "gcmsiv_set_key": (("user_key", "bits", "key"), gcmsiv_set_key_function,
                       "AES-GCM-SIV key: the key-generating key's AES schedule (128 or 256 bits)"),
    "gcmsiv_encrypt": (GCMSIV_ARGS, lambda b: gcmsiv_function(b, False),
                       "AES-GCM-SIV (RFC 8452) encryption and tag"),
    "gcmsiv_decrypt": (GCMSIV_ARGS, lambda b: gcmsiv_function(b, True),
                       "AES-GCM-SIV decryption; -1 and out zeroed on a wrong tag"),
    "xts_set_key": (("key1", "key2", "bits", "xkey", "enc"), xts_set_key_function,
                    "XTS key: key1's schedule (encrypt, or decrypt if enc == 0), then key2's"),
    "xts_encrypt": (("xkey", "in", "out", "len", "tweak"), lambda b: xts_function(b, False),
                    "XTS-AES (IEEE 1619) encryption with ciphertext stealing"),
    "xts_decrypt": (("xkey", "in", "out", "len", "tweak"), lambda b: xts_function(b, True),
                    "XTS-AES (IEEE 1619) decryption with ciphertext stealing"),
    "ocb_set_key": (("user_key", "bits", "okey"), ocb_set_key_function,
                    "OCB key: both AES schedules, L_*, L_$, L_0..L_63 and the batch offset tables"),
    "ocb_encrypt": (OCB_ARGS, lambda b: ocb_function(b, False), "AES-OCB3 (RFC 7253) encryption and tag"),
    "ocb_decrypt": (OCB_ARGS, lambda b: ocb_function(b, True),
                    "AES-OCB3 decryption; -1 and out zeroed on a wrong tag"),
    "otr_set_key": (("user_key", "bits", "key"), otr_set_key_function,
                    "AES-OTR key: the AES encryption schedule, then Q = E_K(0)"),
    "otr_encrypt": (OTR_ARGS, lambda b: otr_function(b, False),
                    "AES-OTR v3.1 (parallel AD) encryption and 16-byte tag"),
    "otr_decrypt": (OTR_ARGS, lambda b: otr_function(b, True),
                    "AES-OTR v3.1 decryption; -1 and out zeroed on a wrong tag or nonce length"),
    "rijndael256_set_encrypt_key": (("user_key", "bits", "rkey"), lambda b: rijndael256_set_key_function(b, False),
                                    "Rijndael-256 key expansion (Nk = Nb = 8: 120 words); bits must be 256"),
    "rijndael256_set_decrypt_key": (("user_key", "bits", "rkey"), lambda b: rijndael256_set_key_function(b, True),
                                    "Rijndael-256 equivalent inverse cipher schedule; bits must be 256"),
    "rijndael256_ecb_encrypt": (("rkey", "in", "out", "nblocks"), lambda b: rijndael256_ecb_function(b, False),
                                "Rijndael-256 (256-bit blocks, 14 rounds) in ECB: nblocks 32-byte blocks"),
    "rijndael256_ecb_decrypt": (("rkey", "in", "out", "nblocks"), lambda b: rijndael256_ecb_function(b, True),
                                "Rijndael-256 ECB decryption (the decryption schedule)"),
    "simpira256_permute": (("in", "out", "nblocks"), lambda b: simpira256_function(b, False),
                           "Simpira v2 (b = 2) of each of nblocks 32-byte blocks"),
    "simpira256_inverse": (("in", "out", "nblocks"), lambda b: simpira256_function(b, True),
                           "the inverse of Simpira v2 (b = 2) of each of nblocks 32-byte blocks"),
    "gfdouble_le": (("tweak", "out", "nblocks"), lambda b: gfdouble_function(b, False),
                    "out[i] = tweak * x^i in GF(2^128), little-endian blocks (XTS)"),
    "gfdouble_be": (("tweak", "out", "nblocks"), lambda b: gfdouble_function(b, True),
                    "out[i] = tweak * x^i in GF(2^128), big-endian blocks (OCB, OTR)"),
    "set_encrypt_keys": (("user_keys", "bits", "nkeys", "keys"), set_encrypt_keys_function,
                         "nkeys AES key expansions into one multikey schedule (round keys interleaved)"),
    "ecb_encrypt_multikey": (("keys", "nkeys", "in", "out", "blocks_per_key"), ecb_multikey_function,
                             "ECB of blocks_per_key blocks under each of nkeys keys, keys in the lanes"),
    "fixed_key_hash": (("key", "in", "out", "nblocks"), fixed_key_hash_function,
                       "correlation-robust hash pi(sigma(x)) ^ sigma(x) under one fixed key"),
    "cbc_encrypt_multi": (("keys", "in", "out", "nblocks", "ivs", "nstreams"), cbc_multi_function,
                          "CBC encryption of nstreams independent equal-length streams, interleaved"),
}


def build_function(spec: KernelSpec, name: str, compact: bool = False) -> Function:
    """`compact`: the variant for when the default's schedule needs too many registers."""
    args, describe, summary = FUNCTIONS[name]
    if spec.backend == "bitsliced" and name != "cpu_supported":
        from .bitsliced import FUNCTIONS as BITSLICED, check_config  # (imports the circuit compilers)
        check_config(spec)
        describe = BITSLICED[name]
    b = FunctionBuilder(spec, name, args, comment=summary, compact=compact)
    describe(b)
    return b.fn


def build_functions(spec: KernelSpec) -> list[Function]:
    return [build_function(spec, name) for name in spec.functions]
