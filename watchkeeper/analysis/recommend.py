"""Pick a speculative profile per category, overall and for the workload's mix — conservatively.

A profile is only recommended when its speed-up CI lies entirely above 1.0 and it has no
correctness finding; among those the highest lower CI bound wins (the best *guaranteed* gain,
not the best point estimate). When nothing qualifies the answer is "keep the baseline", said
plainly, with the arm that came closest and the rounds that would settle it: "keep the
baseline" after 2 rounds and after 12 are different answers, and a reader must see which.

The whole-workload setting for a stated mix of categories lives in analysis/workload_mix.py;
here it gets the same exclusions as every other choice. A mix of one category is that
category: its pick, with the category's own CI (tasks and rounds), so `sweep --category
code_edit` and `unit --category code_edit` give one answer.

Which pick is *the* answer is the caller's to say (`answer`): the sweep's unit runs the mix's
(MIX), so its headline, `setting`, wins and losses name that one, and `pooled_note` says in one
line where all categories pooled would have answered otherwise; a plain bench renders no unit
and answers with the pooled pick (POOLED).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from watchkeeper.analysis.benchmark import ALL, BenchResult, CategoryStats
from watchkeeper.analysis.category_tasks import family_low, pick_families
from watchkeeper.analysis.stats import MIN_ROUNDS, MIN_TASKS, RatioCI
from watchkeeper.analysis.task_pick import TaskCIs
from watchkeeper.analysis.workload_mix import (
    MORE_TASKS,
    TASK_SET,
    Mix,
    MixSpeedup,
    WorkloadChoice,
    choose_for_mix,
    few_tasks_caveat,
    mix_speedup,
    task_set_mix,
)
from watchkeeper.format import ci as ci_text


@dataclass(frozen=True, slots=True)
class Choice:
    category: str
    profile: str | None
    """None means: keep the baseline."""
    speedup: float | None
    low: float | None
    high: float | None
    reason: str
    best: str | None = None
    """The pick, or when keeping the baseline the arm that came closest (best estimate)."""
    best_estimate: float | None = None
    best_low: float | None = None
    best_high: float | None = None
    """None without a CI (too few rounds or tasks): low == high would read as certainty."""
    best_rounds: int = 0
    """Rounds the best arm was measured in."""
    rounds_to_settle: int | None = None
    """Keeping the baseline: measured rounds that would settle the best arm's comparison
    (RatioCI.rounds_needed when inconclusive; MIN_ROUNDS when there is no CI yet). None when
    it is settled, or when rounds alone would not (see ``settle``)."""
    settle: str = ""
    """What would settle it, in words; empty when nothing is open."""
    best_verdict: str = ""
    """The best arm's verdict against the baseline ("no change" is settled, "inconclusive"
    is not)."""

    @property
    def best_text(self) -> str:
        """The best arm's estimate with its CI, or why there is none."""
        if self.best is None or self.best_estimate is None:
            return ""
        if self.best_low is None or self.best_high is None:
            return f"{self.best_estimate:.2f}x (no CI: {self.best_rounds} round(s))"
        return (
            f"{self.best_estimate:.2f}x ({ci_text(self.best_low, self.best_high)}, "
            f"{self.best_verdict})"
        )


POOLED = "pooled"
"""`Recommendation.answer`: the pick over all categories pooled (a plain bench)."""
MIX = "mix"
"""`Recommendation.answer`: the workload mix's pick (the sweep: its unit runs it)."""


