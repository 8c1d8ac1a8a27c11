"""A one-round sweep's answer read from its tasks: the summary table, the pooled pick and the
mix's pick take the interval over tasks where the rounds are too few for one (issue 75).

Where the racer planned CIs over tasks (analysis/racing_tasks.plan) and the sweep stopped
short of `MIN_ROUNDS` rounds, every racing arm has an interval over its tasks
(`Racer.task_cis`: each task paired back to back, t over the tasks, floored by the instance
and the round's drift; for a stratified sample each category weighted by its share of the
set, analysis/task_sample.py), while the tables and the recommendation, which read the CIs
over rounds, had none: a 36-task sweep printed "1.04x (no CI: 1 round(s))" beside an
interval over 36 tasks. Here they read the tasks' interval, and say so ("95% CI over 36
tasks"):

* `with_task_cis`: each such arm's pooled speed-up (the summary table, the console, the pooled
  pick) is its interval over tasks, and the speed-up bound's efficiency and note are judged
  again on it (the note read "CI low 1.30x" from a round's estimate with no interval).
* `mix_over_tasks`: the mix's speed-up of each such arm. For the task set's own proportions it
  is the same interval (every task alike, or the sample weighted by the set's shares: the
  set's own proportions either way); for a stated `--mix`, the stratified interval with the
  mix's weights (`task_sample.weighted_interval`: two tasks in every weighted category, 12 in
  all). Over tasks the estimand is the category-weighted *geometric* mean, task_sample's,
  not the rounds' harmonic mix (time adds): the two agree within a fraction of a percent where
  an arm's categories read alike, and the geometric one reads higher where they do not (1.33x
  against 1.30x for 1.5x on 70% and 1.0x on the rest). The family-wise guard is the mix's
  over rounds: the pick's lower bound at 1 - 0.05 / arms (Bonferroni) must clear 1.

Rates, simulated before the rule decided anything (`benchmarks/mix_tasks.py`,
watchkeeper/simulation/mix_tasks.py): docs/statistics-checks.md, "The pick over tasks".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from watchkeeper.analysis.bench_bound import judge_bound
from watchkeeper.analysis.bench_types import ArmStats, BenchResult
from watchkeeper.analysis.racing_tasks import TaskInterval
from watchkeeper.analysis.stats import RatioCI, classify
from watchkeeper.analysis.task_sample import weighted_interval
from watchkeeper.analysis.workload_mix import (
    FAMILY_ALPHA,
    TASK_SET,
    Mix,
    MixSpeedup,
)


@dataclass(frozen=True, slots=True)
class TaskCIs:
    """A one-round sweep's intervals over tasks, as the racer left them."""

    cis: Mapping[str, TaskInterval]
    """Each racing arm short of a CI over rounds: its interval over its tasks."""
    of: int = 0
    """The set's size where the tasks were a stratified sample of it; 0: every task."""

    def mixes(
        self,
        speedups: Sequence[MixSpeedup],
        mix: Mix,
        per_task: Callable[[str], Mapping[str, Sequence[float]]],
        family: int,
    ) -> list[MixSpeedup]:
        """Each arm's mix speed-up, read over its tasks where the rounds gave no CI
        (`mix_over_tasks`); ``per_task``: an arm's task log ratios per category."""
        return [
            mix_over_tasks(
                s,
                mix_interval(s.arm, mix, self.cis, per_task(s.arm), s.n_rounds),
                family=family,
                of=self.of,
            )
            for s in speedups
        ]


def over_text(ci: TaskInterval, of: int = 0) -> str:
    """'36 tasks', or '24 of 300 tasks' for a stratified sample of a larger set."""
    return f"{ci.tasks} of {of} tasks" if of else f"{ci.tasks} tasks"


def task_ratio(ci: RatioCI, task: TaskInterval, of: int = 0) -> RatioCI:
    """A pooled speed-up without a CI over rounds, read from its interval over tasks."""
    verdict = classify(task.estimate, task.low, task.high, ci.threshold)
    return replace(
        ci,
        estimate=task.estimate,
        low=task.low,
        high=task.high,
        verdict=verdict,
        rounds_needed=None,
        settle=None,
        over=over_text(task, of),
    )


def with_task_cis(
    result: BenchResult, cis: Mapping[str, TaskInterval], *, of: int = 0
) -> BenchResult:
    """``result`` with every arm that has no CI over rounds and an interval over tasks in
    ``cis`` reading that interval as its pooled speed-up; arms with a CI over rounds (a
    multi-round sweep) are left as they are."""
    if not cis:
        return result
    specs = {a.name: a for a in result.arms}
    stats: list[ArmStats] = []
    for s in result.arm_stats:
        ci, task = s.overall.speedup, cis.get(s.arm)
        if ci is None or ci.has_ci or task is None:
            stats.append(s)
            continue
        read = task_ratio(ci, task, of)
        got = replace(s, overall=replace(s.overall, speedup=read))
        if s.bound is not None and s.arm in specs:  # the bound's note reads the same interval
            efficiency, note = judge_bound(specs[s.arm], s.bound, read)
            got = replace(got, efficiency=efficiency, bound_note=note)
        stats.append(got)
    return replace(result, arm_stats=tuple(stats))


def mix_interval(
    arm: str,
    mix: Mix,
    cis: Mapping[str, TaskInterval],
    per_task: Mapping[str, Sequence[float]],
    rounds: int,
) -> TaskInterval | None:
    """The arm's interval over tasks for ``mix``: its own (``cis``) for the task set's
    proportions, else stratified by the mix's weights over its categories' task log ratios
    (``per_task``)."""
    if mix.source == TASK_SET:
        return cis.get(arm)
    return weighted_interval(per_task, dict(mix.weights), max(rounds, 1))


def mix_over_tasks(
    speedup: MixSpeedup, task: TaskInterval | None, *, family: int, of: int = 0
) -> MixSpeedup:
    """The mix's speed-up from its interval over tasks where the rounds gave none; as it was
    where they did (or no interval over tasks exists). ``family``: the arms the mix chooses
    among (the guard's Bonferroni split)."""
    if task is None or speedup.has_ci or speedup.estimate is None:
        return speedup
    guard = task.bounds(1.0 - FAMILY_ALPHA / family)[0] if family > 1 else task.low
    return replace(
        speedup,
        estimate=task.estimate,
        low=task.low,
        high=task.high,
        verdict=classify(task.estimate, task.low, task.high, speedup.threshold),
        rounds_needed=None,
        family_low=guard,
        over=over_text(task, of),
    )
