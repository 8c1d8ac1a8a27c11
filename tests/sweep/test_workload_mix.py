"""The whole-workload setting for a stated mix: the mix parsed strictly, its speed-up the
weighted harmonic mean of the categories' per-round speed-ups with a t interval over rounds
and tasks, and the pick conservative (positive and A/A controls). And per category: keeping the baseline
names the arm that came closest and the rounds that would settle it."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from support.mixtables import steady, with_table

from watchkeeper.analysis.benchmark import BenchResult
from watchkeeper.analysis.recommend import MIX, recommend
from watchkeeper.analysis.stats import MIN_ROUNDS
from watchkeeper.analysis.workload_mix import (
    GIVEN,
    TASK_SET,
    check_mix,
    mix_speedup,
    parse_mix,
)
from watchkeeper.checks.guards import GuardFinding

CATS = ("code_edit", "prose", "tool_call")


def test_a_mix_is_normalised_and_sorted() -> None:
    mix = parse_mix(" prose=3 , code_edit=7")
    assert mix.weights == (("code_edit", 0.7), ("prose", 0.3))
    assert mix.source == GIVEN
    assert mix.text == "code_edit 70%, prose 30%"


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("", "category=weight pairs"),
        (",", "category=weight pairs"),
        ("code_edit", "is not category=weight"),
        ("=0.3", "is not category=weight"),
        ("code_edit=", "is not category=weight"),
        ("code_edit=0.7,,prose=0.3", "is not category=weight"),
        ("code_edit=lots", "is not a number"),
        ("code_edit=0", "above 0"),
        ("code_edit=-0.5,prose=1.5", "above 0"),
        ("code_edit=nan", "above 0"),
        ("code_edit=inf", "above 0"),
        ("prose=0.5,prose=0.5", "given twice"),
    ],
)
def test_a_malformed_mix_is_refused_in_one_line(text: str, said: str) -> None:
    with pytest.raises(ValueError, match=said) as refused:
        parse_mix(text)
    assert "\n" not in str(refused.value)


def test_an_unknown_category_is_refused_naming_the_measured_ones() -> None:
    with pytest.raises(ValueError) as refused:
        check_mix(parse_mix("code_edit=1,poetry=1"), CATS)
    assert "poetry" in str(refused.value)
    assert "code_edit, prose, tool_call" in str(refused.value)
    check_mix(parse_mix("code_edit=1,prose=1"), CATS)  # known ones pass


def test_the_mix_speedup_is_the_weighted_harmonic_mean_of_the_categories() -> None:
    """Half the tokens 2x faster, half unchanged: 0.25 + 0.5 of the time, 1.333x, not the
    arithmetic 1.5x. With 3/4 at 1.5x and 1/4 at 0.5x the time is exactly the baseline's."""
    table = {"code_edit": {1: 2.0, 2: 2.0, 3: 2.0}, "prose": {1: 1.0, 2: 1.0, 3: 1.0}}
    even = mix_speedup("a", table, parse_mix("code_edit=1,prose=1"), 0.03)
    assert even.estimate == pytest.approx(4 / 3)
    assert even.round_values == pytest.approx((4 / 3,) * 3)
    assert even.verdict == "faster"
    lopsided = {"code_edit": {1: 1.5, 2: 1.5, 3: 1.5}, "prose": {1: 0.5, 2: 0.5, 3: 0.5}}
    same = mix_speedup("a", lopsided, parse_mix("code_edit=3,prose=1"), 0.03)
    assert same.estimate == pytest.approx(1.0)


def test_the_ci_is_a_t_interval_over_rounds_present_at_three_absent_at_two() -> None:
    mix = parse_mix("code_edit=1,prose=1")
    table = {"code_edit": {1: 1.2, 2: 1.3, 3: 1.25}, "prose": {1: 1.0, 2: 1.05, 3: 0.95}}
    three = mix_speedup("a", table, mix, 0.03)
    s = [1 / (0.5 / table["code_edit"][r] + 0.5 / table["prose"][r]) for r in (1, 2, 3)]
    logs = np.log(s)
    half = 4.302653 * logs.std(ddof=1) / math.sqrt(3)  # t(0.975, 2 df)
    assert three.has_ci and three.n_rounds == 3
    assert three.estimate == pytest.approx(math.exp(logs.mean()))
    assert three.low == pytest.approx(math.exp(logs.mean() - half), rel=1e-5)
    assert three.high == pytest.approx(math.exp(logs.mean() + half), rel=1e-5)
    two = mix_speedup("a", {c: {1: v[1], 2: v[2]} for c, v in table.items()}, mix, 0.03)
    assert not two.has_ci and two.n_rounds == 2
    assert two.verdict == "insufficient replicates"
    assert two.rounds_needed == MIN_ROUNDS
    assert "no CI: 2 round(s)" in two.text


