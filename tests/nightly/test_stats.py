"""Statistics and the speed-up bound on numbers built by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from watchkeeper.analysis.speculation import expected_tokens, predicted_speedup
from watchkeeper.analysis.stats import Pair, paired_speedup, rounds_to_settle
from watchkeeper.analysis.table_fit import winsorize


def _table(
    ratio: float,
    *,
    tasks: int = 10,
    rounds: int = 8,
    task_sd: float = 0.1,
    round_sd: float = 0.04,
    noise_sd: float = 0.03,
    seed: int = 0,
) -> list[Pair]:
    """Paired ratios with a task effect, a round effect hitting every task of a round (host
    drift) and per-request noise: the structure measured on this host."""
    rng = np.random.default_rng(seed)
    task_effect = rng.normal(0, task_sd, size=tasks)
    task_effect -= task_effect.mean()
    round_effect = rng.normal(0, round_sd, size=rounds)
    return [
        Pair(
            f"t{i}",
            r,
            20.0,
            20.0 * ratio * math.exp(task_effect[i] + round_effect[r] + rng.normal(0, noise_sd)),
        )
        for i in range(tasks)
        for r in range(rounds)
    ]


def test_speedup_is_the_geometric_mean_of_paired_ratios() -> None:
    pairs = [
        Pair(t, r, 10.0, 10.0 * f) for r in range(3) for t, f in (("a", 2.0), ("b", 0.5), ("c", 1))
    ]
    ci = paired_speedup(pairs)
    assert ci is not None
    assert ci.estimate == pytest.approx(1.0)
    assert ci.n_clusters == 3 and ci.n_rounds == 3


def test_a_consistent_gain_is_called_faster() -> None:
    ci = paired_speedup(_table(1.5, seed=1))
    assert ci is not None
    assert 1.4 < ci.estimate < 1.6
    assert ci.low > 1.0 and ci.excludes_one
    assert ci.verdict == "faster"


def test_the_ci_covers_the_true_ratio_when_the_host_drifts_between_rounds() -> None:
    covered = 0
    trials = 150
    for trial in range(trials):
        ci = paired_speedup(_table(1.2, seed=trial), resamples=400, seed=trial)
        assert ci is not None
        covered += ci.low <= 1.2 <= ci.high
    # Resampling tasks alone covered far less here: it ignores the round effect.
    assert covered / trials >= 0.88


def test_identical_servers_are_called_faster_or_slower_at_most_once_in_a_hundred() -> None:
    verdicts = [
        paired_speedup(_table(1.0, seed=s), resamples=400, seed=s).verdict  # type: ignore[union-attr]
        for s in range(100)
    ]
    # An A/A false alarm needs a CI that excludes 1 *and* an estimate beyond 3%: with the
    # host's round-to-round drift this happened in 1 of 300 simulated nights (0.3%).
    assert verdicts.count("faster") + verdicts.count("slower") <= 1


def test_three_identical_rounds_are_not_over_confident() -> None:
    """A 3-round bench (the default) of identical servers on a host whose rounds drift.

    A percentile bootstrap over 3 rounds is as narrow as if their spread were known: here its
    CI excluded 1 in about 15% of the runs, three times what a 95% CI may. The t floor over
    the rounds (2 degrees of freedom) brings it back near 5%."""
    runs = 200
    excluded = 0
    for s in range(runs):
        pairs = _table(1.0, tasks=12, rounds=3, task_sd=0.03, round_sd=0.03, noise_sd=0.02, seed=s)
        ci = paired_speedup(pairs, resamples=300, seed=s)
        assert ci is not None
        excluded += ci.excludes_one
    assert excluded / runs <= 0.08


def test_the_ci_is_never_narrower_than_the_t_interval_over_rounds() -> None:
    # Every task moves with its round: 3 round means, log ratios -0.04, 0, +0.04.
    pairs = [
        Pair(f"t{i}", r, 10.0, 10.0 * math.exp(d))
        for i in range(8)
        for r, d in enumerate((-0.04, 0.0, 0.04))
    ]
    ci = paired_speedup(pairs)
    assert ci is not None
    half = 4.302653 * 0.04 / math.sqrt(3)  # t(0.975, 2) x sd of the round means / sqrt(3)
    assert math.log(ci.low) <= -half + 1e-6 and math.log(ci.high) >= half - 1e-6
    assert ci.verdict == "inconclusive"


def test_one_bad_round_cannot_swing_the_estimate() -> None:
    pairs = [
        Pair(f"t{i}", r, 10.0, 10.0 * (0.871 if r == 4 else 1.0))
        for i in range(6)
        for r in range(10)
    ]
    ci = paired_speedup(pairs)
    assert ci is not None
    assert ci.estimate == pytest.approx(1.0)
    assert 4 in ci.discounted_rounds


def test_one_disturbed_request_cannot_widen_an_aa_night_into_an_inconclusive_one() -> None:
    """The cell measured on this host: a neighbour's burst made one request read 5.9x."""
    quiet = _table(1.0, tasks=12, rounds=10, task_sd=0.01, round_sd=0.01, noise_sd=0.01, seed=5)
    hit = [
        Pair(p.task_id, p.round, p.baseline, p.candidate * 5.9)
        if (p.task_id, p.round) == ("t3", 6)
        else p
        for p in quiet
    ]
    before, after = paired_speedup(quiet), paired_speedup(hit)
    assert before is not None and after is not None
    assert after.winsorized_cells == 1
    assert after.verdict == before.verdict == "no change"
    assert after.half_width is not None and after.half_width < 0.03


