"""Trend statistics of a soak: Theil-Sen slopes and first-third/last-third level shifts.

Pure functions over numbers (and the stored samples' block medians), shared by the absolute
drift of one arm and the paired drift of two (soak/drift.py). Theil-Sen (median of pairwise
slopes, with its rank-based CI) is robust to the odd slow request and to the step a restart
leaves in memory; the level shift catches the late step Theil-Sen is blind to.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

import numpy as np
from scipy import stats

from watchkeeper.soak.views import SoakSampleView

T = TypeVar("T")

MAX_POINTS_PER_SEGMENT = 400

MIN_BLOCKS = 6
"""Blocks of one series needed before its throughput drift is judged: two per third at least.
Block-to-block wobble of +-10% is this host (measured: one series read 134.5 then 120.5 tok/s
while another moved +9% in the same minutes); a CI from the pooled requests of one block per
third called that "unstable"."""


@dataclass(frozen=True, slots=True)
class Trend:
    slope: float
    low: float
    high: float
    points: int

    def to_json(self) -> dict[str, Any]:
        return {"slope": self.slope, "ci95": [self.low, self.high], "points": self.points}


def theil_sen(segments: Sequence[tuple[Sequence[float], Sequence[float]]]) -> Trend | None:
    """Slope of y on x with a 95% CI, pooling pairs only *within* each segment (a server
    restart or a switched profile starts a new segment, so its step is not a slope)."""
    usable = [(np.asarray(x, float), np.asarray(y, float)) for x, y in segments if len(x) >= 2]
    if not usable:
        return None
    if len(usable) == 1:
        x, y = _thin(*usable[0])
        if np.ptp(x) == 0:
            return None
        res = stats.theilslopes(y, x, alpha=0.95)
        return Trend(float(res[0]), float(res[2]), float(res[3]), len(x))
    slopes: list[np.ndarray] = []
    variance, points = 0.0, 0
    for raw_x, raw_y in usable:
        x, y = _thin(raw_x, raw_y)
        i, j = np.triu_indices(len(x), 1)
        dx = x[j] - x[i]
        keep = dx != 0
        slopes.append((y[j] - y[i])[keep] / dx[keep])
        n = len(x)
        variance += n * (n - 1) * (2 * n + 5) / 18.0
        points += n
    pooled = np.sort(np.concatenate(slopes))
    total = len(pooled)
    if total == 0:
        return None
    z = float(stats.norm.ppf(0.975))
    upper = min(round((total + z * math.sqrt(variance)) / 2.0), total - 1)
    lower = max(round((total - z * math.sqrt(variance)) / 2.0) - 1, 0)
    return Trend(float(np.median(pooled)), float(pooled[lower]), float(pooled[upper]), points)


@dataclass(frozen=True, slots=True)
class RelativeTrend:
    """A Theil-Sen trend as a change over a span, relative to the series' median level."""

    trend: Trend
    level: float
    change: float
    low: float
    high: float

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2.0


def relative_trend(
    points: Sequence[tuple[float, float]], span_h: float, *, min_points: int = 2
) -> RelativeTrend | None:
    """Theil-Sen over (hours, value) points, its slope and CI as a change over `span_h`
    relative to the median value: the depth-1 drift's figure (soak/drift.py), and the old
    estimator the depth-4 benchmarks set beside the aggregate slope. None below `min_points`."""
    if len(points) < min_points:
        return None
    xs, ys = zip(*points, strict=True)
    trend = theil_sen([(xs, ys)])
    if trend is None:
        return None
    level = float(np.median(ys))
    scale = span_h / level
    return RelativeTrend(trend, level, trend.slope * scale, trend.low * scale, trend.high * scale)


def _thin(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Bin medians when a segment is long (8 h of 5 s samples is 16 M pairs)."""
    if len(x) <= MAX_POINTS_PER_SEGMENT:
        return x, y
    bins = np.array_split(np.argsort(x), MAX_POINTS_PER_SEGMENT)
    return np.array([np.median(x[b]) for b in bins]), np.array([np.median(y[b]) for b in bins])


def block_medians(
    rows: Sequence[SoakSampleView], *, min_requests: int = 1
) -> list[tuple[datetime, float]]:
    """(start, median decode tok/s) per block that finished a request, in time order.

    Any block with a measured request counts. A minimum of three per block once dropped the
    very blocks a slowdown produces (a server at half speed finishes half the requests of a
    short block), which hid the drift it was there to see: a survivorship bias, caught by a
    fresh-clone CI run where only the four fast blocks were left."""
    by_block: dict[int, list[SoakSampleView]] = defaultdict(list)
    for s in rows:
        if s.decode_tps:
            by_block[s.block].append(s)
    out = []
    for part in by_block.values():
        if len(part) >= min_requests:
            out.append(
                (min(s.started_at for s in part), float(np.median([s.decode_tps for s in part])))
            )
    return sorted(out)


def thirds(values: Sequence[T]) -> tuple[Sequence[T], Sequence[T]]:
    """The first and the last third of ``values`` (in time order), the middle left out: every
    first-to-last comparison of the soak (level shift, scatter, requests per block) splits
    alike, so their figures describe the same stretches."""
    third = len(values) // 3
    return values[:third], values[len(values) - third :]


@dataclass(frozen=True, slots=True)
class Shift:
    """The last third's median against the first third's: their medians and sizes, the
    relative change and its bootstrap CI (`relative_shift`)."""

    first_third: float
    last_third: float
    n: tuple[int, int]
    change: float
    low: float
    high: float

    def to_json(self) -> dict[str, Any]:
        return {
            "first_third": self.first_third,
            "last_third": self.last_third,
            "n": list(self.n),
            "change": self.change,
            "change_ci95": [self.low, self.high],
        }


def relative_shift(
    values: Sequence[float], *, min_values: int = MIN_BLOCKS, resamples: int = 2000
) -> Shift | None:
    """Median of the last third of ``values`` (in time order) against the first third, with a
    bootstrap CI of the relative change that resamples the values within each third. The
    values are replicates (a block's median, a cycle's ratio), never requests. None below
    ``min_values``: not judged."""
    if len(values) < min_values:
        return None
    head, tail = thirds(values)
    first = np.asarray(head, float)
    last = np.asarray(tail, float)
    rng = np.random.default_rng(0)
    ratios = np.median(rng.choice(last, (resamples, len(last))), axis=1) / np.median(
        rng.choice(first, (resamples, len(first))), axis=1
    )
    low, high = np.percentile(ratios - 1.0, [2.5, 97.5])
    return Shift(
        float(np.median(first)),
        float(np.median(last)),
        (len(first), len(last)),
        float(np.median(last) / np.median(first) - 1.0),
        float(low),
        float(high),
    )


def level_shift(
    rows: Sequence[SoakSampleView], *, min_blocks: int = MIN_BLOCKS, resamples: int = 2000
) -> Shift | None:
    """Median block speed of the last third of the soak's blocks against the first third, with
    a bootstrap CI of the relative change that resamples *blocks* within each third.

    Theil-Sen is robust by design, which makes it blind to a step late in the run: with the
    slow part under ~30% of the points its median slope stays near zero. A server restarted
    slower at 2 a.m. is exactly such a step, so it gets its own check. The replicate is the
    block, never the request: requests of one block share its minutes. None below
    ``min_blocks`` blocks: not judged."""
    return relative_shift(
        [v for _, v in block_medians(rows)], min_values=min_blocks, resamples=resamples
    )