@dataclass(frozen=True, slots=True)
class Recommendation:
    overall: Choice
    per_category: tuple[Choice, ...]
    wins: tuple[str, ...] = ()
    """Categories where the answer's profile (`setting`) is called faster."""
    loses: tuple[str, ...] = ()
    """Categories where it is called slower."""
    guard: str = ""
    """What the degenerate-output guard said about the answer's profile's outputs."""
    mix: Mix | None = None
    """The workload mix the ``workload`` choice is for (default: the task set's own)."""
    workload: WorkloadChoice | None = None
    """The one setting for the whole workload at that mix (analysis/workload_mix.py)."""
    answer: str = POOLED
    """Which pick is the answer: MIX (the sweep: the unit runs the mix's pick) or POOLED."""

    @property
    def answers_mix(self) -> bool:
        return self.answer == MIX and self.workload is not None and self.mix is not None

    @property
    def setting(self) -> str | None:
        """The profile the answer runs: the mix's pick when the mix is the answer, else the
        pooled one; None keeps the baseline."""
        if self.answers_mix:
            assert self.workload is not None
            return self.workload.profile
        return self.overall.profile

    @property
    def reason(self) -> str:
        """Why the answer is what it is."""
        if self.answers_mix:
            assert self.workload is not None
            return self.workload.reason
        return self.overall.reason

    def choice(self, category: str) -> Choice | None:
        return next((c for c in self.per_category if c.category == category), None)

    @property
    def mix_words(self) -> str:
        """The mix the answer is for, in words (empty when the answer is the pooled one)."""
        if not self.answers_mix:
            return ""
        assert self.mix is not None
        if len(self.mix.weights) == 1:
            return f"{self.mix.categories[0]} tasks alone (that category's own pick)"
        return f"the workload mix {self.mix.text} ({mix_source(self.mix)})"

    @property
    def headline(self) -> str:
        """The answer in one line: the setting the unit runs with its CI (and, answering the
        mix, the mix it was chosen for), or "keep the baseline" with why."""
        if not self.answers_mix:
            return self.pooled_headline
        assert self.workload is not None
        w, best = self.workload, self.workload.best
        if w.profile is None or best is None or best.low is None or best.high is None:
            return f"keep the baseline for {self.mix_words}: {w.reason}"
        return (
            f"{w.profile}: {best.estimate:.2f}x decode speed-up ({ci_text(best.low, best.high)}) "
            f"over the baseline for {self.mix_words}; {self._tail()}"
        )

    @property
    def pooled_headline(self) -> str:
        """The pick over all categories pooled, every task weighted alike."""
        c = self.overall
        if c.profile is None:
            return f"keep the baseline: {c.reason}"
        tail = f"; {self._tail()}" if c.profile == self.setting else ""
        return (
            f"{c.profile}: {c.speedup:.2f}x decode speed-up "
            f"({ci_text(c.low, c.high)}) over the baseline{tail}"
        )

    def _tail(self) -> str:
        wins = ", ".join(self.wins) or "none"
        loses = ", ".join(self.loses) or "none"
        return f"faster on {wins}, slower on {loses}; {self.guard}"

    @property
    def pooled_note(self) -> str:
        """One line where the pooled pick differs from the answer (the mix's); else empty."""
        if not self.answers_mix or self.overall.profile == self.setting:
            return ""
        c = self.overall
        pooled = (
            f"{c.profile} at {c.speedup:.2f}x ({ci_text(c.low, c.high)})"
            if c.profile is not None
            else f"keep the baseline ({c.reason})"
        )
        runs = self.setting or "the baseline"
        return (
            f"All categories pooled (every task weighted alike, not by the mix) the answer would "
            f"be {pooled}; the unit runs the mix's answer, {runs}."
        )


def mix_source(mix: Mix) -> str:
    return "the task set's own proportions" if mix.source == TASK_SET else "as given by --mix"


