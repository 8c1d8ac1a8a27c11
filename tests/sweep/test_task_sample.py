"""The task sample that fits the budget (analysis/task_sample.py): proportional, seeded,
deterministic, with its minimums, refusing what cannot be drawn; the plan that sizes it
(analysis/racing_tasks.plan) and says so; and the interval for the whole set from the sample,
its coverage held at small seeded counts (the rates over 2000 sets are printed by
`benchmarks/task_interval.py --sampled-only`)."""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from watchkeeper.analysis.racing_tasks import min_sample, plan, task_interval
from watchkeeper.analysis.racing_types import RaceArm, RaceSettings
from watchkeeper.analysis.stats import Pair
from watchkeeper.analysis.task_sample import (
    SIZES_300,
    allocate,
    sample_interval,
    simulate_sampled_coverage,
    stratified_sample,
)
from watchkeeper.campaign.bench_plan import BenchPlan
from watchkeeper.campaign.racer import Racer
from watchkeeper.errors import TaskSetError
from watchkeeper.load.records import RequestSample, RunResult, Task

CATS = ("code_edit", "code_gen", "multi_turn", "prose", "summarize", "tool_call")


def _set(sizes: tuple[int, ...]) -> list[tuple[str, str]]:
    return [(f"{c}-{i:03d}", c) for c, n in zip(CATS, sizes, strict=True) for i in range(n)]


def test_the_allocation_is_proportional_with_two_of_every_category() -> None:
    population = dict(zip(CATS, SIZES_300, strict=True))
    assert list(allocate(population, 60).values()) == [20, 12, 10, 8, 6, 4]
    # 12 of 300: proportion says 4, 2.4, 2, 1.6, 1.2, 0.8; the minimum of two a category
    # is paid for by the category most above its share.
    assert list(allocate(population, 12).values()) == [2, 2, 2, 2, 2, 2]
    assert sum(allocate(population, 13).values()) == 13
    assert allocate(population, 13)["code_edit"] == 3
    # A category of one task is taken whole; the rest is proportional.
    assert allocate({"a": 1, "b": 30, "c": 30}, 12) == {"a": 1, "b": 6, "c": 5}
    assert min_sample(population) == 12
    assert min_sample({c: 6 for c in CATS} | {"x": 6, "y": 6}) == 16
    assert min_sample({"a": 5, "b": 4}) == 9  # the whole set: nothing to sample


def test_the_sample_is_seeded_deterministic_and_keeps_the_sets_order() -> None:
    tasks = _set(SIZES_300)
    first = stratified_sample(tasks, 24, seed=75)
    assert first == stratified_sample(tasks, 24, seed=75)
    assert first.ids != stratified_sample(tasks, 24, seed=76).ids
    order = [t for t, _ in tasks]
    assert list(first.ids) == sorted(first.ids, key=order.index)
    assert len(set(first.ids)) == 24 and set(first.ids) <= set(order)
    drawn = {c: sum(1 for t in first.ids if t.startswith(c)) for c in CATS}
    assert drawn == first.drawn == dict(zip(CATS, [8, 5, 4, 3, 2, 2], strict=True))
    assert first.text == "24 of 300 tasks (stratified by category, seed 75)"
    # The input's order of categories does not change the draw.
    assert stratified_sample(tasks[::-1], 24, seed=75).ids == first.ids[::-1]


@pytest.mark.parametrize(
    ("tasks", "size", "seed", "says"),
    [
        (_set((6,) * 6), 11, 1, "it needs 12 to 36"),
        (_set((6,) * 6), 37, 1, "it needs 12 to 36"),
        (_set((6,) * 6), 0, 1, "it needs 12 to 36"),
        ([("a", "x"), ("a", "y"), ("b", "x")], 3, 1, "duplicate task ids: a"),
        (_set((6,) * 6), 12, -1, "seed must be 0 or more"),
        ([], 0, 1, "categories with at least one task"),
    ],
)
def test_a_sample_that_cannot_be_drawn_is_refused(
    tasks: list[tuple[str, str]], size: int, seed: int, says: str
) -> None:
    with pytest.raises(TaskSetError, match=says):
        stratified_sample(tasks, size, seed=seed)


