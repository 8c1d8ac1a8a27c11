"""A task sample that fits the budget, and the interval over the tasks it drew.

Where one round over every task of a large set does not fit the sweep's budget (300 imported
prompts at ~20 s a task of every arm is 100 minutes a round), running round 1 anyway answers
late or never. The racer (analysis/racing_tasks.plan, campaign/racer.py) then measures a
sample: proportional to each category's share of the set, at least `MIN_PER_CATEGORY` tasks
in every category (a category's spread needs two) and at least `MIN_TASK_REPLICATES` in all,
drawn with the sweep's seed so that a rerun measures the same tasks.

`sample_interval`: the interval is then a statement about the whole set, not about the
sample. The minimums make a small sample uneven (12 of 300 tasks in six categories of 100 to
20 is two a category, where proportion says 4 and 0.8), so the estimate is the stratified
mean: each category's mean task log ratio weighted by its share of the *set*, its variance
the categories' own spreads (Satterthwaite's degrees of freedom), plus the same floors as the
interval over every task (the instance's offset and the round's drift: racing_tasks.py).
An unweighted mean over the sample would move the answer towards the small categories.
`simulate_sampled_coverage` checks it on seeded populations (`benchmarks/task_interval.py
--sampled-only`).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from watchkeeper.analysis.racing_tasks import (
    INSTANCE_SD,
    MIN_PER_CATEGORY,
    MIN_TASK_REPLICATES,
    ROUND_SD,
    TaskInterval,
    arm_task_cis,
    effects_of,
    task_interval,
    task_logs,
)
from watchkeeper.analysis.racing_types import Table
from watchkeeper.analysis.stats import CONFIDENCE, Pair
from watchkeeper.errors import TaskSetError
from watchkeeper.student import t_quantile


@dataclass(frozen=True, slots=True)
class TaskSample:
    ids: tuple[str, ...]
    """The sampled task ids, in the set's order (a round runs them in that order)."""
    drawn: dict[str, int]
    """Sampled tasks per category."""
    population: dict[str, int]
    """The set's tasks per category: the weights of the stratified mean."""
    seed: int

    @property
    def text(self) -> str:
        """'12 of 36 tasks (stratified by category, seed 75)'."""
        total = sum(self.population.values())
        return f"{len(self.ids)} of {total} tasks (stratified by category, seed {self.seed})"


def allocate(population: Mapping[str, int], size: int) -> dict[str, int]:
    """Tasks per category for a sample of ``size``: proportional to the set (largest
    remainder), each category at least `MIN_PER_CATEGORY` (or all it has), the minimums paid
    for by the categories most above their share. Ties go to the name first in order."""
    total = sum(population.values())
    if not population or any(n < 1 for n in population.values()):
        raise TaskSetError(
            "a task sample needs categories with at least one task each",
            hint="check the task set: every task names a category",
        )
    floor = {c: min(MIN_PER_CATEGORY, n) for c, n in population.items()}
    if not sum(floor.values()) <= size <= total:
        raise TaskSetError(
            f"a task sample of {size} from {total} tasks in {len(population)} categories: "
            f"it needs {sum(floor.values())} to {total}",
            hint=f"at least {MIN_PER_CATEGORY} tasks of every category, at most the set",
        )
    names = sorted(population)
    quota = {c: size * population[c] / total for c in names}
    alloc = {c: min(population[c], max(floor[c], math.floor(quota[c]))) for c in names}
    while sum(alloc.values()) > size:
        over = [c for c in names if alloc[c] > floor[c]]
        alloc[max(over, key=lambda c: alloc[c] - quota[c])] -= 1
    while sum(alloc.values()) < size:
        room = [c for c in names if alloc[c] < population[c]]
        alloc[max(room, key=lambda c: quota[c] - alloc[c])] += 1
    return alloc


