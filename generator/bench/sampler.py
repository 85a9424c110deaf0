"""Sample configurations in turn until every median is known, or the time budget ends.

A round asks every configuration for a batch of samples (one harness run each), one
configuration after another; the next round starts one configuration later, so none
always follows the same neighbour. Every configuration takes part in every round, settled
or not, so all of them see the same stretches of time: slow drift (the clock, a
neighbour's load) then moves all alike rather than the ones sampled last.

The unit of evidence is a round: each series (one figure of one configuration, e.g. one
message size) keeps the median of each round's batch, and its interval is the order-
statistics interval of those round medians (stats.median_interval). Samples within one
run share that run's conditions, so pooling them would claim more certainty than two runs
agree on. A configuration is settled when every series is known to ±TARGET at 95% (which
takes at least 6 rounds); sampling stops when all are, or after the round in which the
budget ran out (at least one round always runs).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from statistics import median
from typing import Callable, Generic, Hashable, Sequence, TypeVar

from .stats import CONFIDENCE, TARGET, Interval, Modes, converged, median_interval, two_modes

U = TypeVar("U", bound=Hashable)  # a configuration: what one turn of a round samples
S = TypeVar("S", bound=Hashable)  # a series: one figure of one configuration


@dataclass
class Sampling(Generic[S]):
    round_medians: dict[S, list[float]] = field(default_factory=dict)
    minimum: dict[S, float] = field(default_factory=dict)  # the fastest single sample of a series
    rounds: int = 0
    seconds: float = 0.0
    budget: float = 0.0
    unsettled: int = 0  # configurations not yet known to ±TARGET when the budget ended
    configurations: int = 0

    def interval(self, series: S) -> Interval:
        return median_interval(self.round_medians[series])

    def modes(self, series: S) -> Modes | None:
        """The round medians' two groups, when they fall in two (stats.two_modes)."""
        return two_modes(self.round_medians[series])

    @property
    def stopped_on_budget(self) -> bool:
        return self.unsettled > 0

    def describe(self, what: str = "configurations") -> str:
        """How the sampling ended, for the line under a table."""
        how = (f"the budget of {self.budget:g} s ended with {self.unsettled} of {self.configurations} "
               f"not yet known to ±{TARGET:.0%}" if self.stopped_on_budget
               else f"every median known to ±{TARGET:.0%}")
        short = " (± shown as ?: fewer than 6 rounds give no 95% interval)" if any(
            self.interval(s).confidence < CONFIDENCE for s in self.round_medians) else ""
        return (f"{self.configurations} {what} sampled in turn, {self.rounds} rounds in {self.seconds:.0f} s: {how}; "
                f"± is half the 95% order-statistics interval of the median of the round medians{short}")


def sample(configurations: Sequence[U], take: Callable[[list[U]], dict[U, dict[S, list[float]]]], *,
           budget: float, target: float = TARGET, clock: Callable[[], float] = time.monotonic) -> Sampling[S]:
    """`take(configs)` runs one turn for each of those configurations, in that order, and returns per
    configuration that turn's samples per series."""
    result: Sampling[S] = Sampling(budget=budget, configurations=len(configurations))
    series_of: dict[U, set[S]] = {c: set() for c in configurations}
    order = list(configurations)
    unsettled = len(order)
    start = clock()
    while unsettled:
        turn = result.rounds % len(order)
        for config, new in take(order[turn:] + order[:turn]).items():
            for series, xs in new.items():
                result.round_medians.setdefault(series, []).append(median(xs))
                result.minimum[series] = min(result.minimum.get(series, min(xs)), min(xs))
                series_of[config].add(series)
        result.rounds += 1
        unsettled = sum(not all(converged(result.interval(s), target) for s in series_of[c]) for c in order)
        if clock() - start >= budget:
            break
    result.seconds = clock() - start
    result.unsettled = unsettled
    return result
