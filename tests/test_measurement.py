"""Measurements you can trust: the interval of a median, the stopping rule, ties and the cheapest tie.

Synthetic samples and a fake clock throughout, except the smoke test at the end, which
checks what `aesgen explore` prints, never how fast anything is.
"""
from __future__ import annotations

import json
import re
from math import comb

import pytest
from click.testing import CliRunner

from aesgen.bench.sampler import sample
from aesgen.bench.stats import (CONFIDENCE, Interval, Modes, cheapest_tie, converged, median_interval, order_rank,
                                ties, two_modes)
from aesgen.cpu import missing_features
from aesgen.spec import KernelSpec
from aesgen.tools import report
from aesgen.tools.cli import main
from aesgen.tools import explore as explore_module
from aesgen.tools.explore import Exploration, Point
from aesgen.tools.tune import pick


def coverage(n: int, k: int) -> float:
    """P(x(k) <= median <= x(n+1-k)) for n samples of any continuous distribution."""
    return 1 - 2 * sum(comb(n, i) for i in range(k)) / 2 ** n


@pytest.mark.parametrize("n", [6, 7, 10, 21, 50, 101, 400])
def test_the_rank_is_the_widest_that_keeps_95_percent(n):
    k, achieved = order_rank(n)
    assert achieved == pytest.approx(coverage(n, k)) and achieved >= CONFIDENCE
    assert coverage(n, k + 1) < CONFIDENCE or 2 * (k + 1) > n + 1  # one rank narrower falls short


def test_fewer_than_six_samples_give_no_95_percent_interval():
    for n in range(1, 6):
        k, achieved = order_rank(n)
        assert k == 1 and achieved < CONFIDENCE
    assert not converged(median_interval([5.0] * 5))  # however tight
    assert converged(median_interval([5.0] * 6))


def test_the_interval_is_read_from_the_sorted_samples():
    iv = median_interval([float(x) for x in reversed(range(1, 22))])  # 21 samples, any order
    assert (iv.low, iv.median, iv.high, iv.n) == (6.0, 11.0, 16.0, 21)  # k = 6 at n = 21
    assert iv.half_width == 5.0 and iv.relative == pytest.approx(5 / 11)


def test_converged_means_half_width_within_two_percent():
    assert converged(median_interval([100.0, 101, 99, 100.5, 99.5, 100, 101.5, 98.5]))
    assert not converged(median_interval([100.0, 110, 90, 105, 95, 100, 120, 80]))


def test_reciprocal_swaps_the_ends():
    ticks = Interval(90.0, 100.0, 125.0, 10, 0.98)
    gbps = ticks.reciprocal(1000.0)
    assert (gbps.low, gbps.median, gbps.high) == (8.0, 10.0, 1000 / 90)


def test_a_noisy_config_ties_with_the_best_and_a_tight_slower_one_does_not():
    best = ("d8", Interval(19.8, 20.0, 20.2, 20, 0.95))
    noisy = ("d2", Interval(15.0, 18.0, 21.0, 20, 0.95))  # lower median, but the interval reaches the best's
    slower = ("d4", Interval(18.9, 19.0, 19.1, 20, 0.95))
    items = [noisy, slower, best]
    assert [name for name, _ in ties(items, lambda it: it[1])] == ["d2", "d8"]
    depth = {"d2": 2, "d4": 4, "d8": 8}
    assert cheapest_tie(items, lambda it: it[1], lambda it: (depth[it[0]],))[0] == "d2"


def test_fewer_cycles_is_better_for_short_messages():
    fast = ("a", Interval(60.0, 61.0, 62.0, 20, 0.95))
    slow = ("b", Interval(70.0, 71.0, 72.0, 20, 0.95))
    assert ties([slow, fast], lambda it: it[1], higher_is_better=False) == [fast]


def measured(width: int, depth: int, gbps: float, half: float, cycles: float, code: int) -> Point:
    return Point(width, depth, "measured", bulk_gbps=gbps, bulk_gbps_ci=(gbps - half, gbps + half),
                 short_cycles=cycles, cycles_by_size={"256": cycles}, cycles_ci_by_size={"256": (cycles - 1, cycles + 1)},
                 gbps_by_size={"256": 256 / cycles}, rounds=10, code_bytes=code)


