"""How well a median is known, and which configurations cannot be told apart.

The interval is distribution-free: for n sorted samples, the median lies between the
k-th smallest and the k-th largest with probability 1 - 2 P(Binomial(n, 1/2) < k),
whatever the distribution (timing noise is skewed and has outliers, so no normal
approximation). k is the largest that keeps that probability at least CONFIDENCE.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from math import comb, inf
from statistics import median
from typing import Callable, Iterable, Sequence, TypeVar

CONFIDENCE = 0.95
TARGET = 0.02  # sampling stops once every median is known to within this fraction (half-width)

T = TypeVar("T")


@dataclass(frozen=True)
class Interval:
    """A median and its confidence interval [low, high] from n samples."""
    low: float
    median: float
    high: float
    n: int
    confidence: float  # what the order statistics achieve; below CONFIDENCE when n is too small

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2

    @property
    def relative(self) -> float:
        """Half-width over the median: 0.02 is "known to ±2%"."""
        return self.half_width / self.median if self.median > 0 else inf

    def overlaps(self, other: "Interval") -> bool:
        return self.low <= other.high and other.low <= self.high

    def scaled(self, factor: float) -> "Interval":
        """The same interval in other units (ticks to core cycles: factor > 0)."""
        return Interval(self.low * factor, self.median * factor, self.high * factor, self.n, self.confidence)

    def reciprocal(self, numerator: float) -> "Interval":
        """numerator / x (ticks per message to bytes per tick): the ends swap."""
        return Interval(numerator / self.high, numerator / self.median, numerator / self.low, self.n,
                        self.confidence)


@lru_cache(maxsize=4096)
def order_rank(n: int, confidence: float = CONFIDENCE) -> tuple[int, float]:
    """(k, achieved confidence): [x(k), x(n+1-k)] (1-based) covers the median with that confidence.
    k = 1 (the whole range) when even that falls short, as for n < 6 at 95%."""
    total = 2 ** n
    k, tail = 1, 1  # tail: outcomes of n fair coins with fewer than k heads, C(n, 0) + ... + C(n, k - 1)
    while 2 * (k + 1) <= n + 1:  # x(k + 1) still at or below x(n - k)
        wider = tail + comb(n, k)
        if 1 - 2 * wider / total < confidence:
            break
        tail, k = wider, k + 1
    return k, 1 - 2 * tail / total


def median_interval(samples: Iterable[float], confidence: float = CONFIDENCE) -> Interval:
    xs = sorted(samples)
    if not xs:
        raise ValueError("no samples")
    k, achieved = order_rank(len(xs), confidence)
    return Interval(xs[k - 1], median(xs), xs[len(xs) - k], len(xs), achieved)


@dataclass(frozen=True)
class Modes:
    """Round medians that fall in two groups apart: a speed that depends on the process (where
    code and buffers land), not noise around one value. Each group's median and size."""
    low: float
    n_low: int
    high: float
    n_high: int

    def rates(self, numerator: float) -> tuple[float, int, float, int]:
        """numerator / x of each group (ticks per message to GB/s), slower first:
        (slower, its samples, faster, its samples)."""
        return numerator / self.high, self.n_high, numerator / self.low, self.n_low


def speeds_text(rates: tuple[float, int, float, int]) -> str:
    """'18.10 GB/s in 5 rounds, 18.95 in 9': both groups of Modes.rates."""
    return f"{rates[0]:.2f} GB/s in {rates[1]} rounds, {rates[2]:.2f} in {rates[3]}"


# What two_modes calls two groups: a gap of at least MODE_GAP of the median, SEPARATION times
# the wider group's own range, each group at least 2 rounds and a fifth of them.
MODE_GAP = 0.02
SEPARATION = 2.0


def two_modes(samples: Iterable[float]) -> Modes | None:
    """The two groups the sorted samples split into at their widest gap, or None when no gap
    qualifies (fewer than 6 samples never do). Such a median's interval spans both groups, so
    it ties configurations it is not like; the groups say what the interval hides."""
    xs = sorted(samples)
    n = len(xs)
    least = max(2, -(-n // 5))
    if n < 6 or n < 2 * least:
        return None
    mid = median(xs)
    k = max(range(least, n - least + 1), key=lambda i: xs[i] - xs[i - 1])
    lower, upper = xs[:k], xs[k:]
    gap = upper[0] - lower[-1]
    if gap < MODE_GAP * mid or gap < SEPARATION * max(lower[-1] - lower[0], upper[-1] - upper[0]):
        return None
    return Modes(median(lower), len(lower), median(upper), len(upper))


def spread(value: float, half_width: float, digits: int = 2, rounds: int = 6) -> str:
    """'17.90 ±0.30': a median and half its 95% interval, in the same units; '17.90 ±?' when too
    few rounds give no 95% interval."""
    known = order_rank(rounds)[1] >= CONFIDENCE
    return f"{value:.{digits}f} ±{half_width:.{digits}f}" if known else f"{value:.{digits}f} ±?"


def converged(interval: Interval, target: float = TARGET, confidence: float = CONFIDENCE) -> bool:
    return interval.confidence >= confidence and interval.relative <= target


def ties(items: Sequence[T], interval_of: Callable[[T], Interval], higher_is_better: bool = True) -> list[T]:
    """The items whose interval overlaps the interval of the one with the best median (it included):
    what the measurements cannot rank below it."""
    if not items:
        return []
    sign = 1 if higher_is_better else -1
    top = max(items, key=lambda it: sign * interval_of(it).median)
    return [it for it in items if interval_of(it).overlaps(interval_of(top))]


def cheapest_tie(items: Sequence[T], interval_of: Callable[[T], Interval], cost: Callable[[T], tuple],
                 higher_is_better: bool = True) -> T | None:
    """Among the ties with the best, the one that costs least (e.g. smallest depth, then code size)."""
    return min(ties(items, interval_of, higher_is_better), key=cost, default=None)
