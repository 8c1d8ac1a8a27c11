"""The interval over tasks from one round (analysis/racing_tasks.py): its coverage under
normal, skewed and bimodal task effects at 36 tasks, held at small seeded counts (the rates
over 2000 task sets are printed by `benchmarks/task_interval.py`), and the plan that gives a
36-task set CIs within a 25-minute budget where rounds alone gave none: chosen by the racer
before round 1 from the warm-up's price of a round."""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import UTC, datetime

from support.sweepview import sweep_view

from watchkeeper.analysis.benchmark import BenchResult
from watchkeeper.analysis.racing_tasks import (
    MIN_TASK_REPLICATES,
    plan,
    simulate_coverage,
    task_interval,
)
from watchkeeper.analysis.racing_types import RaceArm, RaceSettings, RaceState
from watchkeeper.analysis.stats import Pair
from watchkeeper.campaign.racer import Racer
from watchkeeper.load.records import RequestSample, RunResult
from watchkeeper.publish.sweep_report import render_sweep_sections


def test_one_round_of_36_tasks_covers_under_every_shape() -> None:
    for shape in ("normal", "skewed", "bimodal"):
        coverage, _ = simulate_coverage(shape, 36, 150, seed=7)
        assert coverage >= 0.88, (shape, coverage)
        _, power = simulate_coverage(shape, 36, 100, seed=8, mu=math.log(1.15))
        assert power >= 0.5, (shape, power)


def test_few_tasks_get_no_interval_over_tasks() -> None:
    pairs = [Pair(f"t{i}", 1, 10.0, 11.0 + i % 3) for i in range(MIN_TASK_REPLICATES - 1)]
    assert task_interval(pairs) is None
    more = [*pairs, Pair("extra", 1, 10.0, 11.0)]
    ci = task_interval(more)
    assert ci is not None and ci.tasks == MIN_TASK_REPLICATES and ci.rounds == 1
    assert ci.low < ci.estimate < ci.high
    # The instance floor: tasks that agree exactly still leave the run's own offset.
    same = task_interval([Pair(f"t{i}", 1, 10.0, 11.0) for i in range(36)])
    assert same is not None and same.high / same.low > 1.02


def test_a_36_task_set_at_12_5_minutes_a_round_gets_a_ci_within_25_minutes() -> None:
    """Issue 75: one round of 36 tasks took 12.5 minutes; rounds alone needed 3 (none within
    25 minutes), tasks give every arm a CI after round 1."""
    tasks = plan(36, 12.5 * 60, 25 * 60, reserve_s=60)
    assert tasks.design == "tasks" and tasks.ci_after == 1 and tasks.rounds == 1
    few = plan(8, 12.5 * 60, 25 * 60)
    assert few.design == "rounds" and few.ci_after is None
    assert "fewer than the 12 tasks" in few.why


def test_the_plan_takes_rounds_where_enough_fit_and_tasks_where_they_do_not() -> None:
    # 300 imported prompts at 20 minutes a round: one round in 25 minutes, a CI per arm.
    big = plan(300, 20 * 60, 25 * 60)
    assert (big.design, big.rounds, big.ci_after) == ("tasks", 1, 1)
    assert "CI over its 300 tasks from round 1" in big.why
    # Where three rounds fit, they measure the host's drift that the tasks' floor assumes.
    quick = plan(36, 5 * 60, 25 * 60, reserve_s=60)
    assert (quick.design, quick.rounds, quick.ci_after) == ("rounds", 4, 3)
    capped = plan(36, 60, 25 * 60, max_rounds=5)
    assert capped.rounds == 5
    # Two rounds fit: still tasks (two rounds give no CI over rounds), both rounds run.
    two = plan(36, 10 * 60, 25 * 60)
    assert (two.design, two.rounds, two.ci_after) == ("tasks", 2, 1)
    # Not one round fits: round 1 runs whatever the budget (the bench checks it only after
    # round 1), so a large set still gets its CIs over tasks, and the plan says by how much
    # the round passes the budget; a small set gets none.
    over = plan(36, 30 * 60, 25 * 60, reserve_s=6 * 60)
    assert (over.design, over.rounds, over.ci_after) == ("tasks", 0, 1)
    assert "not one round fits" in over.why and "about 11.0 min past it" in over.why
    none = plan(8, 30 * 60, 25 * 60)
    assert (none.design, none.ci_after) == ("rounds", None) and "fewer than the 12" in none.why
    # A round not priced yet (no warm-up): the task count decides.
    assert plan(36, 0.0, 25 * 60).design == "tasks"
    assert plan(6, 0.0, 25 * 60).ci_after == 3


def test_two_rounds_of_tasks_cover_like_one() -> None:
    """The tasks design where a second round fits its budget: one instance for the run, a
    round effect and cell noise per round (the interval divides the round floor by 2)."""
    for shape in ("normal", "bimodal", "tight"):
        coverage, _ = simulate_coverage(shape, 36, 150, seed=9, rounds=2)
        assert coverage >= 0.88, (shape, coverage)


