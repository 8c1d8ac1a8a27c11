"""One speculative setting for a stated workload mix ("code_edit=0.7,prose=0.3"), with a CI.

A server takes one setting, so a team that serves mostly code edits wants the setting that is
fastest for *its* mix, not for the task set's. The weights are shares of the workload's
decoded tokens. Time adds, speeds do not: a share w_c decoded s_c times faster takes w_c / s_c
of the baseline's time, so the whole workload's speed-up is the weighted harmonic mean
S = 1 / sum_c(w_c / s_c). An arithmetic mean of speed-ups would credit a 2x category with
time it never saved.

Within a category, s_c is the *geometric* mean of its tasks' speed-ups: each task counts once,
whatever its length (the per-category statistics' own estimand). That is not the category's
time-weighted speed-up (a harmonic mean weighted by tokens), which a unit serving those very
tasks would see: for an arm uneven across tasks (n-gram drafting, 2x on some edits and 1x on
the rest) the geometric mean reads 4-6% above it (issue 75). The simulations' truth
(`benchmarks/mix_coverage.py`, `benchmarks/mix_shapes.py`) is computed the same way: exp of
the mean task log effect per category, harmonic across categories.

Replicates are rounds *and* tasks, as in each category's own CI (analysis/floor.py). One
round's disturbance moves every task of that round at once (one round read 0.871 across all
tasks on this host), so requests within a round are not independent: each measured round r
gives each category's per-round geometric mean of the arm's paired ratios
(`RatioCI.round_ratios`, the same pairs and fit the per-category statistics use), hence one
S_r; the estimate is the geometric mean of the S_r, and the round term the variance of that
mean. Only rounds in which every weighted category was measured count, and fewer than
MIN_ROUNDS of them give no CI.

The task term is what a unit serves: not these tasks but others of the same kinds. A rounds-only
interval treats the task set's prompts as the workload and called an arm faster for the mix while
its categories' own CIs could not tell (docs/measurements.md#figures-behind-the-code). By the delta
method, log S moves with each category's log speed-up by g_c = w_c S / s_c, so the task term is
sum_c g_c^2 s_task,c^2 / C_c (s_task,c^2: the variance of the category's C_c fitted task log ratios,
`RatioCI.task_logs`), with Welch-Satterthwaite degrees of freedom; the two terms add as in
analysis/floor.py and the CI is a t interval on log S. A weighted category with fewer than two tasks
has no task spread to measure, and the mix then has no CI. `benchmarks/mix_coverage.py` measures the
coverage of both intervals on simulated sweeps with this host's task and round spreads.

Pure functions: numbers in, dataclasses out. Errors are ValueErrors with one line; the
command line turns them into its own refusals.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from watchkeeper.analysis.floor import Floor, settle, welch_df
from watchkeeper.analysis.stats import (
    MIN_ROUNDS,
    classify,
    log_t_interval,
    rounds_to_settle,
)
from watchkeeper.format import ci

TASK_SET = "the task set's own proportions (measured tasks per category)"
"""`Mix.source` of the default mix."""
GIVEN = "--mix"
MIN_MIX_TASKS = 12
"""Tasks a category from which the mix's interval held 90% or more under bimodal task
effects (`few_tasks_caveat`)."""
MORE_TASKS = "more tasks (the interval over tasks narrows with them)"
"""What settles an inconclusive interval over tasks (analysis/task_pick.py)."""
FAMILY_ALPHA = 0.05
"""The recommendation's family-wise error over the arms it chooses among (Bonferroni)."""


@dataclass(frozen=True, slots=True)
class Mix:
    """Category weights summing to 1, sorted by category."""

    weights: tuple[tuple[str, float], ...]
    source: str = GIVEN
    """Where the weights came from: the command line, or the task set's own proportions."""

    @property
    def categories(self) -> tuple[str, ...]:
        return tuple(c for c, _ in self.weights)

    @property
    def text(self) -> str:
        return ", ".join(f"{c} {w:.0%}" for c, w in self.weights)

    @property
    def spec(self) -> str:
        """The mix as `--mix` takes it."""
        return ",".join(f"{c}={w:.4g}" for c, w in self.weights)


def _normalised(weights: Mapping[str, float], source: str) -> Mix:
    total = math.fsum(weights.values())
    return Mix(tuple((c, weights[c] / total) for c in sorted(weights)), source)


MAX_WEIGHT = 1e12
"""Weights are relative shares (70/30, 0.7/0.3): any mix a person means fits far below this."""


