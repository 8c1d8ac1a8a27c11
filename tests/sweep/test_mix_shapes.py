"""The mix's interval and pick beyond normal task effects (issue 75): the recommendation is
guarded across the arms it chooses among, a pick from a few tasks a category says what they
cannot support, and the coverage under bimodal task effects holds at 12 tasks a category.
`benchmarks/mix_shapes.py` prints the rates over 400 sweeps; these hold them at a few dozen."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from watchkeeper.analysis.workload_mix import (
    FAMILY_ALPHA,
    MIN_MIX_TASKS,
    Mix,
    choose_for_mix,
    few_tasks_caveat,
    mix_speedup,
    task_floor,
)

CATEGORIES = ("code_edit", "prose", "tool_call")
MIX = Mix(tuple((c, 1.0 / 3) for c in CATEGORIES))


def _sweep(
    rng: np.random.Generator, tasks: int, code_edit: np.ndarray | None = None, mu: float = 0.0
) -> tuple[dict[str, dict[int, float]], dict[str, tuple[float, ...]]]:
    shared = rng.normal(0.0, 0.02, 5)
    per_round: dict[str, dict[int, float]] = {}
    per_task: dict[str, tuple[float, ...]] = {}
    for c in CATEGORIES:
        effects = rng.normal(mu, 0.05, tasks)
        if c == "code_edit" and code_edit is not None:
            effects = code_edit
        table = effects[:, None] + shared[None, :] + rng.normal(0.0, 0.03, (tasks, 5))
        per_round[c] = {r + 1: float(math.exp(v)) for r, v in enumerate(table.mean(axis=0))}
        per_task[c] = tuple(float(v) for v in table.mean(axis=1))
    return per_round, per_task


def test_a_bimodal_category_is_covered_from_twelve_tasks_and_not_from_three() -> None:
    """30% of code edits at 2x, the rest 1x; the truth is the estimand the code computes
    (geometric within a category, harmonic across). Measured: 72% at 3 tasks, 92-96% at 12
    (`benchmarks/mix_shapes.py`, six categories)."""
    truth = 1.0 / (1 / 3 / math.exp(0.3 * math.log(2.0)) + 2 / 3)
    rng = np.random.default_rng(5)
    rates = {}
    for tasks in (3, MIN_MIX_TASKS):
        held = 0
        for _ in range(60):
            code = np.where(rng.random(tasks) < 0.3, math.log(2.0), 0.0)
            per_round, per_task = _sweep(rng, tasks, code)
            m = mix_speedup("x", per_round, MIX, 0.03, per_task=per_task)
            assert m.low is not None and m.high is not None
            held += m.low <= truth <= m.high
        rates[tasks] = held / 60
    assert rates[MIN_MIX_TASKS] >= 0.85 and rates[3] < rates[MIN_MIX_TASKS], rates


def test_the_pick_is_guarded_across_the_arms_and_says_what_few_tasks_cannot_support() -> None:
    rng = np.random.default_rng(1)
    per_round, per_task = _sweep(rng, 3, mu=math.log(1.12))
    alone = mix_speedup("a", per_round, MIX, 0.03, per_task=per_task)
    among = mix_speedup("a", per_round, MIX, 0.03, per_task=per_task, family=4)
    assert alone.verdict == among.verdict == "faster"
    assert among.family_low is not None and alone.low is not None
    assert among.family_low < alone.low  # a wider bound for a choice among four
    picked = choose_for_mix(MIX, [alone], {})
    assert picked.profile == "a" and "3 task(s) in a category" in picked.reason
    assert f"{MIN_MIX_TASKS} tasks a category would support it" in picked.reason
    # Faster on its own 95% CI, but not across the arms: the baseline is kept, and said why.
    kept = choose_for_mix(MIX, [replace(among, family_low=0.99)], {})
    assert kept.profile is None and "not across the arms compared" in kept.reason


def test_four_arms_identical_to_the_baseline_are_seldom_recommended() -> None:
    """Every task 1.0x (a 2% instance offset each): with the Bonferroni guard over the four
    arms a sweep recommends one in at most a few percent (measured in the benchmark)."""
    rng = np.random.default_rng(2)
    picked = 0
    for _ in range(40):
        arms = []
        for arm in range(4):
            per_round, per_task = _sweep(rng, 3)
            arms.append(mix_speedup(f"a{arm}", per_round, MIX, 0.03, per_task=per_task, family=4))
        picked += choose_for_mix(MIX, arms, {}).profile is not None
    assert picked <= 2


def test_the_guard_holds_arms_at_one_with_uneven_code_edits_under_five_percent() -> None:
    """Four arms at 1.0x that help some code edits and hurt others (task log sd 0.35), 3
    tasks a category: Bonferroni on the plain floor recommended one in 7.3% of 1000 sweeps;
    the guard's floor (g at least w, the smallest category's df) in 2.7%
    (`benchmarks/mix_shapes.py --only-family`). Held here on the guard's bound itself, which
    `mix_speedup` reports as `family_low` (400 sweeps of three categories, seed 6: 25 on
    the plain floor, 4 on the guard's; the full call settles each inconclusive arm, too slow
    for a test at this count)."""
    rng = np.random.default_rng(6)
    plain = guarded = 0
    wide = 1.0 - FAMILY_ALPHA / 4
    for _ in range(400):
        hits = [False, False]
        for _arm in range(4):
            per_round, per_task = _sweep(rng, 3, rng.normal(0.0, 0.35, 3))
            logs = np.log([1.0 / sum(w / per_round[c][r] for c, w in MIX.weights) for r in
                           range(1, 6)])  # fmt: skip
            plain_floor = task_floor(logs, per_round, range(1, 6), per_task, MIX)
            guard_floor = task_floor(logs, per_round, range(1, 6), per_task, MIX, guard=True)
            assert plain_floor is not None and guard_floor is not None
            # `faster`: the estimate beyond 3% and its own 95% CI above 1; then each bound.
            faster = float(logs.mean()) > math.log(1.03) and plain_floor.interval()[0] > 0
            for i, floor in enumerate((plain_floor, guard_floor)):
                hits[i] = hits[i] or (faster and floor.interval(wide)[0] > 0)
        plain += hits[0]
        guarded += hits[1]
    assert guarded <= 12 and guarded < plain, (plain, guarded)  # 3% of 400


def test_the_family_bound_is_the_guards_floor() -> None:
    rng = np.random.default_rng(7)
    per_round, per_task = _sweep(rng, 3, rng.normal(0.3, 0.35, 3), mu=math.log(1.1))
    m = mix_speedup("a", per_round, MIX, 0.03, per_task=per_task, family=4)
    logs = np.log(m.round_values)
    floor = task_floor(logs, per_round, range(1, 6), per_task, MIX, guard=True)
    assert floor is not None and m.family_low is not None
    assert m.family_low == pytest.approx(math.exp(floor.interval(1.0 - FAMILY_ALPHA / 4)[0]))
    plain = task_floor(logs, per_round, range(1, 6), per_task, MIX)
    assert plain is not None and floor.df <= plain.df and floor.se >= plain.se


def test_a_category_pick_from_few_tasks_says_what_they_cannot_support() -> None:
    """One category's CI under bimodal task effects covered 59% at 3 tasks, 83% at 6 and 90%
    at 12 (`benchmarks/category_shapes.py`): a pick from fewer than 12 says so, and what
    would."""
    assert "3 task(s) in a category" in few_tasks_caveat(3)
    assert few_tasks_caveat(MIN_MIX_TASKS) == "" and few_tasks_caveat(None) == ""
