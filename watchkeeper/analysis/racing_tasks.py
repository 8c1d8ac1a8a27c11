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

`plan` chooses the design for a budget before round 1 (campaign/racer.py calls it after the
warm-up, which prices round 1 and each round after it, cheaper where kept processes restore
the prompts): rounds where `MIN_ROUNDS` of them fit, else, with
`MIN_TASK_REPLICATES` or more tasks and one round inside the budget, one round gives every
racing arm a CI over its tasks and the remaining budget buys further rounds. Whatever the
plan, a race stopped short of `MIN_ROUNDS` rounds reports every racing arm's CI over tasks
where the set is large enough (the pace can turn out slower than planned).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from watchkeeper.analysis.racing_types import Table
from watchkeeper.analysis.stats import CONFIDENCE, MIN_ROUNDS, Pair
from watchkeeper.format import CI_LABEL
from watchkeeper.student import t_quantile

MIN_TASK_REPLICATES = 12
"""Tasks from which the interval over tasks is used: at 12 its coverage under bimodal task
effects was within a few points of nominal (`benchmarks/task_interval.py`)."""
INSTANCE_SD = 0.008
"""The server instance's offset between process pairs (log sd): one round of one process pair
carries it whole."""
ROUND_SD = 0.025
"""What moves every task of a round at once beyond the instance (log sd): host drift that the
back-to-back pairing does not cancel. Measured (`benchmarks/round_sd.py`, 7 Dec 2026) from the
8 committed A/A nights (24 tasks x 6 rounds, fresh processes every round, cells winsorized):
the round's shift is not seen at all under this host's cell noise (cell sd 16%; point
estimate 0), its 95% upper bound 2.1% (bootstrap over nights) to 2.5% (the exact F interval).
The constant is that upper end: at a true 2.5% an interval floored by the 2% once assumed
covered 89-93% at 300 tasks (`benchmarks/task_interval.py --round-sd`), one floored by 2.5%
94.6-95.4%.
Tasks cannot average it away, so it is added to the mean's variance divided by the rounds,
never by the tasks: without it a one-round interval over 36 near-identical tasks was about
half as wide as the truth (a reviewer's reading of issue 75's first version)."""


MIN_PER_CATEGORY = 2
"""Tasks a sample keeps of every category (all of a smaller one): a category's variance
needs two, and the stratified interval reads each category's own (analysis/task_sample.py)."""


def min_sample(strata: Mapping[str, int]) -> int:
    """The smallest task sample the planner draws from a set with ``strata`` (tasks per
    category): `MIN_TASK_REPLICATES` tasks and `MIN_PER_CATEGORY` of every category (all of
    a smaller one), never more than the set."""
    total = sum(strata.values())
    floor = sum(min(MIN_PER_CATEGORY, n) for n in strata.values())
    return min(total, max(MIN_TASK_REPLICATES, floor))


@dataclass(frozen=True, slots=True)
class TaskInterval:
    estimate: float
    low: float
    high: float
    tasks: int
    rounds: int
    se: float = 0.0
    """The standard error of the log estimate, floors included."""
    df: float = 0.0
    """Its degrees of freedom (tasks - 1; Satterthwaite's for a stratified sample); 0: not
    known, and `bounds` gives the 95% interval whatever the confidence."""

    def bounds(self, confidence: float) -> tuple[float, float]:
        """The interval at another ``confidence`` (the family-wise guard's, 1 - 0.05 / arms)."""
        if not self.df > 0 or not self.se > 0:
            return self.low, self.high
        half = t_quantile(self.df, confidence) * self.se
        return self.estimate * math.exp(-half), self.estimate * math.exp(half)


def task_logs(pairs: Sequence[Pair]) -> dict[str, float]:
    """Each task's paired log ratio (candidate / baseline), its rounds averaged (one round's
    as it is: the same value as numpy's mean of one, without its cost in the simulations)."""
    found: dict[str, list[float]] = defaultdict(list)
    for p in pairs:
        if p.baseline > 0 and p.candidate > 0:
            found[p.task_id].append(math.log(p.candidate / p.baseline))
    return {t: v[0] if len(v) == 1 else float(np.mean(v)) for t, v in found.items()}


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
        se,
        float(n - 1),
    )


def arm_task_cis(table: Table, arms: Sequence[str], baseline: str) -> dict[str, TaskInterval]:
    """Each arm's interval over tasks against the baseline, from every measured pair (only
    where the set has `MIN_TASK_REPLICATES` tasks): an arm never measured (the ceiling rule's)
    has no pairs and gets none."""
    out = {}
    for arm in arms:
        if arm != baseline and (ci := task_interval(table.pairs(arm, baseline, None))):
            out[arm] = ci
    return out


