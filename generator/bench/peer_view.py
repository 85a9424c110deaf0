"""The peers see the CPU aesgen sees: AESGEN_CPU_MASK applied to OpenSSL, BoringSSL, AWS-LC
and intel-ipsec-mb too.

Under `AESGEN_CPU_MASK=avx512f,gfni` (the view of a Zen 3 or an Alder Lake) aesgen builds
AVX2 kernels, and a peer that still ran its AVX-512 code would be timed on another CPU than
ours. The OpenSSL family reads `OPENSSL_ia32cap` when it loads: two 64-bit values, `~`
meaning "clear these bits of what CPUID says"; the first covers CPUID leaf 1 (EDX in the low
half, ECX in the high), the second leaf 7 (EBX low, ECX high). intel-ipsec-mb has no such
variable: the harness initialises the architecture named by AESGEN_BENCH_IPSEC_ARCH instead
of `init_mb_mgr_auto`. AESGEN_BENCH_CPU_MASK tells the harness which flags to treat as
absent when it names the peers' code paths (peers_dl.c).
"""
from __future__ import annotations

from aesgen.cpu import flags, host_flags

# /proc/cpuinfo flag -> (word of the capability vector, bit): words 0/1 CPUID.1 EDX/ECX,
# words 2/3 CPUID.(EAX=7,ECX=0) EBX/ECX (Intel SDM vol. 2A, CPUID).
CPUID_BITS = {
    "pclmulqdq": (1, 1), "ssse3": (1, 9), "fma": (1, 12), "sse4_1": (1, 19), "movbe": (1, 22),
    "aes": (1, 25), "avx": (1, 28),
    "avx2": (2, 5), "bmi2": (2, 8), "avx512f": (2, 16), "avx512dq": (2, 17), "adx": (2, 19),
    "avx512ifma": (2, 21), "avx512cd": (2, 28), "sha_ni": (2, 29), "avx512bw": (2, 30), "avx512vl": (2, 31),
    "avx512vbmi": (3, 1), "avx512_vbmi2": (3, 6), "gfni": (3, 8), "vaes": (3, 9), "vpclmulqdq": (3, 10),
}
# intel-ipsec-mb's architectures, richest first, with what each needs (its own checks, restated).
IPSEC_ARCHES = (
    ("avx512", ("avx512f", "avx512dq", "avx512bw", "avx512vl", "aes", "pclmulqdq")),
    ("avx2", ("avx2", "aes", "pclmulqdq")),
    ("avx", ("avx", "aes", "pclmulqdq")),
    ("sse", ("sse4_1", "aes", "pclmulqdq")),
    ("noaesni", ()),
)


def ia32cap(masked: frozenset[str]) -> str | None:
    """OPENSSL_ia32cap clearing the masked flags' bits (None: nothing to clear)."""
    words = [0, 0, 0, 0]
    for flag in masked:
        if flag in CPUID_BITS:
            word, bit = CPUID_BITS[flag]
            words[word] |= 1 << bit
    if not any(words):
        return None
    return f"~0x{words[1] << 32 | words[0]:x}:~0x{words[3] << 32 | words[2]:x}"


def ipsec_arch(have: frozenset[str]) -> str:
    return next(name for name, needs in IPSEC_ARCHES if all(f in have for f in needs))


def environment() -> dict[str, str]:
    """What the harness's environment needs for the peers to share aesgen's CPU view (empty
    when nothing is masked)."""
    have = flags()
    masked = host_flags() - have
    if not masked:
        return {}
    env = {"AESGEN_BENCH_IPSEC_ARCH": ipsec_arch(have), "AESGEN_BENCH_CPU_MASK": ",".join(sorted(masked))}
    if cap := ia32cap(masked):
        env["OPENSSL_ia32cap"] = cap
    return env


def describe(peer: str) -> str:
    """'' or '; AESGEN_CPU_MASK view: ...' for a peer's details (intel-ipsec-mb's names its path)."""
    env = environment()
    if not env or peer == "ipsec-mb":
        return ""
    return f"; AESGEN_CPU_MASK view: OPENSSL_ia32cap={env.get('OPENSSL_ia32cap', 'unset')}"
