"""The soak's one AR(1) rule: a series' lag-1 autocorrelation, corrected and clamped, and what
it does to an interval.

Consecutive cycles and blocks share the hour they ran in, so their figures correlate, and an
interval that treats them as independent is too narrow. Three judges allow for it the same
way: the paired ratio's interval of a mean (`ar1_t_interval`, soak/paired.py), its sizing hint
(`pairs_needed`, many simulated series at once) and the depth slope's interval
(`soak/depth.py:slope_drift`, over the residuals of a line and a step). Each reads the series'
lag-1 estimate, adds the small-sample bias correction and clamps it in one place
(`used_lag1`): never below the configured floor nor 0, never above `MAX_AUTOCORRELATION`.
The sizing hint's copy had no 0 in its clamp, which changes nothing while the floor is 0 or
more (the config's `soak.autocorrelation_floor` is); the check that merging the copies moved
no figure: [measurements](../../docs/measurements.md#figures-behind-the-code).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

from watchkeeper.student import t_quantiles

MAX_AUTOCORRELATION = 0.9
CONFIDENCE = 0.95
"""The soak's ratio interval, and the interval its sizing judges simulated soaks with."""


@dataclass(frozen=True, slots=True)
class Interval:
    mean: float
    low: float
    high: float
    r_estimate: float
    """Lag-1 autocorrelation of the series, as measured (biased low with few values)."""
    r_used: float
    """Bias-corrected estimate, floored at the configured value, capped at 0.9."""
    n_eff: float


def lag1(values: Sequence[float] | np.ndarray) -> float:
    return float(lag1_rows(np.asarray(values, float)))


def lag1_rows(x: np.ndarray) -> np.ndarray:
    """The lag-1 estimate along the last axis (0 where a row does not vary): one series, or
    the sizing's simulated rows at once."""
    d = x - x.mean(axis=-1, keepdims=True)
    denominator = (d * d).sum(axis=-1)
    numerator = (d[..., 1:] * d[..., :-1]).sum(axis=-1)
    safe = np.where(denominator > 0, denominator, 1.0)
    return np.where(denominator > 0, numerator / safe, 0.0)


def used_lag1_rows(r_hat: ArrayLike, n: int, floor: float) -> NDArray[np.float64]:
    """The r every interval takes: the estimate bias-corrected (+(1 + 4r)/n: with the mean
    estimated it reads low by about that much), never below `floor` nor 0, never above
    `MAX_AUTOCORRELATION`."""
    r = np.asarray(r_hat, float)
    corrected = np.maximum(np.maximum(floor, r + (1.0 + 4.0 * r) / n), 0.0)
    return np.asarray(np.minimum(MAX_AUTOCORRELATION, corrected), float)


def used_lag1(r_hat: float, n: int, floor: float) -> float:
    """`used_lag1_rows` for one series."""
    return float(used_lag1_rows(r_hat, n, floor))


def variance_factor(n: int, r: ArrayLike) -> NDArray[np.float64]:
    """c = 1 + 2 * sum_k (1 - k/n) r^k: the variance of a mean of n AR(1) values over the
    independent one (n_eff = n / c), for each r."""
    k = np.arange(1, n)
    return np.asarray(1.0 + 2.0 * ((1.0 - k / n) * np.asarray(r)[..., None] ** k).sum(axis=-1))


def correlation_matrix(n: int, r: float) -> np.ndarray:
    """The AR(1) correlation matrix of n consecutive values: r^|i - j|."""
    k = np.arange(n)
    return np.asarray(r ** np.abs(k[:, None] - k[None, :]), float)


def standard_series(r: float, rows: int, length: int, seed: int = 0) -> np.ndarray:
    """`rows` seeded standard AR(1) series of lag-1 ``r`` and unit variance, `length` long."""
    series = np.random.default_rng(seed).standard_normal((rows, length))
    for t in range(1, length):
        series[:, t] = r * series[:, t - 1] + math.sqrt(1.0 - r**2) * series[:, t]
    return series


def ar1_t_interval(
    logs: Sequence[float], *, floor: float, confidence: float = CONFIDENCE
) -> Interval:
    """Student's t interval of the mean of an AR(1)-correlated series, in log space.

    Consecutive cycles share the hour they ran in, so their ratios correlate; a plain t
    interval over 6 cycles then covers ~88% at lag-1 correlation 0.3 and ~78% at 0.5. Here
    the variance of the mean is the AR(1) one, Var = s2' * c / n with
    c = 1 + 2 * sum_k (1 - k/n) r^k, where s2' = s2 (n - 1) / (n - c) undoes the sample
    variance's own shrinkage under correlation, and the t quantile takes n/c - 1 degrees of
    freedom. r is the series' lag-1 estimate, bias-corrected and floored (`used_lag1`): from
    6-16 values the estimate alone still under-covers (~0.89 at a true 0.5), while with a
    floor of 0.3 a seeded simulation covers 0.95-0.98 at a true 0.3 or 0.5
    (tests/soak/test_soak_interval.py). The price is width when the truth is 0 (coverage
    ~0.99)."""
    x = np.asarray(logs, float)
    n = x.size
    if n < 2:
        return Interval(float(x.mean()) if n else 0.0, -math.inf, math.inf, 0.0, floor, float(n))
    rows = ar1_rows(x, floor, confidence)
    mean, half, r_hat, r, n_eff = (float(v) for v in rows[:5])
    return Interval(mean, mean - half, mean + half, r_hat, r, n_eff)


class Rows(NamedTuple):
    mean: np.ndarray
    half: np.ndarray
    r_hat: np.ndarray
    r: np.ndarray
    n_eff: np.ndarray
    variance: np.ndarray
    """s2', the series' variance under correlation (what the sizing draws at)."""


def ar1_rows(x: np.ndarray, floor: float, confidence: float) -> Rows:
    """The interval's terms along the last axis: one series (`ar1_t_interval`) or many at
    once (`soak/paired.py:pairs_needed`'s draws)."""
    n = x.shape[-1]
    r_hat = lag1_rows(x)
    r = used_lag1_rows(r_hat, n, floor)
    c = variance_factor(n, r)
    # s2' = s2 (n - 1) / (n - c): the sample variance with its shrinkage under correlation
    # undone (the deviations are taken from a mean that moved with them).
    variance = x.var(axis=-1, ddof=1) * (n - 1) / np.maximum(n - c, 0.5)
    n_eff = n / c
    half = t_quantiles(np.maximum(n_eff - 1.0, 1.0), confidence)
    return Rows(x.mean(axis=-1), half * np.sqrt(variance * c / n), r_hat, r, n_eff, variance)