def task_ci_text(
    cis: dict[str, TaskInterval], dropped: Mapping[str, str] | None = None, *, of: int = 0
) -> str:
    """'ngram 1.04x (0.97-1.11), ... over 36 tasks': the CIs a short sweep still has;
    ``dropped``: arms the race stopped after a round, and why ('idle after round 1'), named
    beside their interval (it covers the rounds they ran); ``of``: the set's size where the
    tasks were a stratified sample of it (analysis/task_sample.py)."""
    gone = dropped or {}
    items = ", ".join(
        f"{a} {c.estimate:.2f}x ({c.low:.2f}-{c.high:.2f})" + (f" [{gone[a]}]" if a in gone else "")
        for a, c in cis.items()
    )
    tasks = max(c.tasks for c in cis.values())
    if of:
        return (
            f"{items}, {CI_LABEL} over {tasks} of {of} tasks (a stratified sample, each category "
            "weighted by its share of the set), each paired back to back (analysis/task_sample)"
        )
    paired = "each paired back to back (analysis/racing_tasks)"
    return f"{items}, {CI_LABEL} over {tasks} tasks {paired}"


@dataclass(frozen=True, slots=True)
class Plan:
    design: str
    """'tasks' (every arm's CI comes from its tasks, from round 1 on) or 'rounds' (from
    `MIN_ROUNDS` rounds on, the race's own CIs)."""
    rounds: int
    """Rounds the budget buys at this pace (0: not one; the most rounds where the pace is
    not known yet)."""
    ci_after: int | None
    """The round after which every racing arm has a CI; None: not within the budget."""
    why: str = ""
    """The plan in words, as the sweep prints it before round 1 and its report repeats."""
    sample: int = 0
    """Tasks the rounds measure, a stratified sample of the set (analysis/task_sample.py)
    where one round of every task does not fit the budget; 0: every task."""


def plan(
    tasks: int,
    round_s: float,
    budget_s: float,
    *,
    reserve_s: float = 0.0,
    max_rounds: int = 5,
    strata: Mapping[str, int] | None = None,
    reserve_of: Callable[[int], float] | None = None,
    seed: int = 0,
    later_s: float | None = None,
) -> Plan:
    """Tasks and rounds planned together before round 1: ``round_s`` is one round of every
    racing arm over all ``tasks`` (estimated from the warm-up; 0: not known), ``later_s`` each
    round after it (None: the same; less where kept processes restore the prompts from their
    cache: campaign/round_price.py), ``budget_s`` what is left for the rounds and
    ``reserve_s`` the identity probes after them.

    Rounds where `MIN_ROUNDS` fit: they measure the round's drift that the interval over
    tasks can only assume (`ROUND_SD`). Tasks where they do not and the set has
    `MIN_TASK_REPLICATES` tasks or more: one round gives every arm a CI over its tasks, and
    the rounds that still fit only shrink the round's floor; where not even one fits, the
    rounds measure a stratified sample sized to fit (given ``strata``: `sample_plan`), else
    round 1 still runs (the bench checks the budget only after it), so a large set still gets
    its CIs over tasks and the plan says by how much it passes the budget. A small set where
    `MIN_ROUNDS` do not fit: rounds, and no CI within the budget (the report says what budget
    would buy one). A round not priced yet:
    tasks where the set is large enough (a CI from round 1 whatever the pace), else rounds.

    ``strata`` (the set's tasks per category) lets a set too large for one round be sampled
    (`sample_plan`): ``reserve_of`` prices the identity reserve for a sample of n tasks (its
    probes come from the sample), ``seed`` is the draw's, named in the plan."""
    known = round_s > 0
    room = max(budget_s - reserve_s, 0.0)
    later = min(later_s, round_s) if later_s is not None and later_s > 0 else round_s
    fits = rounds_fit(room, round_s, later, max_rounds) if known else max_rounds
    each = (
        f"~{round_s / 60:.1f} min a round of every arm (from the warm-up)"
        if later >= round_s
        else f"~{round_s / 60:.1f} min round 1 of every arm and ~{later / 60:.1f} min each "
        "round after it (from the warm-up; the kept processes restore the prompts from their "
        "cache)"
    )
    pace = (
        f"{tasks} tasks, {each}, {room / 60:.1f} min for rounds after the identity "
        f"probes' reserve ({reserve_s / 60:.1f} min): {fits} round(s) fit"
        if known
        else f"{tasks} tasks, the round's cost not known before round 1"
    )
    if fits >= MIN_ROUNDS and (known or tasks < MIN_TASK_REPLICATES):
        return Plan(
            "rounds",
            fits,
            MIN_ROUNDS,
            f"{pace}; CIs over rounds from round {MIN_ROUNDS} (they measure the host's drift)",
        )
    if tasks >= MIN_TASK_REPLICATES and fits >= 1:
        return Plan(
            "tasks",
            fits,
            1,
            f"{pace}{f', short of the {MIN_ROUNDS} a CI over rounds needs' if known else ''}; "
            f"every racing arm gets a CI over its {tasks} tasks from round 1 (each task paired "
            "back to back, t over "
            "the tasks, floored by the instance and the round's drift: analysis/racing_tasks)",
        )
    if tasks >= MIN_TASK_REPLICATES and known and strata:
        sampled = sample_plan(
            tasks, round_s, budget_s, strata, reserve_of or (lambda _n: reserve_s), seed, pace
        )
        if sampled is not None:
            return sampled
    if tasks >= MIN_TASK_REPLICATES:  # not one round fits, but round 1 runs whatever the budget
        over = (round_s + reserve_s - budget_s) / 60
        return Plan(
            "tasks",
            0,
            1,
            f"{pace}: not one round fits; round 1 runs whatever the budget (a sweep answers "
            f"nothing without it), about {over:.1f} min past it, and gives every racing arm a "
            f"CI over its {tasks} tasks (each paired back to back: analysis/racing_tasks)",
        )
    short = f"fewer than the {MIN_TASK_REPLICATES} tasks a CI over tasks needs"
    return Plan(
        "rounds",
        fits,
        None,
        f"{pace}, short of the {MIN_ROUNDS} a CI over rounds needs, and {short}: no CI "
        "within this budget",
    )


