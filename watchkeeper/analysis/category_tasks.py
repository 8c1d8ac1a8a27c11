"""A one-round sweep's per-category answer from each category's own tasks, and the
per-category picks' family-wise bound (issue 75).

Where the race stopped short of `MIN_ROUNDS` rounds and answered from its tasks
(analysis/task_pick.py), the per-category rows had no CI: a category's rows printed "1 round(s):
no CI" though its tasks, each paired back to back, are replicates of that category's question.
`category_interval`: from `MIN_CATEGORY_TASKS` tasks in a category, Student's t over that
category's task log ratios (df = tasks - 1), floored as the interval over every task is
(`racing_tasks`: the instance's offset and the round's drift, which tasks cannot average away);
`with_category_cis` puts it in the category's row ("95% CI over 8 tasks"), so the per-category
pick (analysis/recommend.py) reads it. A category with fewer tasks keeps no CI and
`category_note` says so, with what would give it one.

`family_low`: a category's pick is one choice among the comparisons that could be claimed,
so its lower bound is taken at 1 - FAMILY_ALPHA / family (Bonferroni), not at 95%: over rounds
on the CI's two-way floor, over a category's tasks on its t interval. `pick_families` sizes
the family: (arms with an interval in that category) x (categories with an interval). A
comparison that cannot lead to a pick (an arm the ceiling or idle rule stopped unmeasured, a
category with too few tasks for an interval) has no "faster" verdict to claim, so it spends
none of the family's alpha.

Rates simulated before the rule decided anything (watchkeeper/simulation/category_tasks.py,
`benchmarks/category_tasks.py`): docs/statistics-checks.md, "Per-category picks over tasks".
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import replace

import numpy as np

from watchkeeper.analysis.bench_types import BenchResult, CategoryStats
from watchkeeper.analysis.floor import two_way_floor
from watchkeeper.analysis.racing_tasks import INSTANCE_SD, ROUND_SD, TaskInterval
from watchkeeper.analysis.stats import CONFIDENCE, MIN_ROUNDS, RatioCI
from watchkeeper.analysis.task_pick import task_ratio
from watchkeeper.analysis.workload_mix import FAMILY_ALPHA
from watchkeeper.student import t_quantile

MIN_CATEGORY_TASKS = 8
"""Tasks a category needs for an interval over its own tasks (decided by simulation:
docs/statistics-checks.md, "Per-category picks over tasks")."""


def pick_families(rows: Iterable[CategoryStats], candidates: Collection[str]) -> dict[str, int]:
    """category -> the family its pick is guarded across: the ``candidates`` with an interval
    in that category (`RatioCI.has_ci`) times the categories where any candidate has one.

    Why these and no more: only a comparison with an interval can read `faster`, so only it
    can name a pick. An arm the ceiling rule dropped before round 1 (or the idle rule after
    one round, whose rows get no interval over tasks) and a category with too few tasks for
    an interval can never be claimed; counting them made every bound wider for nothing (the
    power lost: docs/statistics-checks.md, "Per-category picks over tasks"). Still
    family-wise: each of the K categories spends FAMILY_ALPHA / K, split over its own a_c
    arms (alpha / (a_c x K) each), so the comparisons that can be claimed spend FAMILY_ALPHA
    in all. Which rows have an interval is fixed by the design (tasks, rounds run) and by
    rules that read no speed (ceiling, idle); the early rule, which does read speeds, stops an
    arm only below 0.67x on every task, where an arm at 1.0x lands with the near-zero chance
    `racing.early_error` prints, so the family it leaves is the design's.
    A category absent here has no interval, so no comparison to guard."""
    arms: dict[str, set[str]] = {}
    for c in rows:
        if c.arm in candidates and c.speedup is not None and c.speedup.has_ci:
            arms.setdefault(c.category, set()).add(c.arm)
    return {category: len(names) * len(arms) for category, names in arms.items()}


def family_low(ci: RatioCI, family: int) -> float:
    """A category CI's lower bound across the ``family`` of comparisons the per-category picks
    choose among (`pick_families`): Bonferroni, 1 - FAMILY_ALPHA / family, on the CI's floor
    over rounds and tasks (`two_way_floor` from its per-round ratios and task log ratios),
    never above its own 95% bound. With four arms identical to
    the baseline (3 tasks x 5 rounds, 6 categories) some category's pick was named in 15% of
    sweeps on each arm's own CI, 22% with uneven code edits (`benchmarks/mix_shapes.py
    --only-family`). The CI's own bound where the floor cannot be rebuilt or there is one
    comparison."""
    if family > 1 and ci.over and ci.has_ci and len(ci.task_logs) >= 2:
        return _over_tasks_low(ci, family)
    if family <= 1 or len(ci.round_ratios) < 2 or len(ci.task_logs) < 2:
        return ci.low
    floor = two_way_floor(np.log(np.asarray(ci.round_ratios)), np.asarray(ci.task_logs))
    return min(ci.low, ci.estimate * math.exp(-floor.half(1.0 - FAMILY_ALPHA / family)))


def _over_tasks_low(ci: RatioCI, family: int) -> float:
    """An interval over a category's tasks at 1 - FAMILY_ALPHA / ``family``: it is Student's t
    with tasks - 1 df (`category_interval`), so its 95% half-width gives the standard error."""
    df = float(len(ci.task_logs) - 1)
    se = math.log(ci.high / ci.low) / (2.0 * t_quantile(df, CONFIDENCE))
    return min(ci.low, ci.estimate * math.exp(-t_quantile(df, 1.0 - FAMILY_ALPHA / family) * se))


def category_interval(
    logs: Sequence[float],
    rounds: int,
    *,
    confidence: float = CONFIDENCE,
    min_tasks: int = MIN_CATEGORY_TASKS,
) -> TaskInterval | None:
    """The t interval over one category's task log ratios (each task's rounds averaged),
    floored by the instance's offset and the round's drift over ``rounds``; None below
    ``min_tasks`` tasks."""
    values = np.asarray(logs, float)
    n = values.size
    if n < max(min_tasks, 2):
        return None
    se = math.sqrt(float(values.var(ddof=1)) / n + INSTANCE_SD**2 + ROUND_SD**2 / max(rounds, 1))
    half = t_quantile(n - 1, confidence) * se
    mean = float(values.mean())
    return TaskInterval(
        math.exp(mean), math.exp(mean - half), math.exp(mean + half), n, rounds, se, n - 1.0
    )


def with_category_cis(
    result: BenchResult,
    arms: Collection[str],
    *,
    population: Mapping[str, int] | None = None,
    min_tasks: int = MIN_CATEGORY_TASKS,
) -> BenchResult:
    """``result`` with every category row of ``arms`` (the racing arms answered over tasks)
    that has no CI over rounds and ``min_tasks`` tasks or more reading its interval over the
    category's tasks; ``population``: the set's tasks per category where the rounds measured
    a stratified sample ('8 of 100 tasks'). Rows with a CI over rounds are left as they are."""
    rows: list[CategoryStats] = []
    for c in result.categories:
        ci = c.speedup
        read = None
        if ci is not None and c.arm in arms:
            of = (population or {}).get(c.category, 0)
            read = category_ratio(ci, of=of, min_tasks=min_tasks)
        rows.append(c if read is None else replace(c, speedup=read))
    return replace(result, categories=tuple(rows))


def category_ratio(
    ci: RatioCI, *, of: int = 0, min_tasks: int = MIN_CATEGORY_TASKS
) -> RatioCI | None:
    """A category row's speed-up without a CI over rounds read from the interval over its
    tasks (``of``: the category's tasks in the set, where a sample measured fewer); None
    where it has a CI over rounds or fewer than ``min_tasks`` tasks."""
    if ci.has_ci:
        return None
    task = category_interval(ci.task_logs, max(ci.n_rounds, 1), min_tasks=min_tasks)
    if task is None:
        return None
    return task_ratio(ci, task, of if of > task.tasks else 0)


def category_note(
    result: BenchResult, arms: Collection[str], *, min_tasks: int = MIN_CATEGORY_TASKS
) -> str:
    """What the per-category rows of a sweep answered over tasks carry, in words: which
    categories have an interval over their own tasks and which have too few tasks for one,
    and what would give them one. Empty where no racing arm has a category row."""
    counts: dict[str, int] = {}
    for c in result.categories:
        if c.arm in arms and c.speedup is not None:
            counts[c.category] = max(counts.get(c.category, 0), len(c.speedup.task_logs))
    if not counts:
        return ""
    few = {c: n for c, n in sorted(counts.items()) if n < min_tasks}
    enough = {c: n for c, n in sorted(counts.items()) if n >= min_tasks}
    parts = []
    if enough:
        listed = ", ".join(f"{c} {n}" for c, n in enough.items())
        parts.append(
            f"the per-category rows of {listed} tasks carry a 95% CI over that category's own "
            f"tasks (at least {min_tasks} a category; each category's pick guarded across "
            "the arms and categories it is chosen among, Bonferroni: analysis/category_tasks)"
        )
    if few:
        listed = ", ".join(f"{c} ({n} task{'s' if n != 1 else ''})" for c, n in few.items())
        parts.append(
            f"{listed}: too few tasks for an interval over the category's tasks, so no CI "
            f"and no pick there; {min_tasks} tasks in the category (`--per-category "
            f"{min_tasks}` where the set has that many) or {MIN_ROUNDS} rounds (a larger "
            "budget) would give one"
        )
    text = "; ".join(parts)
    return text[0].upper() + text[1:]