def test_the_plan_samples_a_set_too_large_for_one_round() -> None:
    """300 tasks at 100 minutes a round, 25 minutes left, 3 of them the probes' reserve: the
    largest sample whose round fits (66 tasks at 20 s each), named with its seed."""
    strata = dict(zip(CATS, SIZES_300, strict=True))
    got = plan(300, 100 * 60, 25 * 60, reserve_s=180, strata=strata, seed=75)
    assert (got.design, got.rounds, got.ci_after, got.sample) == ("tasks", 1, 1, 66)
    assert "66 of 300 tasks (stratified by category, seed 75): one round ~22.0 min fits the " in (
        got.why
    )
    assert "22.0 min left after the identity probes' reserve" in got.why
    # The reserve grows with the sample where every sampled task is probed.
    grows = plan(300, 100 * 60, 25 * 60, strata=strata, reserve_of=lambda n: 1.2 * n * 10.0)
    assert grows.sample == 46  # 46 x (20 + 12) s = 24.5 min
    # Not even the least sample fits: it runs and the plan says by how much it passes.
    over = plan(300, 700 * 60, 25 * 60, reserve_s=180, strata=strata, seed=75)
    assert (over.rounds, over.sample) == (0, 12)
    assert "12 of 300 tasks" in over.why and "passes the 22.0 min left" in over.why
    assert "by about 6.0 min" in over.why
    # Where one round of every task fits, or nothing is known about the strata, no sample.
    assert plan(300, 20 * 60, 25 * 60, strata=strata).sample == 0
    assert plan(300, 100 * 60, 25 * 60).sample == 0
    # A set no larger than the least sample runs whole.
    assert plan(12, 30 * 60, 25 * 60, strata={"a": 6, "b": 6}).sample == 0


def test_the_interval_is_for_the_whole_set_not_the_uneven_sample() -> None:
    """Two tasks of each of two categories' share would pull an unweighted mean halfway: the
    set is 90% of category a (1.0x) and 10% of b (2.0x)."""
    population = {"a": 90, "b": 10}
    category_of = {f"a{i}": "a" for i in range(8)} | {f"b{i}": "b" for i in range(8)}
    pairs = [Pair(f"a{i}", 1, 10.0, 10.0 * (1.0 + 0.01 * (i % 2))) for i in range(8)]
    pairs += [Pair(f"b{i}", 1, 10.0, 20.0 * (1.0 + 0.01 * (i % 2))) for i in range(8)]
    ci = sample_interval(pairs, category_of, population)
    plain = task_interval(pairs)
    assert ci is not None and plain is not None
    assert ci.estimate == pytest.approx(
        math.exp(0.9 * math.log(1.005) + 0.1 * math.log(2.01)), 1e-3
    )
    assert ci.low < ci.estimate < ci.high and ci.tasks == 16
    assert plain.estimate > 1.35 > ci.high
    # A category with fewer than two measured tasks: the plain interval over the sample.
    more_a = [Pair(f"a{i}", 1, 10.0, 10.0) for i in range(8, 12)]
    short = [p for p in pairs if p.task_id[0] == "a" or p.task_id == "b0"] + more_a
    category_of |= {p.task_id: "a" for p in more_a}
    fallback = sample_interval(short, category_of, population)
    assert fallback is not None and fallback == task_interval(short)
    assert sample_interval(pairs[:5], category_of, population) is None


def test_a_sample_of_12_from_300_tasks_covers_the_sets_mean_under_every_shape() -> None:
    for shape in ("normal", "skewed", "bimodal", "tight"):
        got = simulate_sampled_coverage(shape, SIZES_300, 12, 200, seed=11)
        assert got.weighted >= 0.88, (shape, got)
    power = simulate_sampled_coverage("normal", SIZES_300, 60, 100, seed=12, mu=math.log(1.15))
    assert power.called >= 0.6, power