def parse_mix(text: str) -> Mix:
    """`category=weight` pairs separated by commas, weights finite and above 0, each category
    once; normalised to sum 1 (70/30 and 0.7/0.3 are the same mix)."""
    weights: dict[str, float] = {}
    parts = [p.strip() for p in text.split(",")]
    if not any(parts):
        raise ValueError(f"a mix needs category=weight pairs, got {text!r}")
    for part in parts:
        name, eq, value = part.partition("=")
        name = name.strip()
        if not eq or not name or not value.strip():
            raise ValueError(f"{part!r} is not category=weight (e.g. code_edit=0.7,prose=0.3)")
        try:
            weight = float(value)
        except ValueError:
            raise ValueError(f"{name}: weight {value.strip()!r} is not a number") from None
        if not math.isfinite(weight) or weight <= 0:
            raise ValueError(f"{name}: weight must be a finite number above 0, got {value!r}")
        if weight > MAX_WEIGHT:  # two of 1e308 overflow their sum: shares, not magnitudes
            raise ValueError(f"{name}: weight {value.strip()} is above {MAX_WEIGHT:g}")
        if name in weights:
            raise ValueError(f"{name} is given twice; give each category once")
        weights[name] = weight
    return _normalised(weights, GIVEN)


def task_set_mix(tasks: Mapping[str, int]) -> Mix:
    """The default mix: each category weighted by its measured tasks (categories with none
    are left out)."""
    present = {c: float(n) for c, n in tasks.items() if n > 0}
    if not present:
        return Mix((), TASK_SET)
    return _normalised(present, TASK_SET)


def check_mix(mix: Mix, known: Iterable[str]) -> None:
    """Refuse a mix naming a category the task set does not have, listing the ones it has."""
    have = sorted(set(known))
    unknown = [c for c in mix.categories if c not in have]
    if unknown:
        raise ValueError(
            f"--mix names {', '.join(unknown)}, not a category of the measured tasks "
            f"({', '.join(have) or 'none'})"
        )


@dataclass(frozen=True, slots=True)
class MixSpeedup:
    """One arm's whole-workload speed-up for a mix."""

    arm: str
    estimate: float | None
    """Geometric mean over the complete rounds of S_r; None: no round measured every
    weighted category."""
    low: float | None
    high: float | None
    """None without a CI (fewer than MIN_ROUNDS complete rounds)."""
    n_rounds: int
    """Rounds in which every weighted category was measured."""
    verdict: str
    threshold: float
    rounds_needed: int | None = None
    """For an inconclusive verdict: rounds that would settle it (stats.rounds_to_settle);
    without a CI yet: MIN_ROUNDS."""
    round_values: tuple[float, ...] = ()
    missing: tuple[str, ...] = ()
    """Weighted categories this arm has no per-round value for at all."""
    few_tasks: tuple[str, ...] = ()
    """Weighted categories with fewer than two tasks: no task spread, so no CI."""
    min_tasks: int | None = None
    """The fewest tasks in a weighted category (None: no task term)."""
    family_low: float | None = None
    """The lower bound at 1 - 0.05 / arms (Bonferroni over the arms the mix chooses among),
    on the guard's floor (`task_floor(guard=True)`): what `choose_for_mix` requires above 1,
    so four arms whose mix speed-up is 1.0x are recommended at most 5% of the time (measured
    2.7% of 1000 sweeps with uneven code edits, `benchmarks/mix_shapes.py --only-family`)."""

    over: str = ""
    """What the interval replicates over where the rounds were too few for one and the sweep
    planned its CIs over tasks ('36 tasks': analysis/task_pick.py); empty: rounds and tasks."""

    @property
    def has_ci(self) -> bool:
        return self.low is not None and self.high is not None

    @property
    def text(self) -> str:
        if self.estimate is None:
            gone = ", ".join(self.missing)
            return "not measured in every category of the mix" + (f" ({gone})" if gone else "")
        if not self.has_ci:
            return f"{self.estimate:.2f}x (no CI: {self.n_rounds} round(s))"
        return (
            f"{self.estimate:.2f}x ({ci(self.low, self.high, over=self.over)} weighted by the "
            f"mix, {self.verdict})"
        )

    @property
    def settle(self) -> str:
        """What would settle it, in words; empty when it is settled."""
        if self.estimate is None:
            return ""
        if self.few_tasks:
            return f"two or more tasks in {', '.join(self.few_tasks)}"
        if not self.has_ci:
            return f"at least {self.rounds_needed} rounds measuring every category of the mix"
        if self.over and self.verdict == "inconclusive":
            return MORE_TASKS
        if self.verdict == "inconclusive" and self.rounds_needed is not None:
            return f"about {self.rounds_needed} rounds"
        if self.verdict == "inconclusive":
            return "more tasks per category (more rounds alone would not: the tasks differ)"
        return ""


