"""`watchkeeper bench --load-ladder 1,2,4,8`: the paired bench at increasing load, and the
load where speculation stops paying.

Each level is a paired bench of its own (a campaign of kind `ladder`, speed only: no cost
calibration, no identity probes) with the servers' slots matched to the level, so a closed
loop at 4 in flight runs on servers with 4 slots; the arms stay paired round by round within
each level. The models are resolved once. Per arm and level the result keeps the speed-up
(per-request decode tok/s, the bench's paired CI), the goodput and output tok/s ratios
(paired by round) and the latency distributions; `analysis.crossover` reads where the
speed-up's CI crosses 1.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from watchkeeper.analysis.benchmark import BenchResult
from watchkeeper.analysis.crossover import LevelRatios, crossover
from watchkeeper.analysis.ladder import LadderLevel, LadderResult
from watchkeeper.analysis.latency import ratio_over_rounds, result_latency
from watchkeeper.campaign.bench import execute_bench
from watchkeeper.campaign.bench_plan import BenchPlan, Progress, plan_bench
from watchkeeper.campaign.campaigns import run_profile
from watchkeeper.campaign.load_shape import shape_plan, with_slots
from watchkeeper.config import Config
from watchkeeper.config.paths import runs_log_dir
from watchkeeper.errors import BenchError, ConfigError
from watchkeeper.load.records import Task
from watchkeeper.load.runner import LoadSettings
from watchkeeper.load.shape import LoadShape
from watchkeeper.load.tasks import repeat_tasks
from watchkeeper.server.launch import PreparedProfile, prepare
from watchkeeper.store.db import Database, open_database
from watchkeeper.store.repository import Repository

KIND = "ladder"
SATURATION_FRACTIONS = (0.25, 0.5, 0.75, 1.0)
"""`--load-ladder auto --ladder-rates`: these fractions of the baseline's saturation rate."""


def saturation_rate(
    config: Config, baseline: PreparedProfile, tasks: Sequence[Task], slots: int
) -> float:
    """Requests per second the baseline serves flat out: a closed loop with every slot busy
    (slots in flight, 2 x slots requests at least), completed requests over the wall time.
    Beyond this rate an open loop only builds a queue; the ladder's rates stop there."""
    shaped = with_slots([baseline], slots)[0]
    requests = repeat_tasks(tasks, max(len(tasks), 2 * slots))
    stamp = time.strftime("%Y%m%dT%H%M%S")
    run = run_profile(
        config,
        shaped,
        requests,
        arm=baseline.name,
        round_index=0,
        is_warmup=True,
        settings=LoadSettings(concurrency=slots, seed=config.bench.seed),
        log_path=runs_log_dir() / f"{stamp}-saturation-{baseline.name}.log",
    )
    done = sum(1 for s in run.samples if s.ok)
    seconds = (run.finished_at - run.started_at).total_seconds()
    if not done or seconds <= 0:
        raise BenchError(f"{baseline.name}: no request completed while finding its saturation")
    return done / seconds


def level_ratios(level: float, load: str, result: BenchResult, arm: str) -> LevelRatios:
    stats = {s.arm: s for s in result_latency(result)}
    base, cand = stats.get(result.baseline.name), stats.get(arm)
    overall = result.stats(arm)
    return LevelRatios(
        level,
        load,
        overall.speedup if overall is not None else None,
        ratio_over_rounds(base.goodput_by_round, cand.goodput_by_round) if base and cand else None,
        ratio_over_rounds(base.output_tps_by_round, cand.output_tps_by_round)
        if base and cand
        else None,
    )