def _run(arm: str, round_index: int, tasks: list[tuple[str, str]], latency_s: float) -> RunResult:
    """A run of ``tasks``; the candidate 1.1x on code, 1.0x elsewhere, the pair's own
    speed varying by task."""
    t0 = datetime(2026, 12, 7, tzinfo=UTC)
    samples = tuple(
        RequestSample(
            t,
            c,
            i,
            t0,
            latency_s=latency_s,
            decode_tps_server=20.0
            * (1.0 if arm == "base" else (1.1 if c.startswith("code") else 1.0))
            * (1.0 + 0.02 * (i % 3)),
            draft_n=4 if arm != "base" else None,
        )
        for i, (t, c) in enumerate(tasks)
    )
    return RunResult(arm, arm, round_index, round_index == 0, 1, t0, t0, samples, ())


def test_the_racer_samples_a_set_too_large_for_one_round_and_answers_for_the_set() -> None:
    """300 tasks of two arms at 10 s a request: 100 minutes a round against 25 minutes. The
    racer draws the sample the plan sized (six probes of both arms reserved: 1.2 x 6 x 20 s),
    the bench measures it, and every racing arm's CI is for the whole set."""
    arms = [RaceArm("base", 0.0, True), RaceArm("ngram", 1.0)]
    seen: list[str] = []
    settings = RaceSettings(seed=75)
    clock = iter([0.0, 0.0, 1400.0]).__next__
    racer = Racer(arms, settings, budget_s=1500.0, clock=clock, progress=seen.append)
    racer.probe_fraction, racer.probe_count = 6 / 300, 6
    tasks = _set(SIZES_300)
    warm = [_run(a, 0, tasks[:2], 10.0) for a in ("base", "ngram")]
    got = racer.plan_rounds(warm, 300, tasks)
    assert got.sample == 67 and racer.sample is not None  # 67 x 20 s + 144 s <= 1500 s
    assert racer.sampled() == frozenset(racer.sample.ids)
    assert racer.sample == stratified_sample(tasks, 67, seed=75)
    assert racer.probe_fraction == 6 / 67
    assert seen == [f"race plan: CIs over tasks: {got.why}"]
    assert "67 of 300 tasks (stratified by category, seed 75): one round ~22.3 min" in got.why
    picked = [(t, c) for t, c in tasks if t in racer.sample.ids]
    _, go = racer([_run("base", 1, picked, 10.0), _run("ngram", 1, picked, 10.0)])
    assert not go
    ci = racer.task_cis["ngram"]
    assert ci.tasks == 67 and ci.rounds == 1 and ci.low < ci.estimate < ci.high
    # The set is 160 of 300 code tasks at 1.1x: its mean log ratio, not the sample's.
    assert ci.estimate == pytest.approx(1.1 ** (160 / 300), 1e-9)
    assert "95% CI over 67 of 300 tasks (a stratified sample" in racer.task_ci_text()
    assert racer.task_cis_json()["ngram"]["of"] == 300


def test_the_bench_measures_and_probes_the_sample() -> None:
    """BenchPlan: the measured rounds run the sample in the set's order, and the identity
    pass as many of each category as it would have probed of the set, the sample's first."""
    tasks = tuple(Task(t, c, ({"role": "user", "content": t},), 8) for t, c in _set((6,) * 6))
    first = tuple(t for i, t in enumerate(tasks) if i % 6 == 0)
    plan = BenchPlan(("a", "b"), tasks, 1, 1, 2, 1, identity_tasks=first)
    assert plan.round_tasks == tasks and plan.probe_tasks == first
    chosen = stratified_sample([(t.id, t.category) for t in tasks], 12, seed=3)
    sampled = replace(plan, sample=lambda: frozenset(chosen.ids))
    assert [t.id for t in sampled.round_tasks] == list(chosen.ids)
    assert [t.id for t in sampled.probe_tasks] == list(chosen.ids[::2])
    assert replace(plan, sample=lambda: None).round_tasks == tasks