def task_floor(
    logs: np.ndarray,
    per_round: Mapping[str, Mapping[int, float]],
    rounds: Sequence[int],
    per_task: Mapping[str, Sequence[float]],
    mix: Mix,
    *,
    guard: bool = False,
) -> Floor | None:
    """The mix's round term (the variance of the mean of log S_r) and task term (the delta
    method over the categories' task spreads); None when a weighted category has fewer than
    two tasks.

    ``guard``: the floor the recommendation's family-wise bound stands on. Two small-sample
    faults of the delta method lean the same way when an arm reads fast by chance: the
    gradient g_c = w_c S / s_c shrinks a category that read fast (so the very draw that lifts
    the estimate narrows its interval), and the Welch df rises when the dominant category's
    spread is underestimated. The guard takes each g_c at least w_c (its value where every
    category reads alike, the null) and the task term's df as the smallest category's (Hsu's
    conservative choice). Four arms identical to the baseline with uneven code edits were
    recommended in 7.3% of 1000 sweeps on the plain floor, 2.7% on this one
    (`benchmarks/mix_shapes.py --only-family`)."""
    n = logs.size
    estimate = float(np.exp(logs.mean()))
    terms: list[tuple[float, float]] = []
    for c, w in mix.weights:
        values = np.asarray(per_task.get(c, ()), dtype=float)
        if values.size < 2:
            return None
        s_c = float(np.exp(np.mean([math.log(per_round[c][r]) for r in rounds])))
        g = w * max(estimate / s_c, 1.0) if guard else w * estimate / s_c
        terms.append((g * g * float(values.var(ddof=1)) / values.size, float(values.size - 1)))
    task_term = math.fsum(t for t, _ in terms)
    task_df = (min(d for _, d in terms) if guard else welch_df(terms)) or 0.0
    return Floor(
        float(logs.mean()),
        float(logs.var(ddof=1)) / n,
        float(n - 1),
        task_term,
        task_df,
        n_rounds=n,
        n_tasks=sum(len(per_task[c]) for c in mix.categories),
    )


def mix_speedup(
    arm: str,
    per_round: Mapping[str, Mapping[int, float]],
    mix: Mix,
    threshold: float,
    *,
    per_task: Mapping[str, Sequence[float]] | None = None,
    min_rounds: int = MIN_ROUNDS,
    family: int = 1,
) -> MixSpeedup:
    """``per_round``: category -> round -> that round's speed-up (a geometric mean of the
    category's paired ratios). S_r = 1 / sum_c(w_c / s_{c,r}) for each round that measured
    every weighted category; the estimate is their geometric mean.

    ``per_task``: category -> its tasks' fitted log ratios; the CI then carries the task term
    (what the recommendation uses). None: the rounds' t interval alone, which holds for these
    very tasks only."""
    missing = tuple(c for c in mix.categories if not per_round.get(c))
    rounds = sorted(
        set.intersection(*(set(per_round.get(c, {})) for c in mix.categories))
        if mix.weights
        else set()
    )
    if not rounds:
        return MixSpeedup(arm, None, None, None, 0, "not measured", threshold, missing=missing)
    values = [
        1.0 / math.fsum(w / per_round[c][r] for c, w in mix.weights)
        for r in rounds
        if all(per_round[c][r] > 0 for c in mix.categories)
    ]
    if not values:
        return MixSpeedup(arm, None, None, None, 0, "not measured", threshold, missing=missing)
    logs = np.log(np.asarray(values))
    estimate = float(np.exp(logs.mean()))
    if len(values) < min_rounds:
        return MixSpeedup(
            arm,
            estimate,
            None,
            None,
            len(values),
            "insufficient replicates",
            threshold,
            rounds_needed=min_rounds,
            round_values=tuple(values),
        )
    if per_task is None:
        lo, hi = log_t_interval(logs)
        floor = None
    else:
        floor = task_floor(logs, per_round, rounds, per_task, mix)
        if floor is None:
            few = tuple(c for c in mix.categories if len(per_task.get(c, ())) < 2)
            return MixSpeedup(
                arm, estimate, None, None, len(values), "insufficient replicates", threshold,
                round_values=tuple(values), few_tasks=few,
            )  # fmt: skip
        lo, hi = floor.interval()
    guard = lo
    if family > 1:
        wide = 1.0 - FAMILY_ALPHA / family
        if floor is None:
            guard = log_t_interval(logs, wide)[0]
        else:
            guarded = task_floor(logs, per_round, rounds, per_task or {}, mix, guard=True)
            guard = (guarded or floor).interval(wide)[0]
    low, high = float(np.exp(lo)), float(np.exp(hi))
    verdict = classify(estimate, low, high, threshold)
    needed: int | None = None
    if verdict == "inconclusive" and floor is None:
        needed = rounds_to_settle(estimate, low, high, len(values), threshold)
    elif verdict == "inconclusive" and floor is not None:
        needed = settle(floor, estimate, threshold).rounds
    return MixSpeedup(
        arm,
        estimate,
        low,
        high,
        len(values),
        verdict,
        threshold,
        rounds_needed=needed,
        round_values=tuple(values),
        family_low=float(np.exp(guard)),
        min_tasks=min(len(per_task.get(c, ())) for c in mix.categories) if per_task else None,
    )