def test_only_rounds_that_measured_every_weighted_category_count() -> None:
    """Round 3 lacks prose: it is left out, so two complete rounds give no CI."""
    table = {"code_edit": {1: 1.2, 2: 1.3, 3: 1.25}, "prose": {1: 1.0, 2: 1.05}}
    found = mix_speedup("a", table, parse_mix("code_edit=1,prose=1"), 0.03)
    assert found.n_rounds == 2 and not found.has_ci
    missing = mix_speedup("a", table, parse_mix("code_edit=1,tool_call=1"), 0.03)
    assert missing.estimate is None and missing.missing == ("tool_call",)


def test_tasks_that_differ_widen_the_mix_ci_as_they_widen_their_categorys() -> None:
    """Sweep campaign 1 of 2026-11-28 in small: one category's gain rests on one of its three
    tasks, steady over five rounds. Over rounds alone the mix reads faster; with the task
    term (what the recommendation uses) it is inconclusive, and no number of rounds settles
    it: more tasks would."""
    mix = parse_mix("code_edit=1,prose=1,tool_call=1")
    table = {
        "code_edit": steady(1.18),
        "prose": steady(1.02, shift=1),
        "tool_call": steady(1.0, shift=2),
    }
    spread = {
        "code_edit": (math.log(1.6), math.log(1.0), math.log(0.95)),
        "prose": (0.03, 0.01, 0.02),
        "tool_call": (0.01, -0.01, 0.0),
    }
    rounds_only = mix_speedup("ngram-mod", table, mix, 0.03)
    assert rounds_only.verdict == "faster"
    both = mix_speedup("ngram-mod", table, mix, 0.03, per_task=spread)
    assert both.estimate == pytest.approx(rounds_only.estimate)
    assert both.low is not None and both.high is not None
    assert both.low < 1.0 < both.high and both.verdict == "inconclusive"
    assert both.rounds_needed is None and "more tasks per category" in both.settle
    # The same tasks, all alike: the task term is small and the mix is faster again.
    alike = {c: (0.0, 0.01, -0.01) for c in table}
    assert mix_speedup("ngram-mod", table, mix, 0.03, per_task=alike).verdict == "faster"


def test_a_weighted_category_of_one_task_gives_the_mix_no_ci() -> None:
    mix = parse_mix("code_edit=1,prose=1")
    table = {"code_edit": steady(1.5), "prose": steady(1.0)}
    one = mix_speedup("a", table, mix, 0.03, per_task={"code_edit": (0.4,), "prose": (0.0, 0.01)})
    assert not one.has_ci and one.verdict == "insufficient replicates"
    assert one.few_tasks == ("code_edit",) and one.settle == "two or more tasks in code_edit"


def control_table() -> dict[str, dict[str, dict[int, float]]]:
    """draft4: 1.6x on code_edit and 1.0 elsewhere; ngram 1.0 everywhere."""
    return {
        "draft4": {
            "code_edit": steady(1.6),
            "prose": steady(1.0, shift=1),
            "tool_call": steady(1.0, shift=2),
        },
        "ngram": {c: steady(1.0, shift=i + 3) for i, c in enumerate(CATS)},
    }


def test_positive_control_a_code_edit_arm_wins_a_code_heavy_mix_only(
    result: BenchResult,
) -> None:
    bench = with_table(result, control_table())
    heavy = recommend(bench, mix=parse_mix("code_edit=0.9,prose=0.1"), answer=MIX)
    assert heavy.workload is not None and heavy.workload.profile == "draft4"
    assert heavy.setting == "draft4"
    assert heavy.workload.best is not None and heavy.workload.best.low is not None
    assert heavy.workload.best.low > 1.0
    light = recommend(bench, mix=parse_mix("code_edit=0.02,prose=0.98"), answer=MIX)
    assert light.workload is not None and light.workload.profile is None
    assert light.setting is None
    assert "no setting beats it with confidence for the mix" in light.workload.reason


