"""`watchkeeper bench`: paired A/B of a baseline profile against speculative profiles.

The command composes: the plan (`campaign.bench_plan`), the execution (`campaign.bench`), the
recommendation and the report (`campaign.bench_report`). The module is not called `bench.py`
because the engine it calls was that file before it moved to `campaign/`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from watchkeeper.analysis.benchmark import BenchResult
from watchkeeper.campaign.bench_plan import Progress, plan_bench
from watchkeeper.campaign.bench_report import bench_and_report
from watchkeeper.campaign.load_shape import shape_plan
from watchkeeper.config import Config
from watchkeeper.load.sampling import command_sampling
from watchkeeper.load.shape import LoadShape
from watchkeeper.store.db import Database


def bench_command(
    config: Config,
    *,
    profiles: Sequence[str] | None,
    rounds: int | None,
    taskset: Path | None,
    limit: int | None,
    per_category: int | None,
    concurrency: int | None,
    progress: Progress,
    database: Database | None = None,
    fit_context: int | None = None,
    load: LoadShape | None = None,
    sampler: Mapping[str, float | int | None] | None = None,
) -> BenchResult:
    """`load`: the request rate, arrivals, tokens and requests per round (campaign/load_shape);
    None: the closed loop at `concurrency` with the tasks' own lengths. `sampler`: the
    command line's `--temperature` and friends (None: not given) over [bench]'s, resolved
    here once onto the plan."""
    plan = plan_bench(
        config,
        profiles=profiles,
        rounds=rounds,
        taskset=taskset,
        limit=limit,
        per_category=per_category,
        concurrency=concurrency,
    )
    plan = shape_plan(replace(plan, sampling=command_sampling(config, given=sampler)), config, load)
    return bench_and_report(
        config, plan, fit_context=fit_context, progress=progress, database=database
    )
