"""What one `watchkeeper bench` campaign will run: the plan, built before any server starts.

Kept apart from the orchestration (`campaign.bench`) because every command that runs a paired
campaign (nightly, review-pr, sweep, upgrade-check, release runs) builds or adjusts a plan.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from watchkeeper.config import Config
from watchkeeper.errors import ConfigError
from watchkeeper.load.arrivals import ArrivalSpec
from watchkeeper.load.records import RunResult, Task
from watchkeeper.load.sampling import SamplingSettings, command_sampling
from watchkeeper.load.tasks import load_taskset, select

if TYPE_CHECKING:
    from watchkeeper.campaign.calibration import Calibration

Progress = Callable[[str], None]
DEFAULT_PROFILES = ("qwen-baseline", "qwen-draft4", "qwen-ngram")

MoreRounds = Callable[[Sequence[RunResult], float], int]
"""(measured runs so far, seconds they took) -> how many more rounds to run."""
Race = Callable[[Sequence[RunResult]], tuple[Sequence[str], bool]]
"""After each measured round: (measured runs so far) -> (arms to keep measuring, go on?)."""
Ceiling = Callable[["Calibration"], Sequence[str]]
"""After the cost calibration, before round 1: (the measured costs) -> the arms worth
measuring (the sweep's ceiling rule, analysis/racing.ceiling_drops)."""


@dataclass(frozen=True, slots=True)
class BenchPlan:
    profiles: tuple[str, ...]
    tasks: tuple[Task, ...]
    rounds: int
    warmup_rounds: int
    warmup_tasks: int
    concurrency: int
    more_rounds: MoreRounds | None = None
    """Asked once after `rounds`: more rounds on the same servers. A review sizes its rounds
    for a CI target from its pilot this way; the pilot's rounds count, nothing is re-run."""
    race: Race | None = None
    """The sweep's racing rule (commands/sweep.py); `rounds` is then the most it may run."""
    ceiling: Ceiling | None = None
    """The sweep's rule before round 1, on the calibrated costs (never with `speed_only`,
    which calibrates nothing)."""
    before_rounds: Callable[[Sequence[RunResult]], Sequence[str] | None] | None = None
    """Called once after the warm-up, before round 1, with every run so far (the warm-up's
    priced a round): the sweep's racer plans tasks and rounds together there, and returns the
    arms round 1 measures (it may drop some to fit the budget; None: all still active)."""
    restart_every: int = 0
    """Fresh server processes for every arm before every this many measured rounds (0: one
    process per arm for the whole campaign). A process keeps whatever made it a little fast
    or slow (placement, memory layout) for its whole life, an offset no resampling of its own
    rounds can see; restarting makes the process a replicate the rounds carry into the CI."""
    renew_each_round: frozenset[str] = frozenset()
    """Arms given a fresh process before every measured round after the first even where
    `restart_every` keeps the others: spec types that learn across requests
    (server/flags.LEARNS_ACROSS_REQUESTS) would otherwise draft round 2 from round 1's answers."""
    reuse_prompts: bool = False
    """Measured requests may reuse the server's prompt cache (`cache_prompt`; with
    `restart_every = 0` llama-server's host-memory cache restores a task's prompt in later
    rounds). Decode speed is unchanged; a round's prefill, as long as its decode on two CPU
    cores for the Qwen pair, is skipped. Identity probes always prefill afresh."""
    speed_only: bool = False
    """Throughput alone: no cost calibration, no identity probes, no replay. A bisect step
    or an upgrade check's paired measurement asks only for the ratio (the upgrade check runs
    its identity check as a bench of its own); the probes and calibration took as long as
    the measured rounds of a SmolLM2 batch."""
    arrival: ArrivalSpec | None = None
    """Open-loop load (load/arrivals.py): every arm gets each round's whole schedule in turn,
    the same draw for both; None: the closed loop at `concurrency`."""
    slots: int | None = None
    """The servers' parallel slots (`--parallel`), set on every arm watchkeeper starts whose
    profile keeps the default of 1 (campaign/load_shape.py); None: the profiles' own."""
    identity_tasks: tuple[Task, ...] | None = None
    """The tasks the identity pass probes (temperature-0 probes, replay, distribution check);
    None: every measured task. The sweep probes a subset: in the exact mode every probe
    prompt is prefilled one token at a time, 3.5x a round's cost on two CPU cores, so probing
    every task of nine arms took longer than the whole budget (campaign/racer.py)."""

    served_identity: bool = False
    """Beside the exact identity pass, probe the round's own servers too (identity as served:
    `checks.served_identity`). The sweep asks for it: its verdict is printed to users who
    run the servers as served."""
    served_gate: Callable[[], str] | None = None
    """Asked after the rounds, before the as-served pass: why to skip it (the sweep's racer,
    where its priced replays do not fit the identity share of the budget), empty to run it."""

    sample: Callable[[], Collection[str] | None] | None = None
    """Asked when the measured rounds and the identity pass start: the ids of the tasks
    they measure (the sweep's racer draws a stratified sample where one round of every task
    does not fit its budget: analysis/task_sample.py); None: every task."""

    sampling: SamplingSettings | None = None
    """The sampler every request sends (its seed also seeds the arrivals and the bootstrap),
    resolved once by the command from its request (`load/sampling.command_sampling`); None:
    the config's [bench] keys."""

    def sampler(self, config: Config) -> SamplingSettings:
        """The plan's sampler: the command's, else the config's [bench] keys."""
        return self.sampling if self.sampling is not None else command_sampling(config)

    @property
    def round_tasks(self) -> tuple[Task, ...]:
        """What the measured rounds run: the sample, where one was drawn, in the set's order
        (the warm-up and the cost calibration ran before it, on the whole set's first)."""
        ids = self.sample() if self.sample is not None else None
        return self.tasks if ids is None else tuple(t for t in self.tasks if t.id in ids)

    @property
    def probe_tasks(self) -> tuple[Task, ...]:
        """What the identity pass runs on: from a sample, as many of each category as the
        pass would have probed of the set, the sample's first (the probes judge the tasks
        the rounds measured)."""
        chosen = self.identity_tasks if self.identity_tasks is not None else self.tasks
        if self.sample is None or self.sample() is None:
            return chosen
        left = Counter(t.category for t in chosen)
        out = []
        for t in self.round_tasks:
            if left[t.category] > 0:
                left[t.category] -= 1
                out.append(t)
        return tuple(out)

    @property
    def runs_served(self) -> bool:
        """The as-served pass runs: asked for, and not skipped by `served_gate`."""
        return self.served_identity and not (self.served_gate and self.served_gate())


def plan_bench(
    config: Config,
    *,
    profiles: Sequence[str] | None,
    rounds: int | None,
    taskset: Path | None,
    limit: int | None,
    per_category: int | None,
    concurrency: int | None,
    categories: Sequence[str] | None = None,
) -> BenchPlan:
    """``categories``: only the task set's tasks of these (a workload's own answer: the sweep's
    `--category`); an unknown one is refused naming it."""
    names = tuple(profiles or DEFAULT_PROFILES)
    if len(names) < 2:
        raise ConfigError("bench needs at least two profiles: a baseline and a candidate")
    if len(set(names)) != len(names):
        raise ConfigError(f"bench profiles must be distinct: {', '.join(names)}")
    tasks = select(
        load_taskset(taskset or config.bench.resolved_taskset()),
        limit=limit,
        categories=categories,
        per_category=per_category,
    )
    return BenchPlan(
        profiles=names,
        tasks=tuple(tasks),
        rounds=rounds or config.bench.rounds,
        warmup_rounds=config.bench.warmup_rounds,
        warmup_tasks=min(2, len(tasks)),
        concurrency=concurrency or config.bench.concurrency,
        restart_every=config.bench.restart_every,
    )


def plan_params(plan: BenchPlan, sampling: SamplingSettings) -> dict[str, Any]:
    """The plan as the campaign row records it."""
    return {
        "profiles": list(plan.profiles),
        "rounds": plan.rounds,
        "tasks": len(plan.tasks),
        "concurrency": plan.concurrency,
        "warmup_rounds": plan.warmup_rounds,
        "restart_every": plan.restart_every,
        "reuse_prompts": plan.reuse_prompts,
        "sampling": sampling.to_json(),
        **({"arrival": plan.arrival.to_json()} if plan.arrival is not None else {}),
        **({"slots": plan.slots} if plan.slots is not None else {}),
        **(
            {"identity_tasks": [t.id for t in plan.identity_tasks]}
            if plan.identity_tasks is not None
            else {}
        ),
    }
