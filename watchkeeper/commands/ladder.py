"""`watchkeeper bench --load-ladder 1,2,4,8`: the paired bench at increasing load, and the
load where speculation stops paying.

Each level is a paired bench of its own (a campaign of kind `ladder`, speed only: no cost
calibration, no identity probes) with the servers' slots matched to the level, so a closed
loop at 4 in flight runs on servers with 4 slots; the arms stay paired round by round within
each level. The models are resolved once. The levels' plans and the saturation rate are the
engine's (`campaign/ladder.py`); `analysis.crossover` reads where the speed-up's CI crosses 1;
the page and plots are `publish/ladder_report.py`'s.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from watchkeeper.analysis.crossover import crossover
from watchkeeper.analysis.ladder import LadderLevel, LadderResult
from watchkeeper.analysis.latency import result_latency
from watchkeeper.campaign.bench import execute_bench
from watchkeeper.campaign.bench_plan import Progress, plan_bench
from watchkeeper.campaign.ladder import (
    KIND,
    arm_saturation,
    check_auto_slots,
    check_levels,
    crossover_metric,
    level_plan,
    level_ratios,
    saturation_levels,
)
from watchkeeper.config import Config
from watchkeeper.load.sampling import command_sampling
from watchkeeper.load.shape import LoadShape
from watchkeeper.publish.ladder_report import write_ladder_report
from watchkeeper.server.launch import prepare
from watchkeeper.store.db import Database, open_database
from watchkeeper.store.repository import Repository


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
    metric: str | None = None,
    categories: Sequence[str] | None = None,
    slots: int | None = None,
    sampler: Mapping[str, float | int | None] | None = None,
) -> LadderResult:
    """`levels` are concurrencies (closed loop) or, with `rates`, requests per second (open
    loop, the servers' slots from `concurrency`); no levels with `rates`: 25, 50, 75 and 100%
    of the baseline's saturation rate and each slower candidate's own, measured first
    (`campaign.ladder.arm_saturation`). `metric` decides the crossover (None: the mode's
    default, `analysis.load_compare.default_metric`). `categories`: only the task set's tasks
    of these (a workload's own ladder, `sets/served_ladder.py`); `slots`: every level's servers
    get these slots (the unit's) instead of the level's own. `sampler`: the command line's
    `--temperature` and friends (None: not given) over [bench]'s, resolved here once onto
    every level's plan. The page and its plots are written to the reports folder; the result
    names it (`report_path`)."""
    auto = not levels
    check_levels(levels, rates=rates)
    metric = crossover_metric(metric, rates=rates)
    saturation: dict[str, float] = {}
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
            categories=categories,
        )
        first = replace(first, sampling=command_sampling(config, given=sampler))
        if auto:
            check_auto_slots(shape.max_concurrency or first.concurrency)
        prepared = [prepare(config, name, progress=progress) for name in first.profiles]
        if auto:
            saturation = arm_saturation(config, first, prepared, shape, progress)
            levels = saturation_levels(saturation, first.profiles[0], progress)
        done: list[LadderLevel] = []
        for index, level in enumerate(sorted(levels), start=1):
            plan = level_plan(config, first, shape, level, rates=rates, slots=slots)
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
        crossover(
            arm, [level_ratios(lv.level, lv.load, lv.result, arm) for lv in done], unit, metric
        )
        for arm in candidates
    )
    slo = done[0].latency[0].slo if done and done[0].latency else ""
    ladder = LadderResult(
        "rate" if rates else "concurrency",
        baseline,
        tuple(first.profiles),
        tuple(done),
        crossovers,
        time.monotonic() - started,
        slo,
        metric=metric,
        saturation=tuple(saturation.items()),
    )
    path = write_ladder_report(ladder, config.bench.resolved_reports_dir())
    progress(f"report: {path}")
    return replace(ladder, report_path=str(path))
