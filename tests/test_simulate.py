"""The reference semantics: aesgen.aesref (AES-NI on ints) and aesgen.simulate (the DSL interpreter).

Expected values come from FIPS-197 (the S-box table, Appendix C), an
independent AES model in tests/_support.py, and `cryptography`.
"""
from __future__ import annotations

import random
from dataclasses import replace

import pytest

from _support import (APPENDIX_C, C_PLAIN, FIPS197_INV_SBOX, FIPS197_SBOX, ISA_WIDTHS, KEY_BITS,
                      decrypt_key_schedule, ecb_encrypt, expand_key, inv_mix_columns, reference)
from aesgen import aesref
from aesgen.consts import bswap_mask, counter_step, lane_index
from aesgen.kernels import build_function
from aesgen.ops import OPS
from aesgen.simulate import Machine, SimError, call
from aesgen.spec import KernelSpec

MODES = ("ecb", "ctr32", "cbc")


def le(b: bytes) -> int:
    return int.from_bytes(b, "little")


def to_bytes(x: int) -> bytes:
    return x.to_bytes(16, "little")


# ---------------------------------------------------------------- the S-box

def test_sbox_is_the_fips197_table() -> None:
    assert bytes(aesref.sbox()) == FIPS197_SBOX
    assert bytes(aesref.inv_sbox()) == FIPS197_INV_SBOX


def test_sbox_properties() -> None:
    s, inv = aesref.sbox(), aesref.inv_sbox()
    assert len(s) == 256 and sorted(s) == list(range(256)), "bijective"
    assert s[0x00] == 0x63 and s[0x53] == 0xED and s[0x01] == 0x7C and s[0xFF] == 0x16
    assert all(inv[s[x]] == x and s[inv[x]] == x for x in range(256))
    # No fixed points and no opposite fixed points (FIPS-197's design criteria).
    assert all(s[x] != x and s[x] != x ^ 0xFF for x in range(256))


# ---------------------------------------------------------------- round functions

def encrypt_with_aesref(key: bytes, block: bytes) -> bytes:
    rk = [le(k) for k in expand_key(key)]
    nr = len(rk) - 1
    x = le(block) ^ rk[0]
    for r in range(1, nr):
        x = aesref.aesenc(x, rk[r])
    return to_bytes(aesref.aesenclast(x, rk[nr]))


def decrypt_with_aesref(key: bytes, block: bytes) -> bytes:
    """Equivalent inverse cipher; middle keys through aesref.aesimc (checked by the result)."""
    rk = [le(k) for k in expand_key(key)]
    nr = len(rk) - 1
    x = le(block) ^ rk[nr]
    for r in range(nr - 1, 0, -1):
        x = aesref.aesdec(x, aesref.aesimc(rk[r]))
    return to_bytes(aesref.aesdeclast(x, rk[0]))


def test_independent_model_reproduces_fips197() -> None:
    """The test-side key schedule (built on the pasted table) is right: FIPS-197 Appendix A.1."""
    for bits, (key, ct) in APPENDIX_C.items():
        assert len(expand_key(key)) == bits // 32 + 7
    # FIPS-197 Appendix A.1: the last round key of 2b7e1516...
    assert expand_key(bytes.fromhex("2b7e151628aed2a6abf7158809cf4f3c"))[10] == \
        bytes.fromhex("d014f9a8c9ee2589e13f0cc8b6630ca6")


