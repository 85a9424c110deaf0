"""Helpers of the HDL tests: the cases a core is run on, and Icarus Verilog / Verilator runs.

Expected values come from the vector files (FIPS-197, CAVP) and `cryptography`, never from aesgen;
the testbench (tests/hdl/tb_core.v) is written apart from the generator and drives only the
fixed interface.
"""
from __future__ import annotations

import random
import shutil
import subprocess
from pathlib import Path

from aesgen.hdl import HdlSpec, generate
from aesgen.verify import vectors

from _support import APPENDIX_C, C_PLAIN, ctr32, ecb_decrypt, ecb_encrypt

TESTBENCH = Path(__file__).resolve().parent / "hdl" / "tb_core.v"
Case = tuple[bytes, bytes, bytes]  # key (and, for CTR, the counter block), input block, expected output block


def missing(*tools: str) -> str | None:
    """The reason to skip, when a tool is not installed (make setup installs them as root)."""
    absent = [t for t in tools if shutil.which(t) is None]
    return f"not installed: {', '.join(absent)} (make setup, as root, installs them)" if absent else None


def known_answers(bits: int, decrypt: bool, kinds: tuple[str, ...] = vectors.CAVP_KINDS) -> list[Case]:
    """FIPS-197 Appendix C and the CAVP ECB KAT/MMT files of this key size (multi-block cases
    split into blocks), in the direction the core computes."""
    key, cipher = APPENDIX_C[bits]
    cases = [(key, cipher, C_PLAIN) if decrypt else (key, C_PLAIN, cipher)]
    for f in vectors.cavp("ECB"):
        if not f.name.endswith(str(bits)) or not any(f.name == f"ECB{k}{bits}" for k in kinds):
            continue
        for v in (f.decrypt if decrypt else f.encrypt):
            given, want = (v.ciphertext, v.plaintext) if decrypt else (v.plaintext, v.ciphertext)
            cases += [(v.key, given[i:i + 16], want[i:i + 16]) for i in range(0, len(given), 16)]
    return cases


def differential(bits: int, decrypt: bool, keys: int, blocks: int, seed: int) -> list[Case]:
    """Random keys, each with random blocks; the answers from `cryptography`."""
    rng = random.Random(seed)
    cases = []
    for _ in range(keys):
        key = rng.randbytes(bits // 8)
        data = rng.randbytes(16 * blocks)
        out = ecb_decrypt(key, data) if decrypt else ecb_encrypt(key, data)
        cases += [(key, data[i:i + 16], out[i:i + 16]) for i in range(0, len(data), 16)]
    return cases


def ctr_cases(bits: int, seed: int) -> list[Case]:
    """RFC 3686's vectors of this key size, and random messages under `cryptography` through
    the ctr32 reference, some with the counter about to wrap its 32 bits."""
    cases = []
    groups = []
    for f in vectors.ctr_rfc3686():
        if f.name == f"aes-{bits}-ctr":
            groups += [(v.key, v.iv, v.plaintext, v.ciphertext) for v in f.encrypt]
    rng = random.Random(seed)
    for low in (0, 0xFFFFFFFE, rng.getrandbits(32)):
        key, iv = rng.randbytes(bits // 8), rng.randbytes(12) + low.to_bytes(4, "big")
        data = rng.randbytes(16 * 9)
        groups.append((key, iv, data, ctr32(key, iv, data)[0]))
    for key, iv, given, want in groups:
        given += bytes(-len(given) % 16)  # a partial last block: its first bytes are the answer
        want += bytes(a ^ b for a, b in zip(given[len(want):], ctr32(key, iv, given)[0][len(want):]))
        cases += [(key + iv, given[i:i + 16], want[i:i + 16]) for i in range(0, len(given), 16)]
    return cases


def write_core(spec: HdlSpec, directory: Path) -> list[Path]:
    """The core's files (not its own smoke testbench) written to `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, text in generate(spec, vectors.FIPS197_APPENDIX_C[spec.bits]).items():
        path = directory / name
        path.write_text(text)
        if not name.startswith("tb_"):
            paths.append(path)
    return paths


def simulate(spec: HdlSpec, cases: list[Case], directory: Path, seed: int = 1,
             gap: int = 30, stall: int = 40) -> str:
    """Run tb_core.v on the core with `cases`; its output (PASS n or FAIL lines)."""
    sources = write_core(spec, directory / "core")
    table = directory / "cases.hex"
    table.write_text("".join(f"{k.hex()}{i.hex()}{o.hex()}\n" for k, i, o in cases))
    binary = directory / "sim.vvp"
    params = {"KB": spec.bits, "N": len(cases), "SEED": seed, "GAP": gap, "STALL": stall}
    top = ["-DCTR", f"-DCORE={spec.prefix}_ctr"] if spec.ctr else [f"-DCORE={spec.prefix}_core"]
    subprocess.run(["iverilog", "-g2005", "-s", "tb", *top, "-o", str(binary),
                    *[f"-Ptb.{k}={v}" for k, v in params.items()], str(TESTBENCH), *map(str, sources)],
                   check=True, capture_output=True, text=True)
    run = subprocess.run(["vvp", "-n", str(binary), f"+vectors={table}"], capture_output=True, text=True,
                         check=True, timeout=900)
    return run.stdout


def lint(spec: HdlSpec, directory: Path, top: str | None = None) -> subprocess.CompletedProcess:
    sources = write_core(spec, directory)
    return subprocess.run(["verilator", "--lint-only", "-Wall", "--top-module", top or f"{spec.prefix}_core",
                           *map(str, sources)], capture_output=True, text=True)