def _choose(
    category: str, stats: Sequence[CategoryStats], excluded: dict[str, str], family: int = 1
) -> Choice:
    # "faster" needs the CI above 1 *and* the estimate beyond the practical threshold, and
    # across the comparisons picked among, the family-wise bound above 1 too.
    faster = [s for s in stats if s.speedup is not None and s.speedup.verdict == "faster"]
    lows = {s.arm: family_low(s.speedup, family) for s in faster if s.speedup is not None}
    eligible = [s for s in faster if s.arm not in excluded and lows[s.arm] > 1.0]
    if not eligible:
        # The closest setting is one a user could try: an arm excluded by a finding (one that
        # drafted nothing measured the baseline again under another name) is named only
        # where no other arm was measured.
        measured = [s for s in stats if s.speedup is not None and s.arm not in excluded] or [
            s for s in stats if s.speedup is not None
        ]
        if not measured:
            return Choice(category, None, None, None, None, "no speculative profile was measured")
        if faster:
            # Faster with confidence but disqualified: say why, or the reader thinks it was noise.
            why = "; ".join(
                f"{s.arm} {s.speedup.estimate:.2f}x (CI {s.speedup.low:.2f}-{s.speedup.high:.2f}) "
                + (
                    f"is excluded by {excluded[s.arm]}"
                    if s.arm in excluded
                    else f"reads faster on its own 95% CI but not across the {family} "
                    f"comparisons picked among (family-wise lower bound {lows[s.arm]:.2f})"
                )
                for s in faster
                if s.speedup is not None
            )
            top = max(faster, key=lambda s: s.speedup.low if s.speedup else 0.0)
            return _kept(category, f"no eligible profile: {why}", top.arm, top.speedup)
        best = max(measured, key=lambda s: s.speedup.estimate if s.speedup else 0.0)
        assert best.speedup is not None
        # Without enough replicates there is no CI: printing low == high would read as a
        # perfectly certain estimate.
        ci = (
            f"CI {best.speedup.low:.2f}-{best.speedup.high:.2f}"
            if best.speedup.has_ci
            else f"no CI: {best.speedup.n_clusters} task(s) x {best.speedup.n_rounds} round(s)"
        )
        if best.speedup.over:  # an interval over tasks names what it is over
            ci = ci_text(best.speedup.low, best.speedup.high, over=best.speedup.over)
        open_ = _settle(best.speedup)[1]
        return _kept(
            category,
            f"no speculative profile beats it with confidence (best: {best.arm} "
            f"{best.speedup.estimate:.2f}x, {ci}"
            + (f"; {open_} would settle it)" if open_ else ")"),
            best.arm,
            best.speedup,
        )
    best = max(eligible, key=lambda s: s.speedup.low if s.speedup else 0.0)
    assert best.speedup is not None
    return Choice(
        category,
        best.arm,
        best.speedup.estimate,
        best.speedup.low,
        best.speedup.high,
        "highest lower 95% CI bound among profiles called faster (CI above 1.0, estimate "
        f"beyond {best.speedup.threshold:.0%})"
        # over its tasks a category has an interval only where they support it (category_tasks)
        + ("" if best.speedup.over else few_tasks_caveat(best.speedup.n_clusters)),
        best.arm,
        best.speedup.estimate,
        best.speedup.low,
        best.speedup.high,
        best.speedup.n_rounds,
        best_verdict=best.speedup.verdict,
    )


def _settle(ci: RatioCI) -> tuple[int | None, str]:
    """(rounds that would settle it, the same in words) for a comparison that is still open;
    (None, "") for a settled one. No CI yet: at least MIN_ROUNDS rounds, unless the category
    has too few tasks for any number of rounds to give one."""
    if ci.over:  # an interval over tasks (analysis/task_pick.py)
        return None, MORE_TASKS if ci.verdict == "inconclusive" else ""
    if not ci.has_ci:
        if ci.n_clusters < MIN_TASKS:
            return None, f"at least {MIN_TASKS} tasks in the category (rounds alone give no CI)"
        return MIN_ROUNDS, f"at least {MIN_ROUNDS} measured rounds"
    if ci.verdict != "inconclusive":
        return None, ""
    if ci.rounds_needed is not None:
        return ci.rounds_needed, f"about {ci.rounds_needed} measured rounds"
    return None, "more tasks per category (more rounds alone would not: the tasks differ too much)"


def _kept(category: str, reason: str, arm: str, ci: RatioCI | None) -> Choice:
    """Keep the baseline, carrying the arm that came closest and what would settle it."""
    if ci is None:
        return Choice(category, None, None, None, None, reason)
    rounds, words = _settle(ci)
    return Choice(
        category,
        None,
        None,
        None,
        None,
        reason,
        arm,
        ci.estimate,
        ci.low if ci.has_ci else None,
        ci.high if ci.has_ci else None,
        ci.n_rounds,
        rounds,
        words,
        ci.verdict,
    )


def task_counts(result: BenchResult) -> dict[str, int]:
    """Measured tasks per category: the most any candidate paired (its CI's clusters)."""
    counts: dict[str, int] = {}
    for c in result.categories:
        if c.speedup is not None:
            counts[c.category] = max(counts.get(c.category, 0), c.speedup.n_clusters)
    return counts


def per_round(result: BenchResult, arm: str) -> dict[str, dict[int, float]]:
    """category -> round -> the arm's per-round speed-up (the geometric mean of that round's
    paired ratios, as the category's own statistics fit it)."""
    return {
        c.category: dict(zip(c.speedup.rounds, c.speedup.round_ratios, strict=False))
        for c in result.categories
        if c.arm == arm and c.speedup is not None and c.speedup.rounds
    }


