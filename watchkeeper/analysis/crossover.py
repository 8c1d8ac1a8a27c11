"""Where speculation stops paying as load rises: the crossover of a load ladder.

Speculative decoding spends spare compute to cut latency; at low load that compute is spare,
at high load batched decoding already uses it, so the gain shrinks and can invert, mostly
through lost capacity that users feel as queue wait and missed service levels. A ladder reads
each level on several metrics (analysis/load_compare.py) and one decides (`metric`: goodput
for rate ladders, E2E p90 for concurrency ladders): the arm *pays* at a level when that
reading's CI lies beyond no change and its estimate beyond the threshold, and the crossover is
the first level from which it no longer does.

What the interval is, and is not: between two levels the crossing is interpolated in log load
(and log ratio), for the estimate and for each CI bound; the bounds' crossings bracket the
estimate's. It is pointwise 95% CIs joined by straight lines, not a CI for the crossover by
construction: its coverage was measured by simulation (simulation/crossover.py, docs/load.md).
A curve that falls and rises again by more than the threshold (a valley: 1.27, 0.46, 0.98) is
named non-monotone and no single crossover is read from it. Levels where the baseline could
not keep up with the offered rate (oversaturated, analysis/streaming.py) are left out: two
growing queues describe the run's length, not the load. A candidate oversaturated alone stays
in: that lost capacity is the cost under study.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

from watchkeeper.analysis.crossover_text import sentence
from watchkeeper.analysis.latency import Estimate
from watchkeeper.analysis.load_compare import (
    ATTAINMENT_THRESHOLD,
    Reading,
    decode_reading,
    reading_of,
)
from watchkeeper.analysis.stats import DEFAULT_THRESHOLD, RatioCI


@dataclass(frozen=True, slots=True)
class LevelRatios:
    """One candidate against the baseline at one load level."""

    level: float
    load: str
    speedup: RatioCI | None
    goodput: Estimate | None
    output_tps: Estimate | None
    readings: tuple[Reading, ...] = ()
    """Every metric's reading (analysis/load_compare.py); decode is built from `speedup`."""
    oversaturated: tuple[str, ...] = ()
    """Arms that could not keep up with this level's offered rate (open loop)."""
    baseline: str = ""

    def reading(self, metric: str) -> Reading | None:
        found = reading_of(self.readings, metric)
        return decode_reading(self.speedup) if found is None and metric == "decode" else found

    @property
    def excluded(self) -> bool:
        """Out of the crossover: the baseline was oversaturated here."""
        return bool(self.baseline) and self.baseline in self.oversaturated


@dataclass(frozen=True, slots=True)
class Crossover:
    arm: str
    levels: tuple[LevelRatios, ...]
    pays_up_to: float | None
    """The highest level up to which every level pays; None when the first does not."""
    first_not_paying: float | None
    """The level after `pays_up_to` (None: it pays at every level measured)."""
    estimate_crosses: float | None
    """Interpolated load where the deciding estimate falls through no change (None: it does
    not, or the curve is non-monotone)."""
    low_crosses: float | None
    high_crosses: float | None
    """Where the CI's lower and upper bounds fall through no change: the crossover lies
    between (None: the bound never lay beyond no change / never fell through it)."""
    sentence: str
    metric: str = "decode"
    non_monotone: bool = False
    rounds_needed: int | None = None
    """At the first level whose reading is unresolved: rounds that would resolve it."""

    def state(self, lv: LevelRatios) -> str:
        if lv.excluded:
            return "oversaturated"
        r = lv.reading(self.metric)
        return r.state if r is not None else "no pairs"

    def to_json(self) -> dict[str, object]:
        return {
            "arm": self.arm,
            "metric": self.metric,
            "pays_up_to": self.pays_up_to,
            "first_not_paying": self.first_not_paying,
            "estimate_crosses": self.estimate_crosses,
            "crossover_interval": [self.low_crosses, self.high_crosses],
            "non_monotone": self.non_monotone,
            "rounds_needed": self.rounds_needed,
            "sentence": self.sentence,
            "levels": [self._level_json(lv) for lv in self.levels],
        }

    def _level_json(self, lv: LevelRatios) -> dict[str, object]:
        readings = [lv.reading(m) for m in ("goodput", "e2e_p90", "ttft_p90", "decode")]
        return {
            "level": lv.level,
            "load": lv.load,
            "state": self.state(lv),
            "oversaturated": list(lv.oversaturated),
            "speedup": _ratio(lv.speedup),
            "goodput_ratio": _est(lv.goodput),
            "output_tps_ratio": _est(lv.output_tps),
            "readings": {r.metric: r.to_json() for r in readings if r is not None},
        }


