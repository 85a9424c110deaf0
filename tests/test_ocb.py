"""AES-OCB3 (RFC 7253): the verifier's reference, the scalar ops the kernel added, the DSL
description in the simulator, and the whole verifier on generated files."""
from __future__ import annotations

import random
import subprocess

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESOCB3

from aesgen.ir import Insn
from aesgen.isa import Assembler
from aesgen.kernels import build_function
from aesgen.simulate import Machine, call
from aesgen.spec import KernelSpec
from aesgen.verify import ocb

from _support import aesgen_command, verify_generated


# ---------------------------------------------------------------- the reference

def test_reference_reproduces_every_published_vector():
    files = dict(ocb.ocb_files())
    assert {"rfc7253", "test-vector-1-nonce104", "test-vector-1-nonce120", "openssl"} <= set(files)
    for name, cases in files.items():
        for v in cases:
            assert ocb.OcbReference(v.key).seal(v.iv, v.aad, v.plaintext, len(v.tag)) == (v.ciphertext, v.tag), name


def test_reference_agrees_with_aesocb3_and_inverts_itself():
    rng = random.Random(7)
    for i in range(60):
        key = rng.randbytes((16, 24, 32)[i % 3])
        nonce, aad, pt = rng.randbytes(12 + i % 4), rng.randbytes(rng.randrange(70)), rng.randbytes(rng.randrange(150))
        assert ocb.cross_check(key, nonce, aad, pt) is None
    # nonce and tag lengths AESOCB3 refuses: decryption still inverts, tags truncate the full one
    ref = ocb.OcbReference(bytes(range(16)))
    for noncelen in range(1, 12):
        nonce, pt = rng.randbytes(noncelen), rng.randbytes(41)
        ct, tag = ref.seal(nonce, b"ad", pt, 16)
        assert ref.seal(nonce, b"ad", ct, 16, decrypt=True) == (pt, tag)
    for taglen in (1, 8, 12):  # the tag length enters the nonce block: not a mere truncation
        assert ref.seal(b"n" * 12, b"", b"x", taglen)[1] != ref.seal(b"n" * 12, b"", b"x", 16)[1][:taglen]


def test_reference_would_notice_a_wrong_offset():
    key, nonce = bytes(16), bytes(range(12))
    ref = ocb.OcbReference(key)
    ref.l[1] = ref.l[0]  # a broken L table changes block 2's offset
    ct, tag = ref.seal(nonce, b"", bytes(48), 16)
    assert ct + tag != AESOCB3(key).encrypt(nonce, bytes(48), b"")


# ---------------------------------------------------------------- scalar ops

@pytest.mark.parametrize("op,dst,src,count,want", [
    ("shld.r64.r64.imm", 0x0123456789ABCDEF, 0xFEDCBA9876543210, 8, 0x23456789ABCDEFFE),
    ("shld.r64.r64.cl", 0x0123456789ABCDEF, 0xFEDCBA9876543210, 0, 0x0123456789ABCDEF),
    ("shld.r64.r64.cl", 0x0123456789ABCDEF, 0xFEDCBA9876543210, 63, 0xFF6E5D4C3B2A1908),
    ("shld.r64.r64.cl", 1, 1 << 63, 64 + 1, 3),  # the count is taken mod 64
    ("bsf.r64.r64", 0, 0x50, None, 4),
    ("xor.r64.r64", 0xF0F0, 0xFF00, None, 0x0FF0),
])
def test_scalar_ops_simulate_as_x86(op, dst, src, count, want):
    from aesgen.ops import OPS
    from aesgen.simulate import Interpreter

    spec = KernelSpec(("ocb",), "avx", 128, 1)
    m = Machine(spec)
    m.put("rax", dst)
    m.put("r11", src)
    if op == "shld.r64.r64.cl":
        m.put("rcx", count)
    insn = Insn(op, "rax", ("r11",), imm=count if op == "shld.r64.r64.imm" else None)
    it = Interpreter.__new__(Interpreter)  # the scalar ops need only its machine
    it.m = m
    OPS[op].semantics(it, insn)
    assert m.get("rax") == want


def test_scalar_ops_encode_as_gas_writes_them():
    a = Assembler("avx", {})
    texts = {op: a.emit(Insn(op, "rbp", ("r11",), imm=8 if op == "shld.r64.r64.imm" else None)).text
             for op in ("shld.r64.r64.imm", "shld.r64.r64.cl", "bsf.r64.r64", "xor.r64.r64")}
    assert texts == {"shld.r64.r64.imm": "shld $8,%r11,%rbp", "shld.r64.r64.cl": "shld %cl,%r11,%rbp",
                     "bsf.r64.r64": "bsf %r11,%rbp", "xor.r64.r64": "xor %r11,%rbp"}


