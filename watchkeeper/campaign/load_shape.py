"""How a measuring command shapes its load: the servers' slots matched to it, the open-loop
arrivals from the config and the command line, and the latency figures it adds to a bench.

Small hooks for `campaign/bench.py` (and the ladder, `campaign/ladder.py`), kept here so the
bench's orchestration stays wiring."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from watchkeeper.analysis.benchmark import BenchResult
from watchkeeper.analysis.latency import (
    LATENCY_KEY,
    Slo,
    latency_table,
    load_label,
    result_latency,
    slo_from,
)
from watchkeeper.campaign.bench_plan import BenchPlan
from watchkeeper.config import Config
from watchkeeper.load.arrivals import ArrivalSpec
from watchkeeper.load.records import RunResult
from watchkeeper.load.shape import LoadShape
from watchkeeper.load.tasks import cap_tokens, repeat_tasks
from watchkeeper.server.launch import PreparedProfile
from watchkeeper.store.db import Database
from watchkeeper.store.load_store import LoadStore

OPEN_LOOP_TRIM = 0.1
"""Share of each open-loop round's arrivals left out of its latency figures at each end: the
first find an empty server (ramp-up), the last an emptying one (drain)."""


def with_slots(prepared: Sequence[PreparedProfile], slots: int | None) -> list[PreparedProfile]:
    """Every arm watchkeeper starts gets `slots` parallel slots (`--parallel`), its context
    scaled with them so each slot keeps the profile's `ctx_size` (llama-server splits the
    context between slots). A profile that sets its own slots, and a server somebody else
    runs, keep theirs. None or 1: unchanged."""
    if slots is None or slots <= 1:
        return list(prepared)
    out = []
    for p in prepared:
        if p.external_url or p.profile.slots != 1:
            out.append(p)
            continue
        profile = p.profile.model_copy(
            update={"slots": slots, "ctx_size": p.profile.ctx_size * slots}
        )
        out.append(replace(p, profile=profile))
    return out


def arrival_from(
    config: Config,
    rate: float | None,
    *,
    process: str | None = None,
    burstiness: float | None = None,
    queue_deadline_s: float | None = None,
    max_concurrency: int | None = None,
    offsets: Sequence[float] | None = None,
    seed: int | None = None,
) -> ArrivalSpec | None:
    """The open-loop spec of `--rate` (None: closed loop), the config's `[load]` filling what
    the command line leaves out; drawn with `seed` (None: bench.seed)."""
    if rate is None:
        return None
    load = config.load
    deadline = queue_deadline_s if queue_deadline_s is not None else load.queue_deadline_s
    cap = max_concurrency if max_concurrency is not None else load.max_concurrency
    return ArrivalSpec(
        rate=rate,
        process="constant" if (process or load.arrival) == "constant" else "poisson",
        burstiness=burstiness if burstiness is not None else load.burstiness,
        seed=config.bench.seed if seed is None else seed,
        max_concurrency=cap or None,
        queue_deadline_s=deadline or None,
        offsets=tuple(offsets) if offsets is not None else None,
    )


def load_text(concurrency: int, arrival: ArrivalSpec | None) -> str:
    """The load in words, as a recommendation and a unit name what they hold for."""
    if arrival is None:
        return (
            "one request at a time (closed loop)"
            if concurrency <= 1
            else f"{concurrency} concurrent requests (closed loop)"
        )
    cap = f", at most {arrival.max_concurrency} in flight" if arrival.max_concurrency else ""
    return f"{arrival.label} (open loop{cap})"


def plan_slots(plan: BenchPlan) -> int:
    """The slots a load needs: the concurrency of a closed loop; an open loop's cap, else its
    `concurrency` (the command's --concurrency names the slots the server serves with)."""
    if plan.arrival is not None and plan.arrival.max_concurrency:
        return plan.arrival.max_concurrency
    return plan.concurrency


def bench_latency(
    config: Config, plan: BenchPlan, result: BenchResult, runs: Sequence[RunResult]
) -> BenchResult:
    """The bench's latency distributions per arm at its load, in `extras["latency"]`; an
    open loop's ramp-up and drain trimmed (`OPEN_LOOP_TRIM`)."""
    table = latency_table(
        runs,
        [a.name for a in result.arms],
        load_label(plan.concurrency, plan.arrival),
        config_slo(config),
        trim_fraction=OPEN_LOOP_TRIM if plan.arrival is not None else 0.0,
    )
    return replace(result, extras={**result.extras, LATENCY_KEY: table})


def config_slo(config: Config) -> Slo:
    """The `[load]` service levels (0: not judged)."""
    load = config.load
    return slo_from(load.slo_ttft_ms, load.slo_itl_ms, load.slo_e2e_ms)


def save_latency(db: Database, result: BenchResult) -> None:
    LoadStore(db).save(result.campaign_id, result_latency(result))


def shape_arrival(
    config: Config, shape: LoadShape | None, *, seed: int | None = None
) -> ArrivalSpec | None:
    """The open-loop spec of a load shape (None, or no rate and no trace: the closed loop; a
    trace alone replays at its own speed), the config's `[load]` filling the rest; drawn
    with `seed` (None: bench.seed). The bench's plan (`shape_plan`) and the soak take it."""
    shape = shape or LoadShape()
    rate = shape.rate if shape.rate is not None else (1.0 if shape.trace is not None else None)
    return arrival_from(
        config,
        rate,
        process=shape.arrival,
        burstiness=shape.burstiness,
        queue_deadline_s=shape.queue_deadline_s,
        max_concurrency=shape.max_concurrency,
        offsets=shape.trace,
        seed=seed,
    )


def shape_plan(plan: BenchPlan, config: Config, shape: LoadShape | None) -> BenchPlan:
    """The plan with the command line's load: arrivals, token cap, requests per round, and the
    servers' slots matched to the load (closed loop at c: c slots)."""
    shape = shape or LoadShape()
    arrival = shape_arrival(config, shape, seed=plan.sampler(config).seed)
    source = shape.trace_tasks if shape.trace_tasks is not None else plan.tasks
    tasks = cap_tokens(source, shape.max_tokens)
    wanted = shape.requests
    if wanted is None and arrival is None and plan.concurrency > 1:
        wanted = max(len(tasks), 2 * plan.concurrency)
    if wanted is not None and wanted > len(tasks):
        tasks = repeat_tasks(tasks, wanted)
    shaped = replace(plan, tasks=tuple(tasks), arrival=arrival)
    return replace(shaped, slots=plan_slots(shaped))
