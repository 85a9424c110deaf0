"""Timing variance of the constant-time GHASH kernels, in the style of dudect (Reparaz, Balasch,
Verbauwhede): calls with one fixed key (fixed H) and with random keys (random H) interleaved at
random, on the same data; Welch's t over the two classes' times (measurements above a common
percentile cropped, as dudect does) must stay within 4.5. It judges whether the two distributions
differ, never how fast a kernel is; a control shows the same harness sees a time difference.
The calls are timed in C (tests/dudect_timer.c: rdtsc around the call alone), not through
ctypes, whose overhead would drown a difference of a few cycles.
Slow: run by `make test-full`."""
from __future__ import annotations

import ctypes
import math
import random
import statistics
from pathlib import Path

import pytest

from aesgen.spec import KernelSpec
from aesgen.verify.build import build_shared

from _support import aligned_address, aligned_buffer, load_generated

SAMPLES = 200_000  # calls per test, both classes together
BLOCKS = 16  # 256 bytes a call
CROP = 0.9  # keep measurements below this percentile of all (dudect crops the tail)
THRESHOLD = 4.5
POOL = 64  # key buffers per class
TIMER_SOURCE = Path(__file__).with_name("dudect_timer.c")


def aligned(size: int) -> tuple[ctypes.Array, int]:
    raw = aligned_buffer(size)
    return raw, aligned_address(raw)


def welch_t(a: list[float], b: list[float]) -> float:
    va, vb = statistics.variance(a), statistics.variance(b)
    return (statistics.fmean(a) - statistics.fmean(b)) / math.sqrt(va / len(a) + vb / len(b))


def fixed_vs_random_t(spec: KernelSpec, blocks_of_random_class: int = BLOCKS) -> float:
    lib = load_generated(spec)
    P = spec.prefix
    set_key = getattr(lib, f"{P}_gcm_set_key")
    set_key.argtypes = [ctypes.c_char_p, ctypes.c_uint, ctypes.c_void_p]
    timer = ctypes.CDLL(str(build_shared(TIMER_SOURCE))).dudect_time
    rng = random.Random(16)
    # keys 0..POOL-1: copies of one fixed key (class 0); POOL..2 POOL-1: random keys (class 1).
    # As many buffers each, so that copying one reads alike cold memory for both classes.
    buffers = []
    for n in range(2 * POOL):
        raw, at = aligned(spec.gcm_key_bytes)
        assert set_key(bytes(16) if n < POOL else rng.randbytes(16), 128, at) == 0
        buffers.append(raw)
    keys = (ctypes.c_void_p * (2 * POOL))(*map(aligned_address, buffers))
    classes = [rng.getrandbits(1) for _ in range(SAMPLES)]
    key_of_call = (ctypes.c_uint32 * SAMPLES)(*(cls * POOL + rng.randrange(POOL) for cls in classes))
    blocks_of_call = (ctypes.c_uint32 * SAMPLES)(*(BLOCKS if cls == 0 else blocks_of_random_class for cls in classes))
    data = rng.randbytes(16 * BLOCKS)
    acc_raw, acc = aligned(16)
    work_raw, work = aligned(spec.gcm_key_bytes)
    ticks = (ctypes.c_uint64 * SAMPLES)()
    timer(ctypes.cast(getattr(lib, f"{P}_ghash"), ctypes.c_void_p), ctypes.c_void_p(work),
          ctypes.c_size_t(spec.gcm_key_bytes), keys, key_of_call, blocks_of_call, ctypes.c_void_p(acc), data,
          ctypes.c_size_t(SAMPLES), ticks)
    times = list(zip(classes, ticks))
    limit = sorted(ticks)[int(CROP * SAMPLES)]
    return welch_t([t for c, t in times if c == 0 and t < limit], [t for c, t in times if c == 1 and t < limit])


@pytest.mark.full
@pytest.mark.parametrize("backend,gfmul,width", [("gfni", "ctmul", 256), ("gfni", "bitsliced", 256),
                                                ("bitsliced", "ctmul", 256), ("gfni", "gfni", 512),
                                                ("gfni", "ctmul-gpr", 256)])
def test_ghash_time_does_not_depend_on_h(backend, gfmul, width):
    t = fixed_vs_random_t(KernelSpec(("ghash",), "avx512", width, 1, backend=backend, gfmul=gfmul))
    assert abs(t) < THRESHOLD, f"Welch's t = {t:.2f}"


@pytest.mark.full
def test_the_harness_sees_a_difference():
    """Control: the random class hashing one block fewer (a public length; a time difference of
    a few percent, as a leak would make, here on purpose)."""
    t = fixed_vs_random_t(KernelSpec(("ghash",), "avx512", 256, 1, backend="gfni"), BLOCKS - 1)
    assert abs(t) > THRESHOLD, f"Welch's t = {t:.2f}"
