"""One open-loop shape from a request: the sweep's and the soak's `rate` and arrivals become a
`LoadShape` in one place (`LoadShape.from_request`), and one function turns a shape into the
arrivals both measure under (`campaign.load_shape.shape_arrival`), drawn with the plan's
sampler's seed."""

from __future__ import annotations

from dataclasses import replace

from watchkeeper.campaign.bench_plan import BenchPlan
from watchkeeper.campaign.load_shape import arrival_from, shape_arrival, shape_plan
from watchkeeper.config import Config
from watchkeeper.config.requests import SoakRequest, SweepRequest
from watchkeeper.load.records import Task
from watchkeeper.load.sampling import SamplingSettings
from watchkeeper.load.shape import LoadShape

TASK = Task(id="t", category="chat", messages=({"role": "user", "content": "hi"},), max_tokens=8)


def test_a_request_without_a_rate_is_the_closed_loop_whatever_its_cap() -> None:
    assert LoadShape.from_request(SoakRequest()) is None
    assert LoadShape.from_request(SweepRequest(max_concurrency=4), max_concurrency=4) is None
    assert shape_arrival(Config(), None) is None


def test_the_sweep_and_the_soak_read_rate_and_arrivals_alike() -> None:
    asked = {"rate": 2.5, "arrival": "constant", "burstiness": 0.5, "queue_deadline_s": 30.0}
    sweep = SweepRequest(**asked, max_concurrency=4)  # type: ignore[arg-type]
    soak = SoakRequest(**asked)  # type: ignore[arg-type]
    shape = LoadShape(rate=2.5, arrival="constant", burstiness=0.5, queue_deadline_s=30.0)
    assert LoadShape.from_request(soak) == shape
    assert LoadShape.from_request(sweep, max_concurrency=4) == replace(shape, max_concurrency=4)
    config = Config()
    # The soak's arrivals as its own code drew them before the shape was shared.
    assert shape_arrival(config, LoadShape.from_request(soak)) == arrival_from(
        config, 2.5, process="constant", burstiness=0.5, queue_deadline_s=30.0
    )


def test_a_plans_arrivals_are_drawn_with_its_samplers_seed() -> None:
    config = Config()
    plan = BenchPlan(profiles=("a", "b"), tasks=(TASK,), rounds=1, warmup_rounds=0,
                     warmup_tasks=0, concurrency=1)  # fmt: skip
    shape = LoadShape(rate=1.0)
    shaped = shape_plan(plan, config, shape)
    assert shaped.arrival is not None and shaped.arrival.seed == config.bench.seed
    seeded = replace(plan, sampling=SamplingSettings(seed=config.bench.seed + 1))
    arrival = shape_plan(seeded, config, shape).arrival
    assert arrival is not None and arrival.seed == config.bench.seed + 1
