"""The soak's one AR(1) rule (soak/ar1.py): one clamp and one interval for every judge."""

from __future__ import annotations

import numpy as np
import pytest

from watchkeeper.soak.ar1 import (
    MAX_AUTOCORRELATION,
    ar1_rows,
    ar1_t_interval,
    lag1,
    standard_series,
    used_lag1,
    used_lag1_rows,
)


@pytest.mark.parametrize(
    ("r_hat", "n", "floor", "used"),
    [
        (-0.8, 10, 0.0, 0.0),  # corrected -1.02: never below 0
        (-0.2, 10, 0.3, 0.3),  # below the floor: the floor
        (0.2, 10, 0.0, 0.38),  # +(1 + 4r)/n: 0.2 + 1.8/10
        (0.95, 10, 0.3, MAX_AUTOCORRELATION),  # capped
    ],
)
def test_the_lag1_every_interval_takes_is_corrected_floored_and_capped(
    r_hat: float, n: int, floor: float, used: float
) -> None:
    assert used_lag1(r_hat, n, floor) == pytest.approx(used)


def test_the_sizings_rows_and_one_series_read_the_same_interval() -> None:
    """pairs_needed judges many simulated soaks at once through `ar1_rows`; each row must read
    what `ar1_t_interval` reads of that series alone."""
    draws = 0.01 + 0.03 * standard_series(0.4, rows=40, length=12, seed=3)
    rows = ar1_rows(draws, 0.3, 0.95)
    for k, series in enumerate(draws):
        one = ar1_t_interval(series.tolist(), floor=0.3)
        assert (one.mean, one.r_estimate, one.r_used) == pytest.approx(
            (rows.mean[k], rows.r_hat[k], rows.r[k]), abs=1e-15
        )
        assert one.high - one.mean == pytest.approx(rows.half[k], abs=1e-15)
    assert np.array_equal(rows.r, used_lag1_rows(rows.r_hat, 12, 0.3))
    assert lag1(draws[0]) == pytest.approx(float(rows.r_hat[0]), abs=1e-15)