def plateau() -> list[Point]:
    """512x8 has the top median; 256x3 is noisy enough to tie with it; 256x8 ties with less code."""
    return [measured(128, 8, 12.0, 0.1, 90, 900),
            measured(256, 3, 19.0, 1.5, 65, 700),
            measured(256, 8, 20.1, 0.2, 63, 1500),
            measured(512, 8, 20.3, 0.2, 64, 1800),
            measured(512, 2, 17.0, 0.1, 62, 800)]


def test_exploration_best_is_the_cheapest_tie():
    ex = Exploration("ctr32", "native", True, 16384, 256, short_sizes=[256])
    ex.points = plateau()
    assert [(p.width, p.depth) for p in ex.ties()] == [(256, 3), (256, 8), (512, 8)]
    assert (ex.best().width, ex.best().depth) == (256, 3)
    d = json.loads(json.dumps(ex.to_json()))
    assert d["schema"] == "aesgen-explore/2" and d["best"]["depth"] == 3 and len(d["ties"]) == 3
    assert d["points"][1]["bulk_gbps_halfwidth"] == pytest.approx(1.5)


def test_code_size_settles_ties_of_equal_depth():
    ex = Exploration("ctr32", "native", True, 16384, 256, short_sizes=[256])
    ex.points = [p for p in plateau() if p.depth == 8]
    assert (ex.best().width, ex.best().depth) == (256, 8)  # 1500 bytes of code against 1800


def test_tune_picks_the_smallest_depth_among_ties():
    points = plateau()
    bulk, short = pick(points, "bulk"), pick(points, "short")
    assert (bulk["width"], bulk["depth"], bulk["gbps"], bulk["gbps_halfwidth"]) == (256, 3, 19.0, 1.5)
    assert len(bulk["ties"]) == 3
    # short: 512x2 has the fewest cycles (62 ±1); 256x8 (63 ±1) and 512x8 (64 ±1) overlap it
    assert (short["width"], short["depth"], short["cycles"]) == (512, 2, 62)
    assert {(t["width"], t["depth"]) for t in short["ties"]} == {(512, 2), (256, 8), (512, 8)}


def fake_clock(step: float):
    now = [0.0]

    def clock() -> float:
        now[0] += step
        return now[0]
    return clock


def test_sampling_stops_once_every_median_is_known_to_two_percent():
    calls = []

    def take(configs):
        calls.append(list(configs))
        return {c: {(c, "bulk"): [100.0 + c, 100.5 + c, 99.5 + c]} for c in configs}

    got = sample([0, 1, 2], take, budget=1e9, clock=fake_clock(0.001))
    assert got.rounds == 6 and not got.stopped_on_budget  # the first count with a 95% interval
    assert got.round_medians[(1, "bulk")] == [101.0] * 6 and got.minimum[(1, "bulk")] == 100.5
    assert calls[:3] == [[0, 1, 2], [1, 2, 0], [2, 0, 1]]  # every round, every config, a turn later
    assert "every median known to ±2%" in got.describe()


def test_sampling_stops_when_the_budget_ends():
    rounds = iter(range(10**6))

    def take(configs):  # round medians alternate between 80 and 120: never within ±2%
        r = next(rounds)
        return {c: {c: [80.0 if r % 2 else 120.0]} for c in configs}

    got = sample(["a", "b"], take, budget=5.0, clock=fake_clock(1.0))
    assert got.rounds == 5 and got.stopped_on_budget and got.unsettled == 2  # each round reads 1 s off the clock
    assert "budget of 5 s ended with 2 of 2" in got.describe()
    one = sample(["a"], take, budget=0, clock=fake_clock(1.0))
    assert one.rounds == 1 and "fewer than 6 rounds" in one.describe()


def test_the_table_marks_the_best_and_the_ties(monkeypatch):
    ex = Exploration("ctr32", "native", True, 16384, 256, short_sizes=[256])
    ex.points = plateau()
    ex.sampling = "5 configurations sampled in turn"
    with report.console.capture() as cap:
        monkeypatch.setattr(report.console, "_width", 300)
        report.print_exploration(ex)
    out = cap.get()
    rows = {tuple(re.findall(r"│\s*(\d+)\s*│\s*(\d+)\s*│", line)[0]): line for line in out.splitlines()
            if re.search(r"│\s*\d+\s*│\s*\d+\s*│", line)}
    assert "measured *" in rows[("256", "3")] and "19.00 ±1.50" in rows[("256", "3")]
    assert "measured =" in rows[("256", "8")] and "measured =" in rows[("512", "8")]
    assert "=" not in rows[("128", "8")].replace("│", "") and "*" not in rows[("512", "2")]
    assert "= ties: 2 configs" in out and "best: 256-bit at depth 3: 19.00 ±1.50 GB/s" in out


