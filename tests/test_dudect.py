"""Timing variance of the constant-time GHASH kernels, in the style of dudect (Reparaz, Balasch,
Verbauwhede): calls with one fixed key (fixed H) and with random keys (random H) interleaved at
random, on the same data; Welch's t over the two classes' times (measurements above a common
percentile cropped, as dudect does) must stay within 4.5. It judges whether the two distributions
differ, never how fast a kernel is; a control shows the same harness sees a time difference.
Slow: run by `make test-full`."""
from __future__ import annotations

import ctypes
import math
import random
import statistics
import time

import pytest

from aesgen.spec import KernelSpec

from _support import load_generated

SAMPLES = 40_000  # calls per test, both classes together
BLOCKS = 16  # 256 bytes a call
CROP = 0.9  # keep measurements below this percentile of all (dudect crops the tail)
THRESHOLD = 4.5
POOL = 64  # random keys


def aligned(size: int) -> tuple[ctypes.Array, int]:
    raw = ctypes.create_string_buffer(size + 64)
    return raw, (ctypes.addressof(raw) + 63) // 64 * 64


def welch_t(a: list[float], b: list[float]) -> float:
    va, vb = statistics.variance(a), statistics.variance(b)
    return (statistics.fmean(a) - statistics.fmean(b)) / math.sqrt(va / len(a) + vb / len(b))


def fixed_vs_random_t(spec: KernelSpec, blocks_of_random_class: int = BLOCKS) -> float:
    lib = load_generated(spec)
    P = spec.prefix
    set_key, ghash = getattr(lib, f"{P}_gcm_set_key"), getattr(lib, f"{P}_ghash")
    set_key.argtypes = [ctypes.c_char_p, ctypes.c_uint, ctypes.c_void_p]
    ghash.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
    rng = random.Random(16)
    # class 0: copies of one fixed key; class 1: random keys; as many buffers each, so that the
    # copy into the working buffer below reads alike cold memory for both classes
    keys: list[list[tuple[ctypes.Array, int]]] = [[], []]
    for cls in (0, 1):
        for _ in range(POOL):
            raw, at = aligned(spec.gcm_key_bytes)
            assert set_key(bytes(16) if cls == 0 else rng.randbytes(16), 128, at) == 0
            keys[cls].append((raw, at))
    data = rng.randbytes(16 * BLOCKS)
    acc_raw, acc = aligned(16)
    # Every call reads its key from one buffer, copied in just before: the classes differ in H
    # alone, not in where the key lies or how warm its cache lines are.
    work_raw, work = aligned(spec.gcm_key_bytes)
    times: list[tuple[int, int]] = []
    for _ in range(SAMPLES):
        cls = rng.getrandbits(1)
        key = keys[cls][rng.randrange(POOL)][1]
        n = BLOCKS if cls == 0 else blocks_of_random_class
        ctypes.memmove(work, key, spec.gcm_key_bytes)
        ctypes.memset(acc, 0, 16)
        t0 = time.perf_counter_ns()
        ghash(work, acc, data, n)
        times.append((cls, time.perf_counter_ns() - t0))
    limit = sorted(t for _, t in times)[int(CROP * len(times))]
    return welch_t([t for c, t in times if c == 0 and t < limit], [t for c, t in times if c == 1 and t < limit])


@pytest.mark.full
@pytest.mark.parametrize("backend,gfmul", [("gfni", "ctmul"), ("gfni", "bitsliced"), ("bitsliced", "ctmul")])
def test_ghash_time_does_not_depend_on_h(backend, gfmul):
    t = fixed_vs_random_t(KernelSpec(("ghash",), "avx512", 256, 1, backend=backend, gfmul=gfmul))
    assert abs(t) < THRESHOLD, f"Welch's t = {t:.2f}"


@pytest.mark.full
def test_the_harness_sees_a_difference():
    """Control: the random class hashing half the blocks (a public length; the time difference
    a leak would make, here on purpose)."""
    t = fixed_vs_random_t(KernelSpec(("ghash",), "avx512", 256, 1, backend="gfni"), BLOCKS // 2)
    assert abs(t) > THRESHOLD, f"Welch's t = {t:.2f}"