def _ratio(r: RatioCI | None) -> dict[str, object] | None:
    if r is None:
        return None
    return {"estimate": r.estimate, "low": r.low, "high": r.high, "verdict": r.verdict}


def _est(e: Estimate | None) -> dict[str, object] | None:
    if e is None:
        return None
    return {"estimate": e.estimate, "low": e.low, "high": e.high, "rounds": e.rounds}


def _crossing(points: Sequence[tuple[float, float]], null: float, log_y: bool) -> float | None:
    """First load where the value falls from above `null` to `null` or below, interpolated in
    log load (and log value for a ratio); None when it never does (or starts at or below)."""
    for (x0, y0), (x1, y1) in pairwise(points):
        if y0 > null >= y1:
            if x0 <= 0 or x1 <= 0 or (log_y and y1 <= 0):
                return x1
            a, b, n = (math.log(y0), math.log(y1), 0.0) if log_y else (y0, y1, null)
            t = (a - n) / (a - b)
            return math.exp(math.log(x0) + t * (math.log(x1) - math.log(x0)))
    return None


def is_non_monotone(values: Sequence[float], null: float, log_y: bool) -> bool:
    """A fall followed by a rise, each beyond the threshold (a valley), or more than one
    crossing of `null`: no single crossover describes such a curve."""
    if log_y:
        if any(v <= 0 for v in values):
            return False
        ys = [math.log(v) for v in values]
        step, n = math.log1p(DEFAULT_THRESHOLD), 0.0
    else:
        ys, step, n = list(values), ATTAINMENT_THRESHOLD, null
    peak, trough, fell = ys[0], math.inf, False
    for y in ys[1:]:
        if fell and y > trough + step:
            return True
        if not fell and y < peak - step:
            fell = True
        if fell:
            trough = min(trough, y)
        else:
            peak = max(peak, y)
    return sum(1 for a, b in pairwise(ys) if (a > n) != (b > n)) > 1


def crossover(
    arm: str,
    levels: Sequence[LevelRatios],
    unit: str = "concurrent requests",
    metric: str = "decode",
) -> Crossover:
    ordered = tuple(sorted(levels, key=lambda lv: lv.level))
    used = [lv for lv in ordered if not lv.excluded]
    pays_up_to: float | None = None
    first_not: float | None = None
    for lv in used:
        r = lv.reading(metric)
        if r is not None and r.state == "pays":
            pays_up_to = lv.level
            continue
        first_not = lv.level
        break
    points = [(lv.level, r) for lv in used if (r := lv.reading(metric)) is not None and r.has_ci]
    null = points[0][1].null if points else 1.0
    log_y = not (points and points[0][1].difference)
    # Every level resolved the same way (costs everywhere, or pays everywhere): the answer is
    # that, whatever the estimates do between levels. The 2026-11-28 rate ladder's self-draft
    # cost at all six rates (SLO attainment -0.54, -0.92, ..., -0.33, every CI below 0) and
    # was named non-monotone for the valley in its estimates.
    states = {r.state for _, r in points}
    settled = len(states) == 1 and states <= {"pays", "costs"}
    non_monotone = (
        len(points) >= 3
        and not settled
        and is_non_monotone([r.estimate for _, r in points], null, log_y)
    )
    est = None if non_monotone else _crossing([(x, r.estimate) for x, r in points], null, log_y)
    low = _crossing([(x, r.low) for x, r in points], null, log_y)
    high = _crossing([(x, r.high) for x, r in points], null, log_y)
    unresolved = next((r for _, r in points if r.state == "no clear difference"), None)
    needed = unresolved.rounds_needed if unresolved is not None else None
    text = sentence(
        arm, metric, ordered, pays_up_to, first_not, (est, low, high), non_monotone, unit
    )
    return Crossover(
        arm, ordered, pays_up_to, first_not, est, low, high, text, metric, non_monotone, needed
    )
