"""A seeded synthetic soak of one (arm, concurrency) series: no server, numpy only.

It runs the closed loop of `soak/loop.py` in simulated time: `concurrency` workers, their
starts spread over the ramp, each sending its next task when its last one finished until the
block's deadline (a request in flight then completes), the task order reshuffled every pass
from (seed, block, pass) as `plan.TaskCycle` does. The series gets one block every
`cycle_s` (the other arms and depths run in between). Out come `SoakSampleView`s, so the
judges' own code (`depth.block_rows`, `depth.series_drift`, `trends`) reads them.

The noise, and where each figure comes from (the recommendation's soak, campaign 1, 27 Nov
2026, 100 min, 2-min blocks, Qwen2.5-Coder 1.5B q4_k_m on this 2-core host, reports/
speculative_soak.json and docs/soak.md):

- `aggregate_tps` 33: the baseline's median decode speed at depth 4, 8.2 tok/s a request,
  times 4 in flight; 325 requests in ~12.5 blocks (~26 a block) at 96-192 tokens.
- `host_sd` 3.4%, `host_r` 0.3: block-to-block noise of the server's capacity, AR(1) over the
  series' blocks. 3.4% is what the depth-1 drift CIs of that soak imply (half-width ~7% over
  12.5 blocks of one request stream: sd ~= half-width / 2.05); 0.3 is the soak's
  `autocorrelation_floor`. The aggregate at depth 4 is the same kind of figure as depth 1's
  (the whole server's tokens per second), so it is taken to wander as much.
- `request_sd` 8%: each request's own speed around its block's (the +-15% per-request scatter
  at depth 4, about 2 sd).
- `task_sd` 5%: each task's own speed (prose, code, edits), fixed for the soak.
- `share_sd` 9%: how the block's capacity was shared shows in the per-request decode speeds
  the server reports (which requests' prompts stalled which decodes), not in the tokens the
  block produced. Chosen so that the old estimator (Theil-Sen over block medians) on this
  model reproduces the depth-4 CI half-width measured after 100 min (~21%, -16..+26 and
  -11..+35): `benchmarks/soak_depth4_power.py` prints both.

`share_sd` is the assumption the depth-4 verdict rests on: that the block medians' scatter
is how capacity was shared, not the capacity moving. `host_sd` at 6% or 9% shows what the
verdict would need if it were not (the benchmark's sensitivity rows).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np

from watchkeeper.soak.views import SoakSampleView

ORIGIN = datetime(2026, 11, 27, 0, 30, tzinfo=UTC)
MAX_TOKENS = (128, 96, 160, 192, 128, 128)
"""jobs/tasksets/standard.jsonl's max_tokens by category (4 tasks each: the soak's 24)."""


@dataclass(frozen=True, slots=True)
class SoakModel:
    concurrency: int = 4
    block_s: float = 120.0
    cycle_s: float = 480.0
    """Time between two blocks of this series: 2 arms x depths 1 and 4 x 2-min blocks."""
    aggregate_tps: float = 33.0
    host_sd: float = 0.034
    host_r: float = 0.3
    request_sd: float = 0.08
    task_sd: float = 0.05
    share_sd: float = 0.09
    tasks: int = 24
    ramp_s: float = 2.0
    trend: float = 0.0
    """Change of capacity over the soak (log-linear): -0.1 ends 10% slower."""
    step: float = 0.0
    """Change of capacity from the soak's halfway point on: -0.15 is a server slowed 15%."""


def _host(rng: np.random.Generator, n: int, sd: float, r: float) -> np.ndarray:
    """AR(1) log factors with marginal sd ``sd`` and lag-1 correlation ``r``."""
    out = np.empty(n)
    out[0] = rng.normal(0.0, sd)
    innovation = sd * np.sqrt(1.0 - r * r)
    for i in range(1, n):
        out[i] = r * out[i - 1] + rng.normal(0.0, innovation)
    return out


def simulate_series(
    model: SoakModel, minutes: float, seed: int, *, profile: str = "sim"
) -> list[SoakSampleView]:
    """The load requests of one series over a soak of ``minutes`` (its blocks every
    `cycle_s`), seeded."""
    rng = np.random.default_rng(seed)
    n_blocks = max(1, int(minutes * 60.0 // model.cycle_s))
    tokens = [
        int(MAX_TOKENS[i % len(MAX_TOKENS)] * rng.uniform(0.6, 1.0)) for i in range(model.tasks)
    ]
    task_speed = np.exp(rng.normal(0.0, model.task_sd, model.tasks))
    host = _host(rng, n_blocks, model.host_sd, model.host_r)
    span_s = max((n_blocks - 1) * model.cycle_s, 1.0)
    out: list[SoakSampleView] = []
    for b in range(n_blocks):
        start_s = b * model.cycle_s
        level = host[b] + np.log1p(model.trend) * start_s / span_s
        if model.step and start_s >= span_s / 2.0:
            level += np.log1p(model.step)
        capacity = model.aggregate_tps * float(np.exp(level))
        share = float(np.exp(rng.normal(0.0, model.share_sd)))
        out += _block(model, rng, b, start_s, capacity, share, tokens, task_speed, profile)
    return out


def _block(
    model: SoakModel,
    rng: np.random.Generator,
    block: int,
    start_s: float,
    capacity: float,
    share: float,
    tokens: list[int],
    task_speed: np.ndarray,
    profile: str,
) -> list[SoakSampleView]:
    order: list[int] = []
    passes = 0
    free = [i * model.ramp_s / model.concurrency for i in range(model.concurrency)]
    out: list[SoakSampleView] = []
    while True:
        worker = int(np.argmin(free))
        t = free[worker]
        if t >= model.block_s:
            return out
        if not order:
            order = list(range(model.tasks))
            random.Random(f"{block}:{passes}").shuffle(order)
            passes += 1
        task = order.pop()
        speed = capacity / model.concurrency * task_speed[task]
        speed *= float(np.exp(rng.normal(0.0, model.request_sd)))
        latency = tokens[task] / speed
        free[worker] = t + latency
        out.append(
            SoakSampleView(
                profile=profile,
                concurrency=model.concurrency,
                is_probe=False,
                task_id=f"task-{task}",
                started_at=ORIGIN + timedelta(seconds=start_s + t),
                latency_s=latency,
                completion_tokens=tokens[task],
                decode_tps=speed * share,
                draft_n=None,
                draft_n_accepted=None,
                error=None,
                output_text="",
                block=block,
            )
        )
