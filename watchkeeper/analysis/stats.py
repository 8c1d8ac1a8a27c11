"""Statistics for paired benchmarks. Pure functions: numbers in, dataclasses out.

Speed-up is the geometric mean of paired ratios (candidate / baseline on the same task in the
same round): ratios multiply, so their natural average is geometric, and a 2x gain and a 2x
loss cancel as they should. The 95% interval is a cluster bootstrap over *tasks* — all rounds
of a resampled task come along — because rounds of one task are correlated (same prompt, same
length) and resampling them independently would make the interval too narrow.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

DEFAULT_RESAMPLES = 2000
CONFIDENCE = 0.95


@dataclass(frozen=True, slots=True)
class Pair:
    task_id: str
    round: int
    baseline: float
    candidate: float


@dataclass(frozen=True, slots=True)
class RatioCI:
    estimate: float
    low: float
    high: float
    n_pairs: int
    n_clusters: int
    method: str = "cluster bootstrap over tasks, percentile, geometric mean of paired ratios"

    @property
    def excludes_one(self) -> bool:
        return self.low > 1.0 or self.high < 1.0


def paired_speedup(
    pairs: Sequence[Pair],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    confidence: float = CONFIDENCE,
    seed: int = 0,
) -> RatioCI | None:
    """Geometric-mean ratio with a cluster-bootstrap CI; None when no valid pair exists."""
    valid = [p for p in pairs if p.baseline > 0 and p.candidate > 0]
    if not valid:
        return None
    by_task: dict[str, list[float]] = defaultdict(list)
    for pair in valid:
        by_task[pair.task_id].append(math.log(pair.candidate / pair.baseline))
    clusters = list(by_task.values())
    sums = np.array([sum(c) for c in clusters])
    counts = np.array([len(c) for c in clusters])
    estimate = float(np.exp(sums.sum() / counts.sum()))
    if len(clusters) == 1:
        return RatioCI(estimate, estimate, estimate, len(valid), 1)
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(clusters), size=(resamples, len(clusters)))
    means = sums[picks].sum(axis=1) / counts[picks].sum(axis=1)
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(means, [alpha, 1.0 - alpha])
    return RatioCI(estimate, float(np.exp(low)), float(np.exp(high)), len(valid), len(clusters))


def median(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return float(np.median(present)) if present else None


def coefficient_of_variation(values: Sequence[float]) -> float | None:
    if len(values) < 2:
        return None
    mean = float(np.mean(values))
    return float(np.std(values, ddof=1) / mean) if mean else None
