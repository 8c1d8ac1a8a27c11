"""The absolute-series detector's statistics: pure functions of numbers, no series or runs.

`nightly.detector` decides what a night's series show (labels, fences, storms); the tests and
intervals it relies on live here, next to the paired design's (`analysis.stats`), so both
detectors' statistics are read in one package. The run is the unit throughout: each function
takes one value per run (its median, or a proportion), never pooled per-request trials.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy import stats as sps

from watchkeeper.student import t_quantile


def benjamini_hochberg(pvalues: Sequence[float], q: float) -> list[bool]:
    """Which hypotheses BH rejects at false-discovery rate q (in the input order)."""
    return [p <= q for p in bh_adjusted(pvalues)]


def bh_adjusted(pvalues: Sequence[float]) -> list[float]:
    """BH-adjusted p-values: min over j >= i of m * p_(j) / j, capped at 1, input order kept."""
    m = len(pvalues)
    if m == 0:
        return []
    p = np.asarray(pvalues, dtype=float)
    if np.any(np.isnan(p)) or np.any((p < 0) | (p > 1)):
        raise ValueError("p-values must lie in [0, 1]")
    order = np.argsort(p)
    scaled = p[order] * m / np.arange(1, m + 1)
    adjusted = np.minimum(np.minimum.accumulate(scaled[::-1])[::-1], 1.0)
    out = np.empty(m)
    # Never below the raw p: m * p / m can round one ulp under p.
    out[order] = np.maximum(adjusted, p[order])
    return [float(v) for v in out]


def robust_center_scale(values: Sequence[float]) -> tuple[float, float]:
    """Median and MAD-based sd (1.4826 * MAD; the sample sd when the MAD is 0).

    A baseline of ten runs often holds last night's candidate: with mean and sd, that one run
    widens the scale enough that the confirming night no longer stands out (measured on the
    synthetic nights: p 0.012 for a second 20% drop). Median and MAD ignore one such run."""
    b = np.asarray(values, dtype=float)
    center = float(np.median(b))
    scale = 1.4826 * float(np.median(np.abs(b - center)))
    if scale == 0.0:
        scale = float(np.std(b, ddof=1))
    return center, scale


def prediction_p(value: float, baseline: Sequence[float], alternative: str) -> float:
    """One-sided p that a single new value comes from the baseline runs' distribution
    (Student t prediction interval: t = (x - center) / (scale * sqrt(1 + 1/n)), n - 1 df, with
    the robust center and scale of ``robust_center_scale``).

    Each run is one number (its median, or a per-run metric such as peak RSS): a rank test of
    1 value against 10 cannot go below p = 1/11 however far out the value lies; the t
    prediction test can, at the price of assuming roughly normal run-to-run noise."""
    b = np.asarray(baseline, dtype=float)
    center, scale = robust_center_scale(baseline)
    if scale == 0.0:
        if value == center:
            return 1.0
        return 0.0 if (value < center) == (alternative == "less") else 1.0
    t = (value - center) / (scale * math.sqrt(1.0 + 1.0 / b.size))
    dist = sps.t(df=b.size - 1)
    return float(dist.cdf(t) if alternative == "less" else dist.sf(t))


def two_proportion_p(
    successes: int, attempts: int, base_successes: int, base_attempts: int, alternative: str
) -> float:
    """One-sided pooled two-proportion z-test ("less": current proportion lower)."""
    p_cur, p_base = successes / attempts, base_successes / base_attempts
    pooled = (successes + base_successes) / (attempts + base_attempts)
    se = math.sqrt(pooled * (1 - pooled) * (1 / attempts + 1 / base_attempts))
    if se == 0:  # both all-successes or both all-failures: identical, no evidence
        return 1.0
    z = (p_cur - p_base) / se
    return float(sps.norm.cdf(z) if alternative == "less" else sps.norm.sf(z))


def run_to_run_fence(centers: Sequence[float], multiplier: float, *, relative: bool) -> float:
    """Q3 + multiplier * IQR of absolute changes between consecutive runs' centers."""
    c = np.asarray(centers, dtype=float)
    steps = np.abs(c[1:] / c[:-1] - 1.0) if relative else np.abs(np.diff(c))
    q1, q3 = np.percentile(steps, [25, 75])
    return float(q3 + multiplier * (q3 - q1))


def run_level_ci(value: float, centers: Sequence[float], confidence: float) -> tuple[float, float]:
    """CI of tonight's relative shift from the baseline runs, with the run as the unit.

    The same t prediction interval the test uses: tonight is one run, so its own run-to-run
    wobble (sd * sqrt(1 + 1/n)) is part of the uncertainty, not only the baseline mean's."""
    center, scale = robust_center_scale(centers)
    n = len(centers)
    half = t_quantile(n - 1, confidence) * scale * math.sqrt(1 + 1 / n)
    return (value - half) / center - 1.0, (value + half) / center - 1.0