def per_task(result: BenchResult, arm: str) -> dict[str, tuple[float, ...]]:
    """category -> the arm's fitted task log ratios (the task term of a mix's CI)."""
    return {
        c.category: c.speedup.task_logs
        for c in result.categories
        if c.arm == arm and c.speedup is not None
    }


def workload_choice(
    result: BenchResult, mix: Mix, excluded: Mapping[str, str], per_category: Sequence[Choice],
    tasks: TaskCIs | None = None,
) -> WorkloadChoice:  # fmt: skip
    """The mix's pick; a mix of one category is that category's own pick (its two-way CI,
    with the winsorized table's bootstrap), so one workload gets one answer."""
    candidates = [a.name for a in result.arms if a.role == "candidate"]
    threshold = result.method.threshold
    speedups = [
        mix_speedup(
            a,
            per_round(result, a),
            mix,
            threshold,
            per_task=per_task(result, a),
            family=len(candidates),
        )
        for a in candidates
    ]
    if tasks is not None:
        speedups = tasks.mixes(speedups, mix, lambda a: per_task(result, a), len(candidates))
    own = next((c for c in per_category if mix.categories == (c.category,)), None)
    if own is not None:
        return WorkloadChoice(
            mix, own.profile, _as_mix(own, threshold), own.reason, tuple(speedups)
        )
    return choose_for_mix(mix, speedups, excluded)


def _as_mix(choice: Choice, threshold: float) -> MixSpeedup | None:
    """A category's pick (or closest arm) read as the speed-up of a mix of that category."""
    if choice.best is None:
        return None
    return MixSpeedup(
        choice.best,
        choice.best_estimate,
        choice.best_low,
        choice.best_high,
        choice.best_rounds,
        choice.best_verdict,
        threshold,
        rounds_needed=choice.rounds_to_settle,
    )


def recommend(
    result: BenchResult,
    *,
    withheld: Mapping[str, str] | None = None,
    mix: Mix | None = None,
    answer: str = POOLED,
    tasks: TaskCIs | None = None,
) -> Recommendation:
    """``withheld``: arms the caller will not recommend and why (the sweep: an arm whose
    identity is unresolved, `analysis.identity_gate`), worded to follow "is excluded by".
    ``mix``: the workload the one setting is for (default: the task set's own proportions,
    measured tasks per category). ``answer``: MIX where the mix's pick is what runs (the
    sweep's unit), POOLED for a plain bench. ``tasks``: a one-round sweep's intervals over
    tasks (`task_pick.TaskCIs`): the mix's pick reads them where the rounds gave no CI (the
    pooled pick reads them from ``result``, `task_pick.with_task_cis`)."""
    excluded: dict[str, str] = {}
    for f in result.findings:
        if f.kind in ("correctness", "spec_inactive", "degenerate_output"):
            excluded.setdefault(f.profile, f"a {f.kind.replace('_', ' ')} finding")
    for arm, why in (withheld or {}).items():
        excluded.setdefault(arm, why)
    candidates = [a.name for a in result.arms if a.role == "candidate"]
    overall = _choose(ALL, [s.overall for s in result.arm_stats if s.arm in candidates], excluded)
    categories = sorted({c.category for c in result.categories})
    families = pick_families(result.categories, candidates)
    per_category = tuple(
        _choose(
            cat,
            [c for c in result.categories if c.category == cat and c.arm in candidates],
            excluded,
            family=families.get(cat, 1),
        )
        for cat in categories
    )
    mix = mix if mix is not None else task_set_mix(task_counts(result))
    workload = workload_choice(result, mix, excluded, per_category, tasks)
    rec = Recommendation(overall, per_category, mix=mix, workload=workload, answer=answer)
    runs = rec.setting
    if runs is None:
        return rec
    verdicts = {
        c.category: c.speedup.verdict
        for c in result.categories
        if c.arm == runs and c.speedup is not None
    }
    guard = (
        f"degenerate-output guard on {runs}'s outputs: no repetitive output "
        "found (it would have excluded the profile)"
    )
    return replace(
        rec,
        wins=tuple(c for c, v in sorted(verdicts.items()) if v == "faster"),
        loses=tuple(c for c, v in sorted(verdicts.items()) if v == "slower"),
        guard=guard,
    )
