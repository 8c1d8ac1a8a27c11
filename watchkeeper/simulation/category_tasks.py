"""A one-round sweep's per-category intervals and picks over each category's tasks, simulated:
coverage of every category interval, the family-wise false pick rate when every arm equals the
baseline, and the power per category (issue 75, items 2, 3 and 6).

Where a one-round sweep answers from its tasks, a category row with `MIN_CATEGORY_TASKS` tasks
or more reads the interval over its own tasks (analysis/category_tasks.py) and the category's
pick reads that row, guarded across the comparisons that could name it. This draws that
design and runs the real code on it: `stats.paired_speedup` on the category's one-round
pairs (no CI from one round), `category_tasks.category_ratio` (the interval over the
category's tasks), then
`recommend._choose` with the family the recommendation gives it (`category_tasks.pick_families`:
the arms with an interval in the category x the categories with one) and, for contrast, with
none (each category on its own 95% CI) and with the family before it (every candidate, the
ones the ceiling rule dropped unmeasured included, x every category, with an interval or not).

One sweep: ``arms`` arms, categories of ``sizes`` tasks each; every arm's task effects drawn
fresh in every category from a shape around its true speed-up (`racing_tasks.effects_of`:
normal and skewed with log sd 0.2, bimodal with 30% of tasks at 2x), so the population is the
estimand, and every category's truth is the arm's speed-up. Each arm has its own instance
offset and round effect (`INSTANCE_SD`, `ROUND_SD`: the sizes the interval floors by) shared
by all its categories, and a back-to-back cell noise per task. ``dropped`` more candidates
were dropped by the ceiling rule before round 1: they have no rows, as in a sweep.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from watchkeeper.analysis.bench_types import CategoryStats
from watchkeeper.analysis.category_tasks import (
    MIN_CATEGORY_TASKS,
    category_interval,
    category_ratio,
    pick_families,
)
from watchkeeper.analysis.racing_tasks import INSTANCE_SD, ROUND_SD, effects_of
from watchkeeper.analysis.recommend import _choose
from watchkeeper.analysis.stats import Pair, paired_speedup

THRESHOLD = 0.03
CELL_SD = 0.03
"""A task's back-to-back pair noise (log sd), as `benchmarks/task_interval.py` draws it."""


@dataclass(frozen=True, slots=True)
class CategoryRates:
    sweeps: int
    intervals: int
    """Category intervals formed (arms x categories with enough tasks, over the sweeps)."""
    covered: int
    """Of those, intervals that covered the arm's truth."""
    picked: int
    """Sweeps where some category's pick named an arm, guarded across `pick_families`
    (every arm at 1.0x: a family-wise false pick)."""
    picked_alone: int
    """The same on each category's own 95% CI, no guard."""
    chances: int
    """Category picks that could name an arm (sweeps x categories with enough tasks)."""
    right: int
    """Category picks that named the truly faster arm (power, guarded)."""
    right_alone: int
    picked_wide: int = 0
    """False picks with the family before `pick_families`: every candidate x every category."""
    right_wide: int = 0

    @property
    def coverage(self) -> float:
        return self.covered / max(self.intervals, 1)

    @property
    def power(self) -> float:
        return self.right / max(self.chances, 1)

    @property
    def power_alone(self) -> float:
        return self.right_alone / max(self.chances, 1)

    @property
    def power_wide(self) -> float:
        return self.right_wide / max(self.chances, 1)


def _row(
    rng: np.random.Generator, shape: str, mu: float, shift: float, n: int, arm: str, cat: str
) -> CategoryStats:
    """One arm's one-round row of one category, read over its tasks where it has enough."""
    logs = effects_of(rng, shape, mu, n) + shift + rng.normal(0.0, CELL_SD, n)
    pairs = [Pair(f"t{i}", 1, 1.0, math.exp(float(v))) for i, v in enumerate(logs)]
    ci = paired_speedup(pairs, threshold=THRESHOLD)
    assert ci is not None
    ci = category_ratio(ci) or ci
    return CategoryStats(arm, cat, n, 0, None, None, None, ci, None, 0, 0, None, {})


def simulate_categories(
    shape: str,
    sizes: Sequence[int],
    sweeps: int,
    *,
    seed: int = 0,
    arms: int = 4,
    faster: float = 1.0,
    dropped: int = 0,
) -> CategoryRates:
    """``sweeps`` one-round sweeps of ``arms`` measured arms over categories of ``sizes``
    tasks: every arm's true speed-up 1.0x in every category, except the first at ``faster``
    (power: a category's pick names it); ``dropped`` candidates more, stopped by the ceiling
    rule before round 1 (no rows)."""
    rng = np.random.default_rng(seed)
    candidates = [f"a{a}" for a in range(arms + dropped)]
    wide = len(candidates) * len(sizes)
    enough = sum(n >= MIN_CATEGORY_TASKS for n in sizes)
    intervals = covered = picked = picked_alone = right = right_alone = 0
    picked_wide = right_wide = 0
    for _ in range(sweeps):
        rows: dict[str, list[CategoryStats]] = {f"c{k}": [] for k in range(len(sizes))}
        for a in range(arms):
            target = faster if a == 0 else 1.0
            shift = rng.normal(0.0, INSTANCE_SD) + rng.normal(0.0, ROUND_SD)
            for k, n in enumerate(sizes):
                row = _row(rng, shape, math.log(target), shift, n, f"a{a}", f"c{k}")
                rows[f"c{k}"].append(row)
                ci = row.speedup
                if ci is not None and ci.has_ci:
                    intervals += 1
                    covered += ci.low <= target <= ci.high
        families = pick_families((r for by in rows.values() for r in by), candidates)
        guarded = [_choose(c, r, {}, families.get(c, 1)).profile for c, r in rows.items()]
        alone = [_choose(c, r, {}, family=1).profile for c, r in rows.items()]
        before = [_choose(c, r, {}, family=wide).profile for c, r in rows.items()]
        picked += any(p is not None for p in guarded)
        picked_alone += any(p is not None for p in alone)
        picked_wide += any(p is not None for p in before)
        if faster > 1.0:
            right += sum(p == "a0" for p in guarded)
            right_alone += sum(p == "a0" for p in alone)
            right_wide += sum(p == "a0" for p in before)
    return CategoryRates(
        sweeps,
        intervals,
        covered,
        picked,
        picked_alone,
        sweeps * enough,
        right,
        right_alone,
        picked_wide,
        right_wide,
    )


def simulate_coverage(shape: str, tasks: int, sims: int, *, seed: int = 0) -> float:
    """Coverage of `category_interval` over one category of ``tasks`` tasks (whatever the
    minimum: what decides `MIN_CATEGORY_TASKS`), ``sims`` seeded one-round draws of the
    design above at a true 1.0x."""
    rng = np.random.default_rng(seed)
    covered = 0
    for _ in range(sims):
        shift = rng.normal(0.0, INSTANCE_SD) + rng.normal(0.0, ROUND_SD)
        logs = effects_of(rng, shape, 0.0, tasks) + shift + rng.normal(0.0, CELL_SD, tasks)
        ci = category_interval([float(v) for v in logs], 1, min_tasks=2)
        assert ci is not None
        covered += ci.low <= 1.0 <= ci.high
    return covered / sims
