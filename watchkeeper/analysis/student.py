"""The one Student t interval: its quantile and the half-width of a mean's interval.

Every t interval of the bench, the sweep's race, the nightly, the ladder and the soak takes its
width from here (`t_quantile`), so a confidence level or a quantile is written once. The
soak's AR(1)-widened intervals (soak/paired.py, soak/depth.py) take the quantile at their
effective degrees of freedom.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats as scipy_stats

CONFIDENCE = 0.95


def t_quantile(df: float, confidence: float = CONFIDENCE) -> float:
    """The two-sided quantile of Student's t at `df` degrees of freedom (2.365 at 7)."""
    return float(scipy_stats.t.ppf(0.5 + confidence / 2.0, df))


def t_half_width(values: np.ndarray, confidence: float = CONFIDENCE) -> float:
    """Half the t interval of the mean of `values` (at least 2 of them)."""
    n = values.size
    return float(t_quantile(n - 1, confidence) * values.std(ddof=1) / math.sqrt(n))
