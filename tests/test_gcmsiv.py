"""AES-GCM-SIV (RFC 8452) kernels: simulation against `cryptography` and the RFC's
counter-wrap vectors, the generated files through the verifier, the header, refused
configurations; and the DSL options GCM-SIV added (little-endian counters, schedules
in a stack frame, per-path key schedules, table walks that never copy rsp)."""
from __future__ import annotations

import random
import re
import subprocess
import sys

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCMSIV

from aesgen.dsl import FunctionBuilder
from aesgen.ir import Mem
from aesgen.kernels import build_function
from aesgen.kernels.aes import ScheduleWriter, expand_256, finish
from aesgen.kernels.modes import counter_base, ctr_stream
from aesgen.pipeline import generate
from aesgen.simulate import Machine, call
from aesgen.spec import KernelSpec
from aesgen.verify import vectors

from _support import ecb_encrypt, expand_key, verify_generated


def reference(key: bytes, nonce: bytes, aad: bytes, pt: bytes) -> tuple[bytes, bytes]:
    out = AESGCMSIV(key).encrypt(nonce, pt, aad)
    return out[:-16], out[-16:]


class Siv:
    """gcmsiv_set_key/encrypt/decrypt of one spec, run in the simulator."""

    def __init__(self, spec: KernelSpec) -> None:
        self.spec = spec
        self.fns = {n: build_function(spec, n) for n in ("gcmsiv_set_key", "gcmsiv_encrypt", "gcmsiv_decrypt")}
        self.m = Machine(spec, size=1 << 21)

    def set_key(self, key: bytes, bits: int | None = None) -> tuple[int, int]:
        sk = self.m.alloc(self.spec.gcmsiv_key_bytes)
        ret = call(self.m, self.fns["gcmsiv_set_key"], self.m.alloc(key), bits or 8 * len(key), sk)
        return ret & 0xFFFFFFFF, sk

    def run(self, fn: str, sk: int, nonce: bytes, aad: bytes, data: bytes, tag: bytes) -> tuple[int, bytes, bytes]:
        """In place; returns (rax as signed 32 bits, out, tag buffer)."""
        m = self.m
        buf, ta = m.alloc(data or b"\0"), m.alloc(tag)
        ret = call(m, self.fns[fn], sk, m.alloc(nonce), m.alloc(aad or b"\0"), len(aad), buf, buf, len(data), ta)
        ret &= 0xFFFFFFFF
        return ret - (1 << 32) if ret >> 31 else ret, m.read(buf, len(data)), m.read(ta, 16)


