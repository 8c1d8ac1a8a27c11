"""Seeded synthetic verification-pricing passes (`analysis/verify_price.py`): how often the
break-even's CI holds the true break-even, and how often it claims a bracket it has not got.

Each pass has a known verification price c: per round, every synthetic arm's counted
acceptance is a binomial draw around the rate it asked for (`drafted` tokens), and its speed-up
over that round's baseline is c (1 + n a) times a round factor every arm of the round shares
(the baseline's own requests drift) and a factor of its own, both lognormal. The real fit reads
them. Pure and seeded: `benchmarks/verify_price_coverage.py` prints the rates for many passes,
`tests/sweep/test_verify_price.py` holds a smaller run.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from watchkeeper.analysis.verify_price import SynthPoint, fit

RATES = (0.25, 0.5, 0.75)


def passes(
    seed: int,
    *,
    cost: float,
    draft_n: int = 4,
    rates: Sequence[float] = RATES,
    rounds: int = 3,
    round_sd: float = 0.04,
    cell_sd: float = 0.03,
    drafted: int = 240,
) -> list[SynthPoint]:
    """One synthetic pass's points (arm x round)."""
    rng = np.random.default_rng(seed)
    points: list[SynthPoint] = []
    for rnd in range(1, rounds + 1):
        shared = rng.normal(0.0, round_sd)
        for rate in rates:
            accepted = int(rng.binomial(drafted, rate))
            a = accepted / drafted
            log_s = math.log(cost) + math.log1p(draft_n * a) + shared + rng.normal(0.0, cell_sd)
            arm = f"synth{round(rate * 100)}"
            points.append(SynthPoint(arm, rate, rnd, math.exp(log_s), drafted, accepted, 6))
    return points


def true_break_even(cost: float, draft_n: int = 4) -> float:
    return (1.0 / cost - 1.0) / draft_n


@dataclass(frozen=True, slots=True)
class Coverage:
    runs: int
    covered: int
    """Passes whose CI held the true break-even."""
    kinds: dict[str, int]
    """How the passes stated it ('bracketed', 'above', ...)."""
    wrong_bracket: int
    """Passes that said 'bracketed' with the truth outside the CI."""

    @property
    def rate(self) -> float:
        return self.covered / self.runs


def coverage(
    runs: int,
    *,
    cost: float,
    seed: int = 0,
    rounds: int = 3,
    draft_n: int = 4,
    round_sd: float = 0.04,
    cell_sd: float = 0.03,
) -> Coverage:
    """`runs` passes at `cost`, each fitted by the real code."""
    truth = true_break_even(cost, draft_n)
    covered = wrong = 0
    kinds: dict[str, int] = {}
    for i in range(runs):
        points = passes(
            seed + i, cost=cost, draft_n=draft_n, rounds=rounds, round_sd=round_sd, cell_sd=cell_sd
        )
        be = fit(points, draft_n).break_even
        hit = be.low is not None and be.high is not None and be.low <= truth <= be.high
        covered += hit
        kinds[be.kind] = kinds.get(be.kind, 0) + 1
        wrong += be.kind == "bracketed" and not hit
    return Coverage(runs, covered, kinds, wrong)
