"""The recommendation never picks a profile whose speed-up CI reaches below 1.0."""

from __future__ import annotations

import dataclasses

from watchkeeper.analysis.benchmark import BenchResult
from watchkeeper.analysis.recommend import recommend
from watchkeeper.analysis.stats import RatioCI, classify
from watchkeeper.checks.guards import GuardFinding


def with_ci(result: BenchResult, arm: str, ci: tuple[float, float, float]) -> BenchResult:
    stats = tuple(
        dataclasses.replace(
            s,
            overall=dataclasses.replace(
                s.overall, speedup=RatioCI(*ci, 10, 5, 4, verdict=classify(*ci, threshold=0.03))
            ),
        )
        if s.arm == arm
        else s
        for s in result.arm_stats
    )
    return dataclasses.replace(result, arm_stats=stats)


def test_the_profile_with_the_best_lower_bound_above_one_is_recommended(
    result: BenchResult,
) -> None:
    rec = recommend(result)
    assert rec.overall.profile == "draft4"
    assert rec.overall.low is not None and rec.overall.low > 1.0
    assert "draft4: 1.38x" in rec.headline


def test_a_higher_point_estimate_with_a_ci_below_one_loses(result: BenchResult) -> None:
    changed = with_ci(result, "ngram", (2.5, 0.95, 4.0))
    assert recommend(changed).overall.profile == "draft4"


def test_nothing_above_one_means_keep_the_baseline_said_plainly(result: BenchResult) -> None:
    changed = with_ci(with_ci(result, "draft4", (0.9, 0.8, 1.01)), "ngram", (0.7, 0.6, 0.8))
    rec = recommend(changed)
    assert rec.overall.profile is None
    assert rec.headline.startswith("keep the baseline: no speculative profile beats it")


def test_a_profile_with_a_correctness_finding_is_never_recommended(result: BenchResult) -> None:
    bad = GuardFinding(kind="correctness", profile="draft4", severity="high", title="x")
    changed = dataclasses.replace(result, findings=(*result.findings, bad))
    assert recommend(changed).overall.profile != "draft4"


def test_each_category_gets_its_own_choice(result: BenchResult) -> None:
    rec = recommend(result)
    by_category = {c.category: c.profile for c in rec.per_category}
    assert by_category == {"chat": "draft4", "code": "draft4"}


def test_a_faster_profile_excluded_for_correctness_is_named_with_the_reason(
    result: BenchResult,
) -> None:
    only_draft4 = with_ci(result, "ngram", (0.7, 0.6, 0.8))
    bad = GuardFinding(kind="correctness", profile="draft4", severity="high", title="x")
    rec = recommend(dataclasses.replace(only_draft4, findings=(*result.findings, bad)))
    assert rec.overall.profile is None
    assert "draft4 1.38x" in rec.headline
    assert "excluded by a correctness finding" in rec.headline
    assert "beats it with confidence" not in rec.headline


def test_a_category_without_a_ci_says_so_instead_of_a_zero_width_interval(
    result: BenchResult,
) -> None:
    """One task per category gives no CI; "CI 1.71-1.71" would read as certainty."""
    no_ci = RatioCI(1.71, 1.71, 1.71, 3, 1, 3)  # verdict defaults to insufficient replicates
    stats = tuple(
        dataclasses.replace(s, speedup=no_ci if s.arm == "ngram" else None)
        if s.category == "code"
        else s
        for s in result.categories
    )
    rec = recommend(dataclasses.replace(result, categories=stats))
    code = next(c for c in rec.per_category if c.category == "code")
    assert code.profile is None
    assert "ngram 1.71x, no CI: 1 task(s) x 3 round(s)" in code.reason
    assert "1.71-1.71" not in code.reason
