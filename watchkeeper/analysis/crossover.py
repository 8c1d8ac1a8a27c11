"""Where speculation stops paying as load rises: the crossover of a load ladder.

Speculative decoding spends spare compute to cut latency; at low load that compute is spare,
at high load batched decoding already uses it, so the speed-up shrinks and can invert. A
ladder measures the paired speed-up (analysis/stats.py: per-request decode tok/s, candidate
over baseline, tasks x rounds) at each load level, and this module reads where its CI crosses
1: the arm *pays* at a level when the CI lies above 1 (and the verdict is `faster`), and the
crossover is the first level from which it no longer does. Between two levels the crossing is
interpolated in log load, for the estimate and for each CI bound: the estimate's crossing is
the point figure, the bounds' crossings bracket it (the crossover's own interval, as far as
the levels measured resolve it). Pure: the ladder's per-level results in, a dataclass out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

from watchkeeper.analysis.latency import Estimate
from watchkeeper.analysis.stats import RatioCI


@dataclass(frozen=True, slots=True)
class LevelRatios:
    """One candidate against the baseline at one load level."""

    level: float
    load: str
    speedup: RatioCI | None
    goodput: Estimate | None
    output_tps: Estimate | None

    @property
    def pays(self) -> bool:
        s = self.speedup
        return s is not None and s.has_ci and s.low > 1.0 and s.verdict == "faster"

    @property
    def costs(self) -> bool:
        s = self.speedup
        return s is not None and s.has_ci and s.high < 1.0 and s.verdict == "slower"

    @property
    def state(self) -> str:
        if self.speedup is None:
            return "no pairs"
        if not self.speedup.has_ci:
            return "no CI"
        return "pays" if self.pays else "costs" if self.costs else "no clear difference"


@dataclass(frozen=True, slots=True)
class Crossover:
    arm: str
    levels: tuple[LevelRatios, ...]
    pays_up_to: float | None
    """The highest level up to which every level pays; None when the first does not."""
    first_not_paying: float | None
    """The level after `pays_up_to` (None: it pays at every level measured)."""
    estimate_crosses: float | None
    """Interpolated load where the speed-up estimate falls through 1 (None: it does not)."""
    low_crosses: float | None
    high_crosses: float | None
    """Where the CI's lower and upper bounds fall through 1: the crossover lies between."""
    sentence: str

    def to_json(self) -> dict[str, object]:
        return {
            "arm": self.arm,
            "pays_up_to": self.pays_up_to,
            "first_not_paying": self.first_not_paying,
            "estimate_crosses": self.estimate_crosses,
            "crossover_interval": [self.low_crosses, self.high_crosses],
            "sentence": self.sentence,
            "levels": [
                {
                    "level": lv.level,
                    "load": lv.load,
                    "state": lv.state,
                    "speedup": _ratio(lv.speedup),
                    "goodput_ratio": _est(lv.goodput),
                    "output_tps_ratio": _est(lv.output_tps),
                }
                for lv in self.levels
            ],
        }


def _ratio(r: RatioCI | None) -> dict[str, object] | None:
    if r is None:
        return None
    return {"estimate": r.estimate, "low": r.low, "high": r.high, "verdict": r.verdict}


def _est(e: Estimate | None) -> dict[str, object] | None:
    if e is None:
        return None
    return {"estimate": e.estimate, "low": e.low, "high": e.high, "rounds": e.rounds}


def _crossing(points: Sequence[tuple[float, float]]) -> float | None:
    """First load where the value falls from above 1 to 1 or below, interpolated in log load
    and log value; None when it never does (or starts at or below 1)."""
    for (x0, y0), (x1, y1) in pairwise(points):
        if y0 > 1.0 >= y1:
            if x0 <= 0 or x1 <= 0 or y1 <= 0:
                return x1
            t = math.log(y0) / (math.log(y0) - math.log(y1))
            return math.exp(math.log(x0) + t * (math.log(x1) - math.log(x0)))
    return None


def crossover(
    arm: str, levels: Sequence[LevelRatios], unit: str = "concurrent requests"
) -> Crossover:
    ordered = tuple(sorted(levels, key=lambda lv: lv.level))
    pays_up_to: float | None = None
    first_not: float | None = None
    for lv in ordered:
        if lv.pays:
            pays_up_to = lv.level
            continue
        first_not = lv.level
        break
    with_ci = [lv for lv in ordered if lv.speedup is not None and lv.speedup.has_ci]
    est = _crossing([(lv.level, lv.speedup.estimate) for lv in with_ci if lv.speedup])
    low = _crossing([(lv.level, lv.speedup.low) for lv in with_ci if lv.speedup])
    high = _crossing([(lv.level, lv.speedup.high) for lv in with_ci if lv.speedup])
    return Crossover(
        arm,
        ordered,
        pays_up_to,
        first_not,
        est,
        low,
        high,
        _sentence(arm, ordered, pays_up_to, first_not, est, low, high, unit),
    )


def _g(x: float) -> str:
    return f"{x:.3g}"


def _sentence(
    arm: str,
    ordered: Sequence[LevelRatios],
    pays_up_to: float | None,
    first_not: float | None,
    est: float | None,
    low: float | None,
    high: float | None,
    unit: str,
) -> str:
    if not ordered:
        return f"{arm}: no load level measured"
    if all(lv.speedup is None or not lv.speedup.has_ci for lv in ordered):
        return f"{arm}: no level has a CI (3 rounds and 3 tasks needed): no crossover read"
    where = ""
    if est is not None:
        span = (
            f" (CI bounds cross between {_g(low) if low else '?'} and {_g(high) if high else '?'})"
            if low is not None or high is not None
            else ""
        )
        where = f"; the speed-up's estimate crosses 1 near {_g(est)} {unit}{span}"
    if pays_up_to is None:
        first = ordered[0]
        later = [_g(lv.level) for lv in ordered if lv.pays]
        tail = "keep the baseline" if first.costs else "no gain shown"
        if later:
            tail += f" (pays at {', '.join(later)} only)"
        return f"{arm} does not pay even at {_g(first.level)} {unit} ({first.state}): {tail}{where}"
    if first_not is None:
        return f"{arm} pays at every load measured, up to {_g(pays_up_to)} {unit}{where}"
    at = next(lv for lv in ordered if lv.level == first_not)
    tail = "keep the baseline" if at.costs else "no gain shown"
    return (
        f"{arm} pays up to {_g(pays_up_to)} {unit} here; from {_g(first_not)} on "
        f"{at.state}: {tail}{where}"
    )
