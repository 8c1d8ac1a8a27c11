"""A candidate against the baseline at one load level, read on what users feel.

Per-request decode tok/s leaves out queueing and prefill, and under load speculation costs
mostly through lost capacity: queue wait (TTFT, end-to-end latency) and requests that miss
the service level. So each level is read on four metrics, each with a CI and a state (`pays`,
`costs`, `no clear difference`), and the ladder's `--crossover-metric` picks which one
decides:

- `goodput`: paired SLO attainment, the candidate's share of requests meeting the SLO minus
  the baseline's, paired by round, t interval over rounds. Unlike goodput's ratio it stays
  defined when a round has no good request (0 - 0 is a difference; 0 / 0 is not); pays
  beyond `ATTAINMENT_THRESHOLD`. Its half-width is never below the per-request binomial's
  (`binomial_half`): rounds that all read the same difference (3 of 3 good in each arm)
  gave a CI of one point in 20% of A/A levels at 3 requests a round (issue 75;
  simulation/goodput.py, `benchmarks/goodput_power.py`).
- `e2e_p90`, `ttft_p90`: the baseline's per-round p90 over the candidate's (higher = better,
  as the nightly's tail series read), paired by round, t interval in log space.
- `decode`: the bench's paired speed-up (tasks x rounds, analysis/stats.py).

Ratios pay when their CI lies above 1 and the estimate beyond the bench's 3% threshold.
An unresolved reading says how many rounds would resolve it (t interval: the rounds at which
the half-width falls below the estimate's distance from no change, the spread kept).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as scipy_stats

from watchkeeper.analysis.latency import LatencyStats
from watchkeeper.analysis.stats import CONFIDENCE, DEFAULT_THRESHOLD, RatioCI
from watchkeeper.student import t_half_width, t_quantile

CROSSOVER_METRICS = ("goodput", "e2e_p90", "ttft_p90", "decode")
ATTAINMENT_THRESHOLD = 0.02
"""Two points of SLO attainment: the nightly's floor for `good_fraction`."""
MAX_ROUNDS = 1000
"""Rounds needed beyond this read as 'no practical number of rounds'."""
LABELS = {
    "goodput": "SLO attainment (cand - base)",
    "e2e_p90": "E2E p90 (base / cand)",
    "ttft_p90": "TTFT p90 (base / cand)",
    "decode": "decode tok/s (cand / base)",
}


@dataclass(frozen=True, slots=True)
class Reading:
    """One metric's comparison at one level."""

    metric: str
    estimate: float
    low: float
    high: float
    rounds: int
    state: str
    """'pays', 'costs', 'no clear difference', 'no CI' or 'neither meets the SLO'."""
    rounds_needed: int | None = None
    """For 'no clear difference': rounds that would resolve it (None: none would)."""

    @property
    def difference(self) -> bool:
        """A difference (null 0, SLO attainment) rather than a ratio (null 1)."""
        return self.metric == "goodput"

    @property
    def null(self) -> float:
        return 0.0 if self.difference else 1.0

    @property
    def has_ci(self) -> bool:
        return self.state != "no CI"

    @property
    def label(self) -> str:
        return LABELS[self.metric]

    def text(self) -> str:
        """'0.812 (0.70-0.94)' or '-0.42 (-0.55 to -0.30)' for a difference."""
        if self.difference:
            inner = f"{self.low:+.2f} to {self.high:+.2f}"
            return f"{self.estimate:+.2f} ({inner})" if self.has_ci else f"{self.estimate:+.2f}"
        if not self.has_ci:
            return f"{self.estimate:.3f}"
        return f"{self.estimate:.3f} ({self.low:.3f}-{self.high:.3f})"

    def to_json(self) -> dict[str, object]:
        return {
            "metric": self.metric,
            "estimate": self.estimate,
            "low": self.low,
            "high": self.high,
            "rounds": self.rounds,
            "state": self.state,
            "rounds_needed": self.rounds_needed,
        }


def default_metric(mode: str) -> str:
    """Goodput for a rate ladder (what an open loop offers is requests a user waits for);
    E2E p90 for a concurrency ladder (a closed loop's clients wait their turn: its latency is
    what they feel)."""
    return "goodput" if mode == "rate" else "e2e_p90"


def _rounds_needed(values: np.ndarray, null: float, threshold: float) -> int | None:
    """Smallest n whose t half-width (same spread) falls below the distance from `null`;
    None when the estimate lies within the threshold or no spread is known."""
    distance = abs(float(values.mean()) - null)
    sd = float(values.std(ddof=1)) if values.size >= 2 else 0.0
    if distance <= threshold or sd <= 0:
        return None
    for n in range(max(values.size + 1, 3), MAX_ROUNDS + 1):
        if t_quantile(n - 1, CONFIDENCE) * sd / math.sqrt(n) < distance:
            return n
    return None


