"""Steady-state ladder levels: enough requests per level, ramp-up and drain trimmed from an
open loop's figures, an oversaturated level flagged, and `auto` refusing one slot."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from watchkeeper.analysis.latency import Slo, arm_latency
from watchkeeper.analysis.streaming import saturation, trim
from watchkeeper.campaign.bench_plan import BenchPlan
from watchkeeper.campaign.ladder import crossover_metric, level_plan, saturation_levels
from watchkeeper.cli.app import main
from watchkeeper.config import Config
from watchkeeper.errors import ConfigError
from watchkeeper.load.records import RequestSample, RunResult, Task
from watchkeeper.load.shape import LoadShape

_EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


def _sample(seq: int, arrival_s: float, ttft_s: float, latency_s: float) -> RequestSample:
    """An open-loop request that arrived at `arrival_s` and was sent at once."""
    return RequestSample(
        f"t{seq}",
        "prose",
        seq,
        _EPOCH + timedelta(seconds=arrival_s),
        ttft_s=ttft_s,
        latency_s=latency_s,
        completion_tokens=8,
        queue_s=0.0,
    )


def _kept_up(n: int = 30) -> list[RequestSample]:
    return [_sample(i, i * 0.1, 0.05, 0.3) for i in range(n)]


def _falling_behind(n: int = 30) -> list[RequestSample]:
    # arrivals every 0.1 s, served one at a time in 0.2 s: each waits for the queue ahead
    return [_sample(i, i * 0.1, 0.1 * i + 0.05, 0.1 * i + 0.2) for i in range(n)]


def test_a_level_that_keeps_up_is_steady_and_one_that_falls_behind_is_oversaturated() -> None:
    steady = saturation([_kept_up(), _kept_up()])
    assert steady is not None and not steady.oversaturated
    assert steady.completed_share == pytest.approx(1.0)
    behind = saturation([_falling_behind(), _falling_behind()])
    assert behind is not None and behind.oversaturated
    assert behind.completed_share == pytest.approx(0.5, abs=0.02)
    assert behind.reason == "completed 50% of the offered rate"


def test_ttft_rising_with_the_arrival_index_flags_the_level() -> None:
    # completions keep pace, but every arrival's TTFT is longer than the last one's
    rising = [_sample(i, i * 0.1, 0.01 + 0.004 * i, 0.04 + 0.004 * i) for i in range(30)]
    found = saturation([rising, rising])
    assert found is not None and found.completed_share > 0.95
    assert found.oversaturated and "TTFT rose" in (found.reason or "")
    # the same 4x in relative terms, but milliseconds against 300 ms requests: no queue
    jitter = [_sample(i, i * 0.1, 0.001 + 0.0002 * i, 0.3 + 0.0002 * i) for i in range(30)]
    calm = saturation([jitter, jitter])
    assert calm is not None and not calm.oversaturated


def test_an_open_loop_round_loses_its_ramp_up_and_drain() -> None:
    samples = _kept_up(20)
    kept = trim(samples, 0.1)
    assert [s.seq for s in kept] == list(range(2, 18))
    assert trim(samples, 0.0) == samples
    run = RunResult("a", "a", 0, False, 1, _EPOCH, _EPOCH, tuple(samples), ())
    stats = arm_latency("a", "1 req/s", [run], Slo(), trim_fraction=0.1)
    assert stats.requests == 16 and stats.trimmed == 0.1
    assert stats.saturation is not None and not stats.oversaturated


def _plan(tasks: int, concurrency: int) -> BenchPlan:
    return BenchPlan(
        profiles=("a", "b"),
        tasks=tuple(
            Task(f"t{i}", "prose", ({"role": "user", "content": "x"},), 8) for i in range(tasks)
        ),
        rounds=3,
        warmup_rounds=0,
        warmup_tasks=0,
        concurrency=concurrency,
    )


def test_each_level_runs_its_minimum_requests() -> None:
    config, shape = Config(), LoadShape(level_min_s=10.0, level_min_requests=10)
    assert len(level_plan(config, _plan(3, 4), shape, 4.0, rates=True).tasks) == 40
    assert len(level_plan(config, _plan(3, 4), shape, 0.2, rates=True).tasks) == 10
    assert len(level_plan(config, _plan(3, 1), shape, 8, rates=False).tasks) == 16
    assert len(level_plan(config, _plan(3, 1), shape, 1, rates=False).tasks) == 10
    # A served ladder keeps the unit's slots at every rung; the plain ladder matches the level.
    assert level_plan(config, _plan(3, 1), shape, 1, rates=False).slots == 1
    assert level_plan(config, _plan(3, 1), shape, 1, rates=False, slots=4).slots == 4


def test_auto_levels_add_a_slower_candidates_saturation() -> None:
    said: list[str] = []
    levels = saturation_levels({"base": 8.0, "spec": 5.0, "fast": 12.0}, "base", said.append)
    assert levels == [2.0, 4.0, 5.0, 6.0, 8.0]
    assert said == ["ladder rates 2, 4, 5, 6, 8 req/s"]


def test_auto_refuses_one_slot_before_any_server_starts(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["bench", "--profiles", "smollm2-baseline,smollm2-ngram", "--load-ladder", "auto"]
    assert main([*argv, "--ladder-rates", "--concurrency", "1"]) == 2
    err = capsys.readouterr().err
    assert "--load-ladder auto with 1 slot" in err and "--concurrency 4" in err


def test_the_crossover_metric_defaults_by_mode_and_refuses_an_unknown_one() -> None:
    assert crossover_metric(None, rates=True) == "goodput"
    assert crossover_metric(None, rates=False) == "e2e_p90"
    assert crossover_metric("decode", rates=True) == "decode"
    with pytest.raises(ConfigError, match="--crossover-metric p50: not a crossover metric"):
        crossover_metric("p50", rates=False)
