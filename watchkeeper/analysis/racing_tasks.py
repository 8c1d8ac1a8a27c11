"""An answer from many tasks in few rounds: the interval over tasks, and the plan that buys it.

The sweep's CIs replicate over rounds (analysis/floor.py: at least `MIN_ROUNDS` of them). On a
large task set that is the wrong price: an imported set of 36 questions took 12.5 minutes a
round on this host, so a 25-minute budget stopped after round 1 with no CI on any arm (issue
75), though 36 tasks, each run back to back on both arms, are 36 replicates of the question a
user asks: does it pay on requests like mine?

`task_interval`: from one round (or a few), each task's paired log ratio (its rounds averaged)
is one replicate, and the interval is Student's t over them, df = tasks - 1, with a floor for
what pairing back to back cannot cancel and tasks cannot average away: the server instance's
own offset, shared by every task of a run (sd ~0.8% between process pairs,
benchmarks/instance_effect.py), and the round's drift that moves every task at once
(`ROUND_SD`, divided by the rounds), added to the variance of the mean. Rounds then only separate a
task's own noise from its effect, which this estimand does not need. It applies from
`MIN_TASK_REPLICATES` tasks; below, the rounds' interval stays. `simulate_coverage` checks it
on seeded task sets (normal, skewed, bimodal task effects; `benchmarks/task_interval.py`).

`plan` chooses the design for a budget: with `MIN_TASK_REPLICATES` or more tasks and one round
of every arm inside the budget, one round gives every arm a CI over tasks; the remaining
budget buys further rounds. The racer calls it once before round 1 (a planning hook only:
campaign/racer.py keeps its arm list and rounds).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from watchkeeper.analysis.racing_types import Table
from watchkeeper.analysis.stats import CONFIDENCE, MIN_ROUNDS, Pair
from watchkeeper.analysis.student import t_quantile

MIN_TASK_REPLICATES = 12
"""Tasks from which the interval over tasks is used: at 12 its coverage under bimodal task
effects was within a few points of nominal (`benchmarks/task_interval.py`)."""
INSTANCE_SD = 0.008
"""The server instance's offset between process pairs (log sd): one round of one process pair
carries it whole."""
ROUND_SD = 0.02
"""What moves every task of a round at once beyond the instance (log sd): host drift that the
back-to-back pairing does not cancel (an identical twin's per-round ratio sd was 2.8-5.9% over
12 tasks, the design notes; 2% is `benchmarks/mix_coverage.py`'s figure for this host). Tasks cannot
average it away, so it is added to the mean's variance divided by the rounds, never by the
tasks: without it a one-round interval over 36 near-identical tasks was about half as wide as
the truth (a reviewer's reading of issue 75's first version)."""


@dataclass(frozen=True, slots=True)
class TaskInterval:
    estimate: float
    low: float
    high: float
    tasks: int
    rounds: int


def task_logs(pairs: Sequence[Pair]) -> dict[str, float]:
    """Each task's paired log ratio (candidate / baseline), its rounds averaged."""
    found: dict[str, list[float]] = defaultdict(list)
    for p in pairs:
        if p.baseline > 0 and p.candidate > 0:
            found[p.task_id].append(math.log(p.candidate / p.baseline))
    return {t: float(np.mean(v)) for t, v in found.items()}


def task_interval(
    pairs: Sequence[Pair],
    *,
    confidence: float = CONFIDENCE,
    instance_sd: float = INSTANCE_SD,
    round_sd: float = ROUND_SD,
) -> TaskInterval | None:
    """The t interval over tasks of the candidate's speed-up; None below
    `MIN_TASK_REPLICATES` tasks."""
    logs = np.asarray(list(task_logs(pairs).values()), float)
    n = logs.size
    if n < MIN_TASK_REPLICATES:
        return None
    rounds = max(len({p.round for p in pairs}), 1)
    se = math.sqrt(float(logs.var(ddof=1)) / n + instance_sd**2 + round_sd**2 / rounds)
    half = t_quantile(n - 1, confidence) * se
    mean = float(logs.mean())
    return TaskInterval(
        math.exp(mean),
        math.exp(mean - half),
        math.exp(mean + half),
        n,
        rounds,
    )


def arm_task_cis(table: Table, arms: Sequence[str], baseline: str) -> dict[str, TaskInterval]:
    """Each arm's interval over tasks against the baseline, from every measured pair (only
    where the set has `MIN_TASK_REPLICATES` tasks)."""
    out = {}
    for arm in arms:
        if arm != baseline and (ci := task_interval(table.pairs(arm, baseline, None))):
            out[arm] = ci
    return out


def task_ci_text(cis: dict[str, TaskInterval]) -> str:
    """'ngram 1.04x (0.97-1.11), ... over 36 tasks': the CIs a short sweep still has."""
    items = ", ".join(f"{a} {c.estimate:.2f}x ({c.low:.2f}-{c.high:.2f})" for a, c in cis.items())
    tasks = max(c.tasks for c in cis.values())
    return f"{items}, 95% CI over {tasks} tasks each paired back to back (analysis/racing_tasks)"


@dataclass(frozen=True, slots=True)
class Plan:
    design: str
    """'tasks' (one round gives every arm a CI over tasks) or 'rounds' (`MIN_ROUNDS` rounds)."""
    rounds: int
    """Rounds the budget buys at this pace (at least 1 where one fits)."""
    ci_after: int | None
    """The round after which every arm has a CI; None: not within the budget."""


def plan(tasks: int, round_s: float, budget_s: float, *, reserve_s: float = 0.0) -> Plan:
    """Tasks and rounds planned together for a budget: ``round_s`` is one round of every arm
    over all ``tasks`` (the calibration's estimate)."""
    fits = int(max(budget_s - reserve_s, 0.0) // round_s) if round_s > 0 else 0
    if tasks >= MIN_TASK_REPLICATES:
        return Plan("tasks", fits, 1 if fits >= 1 else None)
    return Plan("rounds", fits, MIN_ROUNDS if fits >= MIN_ROUNDS else None)


def _effects(rng: np.random.Generator, shape: str, mu: float, n: int) -> np.ndarray:
    if shape == "bimodal":  # 30% of tasks at 2x, the rest at 1x, centred at mu
        raw = np.where(rng.random(n) < 0.3, math.log(2.0), 0.0)
        return mu + raw - 0.3 * math.log(2.0)
    if shape == "skewed":
        return mu + 0.2 * (rng.exponential(1.0, n) - 1.0)
    if shape == "tight":  # near-identical tasks: the round's drift dominates the interval
        return rng.normal(mu, 0.02, n)
    return rng.normal(mu, 0.2, n)


def simulate_coverage(
    shape: str,
    tasks: int,
    sims: int,
    *,
    seed: int = 0,
    mu: float = 0.0,
    cell_sd: float = 0.03,
    instance_sd: float = INSTANCE_SD,
    round_sd: float = ROUND_SD,
    floor: bool = True,
) -> tuple[float, float]:
    """(coverage of the true mean task log effect, share called beyond the 3% threshold) of
    `task_interval` over ``sims`` seeded one-round task sets: fresh task effects of ``shape``
    each time (the population is the estimand), a back-to-back cell noise per task and one
    instance offset and one round effect per run (`floor=False`: the interval without either
    floor, drawn on the same effects)."""
    rng = np.random.default_rng(seed)
    covered = called = 0
    band = math.log1p(0.03)
    for _ in range(sims):
        effects = _effects(rng, shape, mu, tasks)
        offset = rng.normal(0.0, instance_sd) + rng.normal(0.0, round_sd)
        logs = effects + offset + rng.normal(0.0, cell_sd, tasks)
        pairs = [Pair(f"t{i}", 1, 1.0, math.exp(v)) for i, v in enumerate(logs)]
        ci = task_interval(
            pairs,
            instance_sd=instance_sd if floor else 0.0,
            round_sd=round_sd if floor else 0.0,
        )
        assert ci is not None
        lo, hi = math.log(ci.low), math.log(ci.high)
        covered += lo <= mu <= hi
        called += (lo > 0 and math.log(ci.estimate) > band) or (
            hi < 0 and math.log(ci.estimate) < -band
        )
    return covered / sims, called / sims
