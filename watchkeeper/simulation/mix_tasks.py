"""The one-round sweep's pick over tasks, simulated: coverage of the interval it quotes, the
false pick rate when every arm equals the baseline, and its power (issue 75, items 3 and 6).

Where a sweep's rounds are too few for a CI over rounds and its plan was one round over many
tasks, the mix's pick reads each arm's interval over tasks (analysis/task_pick.py) with the
family-wise guard of the mix over rounds (Bonferroni over the arms). This draws that design
and runs the real code on it: the racer's interval (`racing_tasks.task_interval`, or
`task_sample.sample_interval` for a sample), or for a stated mix the stratified one
(`task_sample.weighted_interval`), then `task_pick.mix_over_tasks` and
`workload_mix.choose_for_mix`.

One sweep: six categories whose true means spread over +-`CATEGORY_SPREAD` (log), tasks of
each drawn fresh from a shape around them (`racing_tasks.effects_of`: normal and skewed with
log sd 0.2, bimodal with 30% of tasks at 2x), so the population is the estimand: the
category-weighted geometric mean exp(sum_c w_c mu_c). Each arm has its own task effects,
its own instance offset and round effect (`INSTANCE_SD`, `ROUND_SD`: the sizes the interval
floors by) and a back-to-back cell noise per task. ``of``: the set is a finite population of
that many tasks (categories of `SIZES_300` scaled) and the sweep measures a stratified sample
of ``tasks`` of it; the truth is then the set's own mean. ``stated``: the mix weighs the
first category 0.7 (a team that serves mostly one kind), the interval stratified by it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from watchkeeper.analysis.racing_tasks import (
    INSTANCE_SD,
    ROUND_SD,
    TaskInterval,
    effects_of,
    task_interval,
)
from watchkeeper.analysis.stats import Pair
from watchkeeper.analysis.task_pick import mix_over_tasks
from watchkeeper.analysis.task_sample import (
    CATEGORY_SPREAD,
    SIZES_300,
    allocate,
    sample_interval,
    weighted_interval,
)
from watchkeeper.analysis.workload_mix import Mix, MixSpeedup, choose_for_mix, mix_speedup

CATEGORIES = 6
THRESHOLD = 0.03
CELL_SD = 0.03
"""A task's back-to-back pair noise (log sd), as `benchmarks/task_interval.py` draws it."""
STATED = 0.7
"""The first category's weight in a stated mix (the rest share what is left)."""


@dataclass(frozen=True, slots=True)
class PickRates:
    sweeps: int
    picked: int
    """Sweeps whose pick named an arm (where every arm is at 1.0x: a false pick)."""
    right: int
    """Sweeps whose pick named the arm that is truly faster (power)."""
    covered: int
    """Sweeps whose quoted interval (the pick's, else the closest arm's) covered that arm's
    truth."""
    quoted: int
    arm_covered: int
    """Over every arm of every sweep: intervals that covered the arm's truth."""
    arm_intervals: int

    @property
    def pick_rate(self) -> float:
        return self.picked / self.sweeps

    @property
    def power(self) -> float:
        return self.right / self.sweeps

    @property
    def coverage(self) -> float:
        return self.covered / max(self.quoted, 1)

    @property
    def arm_coverage(self) -> float:
        return self.arm_covered / max(self.arm_intervals, 1)


@dataclass(frozen=True, slots=True)
class _Design:
    measured: tuple[int, ...]
    """Tasks measured per category."""
    sizes: tuple[int, ...]
    """The set's tasks per category."""
    weights: np.ndarray
    """The mix's weights."""
    offsets: np.ndarray
    of: int
    stated: bool


def _design(tasks: int, of: int, stated: bool) -> _Design:
    """Every task of six equal categories, or a stratified sample of ``tasks`` from a set of
    ``of`` (`SIZES_300` scaled)."""
    if of:
        sizes = tuple(round(n * of / sum(SIZES_300)) for n in SIZES_300)
        drawn = allocate({f"c{k}": n for k, n in enumerate(sizes)}, tasks)
        measured = tuple(drawn[f"c{k}"] for k in range(CATEGORIES))
    else:
        base, extra = divmod(tasks, CATEGORIES)
        measured = sizes = tuple(base + (k < extra) for k in range(CATEGORIES))
    shares = np.asarray(sizes, float) / sum(sizes)
    if stated:
        shares = np.full(CATEGORIES, (1.0 - STATED) / (CATEGORIES - 1))
        shares[0] = STATED
    offsets = np.linspace(-CATEGORY_SPREAD, CATEGORY_SPREAD, CATEGORIES)
    return _Design(measured, sizes, shares, offsets, of, stated)


