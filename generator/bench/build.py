"""Build the benchmark harness and measurement objects (cached with the verifier's builds, by its builder)."""
from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

from aesgen.verify.build import BuildError, build_dir, build_shared, compiler

# The harness: timing, our kernel and the in-process peers; a peer in a process of its own; the peers
# from libraries `make peers` builds; their header.
BENCH_SOURCES = tuple(Path(__file__).with_name(n) for n in ("bench.c", "bench_peer_process.c", "peers_dl.c"))
BENCH_HEADER = Path(__file__).with_name("bench.h")
IPSEC_HEADER = Path("/usr/include/intel-ipsec-mb.h")


def _link_flags() -> list[str]:
    # The peers are optional: without the ipsec-mb header the harness reports it as n/a.
    return ["-lIPSec_MB"] if IPSEC_HEADER.exists() else []


@lru_cache(maxsize=1)
def bench_binary() -> Path:
    cc = compiler()
    flags = ["-O2", "-march=native", *_link_flags(), "-ldl"]
    text = b"\0".join(p.read_bytes() for p in (*BENCH_SOURCES, BENCH_HEADER))
    h = hashlib.sha256(text + "\0".join([cc, *flags]).encode()).hexdigest()[:20]
    out = build_dir() / f"bench-{h}"
    if out.exists():
        return out
    fd, tmp = tempfile.mkstemp(dir=out.parent, prefix="bench-")
    os.close(fd)
    cmd = [cc, "-o", tmp, *map(str, BENCH_SOURCES), *flags]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        os.unlink(tmp)
        raise BuildError(f"bench harness: compilation failed\n{proc.stderr.rstrip()}")
    os.chmod(tmp, 0o755)
    os.replace(tmp, out)
    return out


def build_so_from_text(text: str, stem: str, suffix: str = ".S", extra_flags: Sequence[str] = ()) -> Path:
    """Write assembly (or, suffix ".c", C) text to the build cache and compile it into a shared object."""
    digest = hashlib.sha256(text.encode()).hexdigest()[:20]
    src = build_dir() / f"{stem}-{digest}{suffix}"
    if not src.exists():
        fd, tmp = tempfile.mkstemp(dir=src.parent, suffix=suffix)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, src)
    return build_shared(src, extra_flags)
