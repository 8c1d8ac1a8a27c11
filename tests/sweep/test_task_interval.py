"""The interval over tasks from one round (analysis/racing_tasks.py): its coverage under
normal, skewed and bimodal task effects at 36 tasks, held at small seeded counts (the rates
over 2000 task sets are printed by `benchmarks/task_interval.py`), and the plan that gives a
36-task set CIs within a 25-minute budget where rounds alone gave none."""

from __future__ import annotations

import math
from datetime import UTC, datetime

from watchkeeper.analysis.racing_tasks import (
    MIN_TASK_REPLICATES,
    plan,
    simulate_coverage,
    task_interval,
)
from watchkeeper.analysis.racing_types import RaceArm, RaceSettings
from watchkeeper.analysis.stats import Pair
from watchkeeper.campaign.racer import Racer
from watchkeeper.load.records import RequestSample, RunResult


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


def _round(arm: str, tps: float) -> RunResult:
    """One round of a 36-task set (6 categories x 6); the candidate's speed-up varies by task."""
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
            draft_n=None if arm == "base" else 4,
        )
        for k, cat in enumerate(cats)
        for i in range(6)
    )
    return RunResult(arm, arm, 1, False, 1, t0, t0, samples, ())


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