def _arm(
    rng: np.random.Generator, shape: str, target: float, d: _Design
) -> tuple[list[Pair], dict[str, str], dict[str, list[float]], float]:
    """One arm's one round: (pairs, category of each task, task logs per category, the
    arm's true category-weighted speed-up)."""
    mu = math.log(target) - float(np.sum(d.weights * d.offsets))
    shift = rng.normal(0.0, INSTANCE_SD) + rng.normal(0.0, ROUND_SD)
    pairs: list[Pair] = []
    category_of: dict[str, str] = {}
    by_cat: dict[str, list[float]] = {}
    means = []
    for k, (n, size) in enumerate(zip(d.measured, d.sizes, strict=True)):
        c = f"c{k}"
        effects = effects_of(rng, shape, mu + d.offsets[k], size if d.of else n)
        means.append(float(effects.mean()))
        if d.of:  # the set's own tasks, a sample of them measured
            effects = effects[rng.choice(size, n, replace=False)]
        logs = effects + shift + rng.normal(0.0, CELL_SD, n)
        by_cat[c] = [float(v) for v in logs]
        for i, v in enumerate(logs):
            pairs.append(Pair(f"{c}t{i}", 1, 1.0, math.exp(v)))
            category_of[f"{c}t{i}"] = c
    truth = math.log(target) if not d.of else float(np.sum(d.weights * np.asarray(means)))
    return pairs, category_of, by_cat, math.exp(truth)


def _interval(
    d: _Design, pairs: Sequence[Pair], category_of: dict[str, str], by_cat: dict[str, list[float]]
) -> TaskInterval | None:
    """What the sweep reads: the stratified interval for a stated mix, the sample's weighted
    one for a sample, else the plain interval over every task."""
    if d.stated:
        return weighted_interval(by_cat, {f"c{k}": float(w) for k, w in enumerate(d.weights)}, 1)
    if d.of:
        return sample_interval(pairs, category_of, {f"c{k}": n for k, n in enumerate(d.sizes)})
    return task_interval(pairs)


def simulate_pick(
    shape: str,
    tasks: int,
    sweeps: int,
    *,
    seed: int = 0,
    arms: int = 4,
    faster: float = 1.0,
    of: int = 0,
    stated: bool = False,
) -> PickRates:
    """``sweeps`` one-round sweeps of ``arms`` arms over ``tasks`` tasks: every arm's true
    speed-up 1.0x, except the first at ``faster`` (power: the pick names it)."""
    d = _design(tasks, of, stated)
    mix = Mix(tuple((f"c{k}", float(w)) for k, w in enumerate(d.weights)))
    rng = np.random.default_rng(seed)
    picked = right = covered = quoted = arm_covered = arm_intervals = 0
    for _ in range(sweeps):
        speedups: list[MixSpeedup] = []
        truths: dict[str, float] = {}
        for a in range(arms):
            pairs, category_of, by_cat, truth = _arm(rng, shape, faster if a == 0 else 1.0, d)
            per_round = {c: {1: math.exp(float(np.mean(v)))} for c, v in by_cat.items()}
            rounds = mix_speedup(f"a{a}", per_round, mix, THRESHOLD, per_task=by_cat)
            task = _interval(d, pairs, category_of, by_cat)
            m = mix_over_tasks(rounds, task, family=arms, of=of)
            speedups.append(m)
            truths[m.arm] = truth
            if m.low is not None and m.high is not None:
                arm_intervals += 1
                arm_covered += m.low <= truth <= m.high
        choice = choose_for_mix(mix, speedups, {})
        picked += choice.profile is not None
        right += choice.profile == "a0" and faster > 1.0
        best = choice.best
        if best is not None and best.low is not None and best.high is not None:
            quoted += 1
            covered += best.low <= truths[best.arm] <= best.high
    return PickRates(sweeps, picked, right, covered, quoted, arm_covered, arm_intervals)