@dataclass(frozen=True, slots=True)
class WorkloadChoice:
    """The one setting for the mix: `profile` None keeps the baseline; `best` is the pick,
    or when keeping the baseline the arm with the best estimate (with what would settle it)."""

    mix: Mix
    profile: str | None
    best: MixSpeedup | None
    reason: str
    speedups: tuple[MixSpeedup, ...] = ()

    @property
    def text(self) -> str:
        if self.profile is not None and self.best is not None:
            return f"{self.profile}, {self.best.text}"
        return f"keep the baseline ({self.reason})"


def few_tasks_caveat(tasks: int | None) -> str:
    """What a few tasks a category cannot support, said beside a pick: the t interval over
    tasks assumes their effects are near-normal. Simulated (`benchmarks/mix_shapes.py`), with
    30% of code edits at 2x and the rest 1x, the mix's 95% CI covered 62-76% at 3 tasks a
    category, ~88-90% at 6 and 91-95% at 12; one category's own CI (`recommend`'s picks,
    `benchmarks/category_shapes.py`) 59%, 83% and 90%."""
    if tasks is None or tasks >= MIN_MIX_TASKS:
        return ""
    return (
        f"; with {tasks} task(s) in a category the interval holds only if the tasks' effects "
        f"are near-normal (uneven effects, as n-gram drafting has on code edits: coverage "
        f"about 60% at 3 tasks); {MIN_MIX_TASKS} tasks a category would support it"
    )


def choose_for_mix(
    mix: Mix, speedups: Sequence[MixSpeedup], excluded: Mapping[str, str]
) -> WorkloadChoice:
    """Among arms not excluded, those called faster: the highest lower bound. Otherwise keep
    the baseline, naming the best estimate and what would settle it."""
    eligible = [s for s in speedups if s.arm not in excluded]
    faster = [
        s
        for s in eligible
        if s.verdict == "faster" and s.low is not None and (s.family_low or s.low) > 1.0
    ]
    if faster:
        best = max(faster, key=lambda s: (s.low or 0.0, s.arm))
        return WorkloadChoice(
            mix,
            best.arm,
            best,
            "highest lower 95% CI bound among settings called faster for the mix (CI above "
            f"1.0, estimate beyond {best.threshold:.0%}){few_tasks_caveat(best.min_tasks)}",
            tuple(speedups),
        )
    # Faster with confidence but disqualified: say why, or the reader thinks it was noise.
    barred = "".join(
        f"; {s.arm} {s.text} is excluded by {excluded[s.arm]}"
        for s in speedups
        if s.arm in excluded and s.verdict == "faster"
    )
    barred += "".join(
        f"; {s.arm} reads faster on its own 95% CI but not across the arms compared (its "
        f"family-wise lower bound {s.family_low:.2f})"
        for s in eligible
        if s.verdict == "faster" and s.family_low is not None and s.family_low <= 1.0
    )
    measured = [s for s in eligible if s.estimate is not None]
    if not measured:
        why = "no eligible setting was measured in every category of the mix" + barred
        return WorkloadChoice(mix, None, None, why, tuple(speedups))
    best = max(measured, key=lambda s: (s.estimate or 0.0, s.arm))
    settle = best.settle
    reason = f"no setting beats it with confidence for the mix (best: {best.arm} {best.text}"
    reason += (f"; {settle} would settle it)" if settle else ")") + barred
    return WorkloadChoice(mix, None, best, reason, tuple(speedups))