def test_round_medians_in_two_groups_are_two_modes():
    """A speed that depends on the process: 5 rounds near 18.4, 9 near 19.05 (what explore ctr32
    read at 512 bits with a branchy CTR32 on Emerald Rapids)."""
    bimodal = [18.38, 18.41, 18.40, 18.43, 18.39, 19.04, 19.05, 19.06, 19.05, 19.03, 19.06, 19.05, 19.04, 19.07]
    assert two_modes(bimodal) == Modes(18.40, 5, 19.05, 9)
    assert two_modes(reversed(bimodal)) == Modes(18.40, 5, 19.05, 9)  # order does not matter


@pytest.mark.parametrize("xs", [
    [19.0, 19.1, 18.9, 19.05, 18.95, 19.02, 19.08, 18.97],  # noise around one value
    [19.0, 19.01, 19.02, 19.03, 19.01, 17.5, 19.02, 19.0],  # one slow round: an outlier, not a mode
    [18.0, 18.2, 18.4, 18.6, 18.8, 19.0, 19.2, 19.4],  # a drift: no gap wider than the groups
    [18.4, 19.05, 18.4, 19.05, 19.05],  # fewer than 6 rounds
])
def test_one_group_with_noise_outliers_or_drift_is_not_two_modes(xs):
    assert two_modes(xs) is None


def test_the_table_marks_a_configuration_with_two_speeds(monkeypatch):
    ex = Exploration("ctr32", "native", True, 16384, 256, short_sizes=[256])
    ex.points = plateau()
    ex.points[-1].bulk_modes = (16.5, 4, 17.4, 8)
    with report.console.capture() as cap:
        monkeypatch.setattr(report.console, "_width", 300)
        report.print_exploration(ex)
    out = cap.get()
    assert re.search(r"│\s*512\s*│\s*2\s*│\s*measured ~", out)
    assert "~ two speeds by process" in out and "512x2: 16.50 GB/s in 4 rounds, 17.40 in 8" in out
    assert json.loads(json.dumps(ex.to_json()))["points"][-1]["bulk_modes"] == [16.5, 4, 17.4, 8]


SMOKE = KernelSpec(("ctr32",), "avx", 128, 2)


@pytest.mark.skipif(bool(missing_features(SMOKE.features)), reason=f"CPU lacks {' '.join(missing_features(SMOKE.features))}")
def test_explore_prints_spreads_and_marks_the_best_among_its_ties(tmp_path, monkeypatch):
    js = tmp_path / "e.json"
    monkeypatch.setattr(report.console, "_width", 300)
    r = CliRunner().invoke(main, ["explore", "ctr32", "--widths", "128", "--depths", "2-3", "--sizes", "256,4096",
                                  "--budget", "3", "--json", str(js)])
    assert r.exit_code == 0, r.output
    assert len(re.findall(r"\d ±(\d+\.\d\d|\?)", r.output)) >= 4  # bulk and short GB/s of both depths
    assert "(configuration, size) pairs sampled in turn" in r.output and "measured *" in r.output
    d = json.loads(js.read_text())
    best = {k: d["best"][k] for k in ("width", "depth", "variant")}
    assert best in d["ties"]  # the best is one of the ties (the cheapest)
    for p in d["points"]:
        assert p["rounds"] >= 1 and p["bulk_gbps_ci"][0] <= p["bulk_gbps"] <= p["bulk_gbps_ci"][1]


@pytest.mark.skipif(bool(missing_features(SMOKE.features)), reason=f"CPU lacks {' '.join(missing_features(SMOKE.features))}")
def test_explore_times_each_size_in_a_process_of_its_own(monkeypatch):
    """A bulk figure must not depend on the sizes timed before it in the same process (a shallow
    ymm loop read 3-7% low after a short size): every harness run times one size."""
    real, sizes_per_run = explore_module.run_op, []

    def recording(spec, so, op, sizes, *args, **kwargs):
        sizes_per_run.append(list(sizes))
        return real(spec, so, op, sizes, *args, **kwargs)

    monkeypatch.setattr(explore_module, "run_op", recording)
    r = CliRunner().invoke(main, ["explore", "ctr32", "--widths", "128", "--depths", "2", "--sizes", "256,4096",
                                  "--budget", "0"])
    assert r.exit_code == 0, r.output
    assert sorted(map(tuple, sizes_per_run)) == [(256,), (4096,)]
