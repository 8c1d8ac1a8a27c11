"""How the SLO-attainment reading (`load_compare.paired_reading("goodput", ...)`) covers and
decides: a simulation of ladder levels with a known attainment difference, as
`simulation/crossover.py` does for the crossover.

One level is `rounds` rounds of `requests` requests per arm. Each round's share of good
requests is binomial around a probability that moves from round to round: on the logit scale
the arm's level, plus a round effect both arms share (`round_sd`: the host's minute) and one of
the arm's own (`arm_sd`: which requests queued behind which). The truth is the difference of
the two arms' expected attainment over that spread (by a large seeded draw), so a clipped
share near 0 or 1 is allowed for. The reading is judged by the real code, with the per-round
request counts (the binomial floor) and without them as before issue 75 (a plain t interval
over rounds, which reads one point when every round reads the same difference).
`benchmarks/goodput_power.py` prints the rates; `tests/load/test_goodput_sim.py` holds them.

`CONTROL` is the positive control the fake servers of `tests/load/test_load_verdicts.py` serve
(`draw_counts` gives each arm's good requests per round, the same draw `simulate` reads), and
`CONTROL_AA` its A/A twin: `benchmarks/goodput_power.py --control` measures their rates.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import expit, logit

from watchkeeper.analysis.load_compare import ATTAINMENT_THRESHOLD, paired_reading, state_of
from watchkeeper.analysis.stats import CONFIDENCE
from watchkeeper.student import t_half_width

DECIDED = ("pays", "costs")


@dataclass(frozen=True, slots=True)
class Level:
    """One simulated scenario: the arms' attainment levels and the level's design."""

    base: float
    cand: float
    requests: int = 30
    rounds: int = 3
    round_sd: float = 0.5
    arm_sd: float = 0.3


CONTROL = Level(0.9, 0.6, 40, 5)
"""The positive control: 90% -> 60% of requests within the SLO, 40 requests x 5 rounds, each
round's share moving with the host (`Level`'s logit sds)."""
CONTROL_AA = Level(0.9, 0.9, 40, 5)
"""Its A/A: the same design with both arms at 90%."""


@dataclass(frozen=True, slots=True)
class Rates:
    levels: int
    truth: float
    covered: int
    zero_width: int
    decided: int
    """Levels read `pays` or `costs` (a false resolution where the truth is 0)."""
    costs: int

    def share(self, count: int) -> float:
        return count / self.levels if self.levels else math.nan


def truth_of(level: Level, draws: int = 200_000) -> float:
    """Expected candidate attainment minus the baseline's over the rounds' spread."""
    rng = np.random.default_rng(12345)
    shared = rng.normal(0.0, level.round_sd, draws)
    own = rng.normal(0.0, level.arm_sd, (2, draws))
    p_c = expit(logit(level.cand) + shared + own[0])
    p_b = expit(logit(level.base) + shared + own[1])
    return float(p_c.mean() - p_b.mean())


def _old_interval(diffs: np.ndarray) -> tuple[float, float, float]:
    mean = float(diffs.mean())
    half = t_half_width(diffs, CONFIDENCE)
    return mean, mean - half, mean + half


def draw_counts(
    attainments: tuple[float, ...], level: Level, rng: np.random.Generator
) -> np.ndarray:
    """Good requests per arm (rows, in the order of ``attainments``) and round (columns) of
    one level: binomial around each arm's probability, moved each round on the logit scale by
    an effect every arm shares and one of the arm's own (``level``'s sds and design)."""
    shared = rng.normal(0.0, level.round_sd, level.rounds)
    rows = []
    for p in attainments:
        prob = expit(logit(p) + shared + rng.normal(0.0, level.arm_sd, level.rounds))
        rows.append(rng.binomial(level.requests, prob))
    return np.asarray(rows)


def simulate(level: Level, levels: int, *, seed: int = 0, floor: bool = True) -> Rates:
    """`levels` seeded levels of ``level``, read with the binomial floor (``floor``) or as
    before it."""
    truth = truth_of(level)
    rng = np.random.default_rng(seed)
    covered = zero = decided = costs = 0
    for _ in range(levels):
        shares = draw_counts((level.cand, level.base), level, rng) / level.requests
        cand = {r: float(v) for r, v in enumerate(shares[0])}
        base = {r: float(v) for r, v in enumerate(shares[1])}
        if floor:
            n = {r: float(level.requests) for r in range(level.rounds)}
            reading = paired_reading("goodput", cand, base, requests=(n, n))
            assert reading is not None
            est, low, high, state = reading.estimate, reading.low, reading.high, reading.state
        else:
            est, low, high = _old_interval(shares[0] - shares[1])
            state = state_of(est, low, high, 0.0, ATTAINMENT_THRESHOLD)
        covered += low <= truth <= high
        zero += high - low <= 0
        decided += state in DECIDED
        costs += state == "costs"
    return Rates(levels, truth, covered, zero, decided, costs)