def test_the_mix_pick_honours_the_same_exclusions_as_every_choice(result: BenchResult) -> None:
    bad = GuardFinding(kind="correctness", profile="draft4", severity="high", title="x")
    bench = with_table(result, control_table())
    excluded = recommend(
        replace(bench, findings=(bad,)), mix=parse_mix("code_edit=0.9,prose=0.1")
    ).workload
    assert excluded is not None and excluded.profile is None
    assert "draft4" in excluded.reason and "excluded by a correctness finding" in excluded.reason
    withheld = recommend(
        bench, withheld={"draft4": "its identity (unresolved)"}, mix=parse_mix("code_edit=1")
    ).workload
    assert withheld is not None and withheld.profile is None


def test_aa_control_ratios_near_one_are_never_called_faster(result: BenchResult) -> None:
    """Identical servers: every category's rounds scatter around 1 (sd 3%), 20 nights."""
    mix = parse_mix("code_edit=0.5,prose=0.3,tool_call=0.2")
    verdicts = []
    for seed in range(20):
        rng = np.random.default_rng(seed)
        table = {c: {r: float(np.exp(rng.normal(0, 0.03))) for r in range(1, 5)} for c in CATS}
        verdicts.append(mix_speedup("twin", table, mix, 0.03).verdict)
    assert "faster" not in verdicts and "slower" not in verdicts
    assert set(verdicts) <= {"no change", "inconclusive", "within threshold"}
    rng = np.random.default_rng(99)
    twin = {c: {r: float(np.exp(rng.normal(0, 0.03))) for r in range(1, 5)} for c in CATS}
    rec = recommend(with_table(result, {"draft4": twin}), mix=mix)
    assert rec.workload is not None and rec.workload.profile is None


def test_the_default_mix_is_the_task_sets_own_proportions(result: BenchResult) -> None:
    bench = with_table(result, control_table(), tasks={"code_edit": 6, "prose": 3, "tool_call": 3})
    rec = recommend(bench)
    assert rec.mix is not None and rec.mix.source == TASK_SET
    assert dict(rec.mix.weights) == {"code_edit": 0.5, "prose": 0.25, "tool_call": 0.25}


def test_a_category_that_keeps_the_baseline_names_its_closest_arm_and_the_rounds(
    result: BenchResult,
) -> None:
    bench = with_table(
        result,
        {
            "draft4": {"prose": {1: 1.06, 2: 0.98, 3: 1.03}, "tool_call": {1: 1.2, 2: 1.3}},
            "ngram": {"prose": {1: 0.97, 2: 0.99, 3: 1.0}, "tool_call": {1: 1.0, 2: 1.0}},
        },
    )
    rec = recommend(bench)
    prose = rec.choice("prose")
    assert prose is not None and prose.profile is None and prose.best == "draft4"
    ci = next(c.speedup for c in bench.categories if c.arm == "draft4" and c.category == "prose")
    assert ci is not None and ci.verdict == "inconclusive" and ci.rounds_needed
    assert prose.rounds_to_settle == ci.rounds_needed
    assert prose.best_low == pytest.approx(ci.low)
    assert f"about {ci.rounds_needed} measured rounds" in prose.settle
    assert "95% CI" in prose.best_text
    tool = rec.choice("tool_call")
    assert tool is not None and tool.profile is None and tool.best == "draft4"
    assert tool.best_low is None and tool.rounds_to_settle == MIN_ROUNDS
    assert tool.best_text == "1.25x (no CI: 2 round(s))"
    assert f"at least {MIN_ROUNDS} measured rounds" in tool.reason


def test_an_arm_that_drafted_nothing_is_not_named_closest_where_another_was_measured(
    result: BenchResult,
) -> None:
    """Sweep campaign 2 of 2026-11-28: ngram-map-k drafted no token in round 1 and left the
    race; its one round read 1.03x on prose (the baseline again, under another name), and the
    report named it closest with "at least 3 measured rounds would settle it". The closest
    setting is now an arm that ran; the idle one only where nothing else was measured."""
    idle = GuardFinding(kind="spec_inactive", profile="draft4", severity="medium", title="x")
    table = {"draft4": {"prose": {1: 1.03}}, "ngram": {"prose": steady(1.0)}}
    rec = recommend(replace(with_table(result, table), findings=(idle,)))
    prose = rec.choice("prose")
    assert prose is not None and prose.profile is None and prose.best == "ngram"
    alone = recommend(
        replace(with_table(result, {"draft4": {"prose": {1: 1.03}}}), findings=(idle,))
    )
    only = alone.choice("prose")
    assert only is not None and only.best == "draft4"
