"""AES-CFB128 encryption (kernels/modes.py cfb_encrypt_function): the description against
`cryptography` on the simulator for every ISA and key size, and a generated file through the
verifier (which derives its checks from the record's standard mode)."""
from __future__ import annotations

import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms

from _support import ISA_WIDTHS, KEY_BITS, verify_generated
from aesgen.kernels import build_function
from aesgen.simulate import Machine, call
from aesgen.spec import KernelSpec

try:  # CFB's home from cryptography 47 on
    from cryptography.hazmat.decrepit.ciphers.modes import CFB
except ImportError:  # older cryptography
    from cryptography.hazmat.primitives.ciphers.modes import CFB


def cfb_reference(key: bytes, iv: bytes, data: bytes) -> tuple[bytes, bytes]:
    """The ciphertext, and the iv a next call continues from: the last ciphertext block."""
    out = Cipher(algorithms.AES(key), CFB(iv)).encryptor().update(data)
    return out, (out[-16:] if data else iv)


@pytest.mark.parametrize("isa,width", ISA_WIDTHS)
@pytest.mark.parametrize("bits", KEY_BITS)
@pytest.mark.parametrize("nblocks", [0, 1, 5])
def test_simulation_matches_cryptography(isa: str, width: int, bits: int, nblocks: int) -> None:
    spec = KernelSpec(("cfb",), isa, width, 4)
    key, iv, data = bytes(range(bits // 8)), bytes(range(100, 116)), bytes(range(7, 7 + 16 * nblocks))
    m = Machine(spec)
    ka, sched = m.alloc(key), m.alloc(spec.key_bytes)
    assert call(m, build_function(spec, "set_encrypt_key"), ka, bits, sched) == 0
    ia, oa, va = m.alloc(data or b"\0"), m.alloc(max(len(data), 1)), m.alloc(iv)
    call(m, build_function(spec, "cfb_encrypt"), sched, ia, oa, nblocks, va)
    assert (m.read(oa, len(data)), m.read(va, 16)) == cfb_reference(key, iv, data)


@pytest.mark.parametrize("isa,width", [("sse", 128), ("avx2", 256), ("avx512", 512)])
def test_generated_file_verifies(tmp_path, isa: str, width: int) -> None:
    """Known answers (FIPS-197, CAVP CFB128), differential, ABI, guard pages; skipped, naming the
    missing feature, on a CPU that cannot run the file."""
    results = verify_generated(tmp_path, KernelSpec(("cfb",), isa, width, 4), quick=True)
    assert any(r.name.startswith("kat cfb_encrypt CFB128") and r.status == "pass" for r in results)