@pytest.mark.parametrize("isa,width,depth", [("sse", 128, 2), ("avx2", 256, 2), ("avx512", 512, 2)])
def test_simulation_matches_cryptography(isa, width, depth):
    spec = KernelSpec(("gcm-siv",), isa, width, depth)
    siv = Siv(spec)
    rng = random.Random(width)
    k = depth * width // 128
    for bits in (128, 256):
        key = rng.randbytes(bits // 8)
        assert siv.set_key(key)[0] == 0
        sk = siv.set_key(key)[1]
        for aadlen, n in ((0, 0), (5, 17), (16, 16 * k), (31, 16 * (2 * k + 1) + 9), (40, 15)):
            nonce, aad, pt = rng.randbytes(12), rng.randbytes(aadlen), rng.randbytes(n)
            ct, tag = reference(key, nonce, aad, pt)
            assert siv.run("gcmsiv_encrypt", sk, nonce, aad, pt, bytes(16))[1:] == (ct, tag)
            assert siv.run("gcmsiv_decrypt", sk, nonce, aad, ct, tag)[:2] == (0, pt)
            wrong = bytes([tag[0]]) + bytes([tag[1] ^ 0x10]) + tag[2:]
            assert siv.run("gcmsiv_decrypt", sk, nonce, aad, ct, wrong)[:2] == (-1, bytes(n))
    assert siv.set_key(bytes(24))[0] == 0xFFFFFFFF  # RFC 8452 has no AES-192


def test_simulation_counter_wraps_like_rfc8452_appendix_c3():
    """The RFC's cases whose 32-bit little-endian counter wraps within the message."""
    spec = KernelSpec(("gcm-siv",), "avx512", 512, 2)
    siv = Siv(spec)
    wraps = [v for vf in vectors.gcmsiv_rfc8452() for v in vf.vectors
             if int.from_bytes(v.tag[:4], "little") + (len(v.ciphertext) + 15) // 16 > 1 << 32]
    assert wraps
    for v in wraps:
        sk = siv.set_key(v.key)[1]
        assert siv.run("gcmsiv_encrypt", sk, v.iv, v.aad, v.plaintext or b"", bytes(16))[1:] == (v.ciphertext, v.tag)
        assert siv.run("gcmsiv_decrypt", sk, v.iv, v.aad, v.ciphertext, v.tag)[:2] == (0, v.plaintext or b"")


@pytest.mark.parametrize("isa,width,depth", [("sse", 128, 2), ("avx", 128, 4), ("avx2", 256, 2), ("avx512", 512, 2)])
def test_generated_file_verifies(tmp_path, isa, width, depth):
    results = verify_generated(tmp_path, KernelSpec(("gcm-siv",), isa, width, depth), quick=True)
    names = {r.name for r in results}
    assert {"ct gcmsiv_encrypt", "ct gcmsiv_decrypt"} <= names


@pytest.mark.full
@pytest.mark.parametrize("isa,width,depth", [
    ("sse", 128, 8), ("avx", 128, 4), ("avx", 128, 8), ("avx2", 256, 2), ("avx2", 256, 4), ("avx512", 128, 3),
    ("avx512", 256, 4), ("avx512", 512, 2), ("avx512", 512, 4), ("avx512", 512, 16)])
@pytest.mark.parametrize("karatsuba", [False, True])
def test_generated_file_verifies_full(tmp_path, isa, width, depth, karatsuba):
    verify_generated(tmp_path, KernelSpec(("gcm-siv",), isa, width, depth, karatsuba=karatsuba))


def test_header_and_refused_depth(tmp_path):
    spec = KernelSpec(("gcm-siv",), "avx2", 256, 2)
    h = generate(spec).header
    assert f"#define {spec.prefix}_GCMSIV_KEY_BYTES {spec.key_bytes} " in h
    assert (f"int {spec.prefix}_gcmsiv_decrypt(const void *skey, const uint8_t nonce[12], const uint8_t *aad, "
            "size_t aadlen, const uint8_t *in, uint8_t *out, size_t len, const uint8_t tag[16]);") in h
    assert f"void {spec.prefix}_polyval(" in h
    assert "pclmulqdq" in spec.features and "vpclmulqdq" in spec.features
    # Sixteen CTR groups cannot fit in 16 xmm registers: one line, exit status 2.
    r = subprocess.run([sys.executable, "-m", "aesgen.tools.cli", "generate", "gcm-siv", "--isa", "sse", "--depth", "16",
                        "-o", str(tmp_path / "x.S")], capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "gcmsiv_encrypt" in r.stderr


def test_frame_is_never_addressed_through_a_copy_of_rsp():
    """The powers of H live in the frame; the tail walks them as rsp + r10."""
    spec = KernelSpec(("gcm-siv",), "avx512", 512, 2)
    asm = generate(spec).asm
    body = asm[asm.index(f"{spec.prefix}_gcmsiv_encrypt:"):asm.index(f"{spec.prefix}_polyval:")]
    assert not re.search(r"\t(mov|add)q?\s+%rsp,|\tlea\S*\s+\S*\(%rsp\),", body)
    assert re.search(r"\(%rsp,%r10(,1)?\)", body)


# ---------------------------------------------------------------- DSL options GCM-SIV added


def _ctr_le_function(spec: KernelSpec):
    """A CTR with GCM-SIV's counter: (key, in, out, len, ctr)."""
    b = FunctionBuilder(spec, "ctr_le", ("key", "in", "out", "len", "ctr"))

    def path(nr: int) -> None:
        base = counter_base(b, Mem(b.reg["ctr"], 0), little_endian=True)
        ctr_stream(b, nr, base, *(b.reg[a] for a in ("in", "out", "len")), little_endian=True)
        finish(b)

    b.key_paths("key", path)
    return b.fn


@pytest.mark.parametrize("isa,width", [("sse", 128), ("avx2", 256), ("avx512", 512)])
def test_little_endian_counter_wraps_in_dword_0(isa, width):
    spec = KernelSpec(("ctr32",), isa, width, 2)
    fn = _ctr_le_function(spec)
    assert not any(getattr(i, "op", "") == "pshufb" for p in fn.paths for i in p.items)
    m = Machine(spec)
    key, ctr = bytes(range(16)), (0xFFFFFFFD).to_bytes(4, "little") + bytes(range(100, 112))
    sched = m.alloc(spec.key_bytes)
    assert call(m, build_function(spec, "set_encrypt_key"), m.alloc(key), 128, sched) == 0
    data = random.Random(3).randbytes(16 * 7 + 5)
    ia, oa = m.alloc(data), m.alloc(len(data))
    call(m, fn, sched, ia, oa, len(data), m.alloc(ctr))
    blocks = b"".join(((0xFFFFFFFD + j) % 2**32).to_bytes(4, "little") + ctr[4:] for j in range(8))
    stream = ecb_encrypt(key, blocks)
    assert m.read(oa, len(data)) == bytes(x ^ y for x, y in zip(data, stream))


def test_key_paths_dispatch_on_the_rounds_given():
    spec = KernelSpec(("gcm-siv",), "avx", 128, 2)
    fn = build_function(spec, "gcmsiv_encrypt")
    compared = [i.imm for i in fn.entry if getattr(i, "op", "") == "cmp.r32.imm"]
    assert compared == [10] and {p.nr for p in fn.paths if p.nr} == {10, 14}


def test_schedule_writer_fills_a_frame_at_the_function_width():
    spec = KernelSpec(("ecb",), "avx2", 256, 1)
    b = FunctionBuilder(spec, "expand_to", ("user_key", "bits", "key"))
    at = Mem(b.reg["key"], 48)  # unaligned on purpose: stack frames are only 16-byte aligned

    def body() -> None:
        expand_256(b, Mem(b.reg["user_key"], 0), ScheduleWriter(b, at, 14, False, width=256))
        finish(b)

    b.single_path(14, body)
    assert {i.op for i in b.fn.paths[0].items if getattr(i, "dst", None) and isinstance(i.dst, Mem)} == {"vstore"}
    m = Machine(spec)
    key = bytes(range(32))
    out = m.alloc(48 + 15 * 32)
    call(m, b.fn, m.alloc(key), 256, out)
    assert [m.read(out + 48 + 32 * i, 32) for i in range(15)] == [k * 2 for k in expand_key(key)]


def test_ctr_path_keeps_its_stack_schedule_in_registers():
    spec = KernelSpec(("gcm-siv",), "avx2", 256, 2)
    fn = build_function(spec, "gcmsiv_decrypt")
    sched = [p.schedule for p in fn.paths if p.schedule]
    assert len(sched) == 2 and all(s.base == "rsp" and s.stride == 32 and not s.aligned for s in sched)
    asm = generate(spec).asm
    key_loads = [line for line in asm.splitlines() if "stays in a register" in line and "(%rsp)" in line]
    assert key_loads and all("vmovdqu" in line for line in key_loads)  # the frame is not 32-byte aligned
