"""The task sample that fits the budget (analysis/task_sample.py): proportional, seeded,
deterministic, with its minimums, refusing what cannot be drawn; the plan that sizes it
(analysis/racing_tasks.plan) and says so; and the interval for the whole set from the sample,
its coverage held at small seeded counts (the rates over 2000 sets are printed by
`benchmarks/task_interval.py --sampled-only`)."""

from __future__ import annotations

import math

import pytest

from watchkeeper.analysis.racing_tasks import min_sample, plan, task_interval
from watchkeeper.analysis.stats import Pair
from watchkeeper.analysis.task_sample import (
    SIZES_300,
    allocate,
    sample_interval,
    simulate_sampled_coverage,
    stratified_sample,
)
from watchkeeper.errors import TaskSetError

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