def ladder_command(
    config: Config,
    *,
    profiles: Sequence[str] | None,
    levels: Sequence[float],
    rates: bool,
    rounds: int | None,
    taskset: Path | None,
    limit: int | None,
    per_category: int | None,
    concurrency: int | None,
    shape: LoadShape,
    progress: Progress,
    database: Database | None = None,
) -> LadderResult:
    """`levels` are concurrencies (closed loop) or, with `rates`, requests per second (open
    loop, the servers' slots from `concurrency`); no levels with `rates`: 25, 50, 75 and 100%
    of the baseline's saturation rate, measured first (`saturation_rate`)."""
    auto = not levels
    _check_levels(levels, rates=rates)
    started = time.monotonic()
    with open_database(config.database.resolved_url(), given=database) as db:
        repo = Repository(db)
        first = plan_bench(
            config,
            profiles=profiles,
            rounds=rounds,
            taskset=taskset,
            limit=limit,
            per_category=per_category,
            concurrency=concurrency,
        )
        prepared = [prepare(config, name, progress=progress) for name in first.profiles]
        if auto:
            levels = _saturation_levels(config, first, prepared[0], shape, progress)
        done: list[LadderLevel] = []
        for index, level in enumerate(sorted(levels), start=1):
            plan = _level_plan(config, first, shape, level, rates=rates)
            load = f"{level:g} req/s" if rates else f"c{int(level)}"
            progress(
                f"ladder {index}/{len(levels)}: {load} ({len(plan.tasks)} requests per arm and "
                f"round, {plan.slots} slot(s) per server)"
            )
            result = execute_bench(
                config, plan, kind=KIND, progress=progress, prepared=prepared, database=db
            )
            repo.finish_campaign(
                result.campaign_id, status="completed", summary={"ladder_level": level}
            )
            done.append(
                LadderLevel(level, load, result.campaign_id, result_latency(result), result)
            )
    baseline = first.profiles[0]
    candidates = first.profiles[1:]
    unit = "concurrent requests" if not rates else "requests/s"
    crossovers = tuple(
        crossover(arm, [level_ratios(lv.level, lv.load, lv.result, arm) for lv in done], unit)
        for arm in candidates
    )
    slo = done[0].latency[0].slo if done and done[0].latency else ""
    return LadderResult(
        "rate" if rates else "concurrency",
        baseline,
        tuple(first.profiles),
        tuple(done),
        crossovers,
        time.monotonic() - started,
        slo,
    )


def _check_levels(levels: Sequence[float], *, rates: bool) -> None:
    """Refuse a ladder that cannot run before any server starts: auto levels are rates, and
    concurrencies are positive whole numbers."""
    auto = not levels
    if auto and not rates:
        raise ConfigError("--load-ladder auto finds rates: add --ladder-rates")
    if not auto and any(lv <= 0 for lv in levels):
        raise ConfigError("--load-ladder needs positive levels, e.g. 1,2,4,8")
    if not rates and any(lv != int(lv) for lv in levels):
        raise ConfigError("concurrency levels are whole numbers; use --ladder-rates for rates")


def _saturation_levels(
    config: Config,
    first: BenchPlan,
    baseline: PreparedProfile,
    shape: LoadShape,
    progress: Progress,
) -> list[float]:
    """Auto levels: fractions of the rate the baseline saturates at, so the ladder spans
    light load to flat out on this host whatever its speed."""
    shaped = shape_plan(first, config, shape)
    peak = saturation_rate(config, baseline, shaped.tasks, max(1, first.concurrency))
    levels = [round(f * peak, 3) for f in SATURATION_FRACTIONS]
    progress(
        f"{baseline.name} saturates near {peak:.3g} req/s at {first.concurrency} "
        f"slot(s): ladder rates {', '.join(f'{lv:g}' for lv in levels)}"
    )
    return levels


def _level_plan(
    config: Config, first: BenchPlan, shape: LoadShape, level: float, *, rates: bool
) -> BenchPlan:
    """One rung's plan, speed only: at a concurrency the servers get that many slots; at a
    rate they keep the command's slots and the arrivals come at that rate."""
    plan = replace(first, concurrency=int(level) if not rates else first.concurrency)
    return replace(
        shape_plan(plan, config, replace(shape, rate=level) if rates else shape),
        speed_only=True,
    )
