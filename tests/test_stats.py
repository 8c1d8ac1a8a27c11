"""Statistics and the speed-up bound on numbers built by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from watchkeeper.analysis.speculation import expected_tokens, predicted_speedup
from watchkeeper.analysis.stats import Pair, paired_speedup


def test_speedup_is_the_geometric_mean_of_paired_ratios() -> None:
    pairs = [Pair("a", 1, 10.0, 20.0), Pair("b", 1, 10.0, 5.0), Pair("c", 1, 10.0, 10.0)]
    ci = paired_speedup(pairs)
    assert ci is not None
    assert ci.estimate == pytest.approx(1.0)
    assert ci.low < 1.0 < ci.high
    assert ci.n_clusters == 3


def test_a_consistent_gain_has_a_ci_above_one() -> None:
    rng = np.random.default_rng(1)
    pairs = [
        Pair(f"t{i}", r, 10.0, 10.0 * 1.5 * float(rng.lognormal(0, 0.05)))
        for i in range(12)
        for r in range(3)
    ]
    ci = paired_speedup(pairs)
    assert ci is not None
    assert 1.4 < ci.estimate < 1.6
    assert ci.low > 1.0 and ci.excludes_one


def test_the_ci_covers_the_true_ratio_about_95_percent_of_the_time() -> None:
    rng = np.random.default_rng(7)
    covered = 0
    trials = 200
    for trial in range(trials):
        task_effect = rng.normal(0, 0.1, size=10)
        pairs = [
            Pair(f"t{i}", r, 20.0, 20.0 * 1.2 * math.exp(task_effect[i] + rng.normal(0, 0.05)))
            for i in range(10)
            for r in range(3)
        ]
        ci = paired_speedup(pairs, resamples=500, seed=trial)
        assert ci is not None
        # The population ratio includes the task effects' mean, which is ~0.
        covered += ci.low <= 1.2 <= ci.high
    assert 0.85 <= covered / trials <= 0.99


def test_rounds_of_one_task_are_resampled_together() -> None:
    one_task_many_rounds = [Pair("a", r, 10.0, 12.0 + r * 0.01) for r in range(20)]
    ci = paired_speedup(one_task_many_rounds)
    assert ci is not None and ci.n_clusters == 1
    assert ci.low == ci.high == ci.estimate


def test_no_valid_pair_gives_none() -> None:
    assert paired_speedup([Pair("a", 1, 0.0, 3.0)]) is None


def test_expected_tokens_match_the_closed_form() -> None:
    assert expected_tokens(0.0, 4) == pytest.approx(1.0)
    assert expected_tokens(1.0, 4) == pytest.approx(5.0)
    assert expected_tokens(0.8, 4) == pytest.approx((1 - 0.8**5) / 0.2)


def test_self_drafting_cannot_beat_the_target_alone() -> None:
    bound = predicted_speedup(acceptance=1.0, draft_length=4, cost_ratio=1.0)
    assert bound.predicted_speedup == pytest.approx(1.0)


def test_a_cheap_accurate_drafter_predicts_a_large_gain() -> None:
    bound = predicted_speedup(acceptance=0.8, draft_length=4, cost_ratio=0.05)
    assert bound.predicted_speedup == pytest.approx(((1 - 0.8**5) / 0.2) / 1.2)
    assert bound.predicted_speedup > 2.5