def stratified_sample(tasks: Sequence[tuple[str, str]], size: int, *, seed: int) -> TaskSample:
    """``size`` of ``tasks`` ((id, category), the set's order), drawn per category
    (`allocate`) with ``seed``: the same set, size and seed give the same sample, whatever
    the order of the set's file."""
    ids = [t for t, _ in tasks]
    if len(set(ids)) != len(ids):
        dup = sorted({t for t in ids if ids.count(t) > 1})
        raise TaskSetError(
            f"a task sample over duplicate task ids: {', '.join(dup[:5])}",
            hint="give every task of the set its own id",
        )
    if seed < 0:
        raise TaskSetError(f"a task sample's seed must be 0 or more (got {seed})", hint="")
    by_cat: dict[str, list[str]] = defaultdict(list)
    for t, c in tasks:
        by_cat[c].append(t)
    population = {c: len(v) for c, v in sorted(by_cat.items())}
    drawn = allocate(population, size)
    rng = np.random.default_rng(seed)
    chosen: set[str] = set()
    for c in sorted(by_cat):
        pool = sorted(by_cat[c])  # the set's file order does not change the draw
        chosen |= {pool[i] for i in rng.choice(len(pool), drawn[c], replace=False)}
    return TaskSample(tuple(t for t in ids if t in chosen), drawn, population, seed)


def sample_interval(
    pairs: Sequence[Pair],
    category_of: Mapping[str, str],
    population: Mapping[str, int],
    *,
    confidence: float = CONFIDENCE,
    instance_sd: float = INSTANCE_SD,
    round_sd: float = ROUND_SD,
) -> TaskInterval | None:
    """The set's mean task speed-up from a stratified sample: each category's mean log
    ratio weighted by its share of the set (``population``), t with Satterthwaite's df over
    the categories' spreads plus the floors. Where a category of the set has fewer than two
    measured tasks (failed requests), the plain interval over the sampled tasks
    (`task_interval`, unweighted); None below `MIN_TASK_REPLICATES` tasks."""
    logs = task_logs(pairs)
    by_cat: dict[str, list[float]] = defaultdict(list)
    for t, v in logs.items():
        by_cat[category_of[t]].append(v)
    if len(logs) < MIN_TASK_REPLICATES:
        return None
    if any(len(by_cat.get(c, ())) < 2 for c in population):
        return task_interval(
            pairs, confidence=confidence, instance_sd=instance_sd, round_sd=round_sd
        )
    total = sum(population.values())
    return weighted_interval(
        by_cat,
        {c: n / total for c, n in population.items()},
        max(len({p.round for p in pairs}), 1),
        confidence=confidence,
        instance_sd=instance_sd,
        round_sd=round_sd,
    )


def weighted_interval(
    by_cat: Mapping[str, Sequence[float]],
    weights: Mapping[str, float],
    rounds: int,
    *,
    confidence: float = CONFIDENCE,
    instance_sd: float = INSTANCE_SD,
    round_sd: float = ROUND_SD,
) -> TaskInterval | None:
    """The stratified interval over tasks: each category's mean task log ratio (``by_cat``)
    weighted by ``weights`` (summing to 1: the set's shares for a sample, a stated mix's
    shares for `--mix`), Satterthwaite's df over the categories' spreads, plus the floors.
    None where a weighted category has fewer than two tasks or all of them fewer than
    `MIN_TASK_REPLICATES`."""
    if any(len(by_cat.get(c, ())) < 2 for c in weights):
        return None
    n = sum(len(by_cat[c]) for c in weights)
    if n < MIN_TASK_REPLICATES:
        return None
    mean = 0.0
    parts: list[tuple[float, int]] = []
    for c, w in weights.items():
        got = np.asarray(by_cat[c], float)
        mean += w * float(got.mean())
        parts.append((w * w * float(got.var(ddof=1)) / got.size, got.size))
    var = sum(a for a, _ in parts) + instance_sd**2 + round_sd**2 / rounds
    spread = sum(a * a / (k - 1) for a, k in parts)
    df = var * var / spread if spread > 0 else float(n - len(weights))
    half = t_quantile(max(1.0, df), confidence) * math.sqrt(var)
    return TaskInterval(
        math.exp(mean),
        math.exp(mean - half),
        math.exp(mean + half),
        n,
        rounds,
        math.sqrt(var),
        max(1.0, df),
    )