def state_of(est: float, low: float, high: float, null: float, threshold: float) -> str:
    if low > null and est > null + threshold:
        return "pays"
    if high < null and est < null - threshold:
        return "costs"
    return "no clear difference"


def binomial_half(
    candidate: Sequence[float], baseline: Sequence[float], counts: Sequence[tuple[float, float]]
) -> float:
    """The floor under the attainment difference's half-width: the per-request binomial of
    each arm's pooled share over its requests, each share shrunk by one good and one bad
    request (Agresti-Coull style: 3 of 3 good reads 0.8, not a certain 1), at 95%. It is
    what the rounds' spread cannot fall below however alike the rounds read."""
    var = 0.0
    for shares, side in ((candidate, 0), (baseline, 1)):
        n = sum(c[side] for c in counts)
        good = sum(a * c[side] for a, c in zip(shares, counts, strict=True))
        p = (good + 1.0) / (n + 2.0)
        var += p * (1.0 - p) / max(n, 1.0)
    return float(scipy_stats.norm.ppf(0.5 + CONFIDENCE / 2.0)) * math.sqrt(var)


def paired_reading(
    metric: str,
    candidate: Mapping[int, float],
    baseline: Mapping[int, float],
    *,
    requests: tuple[Mapping[int, float], Mapping[int, float]] | None = None,
) -> Reading | None:
    """A per-round figure paired by round: the difference for `goodput` (SLO attainment),
    else the log ratio baseline / candidate (latency: lower is better). None: no shared round
    (or a latency of 0). ``requests``: (candidate, baseline) requests per round, which floor
    the attainment's half-width (`binomial_half`); without them a goodput interval of zero
    width reads `no CI`."""
    shared = sorted(set(candidate) & set(baseline))
    if not shared:
        return None
    if metric == "goodput":
        values = np.asarray([candidate[r] - baseline[r] for r in shared])
        null, threshold = 0.0, ATTAINMENT_THRESHOLD
    else:
        if any(candidate[r] <= 0 or baseline[r] <= 0 for r in shared):
            return None
        values = np.asarray([math.log(baseline[r] / candidate[r]) for r in shared])
        null, threshold = 0.0, math.log1p(DEFAULT_THRESHOLD)
    mean = float(values.mean())
    back = (lambda v: v) if metric == "goodput" else math.exp
    if values.size < 2:
        return Reading(metric, back(mean), back(mean), back(mean), values.size, "no CI")
    half = t_half_width(values, CONFIDENCE)
    if metric == "goodput" and requests is not None:
        counts = [(requests[0].get(r, 0.0), requests[1].get(r, 0.0)) for r in shared]
        floor = binomial_half([candidate[r] for r in shared], [baseline[r] for r in shared], counts)
        half = max(half, floor)
    state = state_of(mean, mean - half, mean + half, null, threshold)
    if metric == "goodput" and half <= 0:
        state = "no CI"  # equal differences every round, and no request counts to floor them
    if metric == "goodput" and all(candidate[r] == 0 and baseline[r] == 0 for r in shared):
        state = "neither meets the SLO"
    needed = _rounds_needed(values, null, threshold) if state == "no clear difference" else None
    return Reading(
        metric, back(mean), back(mean - half), back(mean + half), values.size, state, needed
    )


def decode_reading(speedup: RatioCI | None) -> Reading | None:
    """The bench's speed-up as a reading: pays with a CI above 1 and a `faster` verdict."""
    if speedup is None:
        return None
    s = speedup
    if not s.has_ci:
        state = "no CI"
    elif s.low > 1.0 and s.verdict == "faster":
        state = "pays"
    elif s.high < 1.0 and s.verdict == "slower":
        state = "costs"
    else:
        state = "no clear difference"
    needed = s.rounds_needed if state == "no clear difference" else None
    return Reading("decode", s.estimate, s.low, s.high, s.n_rounds, state, needed)


def level_readings(
    base: LatencyStats | None, cand: LatencyStats | None, speedup: RatioCI | None
) -> tuple[Reading, ...]:
    """Every metric's reading at one level, in `CROSSOVER_METRICS` order (missing ones left
    out: no latency figures, no shared round)."""
    found: list[Reading | None] = []
    for metric in CROSSOVER_METRICS:
        if metric == "decode":
            found.append(decode_reading(speedup))
            continue
        if base is None or cand is None:
            found.append(None)
            continue
        key = "attainment" if metric == "goodput" else metric
        counts = (cand.by_round.get("requests", {}), base.by_round.get("requests", {}))
        found.append(
            paired_reading(
                metric,
                cand.by_round.get(key, {}),
                base.by_round.get(key, {}),
                requests=counts if metric == "goodput" else None,
            )
        )
    return tuple(r for r in found if r is not None)


def reading_of(readings: Sequence[Reading], metric: str) -> Reading | None:
    return next((r for r in readings if r.metric == metric), None)
