"""Shared test helpers: an independent AES model and the reference modes.

Nothing here uses aesgen code to compute an expected value. The S-box is the
FIPS-197 Figure 7 table (pasted from the standard; `test_simulate` checks the
model against Appendix A.1 and, through full AES encryptions, against
`cryptography`); block-level expectations come from `cryptography`.
"""
from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
from pathlib import Path

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

# The (isa, width) pairs the project supports (DESIGN.md), with the register file size.
ISA_WIDTHS = [("sse", 128), ("avx", 128), ("avx2", 256), ("avx512", 128), ("avx512", 256), ("avx512", 512)]
NREGS = {"sse": 16, "avx": 16, "avx2": 16, "avx512": 32}
KEY_BITS = (128, 192, 256)
MODE_FUNCS = {"ecb": ("ecb_encrypt", "ecb_decrypt"), "ctr32": ("ctr32_encrypt",),
              "cbc": ("cbc_encrypt", "cbc_decrypt")}

# FIPS-197 Figure 7 (the S-box), row x = high nibble, column y = low nibble.
FIPS197_SBOX = bytes.fromhex(
    "637c777bf26b6fc53001672bfed7ab76" "ca82c97dfa5947f0add4a2af9ca472c0"
    "b7fd9326363ff7cc34a5e5f171d83115" "04c723c31896059a071280e2eb27b275"
    "09832c1a1b6e5aa0523bd6b329e32f84" "53d100ed20fcb15b6acbbe394a4c58cf"
    "d0efaafb434d338545f9027f503c9fa8" "51a3408f929d38f5bcb6da2110fff3d2"
    "cd0c13ec5f974417c4a77e3d645d1973" "60814fdc222a908846eeb814de5e0bdb"
    "e0323a0a4906245cc2d3ac629195e479" "e7c8376d8dd54ea96c56f4ea657aae08"
    "ba78252e1ca6b4c6e8dd741f4bbd8b8a" "703eb5664803f60e613557b986c11d9e"
    "e1f8981169d98e949b1e87e9ce5528df" "8ca1890dbfe6426841992d0fb054bb16"
)
FIPS197_INV_SBOX = bytes(FIPS197_SBOX.index(i) for i in range(256))

# FIPS-197 Appendix C.1 (AES-128), C.2 (AES-192), C.3 (AES-256).
C1_KEY = bytes.fromhex("000102030405060708090a0b0c0d0e0f")
C_PLAIN = bytes.fromhex("00112233445566778899aabbccddeeff")
C1_CIPHER = bytes.fromhex("69c4e0d86a7b0430d8cdb78070b4c55a")
APPENDIX_C = {
    128: (bytes(range(16)), C1_CIPHER),
    192: (bytes(range(24)), bytes.fromhex("dda97ca4864cdfe06eaf70a0ec0d7191")),
    256: (bytes(range(32)), bytes.fromhex("8ea2b7ca516745bfeafc49904b496089")),
}

# SP 800-38A F.5.1 CTR-AES128.Encrypt, blocks 1 and 2.
F51_KEY = bytes.fromhex("2b7e151628aed2a6abf7158809cf4f3c")
F51_COUNTER = bytes.fromhex("f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff")
F51_PLAIN = bytes.fromhex("6bc1bee22e409f96e93d7e117393172a" "ae2d8a571e03ac9c9eb76fac45af8e51")
F51_CIPHER = bytes.fromhex("874d6191b620e3261bef6864990db6ce" "9806f66b7970fdff8617187bb9fffdff")


# ---------------------------------------------------------------- an independent AES model

def xtime(b: int) -> int:
    b <<= 1
    return (b ^ 0x11B) if b & 0x100 else b


def gmul(a: int, b: int) -> int:
    out = 0
    for _ in range(8):
        if b & 1:
            out ^= a
        a, b = xtime(a), b >> 1
    return out


def expand_key(key: bytes) -> list[bytes]:
    """FIPS-197 Section 5.2 KeyExpansion: Nr+1 round keys of 16 bytes."""
    nk = len(key) // 4
    nr = nk + 6
    words = [key[4 * i:4 * i + 4] for i in range(nk)]
    rcon = 1
    for i in range(nk, 4 * (nr + 1)):
        t = words[i - 1]
        if i % nk == 0:
            t = bytes(FIPS197_SBOX[b] for b in t[1:] + t[:1])
            t = bytes([t[0] ^ rcon]) + t[1:]
            rcon = xtime(rcon)
        elif nk > 6 and i % nk == 4:
            t = bytes(FIPS197_SBOX[b] for b in t)
        words.append(bytes(a ^ b for a, b in zip(words[i - nk], t)))
    return [b"".join(words[4 * r:4 * r + 4]) for r in range(nr + 1)]


def inv_mix_columns(block: bytes) -> bytes:
    out = bytearray()
    for c in range(4):
        a = block[4 * c:4 * c + 4]
        for r in range(4):
            out.append(gmul(a[r], 14) ^ gmul(a[(r + 1) % 4], 11) ^ gmul(a[(r + 2) % 4], 13)
                       ^ gmul(a[(r + 3) % 4], 9))
    return bytes(out)


def decrypt_key_schedule(key: bytes) -> list[bytes]:
    """FIPS-197 Section 5.3.5 equivalent inverse cipher: dk[i] = InvMixColumns(ek[nr-i])."""
    ek = expand_key(key)
    nr = len(ek) - 1
    return [ek[nr]] + [inv_mix_columns(ek[nr - i]) for i in range(1, nr)] + [ek[0]]


