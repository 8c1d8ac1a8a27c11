"""The load ladder's engine: each rung's plan (slots matched to a concurrency, or the arrivals
at a rate), the baseline's saturation rate that `auto` rates are fractions of, and the ratios
a level hands to `analysis.crossover`. The command that climbs the ladder is
`commands/ladder.py`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace

from watchkeeper.analysis.benchmark import BenchResult
from watchkeeper.analysis.crossover import LevelRatios
from watchkeeper.analysis.latency import ratio_over_rounds, result_latency
from watchkeeper.campaign.bench_plan import BenchPlan, Progress
from watchkeeper.campaign.campaigns import run_profile
from watchkeeper.campaign.load_shape import shape_plan, with_slots
from watchkeeper.config import Config
from watchkeeper.config.paths import runs_log_dir
from watchkeeper.errors import BenchError, ConfigError
from watchkeeper.load.records import Task
from watchkeeper.load.runner import LoadSettings
from watchkeeper.load.shape import LoadShape
from watchkeeper.load.tasks import repeat_tasks
from watchkeeper.server.launch import PreparedProfile

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


def check_levels(levels: Sequence[float], *, rates: bool) -> None:
    """Refuse a ladder that cannot run before any server starts: auto levels are rates, and
    concurrencies are positive whole numbers."""
    auto = not levels
    if auto and not rates:
        raise ConfigError("--load-ladder auto finds rates: add --ladder-rates")
    if not auto and any(lv <= 0 for lv in levels):
        raise ConfigError("--load-ladder needs positive levels, e.g. 1,2,4,8")
    if not rates and any(lv != int(lv) for lv in levels):
        raise ConfigError("concurrency levels are whole numbers; use --ladder-rates for rates")


def saturation_levels(
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


def level_plan(
    config: Config, first: BenchPlan, shape: LoadShape, level: float, *, rates: bool
) -> BenchPlan:
    """One rung's plan, speed only: at a concurrency the servers get that many slots; at a
    rate they keep the command's slots and the arrivals come at that rate."""
    plan = replace(first, concurrency=int(level) if not rates else first.concurrency)
    return replace(
        shape_plan(plan, config, replace(shape, rate=level) if rates else shape),
        speed_only=True,
    )
