"""The load ladder's engine: each rung's plan (slots matched to a concurrency, or the arrivals
at a rate, long enough for a steady state: `LoadShape.level_min_s` and `level_min_requests`),
every arm's saturation rate that `auto` rates are placed by, the metric that decides the
crossover, and the readings a level hands to `analysis.crossover` (every metric's:
analysis/load_compare.py; an open loop's ramp-up and drain trimmed, a level the baseline cannot
keep up with flagged oversaturated: analysis/streaming.py). The command that climbs the ladder
is `commands/ladder.py`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import replace

from watchkeeper.analysis.benchmark import BenchResult
from watchkeeper.analysis.crossover import LevelRatios
from watchkeeper.analysis.latency import ratio_over_rounds, result_latency
from watchkeeper.analysis.load_compare import CROSSOVER_METRICS, default_metric, level_readings
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
    config: Config,
    baseline: PreparedProfile,
    tasks: Sequence[Task],
    slots: int,
    seed: int,
) -> float:
    """Requests per second the baseline serves flat out: a closed loop with every slot busy
    (slots in flight, 2 x slots requests at least), completed requests over the wall time.
    Beyond this rate an open loop only builds a queue; the ladder's rates stop there. `seed`:
    the ladder's sampler's."""
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
        settings=LoadSettings(concurrency=slots, seed=seed),
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
    speedup = overall.speedup if overall is not None else None
    return LevelRatios(
        level,
        load,
        speedup,
        ratio_over_rounds(base.goodput_by_round, cand.goodput_by_round) if base and cand else None,
        ratio_over_rounds(base.output_tps_by_round, cand.output_tps_by_round)
        if base and cand
        else None,
        level_readings(base, cand, speedup),
        tuple(s.arm for s in (base, cand) if s is not None and s.oversaturated),
        result.baseline.name,
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


def crossover_metric(metric: str | None, *, rates: bool) -> str:
    """The metric that decides the crossover: the one asked for, else the mode's default."""
    metric = metric or default_metric("rate" if rates else "concurrency")
    if metric not in CROSSOVER_METRICS:
        raise ConfigError(
            f"--crossover-metric {metric}: not a crossover metric",
            hint=f"use one of {', '.join(CROSSOVER_METRICS)}",
        )
    return metric


def check_auto_slots(slots: int) -> None:
    """One slot cannot batch: every request waits for the one before, so the capacity that
    speculation spends, the effect a ladder is for, cannot show."""
    if slots <= 1:
        raise ConfigError(
            "--load-ladder auto with 1 slot: nothing batches, so the load effect under study "
            "cannot occur",
            hint="give the servers slots with --concurrency 4 (or --max-concurrency 4)",
        )


def arm_saturation(
    config: Config,
    first: BenchPlan,
    prepared: Sequence[PreparedProfile],
    shape: LoadShape,
    progress: Progress,
) -> dict[str, float]:
    """Every arm's saturation rate at the ladder's slots: a candidate that spends capacity on
    drafts saturates below the baseline, and the load between the two is where it costs."""
    shaped = shape_plan(first, config, shape)
    slots = max(1, shaped.slots or first.concurrency)
    seed = first.sampler(config).seed
    found = {}
    for arm in prepared:
        found[arm.name] = saturation_rate(config, arm, shaped.tasks, slots, seed)
        progress(f"{arm.name} saturates near {found[arm.name]:.3g} req/s at {slots} slot(s)")
    return found


def saturation_levels(
    saturation: dict[str, float], baseline: str, progress: Progress
) -> list[float]:
    """Auto levels: fractions of the baseline's saturation rate, so the ladder spans light
    load to flat out on this host whatever its speed, plus each candidate's own saturation
    where it lies below the baseline's (and not within 10% of a level already there)."""
    peak = saturation[baseline]
    levels = [round(f * peak, 3) for f in SATURATION_FRACTIONS]
    for arm, rate in saturation.items():
        if arm != baseline and rate < peak and all(abs(rate - lv) > 0.1 * lv for lv in levels):
            levels.append(round(rate, 3))
    levels.sort()
    progress(f"ladder rates {', '.join(f'{lv:g}' for lv in levels)} req/s")
    return levels


def level_plan(
    config: Config,
    first: BenchPlan,
    shape: LoadShape,
    level: float,
    *,
    rates: bool,
    slots: int | None = None,
) -> BenchPlan:
    """One rung's plan, speed only: at a concurrency the servers get that many slots; at a
    rate they keep the command's slots and the arrivals come at that rate. `slots`: every
    rung's servers get these instead (a unit's, `sets/served_ladder.py`: one request at a time
    on the four slots the unit serves, not on a server of one)."""
    plan = replace(first, concurrency=int(level) if not rates else first.concurrency)
    wanted = max(shape.requests or 0, shape.level_min_requests, len(plan.tasks))
    if rates:
        wanted = max(wanted, math.ceil(level * shape.level_min_s))
    elif level > 1:
        wanted = max(wanted, 2 * int(level))
    shape = replace(shape, requests=wanted)
    shaped = replace(
        shape_plan(plan, config, replace(shape, rate=level) if rates else shape),
        speed_only=True,
    )
    return shaped if slots is None else replace(shaped, slots=slots)