# ---------------------------------------------------------------- reference modes (cryptography)

def ecb_encrypt(key: bytes, data: bytes) -> bytes:
    e = Cipher(algorithms.AES(key), modes.ECB()).encryptor()
    return e.update(data) + e.finalize()


def ecb_decrypt(key: bytes, data: bytes) -> bytes:
    d = Cipher(algorithms.AES(key), modes.ECB()).decryptor()
    return d.update(data) + d.finalize()


def cbc_encrypt(key: bytes, iv: bytes, data: bytes) -> bytes:
    e = Cipher(algorithms.AES(key), modes.CBC(iv)).encryptor()
    return e.update(data) + e.finalize()


def cbc_decrypt(key: bytes, iv: bytes, data: bytes) -> bytes:
    d = Cipher(algorithms.AES(key), modes.CBC(iv)).decryptor()
    return d.update(data) + d.finalize()


def ctr32_counter(ctr: bytes, j: int) -> bytes:
    """The ABI's counter block j: the last 4 bytes big-endian + j mod 2^32, the first 12 kept."""
    return ctr[:12] + ((int.from_bytes(ctr[12:], "big") + j) % 2**32).to_bytes(4, "big")


def ctr32(key: bytes, ctr: bytes, data: bytes) -> tuple[bytes, bytes]:
    """(output, counter block after the last one used)."""
    nblk = (len(data) + 15) // 16
    stream = ecb_encrypt(key, b"".join(ctr32_counter(ctr, j) for j in range(nblk)))
    return bytes(a ^ b for a, b in zip(data, stream)), ctr32_counter(ctr, nblk)


def reference(fn: str, key: bytes, data: bytes, chain: bytes) -> tuple[bytes, bytes]:
    """(output, chain after) for one ABI function; chain is the iv/ctr (unchanged for ECB)."""
    if fn == "ecb_encrypt":
        return ecb_encrypt(key, data), chain
    if fn == "ecb_decrypt":
        return ecb_decrypt(key, data), chain
    if fn == "cbc_encrypt":
        out = cbc_encrypt(key, chain, data)
        return out, (out[-16:] if data else chain)
    if fn == "cbc_decrypt":
        return cbc_decrypt(key, chain, data), (data[-16:] if data else chain)
    if fn == "ctr32_encrypt":
        return ctr32(key, chain, data) if data else (b"", chain)
    raise ValueError(fn)


# ---------------------------------------------------------------- tools

def aesgen_command() -> list[str]:
    """How to run the installed `aesgen` console script (the venv's, else `python -m`)."""
    script = Path(sys.executable).with_name("aesgen")
    if script.exists():
        return [str(script)]
    found = shutil.which("aesgen")
    return [found] if found else [sys.executable, "-m", "aesgen.tools.cli"]


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def run_aesgen(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """The installed `aesgen` with args, output captured; env adds to (or overrides) this process's."""
    return run(aesgen_command() + list(args), cwd=cwd, env={**os.environ, **(env or {})})



def aligned_buffer(size: int) -> ctypes.Array:
    """A ctypes buffer with room for `size` bytes at its 64-byte aligned address (aligned_address)."""
    return ctypes.create_string_buffer(size + 64)


def aligned_address(buf: ctypes.Array) -> int:
    return (ctypes.addressof(buf) + 63) // 64 * 64

def require_cpu(spec) -> None:
    """Skip the test, naming the missing CPU features (as aesgen sees the CPU), unless this CPU
    runs spec's file: a check that could not run is a skip, never a pass."""
    import pytest

    from aesgen.cpu import missing_features

    missing = missing_features(spec.features)
    if missing:
        pytest.skip(f"CPU lacks {' '.join(missing)}")


def verify_generated(tmp_path: Path, spec, quick: bool = False) -> list:
    """Generate spec into tmp_path, run the whole verifier on it; returns the results after
    asserting that none failed."""
    from aesgen.pipeline import generate
    from aesgen.verify import verify_kernel

    require_cpu(spec)
    path = tmp_path / "kernel.S"
    path.write_text(generate(spec, path.name).asm)
    results = verify_kernel(path, spec, quick=quick)
    assert [(r.name, r.detail) for r in results if r.status == "fail"] == []
    return results


def load_generated(spec):
    """spec generated, assembled and loaded with ctypes; the test is skipped (naming the
    missing CPU feature) if this CPU cannot run it."""
    import ctypes
    import tempfile

    import pytest

    from aesgen.pipeline import generate
    from aesgen.verify.build import build_shared

    require_cpu(spec)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "kernel.S"
        path.write_text(generate(spec).asm)
        return ctypes.CDLL(str(build_shared(path)))


def assert_verdict_is_the_only_declassification(tmp_path: Path, spec, fn: str) -> None:
    """The static constant-time scan passes on spec's file, and fails on fn's tag verdict
    (a secret-dependent branch) once the declassification marker is removed."""
    from aesgen import declassify
    from aesgen.pipeline import generate
    from aesgen.verify import static_ct

    asm = generate(spec).asm
    path = tmp_path / "kernel.S"
    path.write_text(asm)
    assert all(r.status == "pass" for r in static_ct.check(spec, path))
    stripped = "\n".join(line for line in asm.splitlines() if declassify.MARK not in line)
    bad = tmp_path / "bad.S"
    bad.write_text(stripped + "\n")
    results = {r.name: r for r in static_ct.check(spec, bad)}
    assert results[f"ct {fn}"].status == "fail"
    assert "secret-branch" in results[f"ct {fn}"].detail
