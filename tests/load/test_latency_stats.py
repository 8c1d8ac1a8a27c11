"""Latency percentiles with CIs over rounds, goodput and active time, on synthetic data."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from watchkeeper.analysis.latency import (
    Slo,
    active_seconds,
    arm_latency,
    is_good,
    mean_interval,
    quantile_over_rounds,
    ratio_over_rounds,
)
from watchkeeper.load.records import RequestSample, RunResult

T0 = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize("q", [0.5, 0.9, 0.99])
def test_percentile_cis_cover_the_known_quantile(q: float) -> None:
    """Exponential latencies (scale 100 ms: the q-quantile is -100 ln(1 - q)), 5 rounds of 400
    requests, 600 simulated benches: the 95% CI over rounds covers the true quantile in
    90-99% of them (a binomial band around 95% for 600 trials, plus the small bias of a
    sample quantile), and is not trivially wide."""
    rng = np.random.default_rng(11)
    truth = -100.0 * math.log(1.0 - q)
    covered, widths = 0, []
    for _ in range(600):
        rounds = [rng.exponential(100.0, size=400) for _ in range(5)]
        est = quantile_over_rounds(rounds, q)
        assert est is not None and est.has_ci
        covered += est.low <= truth <= est.high
        widths.append((est.high - est.low) / truth)
    assert 0.90 <= covered / 600 <= 0.99
    assert float(np.median(widths)) < 0.5
    assert not est.thin and est.values_per_round == 400
    few = quantile_over_rounds([rng.exponential(100.0, size=16) for _ in range(5)], q)
    assert few is not None and few.thin == (q >= 0.99)


def test_a_round_that_drifts_widens_the_interval() -> None:
    rng = np.random.default_rng(3)
    steady = [rng.exponential(100.0, size=200) for _ in range(4)]
    drifting = [r * f for r, f in zip(steady, (1.0, 1.0, 1.0, 1.6), strict=True)]
    a, b = quantile_over_rounds(steady, 0.9), quantile_over_rounds(drifting, 0.9)
    assert a is not None and b is not None
    assert (b.high - b.low) > 2 * (a.high - a.low)


def test_one_round_has_no_ci() -> None:
    est = mean_interval([3.0])
    assert not est.has_ci and est.low == est.high == 3.0


def test_ratio_over_rounds_pairs_by_round() -> None:
    r = ratio_over_rounds({1: 10.0, 2: 20.0, 3: 10.0}, {1: 5.0, 2: 10.0, 3: 5.0, 4: 1.0})
    assert r is not None and r.rounds == 3
    assert r.estimate == pytest.approx(0.5)
    assert r.low == pytest.approx(0.5) and r.high == pytest.approx(0.5)


def test_a_round_without_a_good_request_leaves_the_ratio_undefined() -> None:
    """Goodput 0 in one round on either side: no ratio, rather than one read off the rounds
    that happened to have good requests (a ladder level once claimed 1.97x, CI 1.93-2.00, from
    2 of 3 rounds)."""
    assert ratio_over_rounds({1: 1.0, 2: 0.0, 3: 1.0}, {1: 2.0, 2: 1.0, 3: 2.0}) is None
    assert ratio_over_rounds({1: 1.0, 2: 1.0}, {1: 2.0, 2: 0.0}) is None
    assert ratio_over_rounds({1: 0.0}, {1: 0.0}) is None


def _sample(
    start_s: float, ttft: float, latency: float, tokens: int = 11, **kw: object
) -> RequestSample:
    return RequestSample(
        "t",
        "prose",
        0,
        started_at=T0 + timedelta(seconds=start_s),
        ttft_s=ttft,
        latency_s=latency,
        completion_tokens=tokens,
        **kw,  # type: ignore[arg-type]
    )


def test_good_requests_meet_every_level() -> None:
    slo = Slo(ttft_ms=500, itl_ms=50, e2e_ms=None)
    assert is_good(_sample(0, 0.4, 0.9), slo)  # TPOT 50 ms
    assert not is_good(_sample(0, 0.6, 0.9), slo)  # TTFT 600 ms
    assert not is_good(_sample(0, 0.1, 1.2), slo)  # TPOT 110 ms
    assert not is_good(_sample(0, 0.1, 0.2, error="boom"), slo)
    assert is_good(_sample(0, 0.6, 3.0), Slo(None, None, None))


def test_active_time_is_the_union_closed_and_the_span_open() -> None:
    closed = [_sample(0, 0.1, 1.0), _sample(0.5, 0.1, 1.0), _sample(5, 0.1, 1.0)]
    assert active_seconds(closed) == pytest.approx(2.5)
    # open loop: arrival = send - queue_s; the span runs from the first arrival to the last end
    open_ = [_sample(0, 0.1, 1.0, queue_s=0.0), _sample(5.5, 0.1, 1.0, queue_s=0.5)]
    assert active_seconds(open_) == pytest.approx(6.0)


def test_arm_latency_reads_measured_rounds_and_counts_expired() -> None:
    def run(rnd: int, samples: list[RequestSample], arm: str = "a") -> RunResult:
        return RunResult(arm, arm, rnd, False, 1, T0, T0, tuple(samples), ())

    expired = RequestSample("x", "prose", 1, T0, queue_s=2.0, error="queue deadline", expired=True)
    runs = [
        run(1, [_sample(0, 0.1, 0.6, itl_s=(0.05,) * 10), expired]),
        run(2, [_sample(0, 0.2, 0.7, itl_s=(0.05,) * 10)]),
        run(0, [_sample(0, 9.0, 9.0)]),  # warm-up: read by nothing
    ]
    runs[2] = RunResult("a", "a", 0, True, 1, T0, T0, runs[2].samples, ())
    stats = arm_latency("a", "c1", runs, Slo())
    assert stats.rounds == 2 and stats.requests == 3 and stats.expired == 1 and stats.errors == 1
    ttft = stats.value("ttft_ms", "p50")
    assert ttft is not None and ttft.estimate == pytest.approx(150.0) and ttft.has_ci
    itl = stats.value("itl_ms", "p99")
    assert itl is not None and itl.estimate == pytest.approx(50.0)
    assert stats.good_fraction == pytest.approx(2 / 3)
    assert stats.goodput_by_round == {1: pytest.approx(1 / 0.6), 2: pytest.approx(1 / 0.7)}
