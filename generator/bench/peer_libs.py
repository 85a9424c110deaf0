"""The stronger timing peers, BoringSSL and AWS-LC: the pinned source of each, how `make peers`
builds it, and where `aesgen bench` finds the library.

Each library's source comes from a crates.io crate that vendors it (boring-sys, aws-lc-sys),
fetched with cargo (the registry's own client) and checked against a pinned sha256. Only
libcrypto is built, as a shared library, with cmake and ninja, into
build/peers/NAME-VERSION/ (git ignores build/). The harness loads it with
dlopen(RTLD_DEEPBIND), so its symbols do not clash with OpenSSL's libcrypto.so.3.

    python -m aesgen.bench.peer_libs          build what is missing (a no-op when all are built)
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
CMAKE_COMMON = ("-GNinja", "-DCMAKE_BUILD_TYPE=Release", "-DBUILD_SHARED_LIBS=1", "-DBUILD_TESTING=OFF")


@dataclass(frozen=True)
class PeerLib:
    name: str  # as `aesgen bench --compare` names it
    crate: str
    version: str
    sha256: str  # of the .crate file
    source: str  # the library's cmake project inside the crate
    cmake_flags: tuple[str, ...]  # beyond CMAKE_COMMON

    @property
    def folder(self) -> Path:
        return peers_root() / f"{self.name}-{self.version}"

    @property
    def library(self) -> Path:
        return self.folder / "libcrypto.so"


PEER_LIBS = {
    # BoringSSL as Cloudflare's boring crate vendors it: AES-GCM with VAES on ymm (AVX2) and zmm (AVX-512).
    # Its assembly is pre-generated in the crate, so neither Perl nor Go is needed for libcrypto.
    "boringssl": PeerLib("boringssl", "boring-sys", "5.4.0",
                         "4986392770df40d11d0d6294b0dd8399570f4a6e76d6953c7a34f7dd1defbd76",
                         "deps/boringssl", ()),
    # AWS-LC: AVX-512 AES-XTS and AES-GCM; its generated assembly ships in the crate (no Go, no Perl).
    "awslc": PeerLib("awslc", "aws-lc-sys", "0.47.0",
                     "8bfbe32ac36b3c428696ce315464181bc4029d689fd58e3f2a4e58c252242f52",
                     "aws-lc", ("-DBUILD_LIBSSL=OFF", "-DBUILD_TOOL=OFF", "-DDISABLE_GO=ON",
                                "-DDISABLE_PERL=ON", "-DENABLE_SOURCE_MODIFICATION=OFF")),
}


def peers_root() -> Path:
    """$AESGEN_PEERS_DIR, or build/peers in the repository."""
    d = os.environ.get("AESGEN_PEERS_DIR")
    return Path(d) if d else REPO_ROOT / "build" / "peers"


def built_library(name: str) -> Path | None:
    """The peer's libcrypto.so, or None before `make peers` built it."""
    lib = PEER_LIBS[name].library
    return lib if lib.is_file() else None


class PeerBuildError(RuntimeError):
    pass


def _run(cmd: list[str], **kw) -> None:
    print("+", " ".join(cmd), flush=True)
    if subprocess.run(cmd, **kw).returncode != 0:
        raise PeerBuildError(f"failed: {' '.join(cmd)}")


def fetch_crate(p: PeerLib) -> Path:
    """The crate file from cargo's download cache, fetched first if missing; its sha256 checked."""
    cache = Path(os.environ.get("CARGO_HOME", Path.home() / ".cargo")) / "registry" / "cache"
    def cached() -> list[Path]:
        return sorted(cache.glob(f"*/{p.crate}-{p.version}.crate"))
    if not cached():
        if not shutil.which("cargo"):
            raise PeerBuildError("cargo (1.82 or newer) is needed to fetch the sources: install Rust")
        # `cargo info` downloads the crate into the cache to read its manifest.
        _run(["cargo", "info", "--quiet", f"{p.crate}@{p.version}"], stdout=subprocess.DEVNULL, cwd=peers_root())
    for crate in cached():
        if hashlib.sha256(crate.read_bytes()).hexdigest() == p.sha256:
            return crate
    raise PeerBuildError(f"{p.crate} {p.version}: no cached crate with sha256 {p.sha256}")


def build(p: PeerLib) -> None:
    """Unpack, configure and build libcrypto; the library is copied last, so its presence means done."""
    if p.library.is_file():
        print(f"{p.name} {p.version}: up to date ({p.library})")
        return
    for tool in ("cmake", "ninja"):
        if not shutil.which(tool):
            raise PeerBuildError(f"{tool} is needed (apt install cmake ninja-build; `make peers` does as root)")
    crate = fetch_crate(p)
    src_root = p.folder / "src"
    if not (src_root / p.source / "CMakeLists.txt").is_file():
        shutil.rmtree(src_root, ignore_errors=True)
        src_root.mkdir(parents=True)
        with tarfile.open(crate) as tar:
            tar.extractall(src_root, filter="data")
        (top,) = src_root.iterdir()  # the crate's one folder, CRATE-VERSION
        for item in top.iterdir():
            item.rename(src_root / item.name)
        top.rmdir()
    obj = p.folder / "obj"
    _run(["cmake", "-S", str(src_root / p.source), "-B", str(obj), *CMAKE_COMMON, *p.cmake_flags],
         stdout=subprocess.DEVNULL)
    _run(["ninja", "-C", str(obj), f"-j{os.environ.get('JOBS', os.cpu_count() or 2)}", "crypto"])
    (lib,) = [f for f in obj.rglob("libcrypto.so*") if f.is_file() and not f.is_symlink()]
    shutil.copy2(lib, p.library.with_suffix(".tmp"))
    os.replace(p.library.with_suffix(".tmp"), p.library)
    print(f"{p.name} {p.version}: built {p.library}")


def main(argv: list[str]) -> int:
    names = argv or list(PEER_LIBS)
    unknown = [n for n in names if n not in PEER_LIBS]
    if unknown:
        print(f"unknown peer {', '.join(unknown)}; choose from {', '.join(PEER_LIBS)}", file=sys.stderr)
        return 2
    peers_root().mkdir(parents=True, exist_ok=True)
    try:
        for name in names:
            build(PEER_LIBS[name])
    except PeerBuildError as e:
        print(f"make peers: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
