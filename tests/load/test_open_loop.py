"""Open-loop load: arrivals drawn before any request, sent on time whatever the server does.

The HTTP tests run a fake server on 127.0.0.1 with one slot that stalls every request; they
assert only bounds a busy neighbour cannot flip (load can delay an answer, never hasten it)."""

from __future__ import annotations

import statistics
import time
from datetime import UTC, datetime

import numpy as np
import pytest
from support.slowserver import slow_server

from watchkeeper.errors import ConfigError
from watchkeeper.load.arrivals import ArrivalSpec, schedule, trace_schedule
from watchkeeper.load.openloop import run_open_loop
from watchkeeper.load.records import RequestSample, Task
from watchkeeper.load.runner import LoadSettings, run_tasks
from watchkeeper.server.endpoints import ServerClient, make_http_client

_EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


def _tasks(n: int) -> list[Task]:
    return [
        Task(f"t{i}", "prose", ({"role": "user", "content": f"hello {i}"},), 4) for i in range(n)
    ]


def test_poisson_gaps_have_the_rate_and_the_seed_fixes_them() -> None:
    spec = ArrivalSpec(rate=4.0, seed=7)
    times = schedule(spec, 4001)
    gaps = np.diff(times)
    assert times[0] == 0.0
    assert gaps.mean() == pytest.approx(0.25, rel=0.06)
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, rel=0.08)  # exponential: CV 1
    assert schedule(spec, 50) == schedule(ArrivalSpec(rate=4.0, seed=7), 50)
    assert schedule(spec, 50, stream=1) != schedule(spec, 50, stream=0)


def test_burstiness_changes_the_spread_not_the_rate() -> None:
    bursty = np.diff(schedule(ArrivalSpec(rate=2.0, burstiness=0.25, seed=1), 4001))
    even = np.diff(schedule(ArrivalSpec(rate=2.0, burstiness=4.0, seed=1), 4001))
    assert bursty.mean() == pytest.approx(0.5, rel=0.1)
    assert even.mean() == pytest.approx(0.5, rel=0.05)
    assert bursty.std() / bursty.mean() == pytest.approx(2.0, rel=0.1)  # 1 / sqrt(shape)
    assert even.std() / even.mean() == pytest.approx(0.5, rel=0.1)


def test_constant_and_trace_schedules() -> None:
    assert schedule(ArrivalSpec(rate=5.0, process="constant"), 4) == pytest.approx(
        [0.0, 0.2, 0.4, 0.6]
    )
    assert trace_schedule([10.0, 11.0, 13.0], 3, speed=2.0) == pytest.approx([0.0, 0.5, 1.5])
    # a short trace repeats after its span plus one mean gap
    assert trace_schedule([0.0, 2.0], 4) == pytest.approx([0.0, 2.0, 4.0, 6.0])


@pytest.mark.parametrize(
    "bad",
    [
        {"rate": 0.0},
        {"rate": 1.0, "burstiness": 0.0},
        {"rate": 1.0, "queue_deadline_s": 0.0},
        {"rate": 1.0, "max_concurrency": 0},
    ],
)
def test_a_nonsense_spec_is_refused(bad: dict[str, float]) -> None:
    with pytest.raises(ConfigError):
        ArrivalSpec(**bad)  # type: ignore[arg-type]


def test_the_dispatcher_sends_at_the_schedule_while_every_answer_stalls() -> None:
    """A fake clock: each request is handed over at its due time although the (fake) server
    has answered none of them yet; nothing the requests do moves the clock."""
    now = [0.0]
    sent: list[tuple[float, float]] = []

    def request(_: ServerClient, task: Task, *, seq: int, origin: float) -> RequestSample:
        sent.append((now[0], origin))
        return RequestSample(task.id, task.category, seq, started_at=_EPOCH, latency_s=60.0)

    def sleep(s: float) -> None:
        now[0] += s

    spec = ArrivalSpec(rate=2.0, seed=3)
    samples = run_open_loop(
        None,  # type: ignore[arg-type]
        _tasks(20),
        spec,
        request=request,
        clock=lambda: now[0],
        sleep=sleep,
    )
    assert [s.seq for s in samples] == list(range(20))
    due = schedule(spec, 20)
    assert sorted(t for t, _ in sent) == pytest.approx(due)
    assert sorted(o for _, o in sent) == pytest.approx(due)


