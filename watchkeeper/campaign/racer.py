"""The sweep's racer: a policy that receives each round's runs and answers which arms go on.

`execute_bench` calls it after every measured round (`BenchPlan.after_round`); it feeds the
runs to the racing rule (`analysis/racing.py`: pure), reports the drops, and says whether
another round fits the budget, with the identity probes' cost reserved. Before round 1 it drops
the draft settings whose speed-up at perfect acceptance cannot tie the baseline, and, once the
warm-up has priced a round, plans tasks and rounds together (analysis/racing_tasks.plan): CIs
over rounds where enough rounds fit the budget, else over the tasks of one round. Kept out of
`commands/sweep.py` so the command only composes: the racer is engine, the sweep its one user.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence

from watchkeeper.analysis import aa_control
from watchkeeper.analysis.racing import (
    budget_for_ci,
    budget_text,
    keep_going,
    point_estimate,
    race_round,
    start,
)
from watchkeeper.analysis.racing_gates import ceiling_drops, idle_drops
from watchkeeper.analysis.racing_tasks import (
    Plan,
    TaskInterval,
    plan,
    task_ci_text,
)
from watchkeeper.analysis.racing_types import (
    RaceArm,
    RaceSettings,
    Table,
    arm_cost,
)
from watchkeeper.analysis.task_sample import TaskSample, arm_sample_cis, stratified_sample
from watchkeeper.campaign.calibration import Calibration, arm_ceiling
from watchkeeper.campaign.race_runs import (
    cells_of,
    drafted_in_round,
    next_round_seconds,
    round_seconds,
)
from watchkeeper.campaign.round_price import (
    RoundPrice,
    measured_pass_s,
    planned_pass_s,
    round_price,
)
from watchkeeper.campaign.served_cost import ServedCost, prefill_of, served_cost
from watchkeeper.config import ProfileConfig
from watchkeeper.load.records import RunResult, Task

Progress = Callable[[str], None]
Clock = Callable[[], float]
PROBE_SHARE = 1.2
"""The identity probes after the last round cost about one uncached round (round 1) of the
arms they probe (same tasks, logprobs on, every prompt prefilled) plus the replays: reserved
from the budget before every further round."""
EXACT_PROBE_SHARE = 2.6
"""The same in the exact identity mode (`bench.identity_mode = exact`, the default): the probe
servers run --ubatch-size 1, so every prompt is prefilled a token at a time: about 2.5 times
round 1 on the default Qwen sweep (the figures: docs/measurements.md#figures-behind-the-code)."""


IDENTITY_SHARE = 0.25
"""The identity pass may take at most this share of the sweep's budget: the arms with the
best estimates are probed first, the rest are left out with the reason (and so cannot be
recommended). The reserve held back before each round is priced on the same arms, so the
race spends the rest on rounds."""


SERVED_PROBE_SHARE = 1.0
"""The as-served probes themselves (one uncached round of the probed tasks); their replays are
priced apart, from the measured prefill (campaign/served_cost.py)."""


def probe_share(identity_mode: str) -> float:
    """What the identity probes cost, in round-1 costs of the arms they probe; the exact mode's
    as-served pass (`--identity-as-served`) is priced by the racer on top (`served`)."""
    if identity_mode == "exact":
        return EXACT_PROBE_SHARE
    return PROBE_SHARE


def race_arms(profiles: dict[str, ProfileConfig]) -> list[RaceArm]:
    """The first profile is the baseline; costs order ties (baseline, n-gram, drafts by n)."""
    return [
        RaceArm(
            n,
            arm_cost(p.spec_type, p.draft_n_max, p.speculative),
            baseline=(i == 0),
            control=i > 0 and aa_control.is_control(n),
        )
        for i, (n, p) in enumerate(profiles.items())
    ]


class Racer:
    """The bench's per-round hook: feeds the measured runs to the racing rule, reports drops,
    and says whether another round fits the budget."""

    def __init__(
        self,
        arms: Sequence[RaceArm],
        settings: RaceSettings,
        *,
        budget_s: float,
        clock: Clock,
        progress: Progress,
        draft_lengths: Mapping[str, int] | None = None,
        probe_share: float = PROBE_SHARE,
        probe_fraction: float = 1.0,
        served: bool = False,
        kept: Collection[str] = (),
        trim: Sequence[str] = (),
    ) -> None:
        self.arms = list(arms)
        self.trim = tuple(trim)
        """Arms `budget_trim.plan_active` may drop before round 1, in order."""
        self.kept = frozenset(kept)
        """Arms whose one process and prompt cache last the race: their later rounds are
        priced without prefill (`RoundPrice.later_round_s`); the rest as round 1."""
        self.probe_share = probe_share
        self.probe_fraction = probe_fraction
        """The share of the measured tasks the identity pass probes (the sweep's
        `--identity-per-category`): the reserve scales with it."""
        self.probe_count = 0
        """The tasks the identity pass probes (0: unknown, the fraction of round 1's)."""
        self.served = served
        """The as-served pass runs beside the exact one (`--identity-as-served`): its probes
        and its replays are priced and reserved too, or it is skipped (`served_skipped`)."""
        self.served_skipped = ""
        """Why the as-served pass will not run (its priced replays do not fit the identity
        share of the budget); empty: it runs, where asked for."""
        self.draft_lengths = dict(draft_lengths or {})
        """Draft-model arms and their n_max: the ones the ceiling rule can price."""
        self.settings = settings
        self.budget_s = budget_s
        self.clock = clock
        self.started = clock()
        self.progress = progress
        self.state = start(arms)
        self.stop_reason = ""
        self.unprobed: dict[str, str] = {}
        """Surviving arms left out of the identity probes, and why."""
        self.task_cis: dict[str, TaskInterval] = {}
        """On a large task set, every arm that raced short of a CI over rounds (the whole
        race stopped short, or the early or idle rule stopped the arm): its CI over its
        tasks (analysis/racing_tasks.py)."""
        self.budget_hint = ""
        """Where the budget stopped the race before any CI existed: what budget would have
        reached one (the report's "what would change the answer")."""
        self.plan: Plan | None = None
        """The design chosen before round 1 (`plan_rounds`); None: not planned (no warm-up
        reached the hook)."""
        self.sample: TaskSample | None = None
        """The tasks the rounds measure where one round of every task did not fit."""
        self.exact = probe_share == EXACT_PROBE_SHARE  # its probes are priced task by task
        self.probe_tasks: Callable[[], Sequence[Task]] = tuple
        """The identity pass's tasks (the sweep's `BenchPlan.probe_tasks`, the sample's once
        drawn); empty: only their count is known."""
        self.costs: Calibration | None = None  # calibrated before round 1: prices the prefill
        self.price: RoundPrice | None = None
        """Each task's cost from its size (`plan_rounds`); None: from the warm-up's mean."""
        self.later: dict[str, float] = {}  # per arm: later round / round 1, as priced

    @property
    def plan_text(self) -> str:
        """The plan as the report names it: the design, then why."""
        return f"CIs over {self.plan.design}: {self.plan.why}" if self.plan else ""

    def task_ci_text(self) -> str:
        """Every measured arm's CI over tasks in words, an arm the race stopped after a round
        named with its rule (its interval covers the rounds it ran); empty: none."""
        if not self.task_cis:
            return ""
        dropped = {d.arm: f"{d.rule} drop after round {d.round}" for d in self.state.drops}
        of = sum(self.sample.population.values()) if self.sample else 0
        return task_ci_text(self.task_cis, dropped, of=of)

    def task_cis_json(self) -> dict[str, dict[str, float]]:
        """Each racing arm's CI over tasks, for the sweep's JSON; ``of``: the set's size
        where its tasks were a sample of it (0: every task)."""
        of = float(sum(self.sample.population.values())) if self.sample else 0.0
        return {
            a: {
                "estimate": c.estimate,
                "low": c.low,
                "high": c.high,
                "tasks": float(c.tasks),
                "rounds": float(c.rounds),
                "of": of,
            }
            for a, c in self.task_cis.items()
        }

    def plan_rounds(
        self,
        runs: Sequence[RunResult],
        tasks: int,
        strata: Sequence[tuple[str, str]] = (),
        task_list: Sequence[Task] = (),
    ) -> Plan:
        """Before round 1: a round priced from the warm-up, the probes' reserve, and the
        design that gives every racing arm a CI within what is left of the budget. Given the
        set's tasks (``task_list``), each is priced from its size (campaign/round_price.py,
        and the exact probes too), a round after the first without the prefill of the `kept`
        arms; else each racing arm's mean warm-up request times the task count. ``strata``:
        the set's (task id, category); where one round of every task does not fit, the
        rounds measure a stratified sample of them sized to fit (`sample`,
        analysis/task_sample.py). Printed, kept for the report."""
        warm = [r for r in runs if r.is_warmup and r.arm in self.state.active]
        per_arm: dict[str, list[float]] = {}
        for r in warm:
            per_arm.setdefault(r.arm, []).extend(s.latency_s or 0.0 for s in r.samples)
        task_s = sum(sum(v) / len(v) for v in per_arm.values() if v)
        base = self.arms[0].name
        base_s = sum(per_arm.get(base) or [0.0]) / max(1, len(per_arm.get(base) or []))
        active = list(self.state.active)
        self.price = round_price(runs, task_list, active, base, self.costs) if task_list else None
        later_s = task_s  # each task of a round after the first
        if self.price is not None:
            task_s = self.price.round_s(task_list, active) / len(task_list)
            later_s = self.price.later_round_s(task_list, active, self.kept) / len(task_list)
            self.later = self.price.later_shares(task_list, active, self.kept)
            base_s = self.price.round_s(task_list, [base]) / len(task_list)
            self.progress(f"race price: each task from its size; {self.price.how}")

        def reserve(n: int) -> float:  # the probes of a round of n tasks
            count = min(self.probe_count, n) if self.probe_count else self.probe_fraction * n
            cap = IDENTITY_SHARE * self.budget_s
            if self.price is not None and self.exact:
                probes = self.probe_tasks()
                alone, every = planned_pass_s(self.price, task_list, probes, count, active)
                return max(alone, min(cap, every))
            probed = self.probe_share * count
            return max(probed * base_s, min(cap, probed * task_s))

        left = self.budget_s - (self.clock() - self.started)
        self.plan = plan(
            tasks,
            tasks * task_s,
            left,
            reserve_s=reserve(tasks),
            max_rounds=self.settings.max_rounds,
            strata=Counter(c for _, c in strata) if len(strata) == tasks else None,
            reserve_of=reserve,
            seed=self.settings.seed,
            later_s=tasks * later_s,
        )
        if self.plan.sample:
            self.sample = stratified_sample(strata, self.plan.sample, seed=self.settings.seed)
            probed = min(self.probe_count, self.plan.sample) if self.probe_count else 0
            self.probe_fraction = probed / self.plan.sample if probed else self.probe_fraction
        self.progress(f"race plan: {self.plan_text}")
        return self.plan

    def sampled(self) -> frozenset[str] | None:
        """The task ids the rounds measure where the plan drew a sample; None: every task."""
        return frozenset(self.sample.ids) if self.sample is not None else None

    def __call__(self, runs: Sequence[RunResult]) -> tuple[Sequence[str], bool]:
        before = len(self.state.drops)
        self.state = race_round(Table(cells_of(runs)), self.arms, self.state, self.settings)
        base = next(a.name for a in self.arms if a.baseline)
        controls = [a.name for a in self.arms if a.control]
        self.state = idle_drops(self.state, drafted_in_round(runs), baseline=base, keep=controls)
        for d in self.state.drops[before:]:
            self.progress(f"race: dropped {d.arm} after round {d.round} ({d.rule}): {d.reason}")
        nxt = next_round_seconds(runs, self.state.active, self.later)
        probed = self.probe_arms(runs)
        elapsed = self.clock() - self.started
        reserve = self.probe_seconds(runs, probed)
        go, why = keep_going(
            self.state,
            self.settings,
            elapsed_s=elapsed,
            budget_s=self.budget_s,
            next_round_s=nxt,
            reserve_s=reserve,
        )
        if not go:
            self.stop_reason = why
            need = budget_for_ci(self.state, self.settings, elapsed, nxt, reserve)
            # Short of a CI over rounds (the race, or an arm the early or idle rule stopped
            # before it had them): a large set answers from the tasks each arm ran.
            table = Table(cells_of(runs))
            short = [
                a.name
                for a in self.arms
                if need is not None or table.rounds(a.name) < self.settings.min_rounds
            ]
            self.task_cis = arm_sample_cis(table, short, base, self.sample)
            if self.task_cis:
                self.progress(f"race: CIs over tasks: {self.task_ci_text()}")
            if why.startswith("budget") and need is not None:
                self.budget_hint = (
                    f"a larger budget: this sweep stopped after {self.state.rounds} round(s), "
                    f"short of the {self.settings.min_rounds} a CI needs, so no arm has one; "
                    f"`--budget {budget_text(need)}` would reach them at this pace"
                )
                if self.task_cis:
                    self.budget_hint = (
                        f"more rounds for a CI over rounds: this sweep stopped after "
                        f"{self.state.rounds} round(s), short "
                        f"of the {self.settings.min_rounds} it needs; over its tasks each arm "
                        f"has one: {self.task_ci_text()}"
                    )
            self.progress(
                f"race: stop after round {self.state.rounds}: {why}; identity probes for "
                + ", ".join(probed)
                + (
                    f"; as-served pass skipped: {self.served_skipped}"
                    if self.served_skipped
                    else ""
                )
            )
            return probed, False
        return self.state.active, go

    def ceiling(self, costs: Calibration) -> Sequence[str]:
        """Before round 1: drop the draft settings whose speed-up at perfect acceptance, at the
        costs just calibrated, cannot tie the baseline (analysis/racing.ceiling_drops). The
        costs are kept: they price the prefill (`plan_rounds`)."""
        self.costs = costs
        found = [c for arm, n in self.draft_lengths.items() if (c := arm_ceiling(arm, n, costs))]
        for c in found:
            self.progress(f"race: {c.arm} at perfect acceptance: {c.bound:.2f}x ({c.how})")
        before = len(self.state.drops)
        self.state = ceiling_drops(self.state, found, self.settings)
        for d in self.state.drops[before:]:
            self.progress(f"race: dropped {d.arm} before round 1 ({d.rule}): {d.reason}")
        return self.state.active

    def probe_arms(self, runs: Sequence[RunResult]) -> list[str]:
        """The arms the identity pass probes: the baseline, then every surviving arm a
        recommendation could name, best estimate first, as many as the pass's share of the
        budget holds (`IDENTITY_SHARE`). A recommendation names only an arm called faster,
        overall or in a category, and "faster" needs an estimate beyond 1 + min_effect
        (`stats.classify`), so an arm whose every estimate lies below that cannot be named
        whatever its CI: its probes would be spent on nothing (on two CPU cores the draft
        arms' ran 4x their round's cost). The arm with the best overall estimate is probed
        too: the report checks the request's criteria on it when the baseline is kept. The
        recommendation names only an arm whose identity was checked
        (analysis/identity_gate.py)."""
        base = self.arms[0].name
        table = Table(cells_of(runs))
        band = 1.0 + self.settings.min_effect
        best: dict[str, tuple[float, str]] = {}
        overall: dict[str, float] = {}
        controls = {a.name for a in self.arms if a.control}
        for a in self.state.active:
            if a == base or a in controls:  # the A/A control is never named: nothing to probe
                continue
            overall[a] = point_estimate(table, a, base, None)
            found = [(overall[a], "overall")]
            found += [(point_estimate(table, a, base, c), c) for c in table.categories(a)]
            best[a] = max(found)
        closest = max(overall, key=lambda a: (overall[a], a), default=None)
        wanted = sorted(
            (a for a, (est, _) in best.items() if est >= band or a == closest),
            key=lambda a: -best[a][0],
        )
        self.unprobed = {
            a: (
                f"no estimate beyond {band:.2f}x, overall or in any category (best: "
                f"{where} {est:.2f}x): no recommendation can name it"
            )
            for a, (est, where) in best.items()
            if a not in wanted
        }
        keep = [base] if base in self.state.active else []
        cap = IDENTITY_SHARE * self.budget_s
        self.served_skipped = self.served_skip(runs, keep + wanted[:1], cap)
        spent = self.probe_seconds(runs, keep)
        for a in wanted:
            cost = self.probe_seconds(runs, [a])
            if spent + cost > cap:
                self.unprobed[a] = (
                    f"the identity pass is held to {IDENTITY_SHARE:.0%} of the budget "
                    f"({cap / 60:.1f} min) and the arms with better estimates filled it"
                )
                continue
            spent += cost
            keep.append(a)
        return keep

    def probe_seconds(self, runs: Sequence[RunResult], arms: Sequence[str]) -> float:
        """What probing `arms` costs, priced from their round 1 (probes prefill every prompt
        afresh, so the uncached round is the right yardstick), in both identity modes where
        the sweep runs both (the as-served probes on the round's own servers, then the exact
        pass)."""
        exact = self.exact_seconds(runs, arms)
        if not self.served or self.served_skipped:
            return exact
        return exact + self.served_seconds(runs, arms)

    def exact_seconds(self, runs: Sequence[RunResult], arms: Sequence[str]) -> float:
        """The identity probes of `arms` (the exact ones, in that mode): each probed task
        priced from its round-1 request where planned task by task (`price`), else
        `probe_share` of the arms' round 1."""
        probes = self.probe_tasks()
        if self.price is None or not self.exact or not probes:
            return self.probe_share * self.probe_fraction * round_seconds(runs, arms, 1)
        return measured_pass_s(self.price, runs, probes, arms)

    def served_cost(self, runs: Sequence[RunResult]) -> ServedCost | None:
        """The as-served replays, priced from the baseline's round-1 prefill; None where
        round 1 reported no prompt timings."""
        base = self.arms[0].name
        prefill = prefill_of(runs, base)
        if prefill is None or prefill.tps <= 0:
            return None
        tasks = sum(len(r.samples) for r in runs if r.arm == base and r.round == 1)
        probes = self.probe_count or max(1, round(self.probe_fraction * tasks))
        return served_cost(probes, prefill)

    def served_seconds(self, runs: Sequence[RunResult], arms: Sequence[str]) -> float:
        """The as-served pass on `arms`: its probes (SERVED_PROBE_SHARE of their round 1) and
        its replays (the baseline's A/A floor where the baseline is among them, each
        speculative arm's scores and divergences); without prompt timings, PROBE_SHARE."""
        round1 = self.probe_fraction * round_seconds(runs, arms, 1)
        cost = self.served_cost(runs)
        if cost is None:
            return PROBE_SHARE * round1
        base = self.arms[0].name
        spec = sum(1 for a in arms if a != base)
        return SERVED_PROBE_SHARE * round1 + cost.seconds(spec, floor=base in arms)

    def served_skip(self, runs: Sequence[RunResult], first: Sequence[str], cap: float) -> str:
        """Why the as-served pass is skipped: on the baseline and the first arm to probe, with
        their exact probes, it would pass the identity share of the budget. Empty: it fits
        (or was not asked for)."""
        if not self.served:
            return ""
        exact = self.exact_seconds(runs, first)
        served = self.served_seconds(runs, first)
        if exact + served <= cap:
            return ""
        cost = self.served_cost(runs)
        how = cost.text if cost is not None else "priced at PROBE_SHARE of round 1"
        return (
            f"priced at {served / 60:.1f} min on {', '.join(first)} ({how}), which with the "
            f"exact probes ({exact / 60:.1f} min) passes the identity pass's "
            f"{IDENTITY_SHARE:.0%} of the budget ({cap / 60:.1f} min)"
        )