def arm_sample_cis(
    table: Table, arms: Sequence[str], baseline: str, sample: TaskSample | None
) -> dict[str, TaskInterval]:
    """`racing_tasks.arm_task_cis` where the rounds measured a sample: each arm's interval
    for the whole set (`sample_interval`), the categories read from the measured cells.
    Without a sample, `arm_task_cis` itself."""
    if sample is None:
        return arm_task_cis(table, arms, baseline)
    out = {}
    for arm in arms:
        if arm == baseline:
            continue
        category_of = {t: c.category for (t, _), c in table.by_arm.get(arm, {}).items()}
        pairs = table.pairs(arm, baseline, None)
        if ci := sample_interval(pairs, category_of, sample.population):
            out[arm] = ci
    return out


@dataclass(frozen=True, slots=True)
class SampledCoverage:
    weighted: float
    """Coverage of the set's mean by `sample_interval`."""
    plain: float
    """Coverage by the unweighted interval over the sampled tasks (`task_interval`)."""
    called: float
    """Share of `sample_interval`s calling the arm beyond the 3% threshold."""


SIZES_300 = (100, 60, 50, 40, 30, 20)
"""An uneven 300-task set in six categories: the sample's minimums skew a small sample."""
CATEGORY_SPREAD = 0.1
"""Category means spread over +-this log (tight: none), largest category slowest: an
unweighted mean over an uneven sample would be pulled towards the small categories."""


def simulate_sampled_coverage(
    shape: str,
    sizes: Sequence[int],
    sample: int,
    sims: int,
    *,
    seed: int = 0,
    mu: float = 0.0,
    cell_sd: float = 0.03,
    spread: float = CATEGORY_SPREAD,
) -> SampledCoverage:
    """Over ``sims`` seeded draws: a fresh set (categories of ``sizes``, task effects of
    ``shape`` around spread category means, overall mean ``mu``), a fresh stratified sample
    of ``sample`` tasks as the planner draws it, one round of it (cell noise per task, one
    instance offset and one round effect), and whether the interval covers the set's own
    mean task log effect (the estimand: the set the team imported). ``spread``: the
    category means' range, +-this log (none for 'tight')."""
    rng = np.random.default_rng(seed)
    cats = [f"c{k}" for k in range(len(sizes))]
    labels = [c for c, n in zip(cats, sizes, strict=True) for _ in range(n)]
    spread = 0.0 if shape == "tight" else spread
    offsets = np.repeat(np.linspace(-spread, spread, len(sizes)), sizes)
    offsets -= offsets.mean()  # the set's mean is mu
    ids = [(f"t{i}", c) for i, c in enumerate(labels)]
    category_of = dict(ids)
    population = dict(zip(cats, sizes, strict=True))
    weighted = plain = called = 0
    band = math.log1p(0.03)
    for _ in range(sims):
        effects = effects_of(rng, shape, mu, len(labels)) + offsets
        truth = float(effects.mean())
        drawn = stratified_sample(ids, sample, seed=int(rng.integers(0, 2**31)))
        shift = rng.normal(0.0, INSTANCE_SD) + rng.normal(0.0, ROUND_SD)
        pairs = [
            Pair(t, 1, 1.0, math.exp(effects[int(t[1:])] + shift + rng.normal(0.0, cell_sd)))
            for t in drawn.ids
        ]
        ci = sample_interval(pairs, category_of, population)
        bare = task_interval(pairs)
        assert ci is not None and bare is not None
        lo, hi, est = math.log(ci.low), math.log(ci.high), math.log(ci.estimate)
        weighted += lo <= truth <= hi
        plain += math.log(bare.low) <= truth <= math.log(bare.high)
        called += (lo > 0 and est > band) or (hi < 0 and est < -band)
    return SampledCoverage(weighted / sims, plain / sims, called / sims)
