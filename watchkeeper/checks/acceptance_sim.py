"""Seeded synthetic runs for the acceptance alarms' A/A and positive controls
(`benchmarks/acceptance_alarm.py` prints the rates, `tests/checks/test_acceptance_alarm.py`
holds them).

Shapes: a series' acceptance (0.3 an n-gram type on prose, 0.75 a draft pair, 0.95 a model
drafting for itself; the Qwen pair read 71-92% here) moves from run to run by `run_sd`
(absolute; 3 points by default, 6 for a noisy series); inside a run each request's acceptance
is Beta around the run's with concentration `kappa` (8: requests of one run range widely, as
tasks do), its drafted tokens Poisson around `drafted_mean`, its accepted tokens binomial.
Ordinary outputs repeat 0-10% of their word 6-grams (Beta(1, 30)); a looping request accepts
about 98% and repeats about 90%.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from watchkeeper.checks.acceptance_alarm import RequestAcceptance


@dataclass(frozen=True, slots=True)
class SeriesShape:
    mean: float = 0.75
    run_sd: float = 0.03
    kappa: float = 8.0
    requests: int = 12
    drafted_mean: float = 80.0


def simulate_run(
    rng: np.random.Generator,
    shape: SeriesShape,
    *,
    scale: float = 1.0,
    loop_share: float = 0.0,
    copy_task: bool = False,
) -> list[RequestAcceptance]:
    """One run's requests: `scale` multiplies the run's acceptance (0.25 = a collapse),
    `loop_share` of its requests loop, `copy_task` puts every request near 1 on output that
    does not repeat itself (the loop alarm's negative control)."""
    level = float(np.clip(rng.normal(shape.mean, shape.run_sd), 0.02, 0.99)) * scale
    level = min(max(level, 0.005), 0.995)
    out = []
    for _ in range(shape.requests):
        drafted = max(4, int(rng.poisson(shape.drafted_mean)))
        repeat = float(rng.beta(1, 30))
        if rng.random() < loop_share:
            p, repeat = float(rng.beta(49, 1)), float(rng.beta(18, 2))
        elif copy_task:
            p = float(rng.beta(40, 1.5))
        else:
            p = float(rng.beta(level * shape.kappa, (1 - level) * shape.kappa))
        out.append(RequestAcceptance(drafted, int(rng.binomial(drafted, p)), repeat))
    return out
