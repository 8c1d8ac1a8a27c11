"""A bench's rounds: warm-up and measured rounds on servers that stay up, the load moving
between the arms task by task, fresh processes (and their rewarm) where `restart_every` asks,
and a race (the sweep's) narrowing the active arms after each measured round.

`campaign.bench._execute` runs these with the servers up; every run is stored the moment it
ends (`store.bench_rows`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from watchkeeper.analysis.benchmark import REWARM_TOKENS
from watchkeeper.campaign.bench_plan import BenchPlan, Progress
from watchkeeper.campaign.campaigns import measure_round
from watchkeeper.campaign.time_split import ROUNDS, SERVER_STARTS, WARMUP, TimeSplit
from watchkeeper.config import Config
from watchkeeper.load.records import RunPurpose, Task
from watchkeeper.load.runner import LoadSettings
from watchkeeper.server.launch import PreparedProfile
from watchkeeper.server.serverset import ServerSet
from watchkeeper.store.bench_rows import BenchRows


def restarts_before(round_index: int, every: int) -> bool:
    """Fresh processes before measured rounds 1 + every, 1 + 2 x every, ..."""
    return every > 0 and round_index > 1 and (round_index - 1) % every == 0


@dataclass(frozen=True, slots=True)
class Bench:
    """What every step of one bench shares: the plan, the servers, where rows go."""

    config: Config
    plan: BenchPlan
    prepared: Sequence[PreparedProfile]
    servers: ServerSet
    rows: BenchRows
    settings: LoadSettings
    progress: Progress
    arm_settings: Mapping[str, LoadSettings]
    """Each arm's throughput requests: the command's sampler under the arm's own keys."""
    active: list[str]
    """The arms still measured: a race (the sweep) drops the ones it has decided."""
    split: TimeSplit = field(default_factory=TimeSplit)
    """Where the wall time goes (the report's time split)."""

    @property
    def baseline(self) -> str:
        return self.prepared[0].name


def measure_rounds(bench: Bench) -> int:
    """Warm-up rounds, the planned measured rounds, then as many more as `more_rounds` asks
    for on the same servers; returns how many measured rounds ran (fewer where a race
    stopped early)."""
    plan = bench.plan
    schedule = [(r, True) for r in range(-plan.warmup_rounds + 1, 1)] if plan.warmup_rounds else []
    schedule += [(r, False) for r in range(1, plan.rounds + 1)]
    rounds_started = time.monotonic()
    stopped = _run_schedule(
        bench, schedule, total=len(schedule), before=0, measured_rounds=plan.rounds
    )
    if stopped is not None:
        return stopped
    if plan.more_rounds is None:
        return plan.rounds
    extra = plan.more_rounds(bench.rows.measured(), time.monotonic() - rounds_started)
    if extra <= 0:
        return plan.rounds
    measured_rounds = plan.rounds + extra
    more = [(r, False) for r in range(plan.rounds + 1, measured_rounds + 1)]
    stopped = _run_schedule(
        bench,
        more,
        total=len(schedule) + extra,
        before=len(schedule),
        measured_rounds=measured_rounds,
    )
    return measured_rounds if stopped is None else stopped


def _run_schedule(
    bench: Bench,
    rounds: list[tuple[int, bool]],
    *,
    total: int,
    before: int,
    measured_rounds: int,
) -> int | None:
    """Each (round, is warm-up) of `rounds`, arms back to back per task; fresh processes (and
    their rewarm) before the measured rounds `restart_every` names. After each measured round
    a race (if any) narrows the active arms; the round it stops at is returned (else None)."""
    plan = bench.plan
    for done, (round_index, warm) in enumerate(rounds, start=before + 1):
        if round_index == 1 and not warm and plan.before_rounds is not None:
            keep = plan.before_rounds(bench.rows.runs)
            if keep is not None:  # the plan dropped arms to fit the budget
                bench.active[:] = [a for a in bench.active if a in keep]
        if not warm and restarts_before(round_index, plan.restart_every):
            with bench.split.phase(SERVER_STARTS):
                bench.servers.restart(bench.active)  # arms a race dropped stay stopped
            _rewarm(bench, round_index, bench.active)
        elif not warm and round_index > 1:
            renew = [a for a in bench.active if a in plan.renew_each_round]
            if renew:
                with bench.split.phase(SERVER_STARTS):
                    bench.servers.renew(renew)
                _rewarm(bench, round_index, renew)
        tasks = plan.tasks[: plan.warmup_tasks] if warm else plan.round_tasks
        label = "warm-up" if warm else f"round {round_index}/{measured_rounds}"
        bench.progress(
            f"[{done}/{total}] {label}: {len(tasks)} tasks x {len(bench.active)} arms, "
            "back to back per task"
        )
        started = bench.split.clock()

        def tick(
            n: int, task: Task, index: int = round_index, of: int = len(tasks), t0: float = started
        ) -> None:
            minutes = (bench.split.clock() - t0) / 60
            bench.progress(f"round {index}: task {n}/{of} ({task.category}), {minutes:.1f} min")

        for run in measure_round(
            bench.servers,
            bench.config,
            tasks,
            arms=bench.active,
            round_index=round_index,
            is_warmup=warm,
            settings=bench.settings,
            arm_settings=bench.arm_settings,
            on_task=None if warm else tick,
        ):
            bench.rows.save(run, run.arm)
        took = bench.split.clock() - started
        bench.split.add(WARMUP if warm else ROUNDS, took)
        if not warm:
            bench.split.rounds.append(took)
        if plan.race is not None and not warm:
            keep, go_on = plan.race(bench.rows.measured())
            bench.active[:] = keep
            if not go_on:
                return round_index
    return None


def _rewarm(bench: Bench, round_index: int, arms: Sequence[str]) -> None:
    """The first requests of a fresh process pay its cold start: not measured."""
    first = bench.plan.tasks[0]
    with bench.split.phase(WARMUP):
        _rewarm_requests(bench, round_index, arms, first)


def _rewarm_requests(bench: Bench, round_index: int, arms: Sequence[str], first: Task) -> None:
    for run in measure_round(
        bench.servers,
        bench.config,
        [replace(first, max_tokens=min(first.max_tokens, REWARM_TOKENS))],
        arms=list(arms),
        round_index=round_index,
        is_warmup=True,
        settings=bench.settings,
    ):
        bench.rows.save(replace(run, purpose=RunPurpose.REWARM), run.arm)