def rounds_fit(room_s: float, first_s: float, later_s: float, most: int) -> int:
    """Rounds that fit ``room_s``: the first at ``first_s``, each after it at ``later_s``
    (at most ``most``)."""
    if later_s >= first_s:
        return min(int(room_s // first_s), most)
    if room_s < first_s:
        return 0
    return min(1 + int((room_s - first_s) // later_s), most)


def sample_plan(
    tasks: int,
    round_s: float,
    budget_s: float,
    strata: Mapping[str, int],
    reserve_of: Callable[[int], float],
    seed: int,
    pace: str,
) -> Plan | None:
    """Where one round of all ``tasks`` does not fit: the largest stratified sample whose one
    round (``round_s`` per task, pro rata) and identity reserve (``reserve_of``) fit
    ``budget_s``, never below the sample's minimum (`min_sample`: where even that
    does not fit, it runs and the plan says by how much it passes the budget). None where
    the minimum is the whole set (nothing to sample)."""
    least = min_sample(strata)
    if least >= tasks:
        return None
    per_task = round_s / tasks

    def cost(n: int) -> float:
        return n * per_task + reserve_of(n)

    size = max((n for n in range(least, tasks) if cost(n) <= budget_s), default=least)
    head = (
        f"{pace}: not one round of every task fits; {size} of {tasks} tasks (stratified by "
        f"category, seed {seed}): one round ~{size * per_task / 60:.1f} min"
    )
    left = (budget_s - reserve_of(size)) / 60
    if cost(size) <= budget_s:
        head += f" fits the {left:.1f} min left after the identity probes' reserve"
    else:
        head += (
            f", the least a CI over tasks needs, passes the {max(left, 0.0):.1f} min left "
            f"after the identity probes' reserve by about {(cost(size) - budget_s) / 60:.1f} min"
        )
    why = (
        f"{head}; every racing arm gets a CI over the sampled tasks, each category weighted "
        "by its share of the set (a statement about the whole set: analysis/task_sample)"
    )
    return Plan("tasks", int(cost(size) <= budget_s), 1, why, sample=size)


def effects_of(rng: np.random.Generator, shape: str, mu: float, n: int) -> np.ndarray:
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
    rounds: int = 1,
    drawn_round_sd: float | None = None,
) -> tuple[float, float]:
    """(coverage of the true mean task log effect, share called beyond the 3% threshold) of
    `task_interval` over ``sims`` seeded one-round task sets: fresh task effects of ``shape``
    each time (the population is the estimand), a back-to-back cell noise per task and one
    instance offset and one round effect per run (`floor=False`: the interval without either
    floor, drawn on the same effects). ``rounds``: the design the racer runs where more than
    one round fits its budget: one instance per run (the sweep keeps each arm's process),
    a fresh round effect and cell noise per round. ``drawn_round_sd``: the round effect the
    simulation draws where it is not the ``round_sd`` the interval floors by (the coverage if
    the host's round drift is not the one assumed)."""
    drawn = round_sd if drawn_round_sd is None else drawn_round_sd
    rng = np.random.default_rng(seed)
    covered = called = 0
    band = math.log1p(0.03)
    for _ in range(sims):
        effects = effects_of(rng, shape, mu, tasks)
        instance = rng.normal(0.0, instance_sd)
        pairs = []
        for r in range(1, rounds + 1):
            shift = instance + rng.normal(0.0, drawn)
            logs = effects + shift + rng.normal(0.0, cell_sd, tasks)
            pairs += [Pair(f"t{i}", r, 1.0, math.exp(v)) for i, v in enumerate(logs)]
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
