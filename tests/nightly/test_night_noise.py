"""The verdict's CI carries the server processes' night-to-night spread (nightly/ratios.py)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from watchkeeper.nightly.ratios import MIN_AA_NIGHTS, night_noise, with_night_noise
from watchkeeper.store.references import RatioRecord

NIGHT = RatioRecord(
    campaign_id=1,
    reference_id=1,
    series="host|p|all|decode_tps",
    host_fingerprint="host",
    profile="p",
    category="all",
    metric="decode_tps",
    estimate=1.035,
    low=1.015,
    high=1.055,
    n_pairs=288,
    n_tasks=24,
    n_rounds=12,
    threshold=0.03,
    verdict="improvement",
    aa=True,
)


def test_an_aa_night_that_one_process_pair_moved_by_3_5_percent_is_not_a_flag() -> None:
    """Two nights measured here read 0.989 and 1.014 with +-2% CIs of their own: a night's CI
    cannot see that its two server processes stay fixed all night."""
    judged = with_night_noise(NIGHT, night_noise([], prior_sd=0.02))
    assert judged.low is not None and judged.high is not None
    assert judged.low < 1.0 < judged.high
    assert judged.verdict == "inconclusive"
    assert math.log(judged.high / judged.estimate) == pytest.approx(1.959964 * 0.02)


def test_a_slower_build_stays_a_regression_under_the_night_noise() -> None:
    slow = replace(NIGHT, estimate=0.5, low=0.48, high=0.53, verdict="regression", aa=False)
    assert with_night_noise(slow, night_noise([], 0.02)).verdict == "regression"


def test_a_night_ci_wider_than_the_night_noise_is_kept_as_it_is() -> None:
    wide = replace(NIGHT, estimate=1.0, low=0.9, high=1.1, verdict="inconclusive")
    assert with_night_noise(wide, night_noise([], 0.02)) == wide


def test_enough_aa_nights_replace_the_configured_sd_with_their_own_spread() -> None:
    estimates = [0.99, 1.01] * (MIN_AA_NIGHTS // 2)
    history = [replace(NIGHT, campaign_id=i, estimate=e) for i, e in enumerate(estimates)]
    noise = night_noise(history, prior_sd=0.05)
    assert noise.sd == pytest.approx(0.0107, abs=0.0005)
    assert "A/A nights" in noise.source
    fewer = night_noise(history[:-1], prior_sd=0.05)
    assert fewer.sd == 0.05 and "nightly.night_sd" in fewer.source
    # Nights of a changed system say nothing about the noise of an unchanged one.
    changed = [replace(r, aa=False) for r in history]
    assert night_noise(changed, prior_sd=0.05).sd == 0.05