def _warmup(arm: str, latency_s: float) -> RunResult:
    t0 = datetime(2026, 12, 6, tzinfo=UTC)
    samples = tuple(
        RequestSample(f"w-{i}", "prose", i, t0, latency_s=latency_s, decode_tps_server=20.0)
        for i in range(2)
    )
    return RunResult(arm, arm, 0, True, 1, t0, t0, samples, ())


def test_the_racer_plans_from_the_warm_up_before_round_1() -> None:
    """Two arms whose warm-up requests took 10 s each: a 36-task round is priced at 12 min;
    with 100 s of the 25-minute budget spent and the baseline's probes reserved (1.2 x its 6
    minutes), one round fits: CIs over tasks, printed before round 1."""
    arms = [RaceArm("base", 0.0, True), RaceArm("ngram", 1.0)]
    clock = iter([0.0, 100.0]).__next__
    seen: list[str] = []
    racer = Racer(arms, RaceSettings(), budget_s=1500.0, clock=clock, progress=seen.append)
    found = racer.plan_rounds([_warmup("base", 10.0), _warmup("ngram", 10.0)], 36)
    assert (found.design, found.rounds, found.ci_after) == ("tasks", 1, 1)
    assert "~12.0 min a round" in found.why and "reserve (7.2 min)" in found.why
    assert seen == [f"race plan: CIs over tasks: {found.why}"]
    assert racer.plan_text.startswith("CIs over tasks: 36 tasks")
    # An arm the ceiling rule dropped is not priced: its warm-up never ran, and a run of an
    # arm no longer racing is left out.
    racer2 = Racer(
        arms, RaceSettings(), budget_s=6000.0, clock=iter([0.0, 0.0]).__next__, progress=seen.append
    )
    racer2.state = racer2.state.__class__(0, ("base",))
    alone = racer2.plan_rounds([_warmup("base", 10.0), _warmup("ngram", 10.0)], 36)
    assert "~6.0 min a round" in alone.why and alone.design == "rounds"


def _round(arm: str, tps: float, *, drafts: bool = True, index: int = 1) -> RunResult:
    """One round of a 36-task set (6 categories x 6); the candidate's speed-up varies by task.
    ``drafts=False``: a candidate that drafted nothing (the idle rule drops it)."""
    t0 = datetime(2026, 12, 6, tzinfo=UTC)
    cats = ("code_edit", "code_gen", "multi_turn", "prose", "summarize", "tool_call")
    samples = tuple(
        RequestSample(
            f"{cat}-{i}",
            cat,
            i,
            t0,
            latency_s=2.0,
            decode_tps_server=tps * (1.0 + 0.04 * ((i + k) % 3) if arm != "base" else 1.0),
            draft_n=4 if arm != "base" and drafts else None,
        )
        for k, cat in enumerate(cats)
        for i in range(6)
    )
    return RunResult(arm, arm, index, False, 1, t0, t0, samples, ())


def test_a_sweep_the_budget_stops_after_one_round_of_36_tasks_still_has_a_ci_per_arm() -> None:
    """The racer's planning hook: short of the rounds a CI over rounds needs, each arm's CI
    over its 36 tasks is printed and becomes the report's hint."""
    arms = [RaceArm("base", 0.0, True), RaceArm("ngram", 1.0)]
    clock = iter([0.0, 1450.0]).__next__
    seen: list[str] = []
    racer = Racer(arms, RaceSettings(), budget_s=1500.0, clock=clock, progress=seen.append)
    _, go = racer([_round("base", 20.0), _round("ngram", 22.0)])
    assert not go and racer.stop_reason.startswith("budget")
    ci = racer.task_cis["ngram"]
    assert ci.tasks == 36 and ci.rounds == 1 and 1.0 < ci.low < ci.estimate < ci.high
    assert "over its tasks each arm has one: ngram 1.1" in racer.budget_hint
    assert any("CIs over tasks" in m for m in seen)


def test_an_arm_dropped_after_round_1_keeps_its_ci_over_the_tasks_it_ran() -> None:
    """Every arm that raced round 1 has a CI over its 36 tasks, the one the idle rule stopped
    after it too, named with its drop; an arm the ceiling rule dropped before round 1 never ran
    and has none (the 36-task sweep of issue 75 must show a CI on every racing arm)."""
    arms = [
        RaceArm("base", 0.0, True),
        RaceArm("ngram", 1.0),
        RaceArm("lookup", 1.0),
        RaceArm("draft8", 8.0),
    ]
    seen: list[str] = []
    racer = Racer(
        arms,
        RaceSettings(),
        budget_s=1500.0,
        clock=iter([0.0, 1450.0]).__next__,
        progress=seen.append,
    )
    racer.state = racer.state.__class__(0, ("base", "ngram", "lookup"))  # draft8: ceiling
    runs = [_round("base", 20.0), _round("ngram", 22.0), _round("lookup", 19.0, drafts=False)]
    _, go = racer(runs)
    assert not go and racer.state.active == ("base", "ngram")
    assert [d.rule for d in racer.state.drops] == ["idle"]
    assert set(racer.task_cis) == {"ngram", "lookup"}
    idle = racer.task_cis["lookup"]
    assert idle.tasks == 36 and idle.low < 0.99 < idle.high and idle.low < 1.0 < idle.high
    text = racer.task_ci_text()
    assert "lookup 0.99x (0.9" in text and "[idle drop after round 1]" in text
    assert "ngram 1.1" in text and "draft8" not in text
    assert any("[idle drop after round 1]" in m for m in seen)