def test_requests_are_sent_on_time_to_a_stalling_server_and_carry_its_queue() -> None:
    """One slot, every request stalls 1 s, arrivals every 0.1 s: all five reach the server
    before the first is answered, and the last one's latency holds the four stalls ahead."""
    stall = 1.0
    spec = ArrivalSpec(rate=10.0, process="constant")
    with slow_server(stall) as (url, server), make_http_client(url, request_timeout_s=30) as c:
        samples = run_open_loop(c, _tasks(5), spec)
    assert all(s.ok for s in samples), [s.error for s in samples]
    first_answer = min(server.finished)
    assert len(server.arrivals) == 5
    assert max(server.arrivals) < first_answer  # nothing waited for an answer
    # The slot serves them one by one (in whatever order its lock is taken): the k-th served
    # answers (k + 1) stalls after the first arrival, and no request was due later than 0.4 s.
    ttfts = sorted(s.ttft_s for s in samples if s.ttft_s is not None)
    assert len(ttfts) == 5 and all(s.latency_s is not None for s in samples)
    for k, ttft in enumerate(ttfts):
        assert ttft >= (k + 1) * stall - 0.4 - 0.05
    # the closed loop at one request in flight never sees the queue: each TTFT is one stall
    with slow_server(stall) as (url, _), make_http_client(url, request_timeout_s=30) as c:
        closed = run_tasks(c, _tasks(3), LoadSettings(concurrency=1))
    assert max(s.ttft_s or 0 for s in closed) < ttfts[-1] - 2 * stall


def test_a_capped_client_counts_its_wait_and_expires_past_the_deadline() -> None:
    """One request in flight at most, deadline 1.5 s: the second request waits for the
    first's 1 s stall (its latency counts from its arrival), the third and fourth would wait
    past 1.5 s and are recorded as expired: four samples for four arrivals."""
    spec = ArrivalSpec(rate=10.0, process="constant", max_concurrency=1, queue_deadline_s=1.5)
    started = time.perf_counter()
    with slow_server(1.0) as (url, server), make_http_client(url, request_timeout_s=30) as c:
        samples = run_open_loop(c, _tasks(4), spec)
    assert time.perf_counter() - started >= 2.0
    assert len(samples) == 4
    assert [s.expired for s in samples] == [False, False, True, True]
    assert len(server.arrivals) == 2
    second = samples[1]
    assert second.queue_s is not None and second.queue_s >= 0.85
    assert second.latency_s is not None and second.latency_s >= 1.85
    assert all("queue deadline exceeded" in (s.error or "") for s in samples[2:])
    assert statistics.fmean(s.queue_s or 0 for s in samples[2:]) >= 1.4


def test_a_paired_round_sends_each_arm_the_same_open_loop_schedule() -> None:
    """`measure_round` with an arrival spec: every arm gets the whole round's schedule in
    turn (no chunks), each request measured from its arrival; the latency table reads it."""
    from watchkeeper.analysis.latency import Slo, arm_latency
    from watchkeeper.campaign.campaigns import measure_round
    from watchkeeper.config import Config
    from watchkeeper.server.launch import RunningServer

    spec = ArrivalSpec(rate=20.0, process="constant")
    with slow_server(0.3) as (url_a, a), slow_server(0.3) as (url_b, b):
        servers = {"a": RunningServer(url_a, (), None), "b": RunningServer(url_b, (), None)}
        runs = measure_round(
            servers,
            Config(),
            _tasks(4),
            arms=["a", "b"],
            round_index=1,
            is_warmup=False,
            settings=LoadSettings(concurrency=1, arrival=spec),
        )
    assert len(a.arrivals) == len(b.arrivals) == 4
    for arrivals in (a.arrivals, b.arrivals):  # 50 ms apart, not one per 0.3 s answer
        assert arrivals[-1] - arrivals[0] < 3 * 0.3
    for run in runs:
        assert [s.seq for s in run.samples] == [0, 1, 2, 3]
        assert all(s.ok and s.queue_s is not None for s in run.samples)
    stats = arm_latency("a", "20 req/s constant", runs, Slo(ttft_ms=10_000, itl_ms=None))
    assert stats.requests == 4 and stats.good_fraction == 1.0
    assert stats.goodput_rps is not None and stats.goodput_rps.estimate > 0
