"""The one Student t interval: its quantile and the half-width of a mean's interval.

Every t interval takes its width from here, so a confidence level or a quantile is written
once: the bench, the sweep's race, the nightly (`analysis/`, `nightly/`), the ladder, the
soak's AR(1)-widened intervals at their effective degrees of freedom (`soak/paired.py` many
series at once through `t_quantiles`, `soak/depth.py`) and the distribution check's
cluster-robust interval (`checks/distribution_stats.py`). It sits at the base, beside
`format.py`, because `checks/` lies below `analysis/` and needs it too.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats as scipy_stats

CONFIDENCE = 0.95


def t_quantiles(df: ArrayLike, confidence: float = CONFIDENCE) -> NDArray[np.float64]:
    """The two-sided quantiles of Student's t at each of `df` degrees of freedom."""
    return np.asarray(scipy_stats.t.ppf(0.5 + confidence / 2.0, df), dtype=float)


@functools.lru_cache(maxsize=4096)
def t_quantile(df: float, confidence: float = CONFIDENCE) -> float:
    """The two-sided quantile of Student's t at `df` degrees of freedom (2.365 at 7). Cached:
    scipy's ppf costs about 0.3 ms a call, and the simulations ask for the same few quantiles
    hundreds of thousands of times (the same value, bit for bit)."""
    return float(t_quantiles(df, confidence))


def t_half_width(values: np.ndarray, confidence: float = CONFIDENCE) -> float:
    """Half the t interval of the mean of `values` (at least 2 of them)."""
    n = values.size
    return float(t_quantile(n - 1, confidence) * values.std(ddof=1) / math.sqrt(n))
