"""How often the crossover interval holds the true crossover: a simulation, since the interval
(the CI bounds' crossings, interpolated between levels) is not a CI by construction.

Each synthetic ladder has a known crossover x*: the true log ratio falls linearly in log2 load,
`slope * (log2 x* - log2 x)`, and each level's rounds are that plus normal noise of `sd` (the
round is the replicate, as in a real ladder); the levels are read by the real code
(`load_compare.paired_reading`, `crossover.crossover`). The interval counts as covering x* when
the lower bound's crossing lies at or below it and the upper bound's at or above it, a bound
that never crossed standing for the open end it implies (the lower bound never above no
change: the interval reaches down to 0; the upper bound never falling through: up to
infinity). Pure and seeded: `benchmarks/crossover_coverage.py` prints it for 500+ ladders,
`tests/load/test_crossover_coverage.py` checks a smaller run.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.special import expit, logit

from watchkeeper.analysis.crossover import LevelRatios, crossover
from watchkeeper.analysis.load_compare import Reading, paired_reading

LEVELS = (1.0, 2.0, 4.0, 8.0, 16.0)


@dataclass(frozen=True, slots=True)
class Coverage:
    ladders: int
    covered: int
    """Ladders whose interval held the true crossover."""
    closed: int
    """Ladders whose interval had both ends inside the ladder (both bounds crossed)."""
    closed_covered: int
    non_monotone: int
    """Ladders whose estimate curve was named non-monotone (noise alone made it so)."""
    median_width_doublings: float | None
    """Median width of the closed intervals, in doublings of load (log2 high - log2 low)."""

    @property
    def rate(self) -> float:
        return self.covered / self.ladders if self.ladders else math.nan

    @property
    def closed_rate(self) -> float:
        return self.closed_covered / self.closed if self.closed else math.nan


def _interval(
    c_low: float | None, c_high: float | None, first: Sequence[float]
) -> tuple[float, float]:
    """The interval's ends, open ends made explicit. `first` is (low, high) of the first
    level's CI in log space: a bound already at or below no change there crossed before the
    ladder began."""
    low_start, high_start = first
    lo = c_low if c_low is not None else (0.0 if low_start <= 0 else math.inf)
    hi = c_high if c_high is not None else (0.0 if high_start <= 0 else math.inf)
    return lo, hi


def one_ladder(
    rng: np.random.Generator,
    truth: float,
    *,
    slope: float,
    sd: float,
    rounds: int,
    levels: Sequence[float] = LEVELS,
    claimed: float | None = None,
    metric: str = "e2e_p90",
    requests: int = 30,
) -> tuple[bool, bool, bool, float | None]:
    """(covered, closed, non-monotone, width in doublings or None) of one synthetic ladder;
    `claimed`: whether the interval holds this load instead of the truth (a check of the
    check: a wrong crossover must be covered far less often). ``metric`` "goodput": SLO
    attainment, `_goodput_level`."""
    ratios = []
    for x in levels:
        mean = slope * (math.log2(truth) - math.log2(x))
        if metric == "goodput":
            reading = _goodput_level(rng, x, mean, sd, rounds, requests)
        else:
            logs = rng.normal(mean, sd, rounds)
            base = {r: 1.0 for r in range(rounds)}
            cand = {r: math.exp(-float(v)) for r, v in enumerate(logs)}
            reading = paired_reading("e2e_p90", cand, base)
        assert reading is not None
        ratios.append(LevelRatios(x, f"{x:g}", None, None, None, (reading,)))
    c = crossover("sim", ratios, metric=metric)
    first = ratios[0].reading(metric)
    assert first is not None
    ends = (first.low, first.high)
    if metric != "goodput":
        ends = (math.log(first.low), math.log(first.high))
    lo, hi = _interval(c.low_crosses, c.high_crosses, ends)
    closed = c.low_crosses is not None and c.high_crosses is not None
    width = math.log2(hi) - math.log2(lo) if closed and lo > 0 else None
    point = truth if claimed is None else claimed
    return lo <= point <= hi, closed, c.non_monotone, width


def _goodput_level(
    rng: np.random.Generator, x: float, gap: float, sd: float, rounds: int, requests: int
) -> Reading | None:
    """One level read on SLO attainment: the baseline meets the SLO less as load rises
    (0.9 at 1, 5 points less a doubling), the candidate ``gap`` points above it (clipped);
    each round's share is binomial around a probability that moves with the host (logit sd
    ``sd`` shared by both arms, half of it each arm's own). Where ``gap`` is 0 the two arms
    share one distribution: the true crossover."""
    p_base = 0.9 - 0.05 * math.log2(x)
    p_cand = min(max(p_base + gap, 0.02), 0.98)
    shared = rng.normal(0.0, sd, rounds)
    shares = []
    for p in (p_cand, p_base):
        prob = expit(logit(p) + shared + rng.normal(0.0, sd / 2.0, rounds))
        shares.append(rng.binomial(requests, prob) / requests)
    n = {r: float(requests) for r in range(rounds)}
    cand = {r: float(v) for r, v in enumerate(shares[0])}
    base = {r: float(v) for r, v in enumerate(shares[1])}
    return paired_reading("goodput", cand, base, requests=(n, n))


def simulate_coverage(
    ladders: int,
    *,
    seed: int = 0,
    rounds: int = 5,
    sd: float = 0.10,
    slopes: tuple[float, float] = (0.1, 0.3),
    levels: Sequence[float] = LEVELS,
    truth_at: float | None = None,
    metric: str = "e2e_p90",
) -> Coverage:
    """`ladders` synthetic ladders, the true crossover drawn log-uniformly between the second
    and the second-to-last level (or fixed at ``truth_at``: the coverage is conditional on
    where it falls, about 95% on a measured level and near 100% midway between two), the slope
    (log ratio per doubling) uniformly from `slopes`."""
    rng = np.random.default_rng(seed)
    lo, hi = math.log2(levels[1]), math.log2(levels[-2])
    covered = closed = closed_covered = non_monotone = 0
    widths: list[float] = []
    for _ in range(ladders):
        truth = 2.0 ** rng.uniform(lo, hi) if truth_at is None else truth_at
        slope = float(rng.uniform(*slopes))
        hit, shut, bent, width = one_ladder(
            rng, truth, slope=slope, sd=sd, rounds=rounds, levels=levels, metric=metric
        )
        covered += hit
        closed += shut
        closed_covered += hit and shut
        non_monotone += bent
        if width is not None:
            widths.append(width)
    return Coverage(
        ladders,
        covered,
        closed,
        closed_covered,
        non_monotone,
        float(np.median(widths)) if widths else None,
    )
