"""The nightly detector on synthetic histories with fixed seeds.

Continuous histories: each run has a level that wobbles 1% from night to night (thermals,
neighbours) and 20 trials around it with a 3% coefficient of variation (per-request speeds).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from scipy.stats import false_discovery_control

from watchkeeper.analysis.absolute import benjamini_hochberg, bh_adjusted
from watchkeeper.nightly.changepoints import first_bad
from watchkeeper.nightly.detector import (
    DetectorParams,
    Direction,
    Label,
    RunPoint,
    SeriesKey,
    Side,
    detect_night,
    detect_series,
    storm,
)

FAST = DetectorParams(resamples=200)  # the bootstrap does not decide labels; keep loops quick


def key(metric: str = "decode_tps", category: str = "code") -> SeriesKey:
    return SeriesKey("host-a", "cpu-avx2", "qwen2.5-7b+0.5b", "cfg-1a2b", category, 1, metric)


def noisy_run(
    rng: np.random.Generator,
    label: str,
    level: float,
    *,
    run_cv: float = 0.01,
    trial_cv: float = 0.03,
    trials: int = 20,
) -> RunPoint:
    night = level * (1 + rng.normal(0, run_cv))
    return RunPoint.of(label, night * rng.lognormal(0, trial_cv, trials))


def history(
    rng: np.random.Generator, runs: int = 15, level: float = 50.0, run_cv: float = 0.01
) -> list[RunPoint]:
    return [noisy_run(rng, f"b{i}", level, run_cv=run_cv) for i in range(runs)]


def counts_run(rng: np.random.Generator, label: str, rate: float, drafted: int = 2000) -> RunPoint:
    n = int(rng.integers(drafted - 100, drafted + 100))
    return RunPoint.counts(label, int(rng.binomial(n, rate)), n)


def labels_over_seeds(seeds: range, step: float, run_cv: float = 0.01) -> list[Label]:
    out = []
    for seed in seeds:
        rng = np.random.default_rng(seed)
        past = history(rng, run_cv=run_cv)
        tonight = noisy_run(rng, "new", 50.0 * (1 + step), run_cv=run_cv)
        out.append(detect_series(key(), past, tonight, FAST).label)
    return out


def test_a_10_percent_decode_drop_after_15_noisy_runs_is_a_regression_in_90_percent_of_seeds() -> (
    None
):
    labels = labels_over_seeds(range(100), -0.10)
    assert sum(label is Label.REGRESSION for label in labels) >= 90
    assert Label.IMPROVEMENT not in labels


def test_pure_noise_histories_are_flagged_in_at_most_5_percent_of_seeds() -> None:
    labels = labels_over_seeds(range(1000, 1200), 0.0)
    flagged = sum(label in (Label.REGRESSION, Label.IMPROVEMENT) for label in labels)
    assert flagged <= 10
    assert sum(label is Label.SUSPICIOUS for label in labels) <= 20


def test_a_10_percent_step_hides_inside_the_fence_when_run_medians_wobble_3_percent() -> None:
    # The fence is ~5 run-to-run sigmas: that, not the test, bounds what can be seen.
    labels = labels_over_seeds(range(40), -0.10, run_cv=0.03)
    assert sum(label is Label.REGRESSION for label in labels) < 20
    assert sum(label is Label.SUSPICIOUS for label in labels) > 20


def test_a_single_spike_is_at_most_a_candidate_and_the_next_normal_run_is_no_change() -> None:
    for seed in range(5):
        rng = np.random.default_rng(seed)
        past = history(rng)
        spike = noisy_run(rng, "spike", 50.0 * 0.8)
        assert detect_series(key(), past, spike, FAST).label is Label.REGRESSION  # a candidate
        after = noisy_run(rng, "after", 50.0)
        assert detect_series(key(), [*past, spike], after, FAST).label is Label.NO_CHANGE
        # ...and never confirmed: the change-point pass opens no segment for one night.
        medians = [(r.label, float(np.median(r.trials))) for r in [*past, spike, after]]
        assert first_bad(medians, Direction.HIGHER) is None


def test_a_slow_drift_stays_unflagged_by_the_per_run_detector_but_the_change_point_pass_sees_it() -> (
    None
):
    for seed in range(3):
        rng = np.random.default_rng(seed)
        runs = [noisy_run(rng, f"b{i}", 50.0 * (1 - 0.001 * i)) for i in range(40)]  # -4% in all
        nightly = [detect_series(key(), runs[:i], runs[i], FAST) for i in range(15, 40)]
        assert not any(f.label is Label.REGRESSION for f in nightly)
        medians = [(r.label, float(np.median(r.trials))) for r in runs]
        found = first_bad(medians, Direction.HIGHER)
        assert found is not None and found.is_current and found.after_median < found.before_median


def test_fewer_than_10_good_runs_is_insufficient_data_and_bad_runs_do_not_count() -> None:
    rng = np.random.default_rng(3)
    past = history(rng, runs=9)
    tonight = noisy_run(rng, "new", 40.0)
    assert detect_series(key(), past, tonight).label is Label.INSUFFICIENT
    bad = [RunPoint.of(f"x{i}", [50.0] * 20, excluded="errors") for i in range(6)]
    finding = detect_series(key(), [*past, *bad], tonight)
    assert finding.label is Label.INSUFFICIENT
    assert finding.p_value is None and finding.delta is None
    assert "9 good runs" in finding.note


def test_excluded_runs_never_enter_the_baseline_or_the_fence() -> None:
    rng = np.random.default_rng(11)
    past = history(rng)
    tonight = noisy_run(rng, "new", 50.0)
    wild = [
        RunPoint.of("crash", [5.0] * 20, excluded="3 requests failed"),
        RunPoint.of("mismatch", [500.0] * 40, excluded="tokens differ from baseline"),
    ]
    polluted = [*past[:5], wild[0], *past[5:12], wild[1], *past[12:], wild[0]]
    clean = detect_series(key(), past, tonight)
    dirty = detect_series(key(), polluted, tonight)
    assert not clean.flagged
    assert dirty == clean
    # Had they counted, both the baseline and the fence would have moved:
    admitted = [dataclasses.replace(r, good=True, excluded_reason=None) for r in polluted]
    leaky = detect_series(key(), admitted, tonight)
    assert leaky.fence != clean.fence and leaky.baseline_value != clean.baseline_value
    assert dirty.baseline_runs == 10 and dirty.baseline_trials == 200


def test_tonights_run_is_judged_even_when_it_will_never_be_a_baseline() -> None:
    rng = np.random.default_rng(5)
    past = [counts_run(rng, f"b{i}", 0.001, drafted=400) for i in range(12)]
    tonight = RunPoint.counts("new", 40, 400, excluded="40 requests failed")
    finding = detect_series(key("error_rate"), past, tonight)
    assert finding.label is Label.REGRESSION and finding.side is Side.WORSE


def test_a_5_point_acceptance_drop_on_2000_drafted_tokens_is_flagged_by_the_proportion_test() -> (
    None
):
    flagged = 0
    for seed in range(50):
        rng = np.random.default_rng(seed)
        past = [counts_run(rng, f"b{i}", 0.90) for i in range(15)]
        finding = detect_series(key("acceptance_rate"), past, counts_run(rng, "new", 0.85), FAST)
        assert finding.test == "one-sided two-proportion z-test"
        assert finding.p_value is not None and finding.p_value < 1e-4
        assert finding.delta == pytest.approx(-0.05, abs=0.02)
        assert finding.label in (Label.REGRESSION, Label.SUSPICIOUS)
        flagged += finding.label is Label.REGRESSION
    assert flagged >= 40


def test_at_75_percent_acceptance_the_test_still_sees_5_points_but_the_fence_may_not() -> None:
    # Binomial noise alone at 2000 tokens is ~1 point per run, so the fence sits near 5 points.
    labels = []
    for seed in range(40):
        rng = np.random.default_rng(seed)
        past = [counts_run(rng, f"b{i}", 0.75) for i in range(15)]
        labels.append(
            detect_series(key("acceptance_rate"), past, counts_run(rng, "new", 0.70), FAST).label
        )
    assert set(labels) <= {Label.REGRESSION, Label.SUSPICIOUS, Label.NO_CHANGE}
    assert labels.count(Label.NO_CHANGE) <= 2
    assert 5 < labels.count(Label.SUSPICIOUS) < 35


@pytest.mark.parametrize("drafted", [2000, 50_000])
def test_a_1_point_acceptance_drop_is_below_the_floor(drafted: int) -> None:
    wobble = [0, 3, -2, 1, -1, 2, -3, 0, 1, -1, 2, 0]  # per-mille, deterministic
    past = [
        RunPoint.counts(f"b{i}", round(drafted * (0.80 + w / 1000)), drafted)
        for i, w in enumerate(wobble)
    ]
    tonight = RunPoint.counts("new", round(drafted * 0.79), drafted)
    finding = detect_series(key("acceptance_rate"), past, tonight)
    assert finding.delta == pytest.approx(-0.01, abs=0.001)
    assert finding.label is Label.NO_CHANGE
    if drafted == 50_000:  # certain, and still too small to matter
        assert finding.p_value is not None and finding.p_value < 0.01
        assert "floor" in finding.note


def test_peak_rss_growth_of_5_percent_is_a_regression_and_a_5_percent_drop_an_improvement() -> None:
    rng = np.random.default_rng(2)
    gib = 2**30

    def rss(label: str, level: float) -> RunPoint:  # peak RSS sampled once per measured round
        return noisy_run(rng, label, level, run_cv=0.003, trial_cv=0.002, trials=5)

    past = [rss(f"b{i}", 4.0 * gib) for i in range(15)]
    grew = detect_series(key("peak_rss_bytes"), past, rss("grew", 4.2 * gib))
    assert grew.label is Label.REGRESSION and grew.side is Side.WORSE
    assert grew.delta == pytest.approx(0.05, abs=0.01)
    shrank = detect_series(key("peak_rss_bytes"), past, rss("shrank", 3.8 * gib))
    assert shrank.label is Label.IMPROVEMENT and shrank.side is Side.BETTER


def test_a_finding_carries_its_interval_sizes_and_parameters() -> None:
    rng = np.random.default_rng(9)
    past = history(rng)
    finding = detect_series(key(), past, noisy_run(rng, "new", 45.0), DetectorParams(seed=4))
    assert (
        finding.delta is not None
        and finding.delta_low is not None
        and finding.delta_high is not None
    )
    assert finding.delta_low < finding.delta < finding.delta_high < 0
    assert finding.test.startswith("one-sided t prediction test on run medians")
    assert finding.p_adjusted == finding.p_value  # a lone series: BH changes nothing
    assert (finding.baseline_runs, finding.baseline_trials) == (10, 200)
    assert finding.baseline_cv is not None and 0.003 < finding.baseline_cv < 0.03
    assert finding.floor == 0.03 and finding.fence is not None and finding.fence > 0
    assert (finding.params.alpha, finding.params.fence_multiplier, finding.params.window) == (
        0.01,
        3.0,
        10,
    )


def test_the_rate_bootstrap_is_reproducible_with_its_seed_and_the_speed_interval_needs_none() -> (
    None
):
    rng = np.random.default_rng(9)
    past = [counts_run(rng, f"b{i}", 0.7) for i in range(15)]
    tonight = counts_run(rng, "new", 0.6)
    rate = key("acceptance_rate")
    one = detect_series(rate, past, tonight, DetectorParams(seed=1))
    two = detect_series(rate, past, tonight, DetectorParams(seed=1))
    other = detect_series(rate, past, tonight, DetectorParams(seed=2))
    assert (one.delta_low, one.delta_high) == (two.delta_low, two.delta_high)
    assert (one.delta_low, one.delta_high) != (other.delta_low, other.delta_high)
    # Speeds: a t prediction interval over run medians, the same whatever the seed.
    runs, new = history(rng), noisy_run(rng, "new", 45.0)
    a = detect_series(key(), runs, new, DetectorParams(seed=1))
    b = detect_series(key(), runs, new, DetectorParams(seed=2))
    assert (a.delta_low, a.delta_high) == (b.delta_low, b.delta_high)


def test_benjamini_hochberg_rejects_the_first_four_of_the_1995_example_and_matches_scipy() -> None:
    p = [0.0001, 0.0004, 0.0019, 0.0095, 0.0201, 0.0278, 0.0298, 0.0344, 0.0459,
         0.3240, 0.4262, 0.5719, 0.6528, 0.7590, 1.0]  # fmt: skip
    shuffled = [p[i] for i in np.random.default_rng(0).permutation(len(p))]
    assert benjamini_hochberg(p, 0.05) == [True] * 4 + [False] * 11
    assert bh_adjusted(shuffled) == pytest.approx(list(false_discovery_control(shuffled)))
    assert benjamini_hochberg([], 0.05) == []


def test_with_20_series_and_2_real_steps_only_those_2_are_flagged() -> None:
    rng = np.random.default_rng(20)
    night = {}
    for i in range(20):
        past = history(rng)
        night[key(category=f"cat{i}")] = (
            past,
            noisy_run(rng, "new", 45.0 if i in (3, 14) else 50.0),
        )
    result = detect_night(night, FAST)
    flagged = {f.key.category for f in result.findings if f.flagged}
    assert flagged == {"cat3", "cat14"}
    assert result.environment_noise is None
    assert {f.key.category for f in result.verdicts if f.flagged} == flagged
    for f in result.findings:
        assert f.p_value is not None and f.p_adjusted is not None and f.p_adjusted >= f.p_value


def test_30_percent_of_series_flagging_gives_one_environment_noise_verdict() -> None:
    rng = np.random.default_rng(30)
    night = {}
    for i in range(20):
        level = {0: 44.0, 1: 44.0, 2: 44.0, 3: 56.0, 4: 56.0, 5: 56.0}.get(i, 50.0)
        night[key(category=f"cat{i}")] = (history(rng), noisy_run(rng, "new", level))
    result = detect_night(night, FAST)
    assert result.verdicts == ()
    noise = result.environment_noise
    assert noise is not None and noise.label is Label.ENVIRONMENT_NOISE
    assert (noise.flagged, noise.regressions, noise.improvements) == (6, 3, 3)
    assert "6 of 20" in noise.reason
    assert sum(f.flagged for f in result.findings) == 6  # kept for the record


def test_three_flags_all_one_way_are_a_storm_but_two_or_mixed_are_not() -> None:
    rng = np.random.default_rng(1)
    base = detect_series(key(), history(rng), noisy_run(rng, "new", 50.0), FAST)
    reg = dataclasses.replace(base, label=Label.REGRESSION)
    imp = dataclasses.replace(base, label=Label.IMPROVEMENT)
    quiet = [base] * 27
    assert storm([reg, reg, reg, *quiet], 30)
    assert not storm([reg, reg, *quiet], 30)
    assert not storm([reg, reg, imp, *quiet], 30)
    assert storm([reg, reg, imp, imp, imp, imp, imp], 30)  # 7 of 30 > 20%
    assert not storm([], 30)


def test_unknown_metrics_and_contradictory_runs_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown metric"):
        detect_series(key("tokens_per_joule"), [], RunPoint.of("x", [1.0]))
    with pytest.raises(ValueError, match="exactly when"):
        RunPoint("x", (1.0,), excluded_reason="oops")
    with pytest.raises(ValueError, match="exactly when"):
        RunPoint("x", (1.0,), good=False)
    with pytest.raises(ValueError, match="impossible counts"):
        RunPoint.counts("x", 5, 4)


def test_one_value_per_run_metrics_use_the_prediction_test_and_can_flag() -> None:
    rng = np.random.default_rng(7)
    past = [RunPoint.of(f"b{i}", [2.0e9 * (1 + rng.normal(0, 0.005))]) for i in range(12)]
    grown = detect_series(key("peak_rss_bytes", "all"), past, RunPoint.of("new", [2.2e9]), FAST)
    assert grown.test.startswith("one-sided t prediction")
    assert grown.label is Label.REGRESSION
    same = detect_series(key("peak_rss_bytes", "all"), past, RunPoint.of("new", [2.0e9]), FAST)
    assert same.label is Label.NO_CHANGE


def test_the_run_is_the_unit_a_tight_run_inside_the_run_to_run_wobble_is_not_significant() -> None:
    """Many precise requests in one run are not many replicates of the host's drift.

    Tonight's run sits 1.5 run-sd below the baseline's mean with 200 near-identical requests:
    a test on the pooled requests would call that certain (p far below 1e-6); with the run as
    the unit it is ordinary wobble."""
    rng = np.random.default_rng(3)
    past = [noisy_run(rng, f"b{i}", 50.0, run_cv=0.02, trial_cv=0.001) for i in range(12)]
    centers = [float(np.median(r.trials)) for r in past[-10:]]
    mean, sd = float(np.mean(centers)), float(np.std(centers, ddof=1))
    tonight = RunPoint.of("new", (mean - 1.5 * sd) * rng.lognormal(0, 0.001, 200))
    finding = detect_series(key(), past, tonight, FAST)
    assert finding.p_value is not None and 0.05 < finding.p_value < 0.2
    assert finding.label is Label.NO_CHANGE
    assert finding.delta_low is not None and finding.delta_high is not None
    assert finding.delta_low < 0 < finding.delta_high  # the interval carries the run wobble