@pytest.mark.parametrize("bits", KEY_BITS)
def test_round_functions_build_aes(bits: int) -> None:
    key, ct = APPENDIX_C[bits]
    assert encrypt_with_aesref(key, C_PLAIN) == ct
    assert decrypt_with_aesref(key, ct) == C_PLAIN
    rng = random.Random(bits)
    for _ in range(8):
        key, block = rng.randbytes(bits // 8), rng.randbytes(16)
        ct = ecb_encrypt(key, block)
        assert encrypt_with_aesref(key, block) == ct
        assert decrypt_with_aesref(key, ct) == block


def test_aesimc_is_inv_mix_columns() -> None:
    rng = random.Random(7)
    for _ in range(32):
        b = rng.randbytes(16)
        assert to_bytes(aesref.aesimc(le(b))) == inv_mix_columns(b)


def test_aeskeygenassist_definition() -> None:
    """Intel SDM: [SubWord(X1), RotWord(SubWord(X1)) ^ RCON, SubWord(X3), RotWord(SubWord(X3)) ^ RCON]."""
    rng = random.Random(3)
    for rcon in (0x00, 0x01, 0x1B, 0x36, 0x80):
        src = rng.randbytes(16)
        words = [src[4 * i:4 * i + 4] for i in range(4)]
        sub = [bytes(FIPS197_SBOX[b] for b in w) for w in words]
        rot = [w[1:] + w[:1] for w in sub]
        rc = rcon.to_bytes(4, "little")
        want = sub[1] + bytes(a ^ b for a, b in zip(rot[1], rc)) + sub[3] + bytes(a ^ b for a, b in zip(rot[3], rc))
        assert to_bytes(aesref.aeskeygenassist(le(src), rcon)) == want


# ---------------------------------------------------------------- the simulated kernels

class Sim:
    """One machine, one key schedule, a helper to call a data function with guard bytes around."""

    def __init__(self, spec: KernelSpec, key: bytes, decrypt: bool) -> None:
        self.spec = spec
        self.m = Machine(spec)
        user = self.m.alloc(key)
        self.sched = self.m.alloc(spec.key_bytes, align=64)
        setter = build_function(spec, "set_decrypt_key" if decrypt else "set_encrypt_key")
        rc = call(self.m, setter, user, len(key) * 8, self.sched)
        assert rc == 0

    def run(self, fn: str, data: bytes, chain: bytes, in_place: bool = False) -> tuple[bytes, bytes]:
        m, guard = self.m, b"\xa5" * 32
        src = m.alloc(guard + data + guard, align=1) + 32   # no alignment promised
        dst = src if in_place else m.alloc(guard + b"\x5a" * len(data) + guard, align=1) + 32
        chain_at = m.alloc(chain)
        count = len(data) if fn == "ctr32_encrypt" else len(data) // 16
        call(m, build_function(self.spec, fn), self.sched, src, dst, count, chain_at)
        assert m.read(dst - 32, 32) == guard and m.read(dst + len(data), 32) == guard, "wrote outside out"
        if not in_place:
            assert m.read(src, len(data)) == data, "input modified"
        return m.read(dst, len(data)), m.read(chain_at, 16)


def lengths_for(spec: KernelSpec, fn: str) -> list[int]:
    """Block counts through every loop and tail: 1, a full main-loop group, and the longest tail."""
    lanes, d = spec.width // 128, spec.depth
    nblocks = sorted({1, d * lanes, 2 * d * lanes + lanes + (lanes - 1)})
    if fn != "ctr32_encrypt":
        return [16 * n for n in nblocks]
    return [16 * n + extra for n, extra in zip(nblocks, (0, 5, 15))] + [7]


@pytest.mark.parametrize("depth", (1, 2, 3))
@pytest.mark.parametrize("isa,width", ISA_WIDTHS)
@pytest.mark.parametrize("mode", MODES)
def test_simulated_kernel_matches_cryptography(mode: str, isa: str, width: int, depth: int) -> None:
    spec = KernelSpec((mode,), isa, width, depth)
    rng = random.Random(f"{mode}{isa}{width}{depth}")
    for fn in {"ecb": ("ecb_encrypt", "ecb_decrypt"), "ctr32": ("ctr32_encrypt",),
               "cbc": ("cbc_encrypt", "cbc_decrypt")}[mode]:
        for bits in KEY_BITS:
            key = rng.randbytes(bits // 8)
            sim = Sim(spec, key, decrypt=fn.endswith("decrypt") and mode != "ctr32")
            for n in lengths_for(spec, fn):
                data, chain = rng.randbytes(n), rng.randbytes(16)
                want = reference(fn, key, data, chain)
                got = sim.run(fn, data, chain)
                assert got == want, f"{fn} AES-{bits} len {n}"
                # in == out
                assert sim.run(fn, data, chain, in_place=True) == want, f"{fn} AES-{bits} len {n} in place"


@pytest.mark.parametrize("overrides", [(("cbc", 256, 2), ("ctr32", 128, 3)), (("ecb", 256, 1),)])
def test_simulated_per_mode_overrides(overrides: tuple) -> None:
    """Modes at their own width/depth in a 512-bit file: same results, key stride of the widest."""
    spec = KernelSpec(MODES, "avx512", 512, 2, overrides=overrides)
    rng = random.Random(str(overrides))
    for fn in ("ecb_encrypt", "ecb_decrypt", "ctr32_encrypt", "cbc_encrypt", "cbc_decrypt"):
        key = rng.randbytes(24)
        sim = Sim(spec, key, decrypt=fn.endswith("decrypt"))
        for n in (16, 16 * 13, 16 * 13 + 7):
            if n % 16 and fn != "ctr32_encrypt":
                continue
            data, chain = rng.randbytes(n), rng.randbytes(16)
            assert sim.run(fn, data, chain) == reference(fn, key, data, chain), (fn, n)


@pytest.mark.parametrize("isa,width", ISA_WIDTHS)
def test_ctr32_counter_wraps_mod_2_32(isa: str, width: int) -> None:
    """Only the last 4 bytes count: ...ffffffff + 1 = ...00000000, byte 11 untouched."""
    spec = KernelSpec(("ctr32",), isa, width, 2)
    key = bytes(range(16, 32))
    sim = Sim(spec, key, decrypt=False)
    lanes = width // 128
    for start in (0xFFFFFFFF, 0xFFFFFFFE, 0xFFFFFFFF - lanes):
        ctr = bytes.fromhex("0011223344556677889900ff") + start.to_bytes(4, "big")
        data = bytes(range(256))[: 16 * (2 * lanes + 3) + 9]   # crosses the wrap, ends in a partial block
        out, after = sim.run("ctr32_encrypt", data, ctr)
        nblk = (len(data) + 15) // 16
        stream = ecb_encrypt(key, b"".join(
            ctr[:12] + ((start + j) & 0xFFFFFFFF).to_bytes(4, "big") for j in range(nblk)))
        assert out == bytes(a ^ b for a, b in zip(data, stream))
        assert after == ctr[:12] + ((start + nblk) & 0xFFFFFFFF).to_bytes(4, "big")


@pytest.mark.parametrize("isa,width", ISA_WIDTHS)
@pytest.mark.parametrize("fn", ("ecb_encrypt", "ecb_decrypt", "ctr32_encrypt", "cbc_encrypt", "cbc_decrypt"))
def test_zero_length_touches_nothing(isa: str, width: int, fn: str) -> None:
    spec = KernelSpec(("ecb", "ctr32", "cbc"), isa, width, 2)
    sim = Sim(spec, bytes(16), decrypt=fn.endswith("decrypt"))
    chain = bytes(range(16))
    out, after = sim.run(fn, b"", chain)
    assert out == b"" and after == chain


@pytest.mark.parametrize("isa,width", ISA_WIDTHS)
def test_simulated_key_schedules_match_fips197(isa: str, width: int) -> None:
    """Round key i at key_stride*i, replicated per lane; round count at rounds_offset."""
    spec = KernelSpec(("ecb",), isa, width, 1)
    lanes, stride = width // 128, width // 8
    for bits in KEY_BITS:
        key = random.Random(bits).randbytes(bits // 8)
        nr = bits // 32 + 6
        for decrypt, want in ((False, expand_key(key)), (True, decrypt_key_schedule(key))):
            m = Machine(spec)
            user, sched = m.alloc(key), m.alloc(spec.key_bytes, align=64)
            fn = build_function(spec, "set_decrypt_key" if decrypt else "set_encrypt_key")
            assert call(m, fn, user, bits, sched) == 0
            for i in range(nr + 1):
                assert m.read(sched + stride * i, stride) == want[i] * lanes, (bits, decrypt, i)
            assert int.from_bytes(m.read(sched + 15 * stride, 4), "little") == nr


@pytest.mark.parametrize("bits", (0, 64, 127, 129, 512))
def test_simulated_set_key_rejects_bad_bits(bits: int) -> None:
    spec = KernelSpec(("ecb",), "avx", 128, 1)
    for name in ("set_encrypt_key", "set_decrypt_key"):
        m = Machine(spec)
        user, sched = m.alloc(bytes(32)), m.alloc(spec.key_bytes, align=64)
        rc = call(m, build_function(spec, name), user, bits, sched)
        assert rc & 0xFFFFFFFF == 0xFFFFFFFF, "returns -1 as an int"
        assert m.read(sched, spec.key_bytes) == bytes(spec.key_bytes), "writes no schedule"


# Intel SDM Vol. 2A, CPUID: (leaf, register, bit) of each /proc/cpuinfo flag.
SDM_CPUID_BITS = {
    "ssse3": (1, "ecx", 9), "aes": (1, "ecx", 25), "avx": (1, "ecx", 28),
    "avx2": (7, "ebx", 5), "bmi2": (7, "ebx", 8), "avx512f": (7, "ebx", 16),
    "avx512bw": (7, "ebx", 30), "avx512vl": (7, "ebx", 31), "vaes": (7, "ecx", 9),
}


@pytest.mark.parametrize("isa", ("sse", "avx", "avx2", "avx512"))
def test_simulated_cpu_supported_checks_every_feature(isa: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A model CPU that lacks any one required feature (or OS support for its state) gets 0."""
    spec = KernelSpec(("ecb",), isa, 128 if isa != "avx2" else 256, 1)
    fn = build_function(spec, "cpu_supported")
    state = {"clear": None, "xcr0": 0xE7}

    def cpuid(it, i) -> None:
        leaf = it.m.get("eax")
        regs = {"eax": 0x20 if leaf == 0 else 0, "ebx": 0, "ecx": 0, "edx": 0}
        if leaf in (1, 7):
            regs.update(ebx=0xFFFFFFFF, ecx=0xFFFFFFFF, edx=0xFFFFFFFF)
            if state["clear"] and state["clear"][0] == leaf:
                regs[state["clear"][1]] &= ~(1 << state["clear"][2])
        for r, v in regs.items():
            it.m.put(r, v)

    def xgetbv(it, i) -> None:
        it.m.put("eax", state["xcr0"])
        it.m.put("edx", 0)

    monkeypatch.setitem(OPS, "cpuid", replace(OPS["cpuid"], semantics=cpuid))
    monkeypatch.setitem(OPS, "xgetbv", replace(OPS["xgetbv"], semantics=xgetbv))

    def supported() -> int:
        m = Machine(spec)
        rbx = 0x1122334455667788
        m.put("rbx", rbx)
        rc = call(m, fn) & 0xFFFFFFFF
        assert m.get("rbx") == rbx, "rbx is callee-saved"
        return rc

    assert supported() == 1
    for flag in spec.features:
        state["clear"] = SDM_CPUID_BITS[flag]
        assert supported() == 0, f"{isa}: cpu_supported ignores a missing {flag}"
    state["clear"] = None
    if isa != "sse":
        state["clear"] = (1, "ecx", 27)     # OSXSAVE
        assert supported() == 0, "no OSXSAVE: the OS does not save AVX state"
        state["clear"] = None
        state["xcr0"] = 0x3                 # x87 | SSE only: no YMM state
        assert supported() == 0
        if isa == "avx512":
            state["xcr0"] = 0x7             # no opmask/ZMM state
            assert supported() == 0


# ---------------------------------------------------------------- constants and the interpreter

def pshufb_sim(a: bytes, ctl: bytes) -> bytes:
    spec = KernelSpec(("ecb",), "avx", 128, 1)
    m = Machine(spec)
    from aesgen.dsl import FunctionBuilder
    from aesgen.ir import Const, Mem

    b = FunctionBuilder(spec, "t", ("in", "out"))
    x = b.v("vload", Mem("rdi", 0))
    y = b.v("pshufb", x, Const("ctl", ctl))
    b.store(Mem("rsi", 0), y)
    b.s("ret")
    src, dst = m.alloc(a), m.alloc(16)
    call(m, b.fn, src, dst)
    return m.read(dst, 16)


def test_bswap_mask_reverses_each_lane() -> None:
    block = bytes(range(0x40, 0x50))
    assert pshufb_sim(block, bswap_mask(1).data) == block[::-1]
    for lanes in (1, 2, 4):
        c = bswap_mask(lanes)
        assert len(c.data) == 16 * lanes and c.data == bytes(range(15, -1, -1)) * lanes


def test_counter_constants() -> None:
    assert lane_index(4).data == b"".join(l.to_bytes(4, "little") + bytes(12) for l in range(4))
    assert counter_step(8, 2).data == (8).to_bytes(4, "little") + bytes(12) + (8).to_bytes(4, "little") + bytes(12)


def test_read_before_write_is_an_error() -> None:
    from aesgen.dsl import FunctionBuilder
    from aesgen.ir import Mem, VReg

    spec = KernelSpec(("ecb",), "avx", 128, 1)
    b = FunctionBuilder(spec, "t", ("out",))
    b.store(Mem("rdi", 0), VReg(999, "ghost"))
    b.s("ret")
    m = Machine(spec)
    with pytest.raises(SimError):
        call(m, b.fn, m.alloc(16))