def test_gaussian_cells_are_not_outliers_however_few_the_rounds() -> None:
    """With 3 rounds the median polish zeroes a residual in every row and the MAD shrinks:
    before WINSORIZE_FROM, about 6% of plain Gaussian cells were clipped."""
    rng = np.random.default_rng(3)
    for rounds, allowed in ((3, 0), (4, 0), (12, 0.005)):
        clipped = total = 0
        for _ in range(50):
            table = rng.normal(0, 0.03, size=(18, rounds)) + rng.normal(0, 0.1, size=(18, 1))
            clipped += winsorize(table)[1]
            total += table.size
        assert clipped / total <= allowed, rounds


def test_a_task_or_a_round_that_really_moved_is_never_winsorized() -> None:
    """A regression on one task is a task effect; a disturbed round is a round effect."""
    pairs = [
        Pair(f"t{i}", r, 10.0, 10.0 * (0.5 if i == 2 else 1.0) * (0.8 if r == 3 else 1.0))
        for i in range(8)
        for r in range(6)
    ]
    ci = paired_speedup(pairs)
    assert ci is not None and ci.winsorized_cells == 0
    # The trimmed estimate: rounds' means over tasks, best and worst round set aside.
    per_task = [math.log(0.5)] + [0.0] * 7
    assert ci.estimate == pytest.approx(math.exp(sum(per_task) / 8))


def test_fewer_than_three_rounds_give_no_ci_and_no_verdict() -> None:
    ci = paired_speedup([Pair(f"t{i}", r, 10.0, 15.0) for i in range(12) for r in range(2)])
    assert ci is not None
    assert not ci.has_ci and ci.verdict == "insufficient replicates"
    assert ci.low == ci.high == ci.estimate


def test_fewer_than_three_tasks_give_no_ci_however_steady_the_rounds() -> None:
    """The A/A case measured on this host: one task, an identical twin 1.07-1.11x in every
    round. Four steady rounds of one task are not evidence that the servers differ."""
    rounds = [1.07, 1.095, 1.084, 1.107]
    one_task = [Pair("code_edit-01", r, 100.0, 100.0 * x) for r, x in enumerate(rounds)]
    ci = paired_speedup(one_task)
    assert ci is not None and ci.verdict == "insufficient replicates" and not ci.has_ci
    two = one_task + [Pair("code_edit-02", r, 100.0, 99.0) for r in range(4)]
    assert paired_speedup(two).verdict == "insufficient replicates"  # type: ignore[union-attr]
    three = two + [Pair("code_edit-03", r, 100.0, 101.0) for r in range(4)]
    assert paired_speedup(three).has_ci  # type: ignore[union-attr]


def test_a_wide_ci_is_inconclusive_and_says_how_many_rounds_would_settle_it() -> None:
    # Tasks that agree (task sd 1%): the rounds' drift is what more rounds can settle. With
    # task sd 10% over 10 tasks no number of rounds would (test_verdict_honesty, item 7).
    ci = paired_speedup(_table(1.04, rounds=3, round_sd=0.08, task_sd=0.01, seed=3))
    assert ci is not None
    assert ci.verdict == "inconclusive"
    assert ci.rounds_needed is not None and ci.rounds_needed > 3


def test_rounds_to_settle_count_the_estimates_distance_to_the_band() -> None:
    """1.010 (0.981-1.037) after 12 rounds: the CI must fit inside +-3% around an estimate 1%
    off centre, a 2% reach, not the 3% threshold. The t quantile falls as rounds are added
    (2.26 at 10 kept rounds, 2.09 at 17): 19 rounds, where scaling by sqrt(rounds) alone
    said 25."""
    assert rounds_to_settle(1.010, 0.981, 1.037, 12, 0.03) == 19
    # Centred: the whole band is the reach (t 3.18 at 4 rounds, 2.31 at 11 with 9 kept).
    assert rounds_to_settle(1.0, 0.95, 1.0526, 4, 0.03) == 11
    # Never fewer rounds than already run.
    assert rounds_to_settle(1.0, 0.969, 1.032, 12, 0.03) >= 13


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