# ---------------------------------------------------------------- the DSL description, simulated

@pytest.mark.parametrize("isa,width,depth", [("avx", 128, 2), ("avx2", 256, 2), ("avx512", 512, 2)])
def test_simulation_matches_the_reference(isa, width, depth):
    spec = KernelSpec(("ocb",), isa, width, depth)
    B = spec.ocb_batch_blocks
    rng = random.Random(width + depth)
    setup, enc, dec = (build_function(spec, f"ocb_{f}") for f in ("set_key", "encrypt", "decrypt"))
    # (noncelen, aadlen, len, taglen): blocks in the head, a masked/odd rest, batches past 2B
    cases = [(12, 0, 0, 16), (1, 16 * (B + 2) + 8, 16 * (2 * B + 1) + 7, 13), (15, 16 * 6, 16 * 3, 1),
             (7, 5, 16 * (4 * B) + 15, 16)]
    for bits in (128, 256):
        m = Machine(spec, size=1 << 21)
        key = rng.randbytes(bits // 8)
        okey = m.alloc(spec.ocb_key_bytes)
        assert call(m, setup, m.alloc(key), bits, okey) == 0
        ref = ocb.OcbReference(key)
        for noncelen, aadlen, n, taglen in cases:
            nonce, aad, pt = rng.randbytes(noncelen), rng.randbytes(aadlen), rng.randbytes(n)
            ct, tag = ref.seal(nonce, aad, pt, taglen)
            na, aa, buf, ta = m.alloc(nonce), m.alloc(aad or b"\0"), m.alloc(pt or b"\0"), m.alloc(16)

            def run(fn):  # in place; arguments 7..10 on the simulated stack
                return call(m, fn, okey, na, noncelen, aa, aadlen, buf, buf, n, ta, taglen) & 0xFFFFFFFF

            assert run(enc) == 0
            assert m.read(buf, n) == ct and m.read(ta, taglen) == tag, (bits, noncelen, aadlen, n, taglen)
            assert run(dec) == 0 and m.read(buf, n) == pt
            m.write(buf, ct)
            m.write(ta, bytes([tag[0] ^ 1]) + tag[1:])
            assert run(dec) == 0xFFFFFFFF and m.read(buf, n) == bytes(n)


# ---------------------------------------------------------------- generated files, whole verifier

@pytest.mark.parametrize("isa,width,depth", [("avx", 128, 4), ("avx", 128, 8), ("avx2", 256, 2), ("avx2", 256, 4),
                                             ("avx512", 512, 4), ("avx512", 512, 8)])
def test_generated_file_verifies(tmp_path, isa, width, depth):
    results = verify_generated(tmp_path, KernelSpec(("ocb",), isa, width, depth), quick=True)
    names = {r.name for r in results}
    assert {"ct ocb_encrypt", "ct ocb_decrypt", "tamper ocb_decrypt 128", "simulate ocb_decrypt",
            "badargs ocb_encrypt", "abi ocb_decrypt", "guard ocb_encrypt len0"} <= names
    assert any(n.startswith("kat ocb_decrypt rfc7253") for n in names)


@pytest.mark.full
@pytest.mark.parametrize("isa,width,depth", [("sse", 128, 2), ("avx512", 128, 8), ("avx512", 256, 4),
                                             ("avx512", 512, 16), ("avx2", 256, 8)])
def test_generated_file_verifies_fully(tmp_path, isa, width, depth):
    verify_generated(tmp_path, KernelSpec(("ocb",), isa, width, depth))


def test_depth_that_breaks_the_batch_alignment_is_refused_in_one_line(tmp_path):
    out = tmp_path / "k.S"
    p = subprocess.run(aesgen_command() + ["generate", "ocb", "--isa", "avx2", "--depth", "3", "-o", str(out)],
                       capture_output=True, text=True)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and "power-of-two" in p.stderr
    assert not out.exists()


@pytest.mark.parametrize("isa,width,depth", [("avx2", 256, 8), ("avx512", 512, 4), ("avx512", 256, 8)])
def test_the_batch_offset_table_is_64_byte_aligned_in_the_key(isa, width, depth):
    """The batch loop reads T_1.. as whole vectors from the key (a batch is blocks s+1..s+B): a
    table 32 bytes past a line boundary split every zmm load (native OCB at 16 KiB: 23.8 -> 25.1
    GB/s once aligned)."""
    spec = KernelSpec(("ocb",), isa, width, depth)
    assert (spec.ocb_table_offset + 16) % 64 == 0
    assert spec.ocb_table_offset >= spec.ocb_l_offset + 16 * (2 + 64)  # after L_*, L_$, L_0..L_63