def test_a_race_whose_every_arm_was_dropped_stops_without_a_round_of_the_baseline_alone() -> None:
    """Issue 75's reduced real run: both n-gram arms idle after round 1, and the race ran a
    second round of the baseline alone (nothing to compare) before it stopped. Now it stops
    after round 1, every dropped arm with its CI over tasks."""
    arms = [RaceArm("base", 0.0, True), RaceArm("ngram", 1.0), RaceArm("lookup", 1.0)]
    racer = Racer(
        arms, RaceSettings(), budget_s=6000.0, clock=iter([0.0, 10.0]).__next__,
        progress=lambda _: None,
    )  # fmt: skip
    runs = [_round(a, 20.0, drafts=False) for a in ("base", "ngram", "lookup")]
    probed, go = racer(runs)
    assert not go and racer.state.active == ("base",) and list(probed) == ["base"]
    assert racer.stop_reason == "only the baseline is left after round 1: no arm to race"
    assert set(racer.task_cis) == {"ngram", "lookup"} and racer.budget_hint == ""


def test_a_race_with_cis_over_rounds_still_gives_an_arm_dropped_after_round_1_one() -> None:
    """Three rounds give the racing arms CIs over rounds; the arm the idle rule stopped after
    round 1 never gets one over rounds, so it gets one over its 36 tasks, and only it."""
    arms = [RaceArm("base", 0.0, True), RaceArm("ngram", 1.0), RaceArm("lookup", 1.0)]
    ticks = iter(range(0, 1000, 10))
    racer = Racer(
        arms, RaceSettings(max_rounds=3), budget_s=6000.0, clock=lambda: float(next(ticks)),
        progress=lambda _: None,
    )  # fmt: skip
    runs = [_round("base", 20.0), _round("ngram", 22.0), _round("lookup", 19.0, drafts=False)]
    _, go = racer(runs)
    assert go and racer.state.active == ("base", "ngram") and racer.task_cis == {}
    for index in (2, 3):
        runs += [_round("base", 20.0, index=index), _round("ngram", 22.0, index=index)]
        _, go = racer(runs)
    assert not go and racer.state.rounds == 3
    assert set(racer.task_cis) == {"lookup"} and racer.task_cis["lookup"].rounds == 1
    assert "[idle drop after round 1]" in racer.task_ci_text()


def test_a_race_out_of_planned_rounds_short_of_a_ci_still_has_one_over_tasks() -> None:
    """Not only a budget stop: a race planned for one round (`--rounds 1`) stops with every
    racing arm's CI over its tasks, and no budget hint (the budget was not what stopped it)."""
    arms = [RaceArm("base", 0.0, True), RaceArm("ngram", 1.0)]
    clock = iter([0.0, 10.0]).__next__
    seen: list[str] = []
    racer = Racer(
        arms, RaceSettings(max_rounds=1), budget_s=1500.0, clock=clock, progress=seen.append
    )
    _, go = racer([_round("base", 20.0), _round("ngram", 22.0)])
    assert not go and racer.stop_reason.startswith("planned rounds")
    assert racer.task_cis["ngram"].tasks == 36 and racer.budget_hint == ""
    assert racer.task_cis_json()["ngram"]["tasks"] == 36.0
    assert any(m.startswith("race: CIs over tasks: ngram 1.") for m in seen)


def test_the_report_names_the_plan_and_every_racing_arms_ci_over_tasks(
    result: BenchResult,
) -> None:
    """The race section says which design the racer chose before round 1 and, short of a CI
    over rounds, every racing arm's CI over its tasks, and that the recommendation does not
    read them."""
    race = RaceState(1, ("base", "draft4"))
    view = replace(
        sweep_view(result, race),
        race_plan="CIs over tasks: 36 tasks, ~12.0 min a round of every arm (from the warm-up)",
        task_cis="draft4 1.07x (1.01-1.13), 95% CI over 36 tasks each paired back to back",
    )
    text = render_sweep_sections(view)
    assert "Planned before round 1: CIs over tasks: 36 tasks, ~12.0 min a round" in text
    assert "short of a CI over rounds has one over its tasks: draft4 1.07x (1.01-1.13)" in text
    assert "names no arm on these intervals" in text
    assert "Planned before round 1" not in render_sweep_sections(sweep_view(result, race))
