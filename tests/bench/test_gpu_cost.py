"""The GPU cost of an arm: VRAM, utilisation, power, energy per token, and the energy ratio.

The integration runs on a real nvidia-smi trace (one H100, the four SmolLM2 servers of a bench
coming up and working: ../shared/gpu/smi.csv, copied to cuda_logs/) and on traces written to
make the arithmetic checkable by hand. Without NVML everything is absent (None, 'n/a'), never 0.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from watchkeeper.analysis.bench_types import BenchResult
from watchkeeper.analysis.gpu_cost import (
    ArmGpuCost,
    arm_cost,
    energy_joules,
    run_cost,
    samples_cost,
    window_of,
)
from watchkeeper.host.gpu import GpuReading, parse_smi_trace
from watchkeeper.host.gpu_monitor import LiveGpuMonitor, RecordedGpuMonitor
from watchkeeper.load.records import RequestSample
from watchkeeper.publish.report import render_bench_report

SMI = Path(__file__).parent.parent / "server" / "cuda_logs" / "smi.csv"
T0 = datetime(2026, 11, 26, 18, 9, 0, tzinfo=UTC)
MIB = 1 << 20


def _at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def _trace(points: list[tuple[float, float]], vram_mib: int = 900) -> list[GpuReading]:
    return [GpuReading(_at(t), w, 70.0, vram_mib * MIB) for t, w in points]


def test_the_real_smi_trace_is_parsed_and_gives_vram_but_no_energy_without_power() -> None:
    trace = parse_smi_trace(SMI.read_text())
    assert len(trace) == 19
    assert trace[4].at == datetime(2026, 11, 26, 18, 9, 7, 671000, tzinfo=UTC)
    assert (trace[4].tree_vram_bytes, trace[4].utilization_percent) == (3604 * MIB, 73.0)
    assert trace[4].power_watts is None  # this trace has no power.draw column
    # The second block of work (18:09:19 to 18:09:33): four servers up, busy.
    windows = [window_of("t", _at(19), 14.0, 700)]
    cost = run_cost(trace, windows)
    assert cost is not None
    assert cost.peak_vram_bytes == 3616 * MIB
    assert cost.steady_vram_bytes == 3616 * MIB  # median of 3604 x2, 3606, 3616 x4
    assert cost.utilization_percent == pytest.approx((67 + 68 + 80 + 54 + 57 + 63 + 67) / 7)
    assert cost.energy_joules is None and cost.joules_per_token is None and cost.power_watts is None


def test_energy_is_power_integrated_over_the_requests_with_interpolation() -> None:
    trace = _trace([(0, 100.0), (2, 300.0), (4, 300.0)])
    assert energy_joules(trace, _at(0), _at(2)) == pytest.approx(400.0)  # ramp 100 -> 300
    assert energy_joules(trace, _at(2), _at(4)) == pytest.approx(600.0)
    # A 0.5 s request between two readings: 200 W to 250 W interpolated.
    assert energy_joules(trace, _at(1), _at(1.5)) == pytest.approx(112.5)
    assert energy_joules(trace, _at(3), _at(3)) is None
    windows = [window_of("a", _at(0), 2.0, 100), window_of("b", _at(2), 2.0, 200)]
    cost = run_cost(trace, windows)
    assert cost is not None
    assert cost.energy_joules == pytest.approx(1000.0)
    assert cost.joules_per_token == pytest.approx(1000.0 / 300)
    assert cost.power_watts == pytest.approx(250.0)
    assert cost.joules_per_token_by_task == pytest.approx({"a": 4.0, "b": 3.0})


def test_the_energy_ratio_is_paired_like_the_speed_up_and_carries_a_ci() -> None:
    """A candidate that draws 1.5x the baseline's energy per token on every task and round."""

    def runs(watts: float) -> list[tuple[int, object]]:
        out = []
        for r in range(1, 6):
            trace = _trace([(0, watts), (60, watts * (1 + 0.01 * r))])
            windows = [
                window_of(f"t{k}", _at(10 * k), 2.0 + 0.1 * k, 100 + 7 * k) for k in range(5)
            ]
            out.append((r, run_cost(trace, windows)))
        return out

    base, cand = runs(200.0), runs(300.0)
    baseline = arm_cost(base)  # type: ignore[arg-type]
    candidate = arm_cost(cand, base, resamples=400, seed=1)  # type: ignore[arg-type]
    assert baseline is not None and baseline.energy_ratio is None
    assert candidate is not None and candidate.energy_ratio is not None
    ratio = candidate.energy_ratio
    assert ratio.estimate == pytest.approx(1.5, rel=1e-3)
    assert ratio.has_ci and ratio.low <= 1.5 <= ratio.high and ratio.low > 1.0
    assert candidate.joules_per_token > baseline.joules_per_token  # type: ignore[operator]
    assert arm_cost([(1, None)]) is None


def test_a_real_runs_request_windows_take_their_energy_from_an_injected_monitor() -> None:
    samples = [
        RequestSample("t1", "prose", 0, _at(1), latency_s=1.0, completion_tokens=50),
        RequestSample("t2", "prose", 1, _at(3), latency_s=2.0, completion_tokens=100),
        RequestSample("t3", "prose", 2, _at(6), latency_s=1.0, error="boom"),
    ]
    monitor = RecordedGpuMonitor(_trace([(0, 250.0), (10, 250.0)], vram_mib=1200))
    cost = samples_cost(monitor, samples)
    assert cost is not None
    assert cost.energy_joules == pytest.approx(750.0)  # failed requests carry no energy
    assert cost.tokens == 150 and cost.peak_vram_bytes == 1200 * MIB
    assert samples_cost(None, samples) is None


def test_a_live_monitor_reads_through_an_injected_reader_and_stops() -> None:
    clock = iter(range(100))

    def read(pid: int, at: datetime) -> GpuReading:
        return GpuReading(_at(next(clock)), 100.0, 50.0, pid)

    monitor = LiveGpuMonitor(4242, interval_s=3600, read=read).start()
    try:
        got = monitor.readings(_at(0), _at(1))
    finally:
        monitor.stop()
    assert [r.tree_vram_bytes for r in got] == [4242, 4242]


def test_the_report_shows_gpu_cost_and_n_a_without_it(result: BenchResult) -> None:
    without = render_bench_report(result, plots={})
    assert "n/a: NVML measured nothing here" in without
    assert json.loads(json.dumps(result.to_json()))["arm_stats"][0]["gpu"] is None
    cost = ArmGpuCost(3616 * MIB, 3604 * MIB, 71.0, 312.0, 0.412, None)
    stats = [replace(s, gpu=cost) for s in result.arm_stats]
    measured = render_bench_report(replace(result, arm_stats=stats), plots={})
    assert "| baseline | 3616 | 3604 | 71 | 312 | 0.412 | — |" in measured
    assert "n/a: NVML" not in measured
    half = [replace(s, gpu=cost if s.arm == "baseline" else None) for s in result.arm_stats]
    partly = render_bench_report(replace(result, arm_stats=half), plots={})
    assert "| n/a | n/a | n/a | n/a | n/a | n/a |" in partly


def test_the_console_says_n_a_without_nvml_and_prints_the_table_with_it(
    result: BenchResult,
) -> None:
    from rich.console import Console

    from watchkeeper.publish.console import print_gpu_cost

    plain = Console(record=True, width=120)
    print_gpu_cost(plain, result)
    assert "GPU cost: n/a" in plain.export_text()
    cost = ArmGpuCost(3616 * MIB, 3604 * MIB, 71.0, 312.0, 0.412, None)
    measured = Console(record=True, width=120)
    print_gpu_cost(
        measured, replace(result, arm_stats=[replace(s, gpu=cost) for s in result.arm_stats])
    )
    text = measured.export_text()
    assert "3616" in text and "0.412" in text and "GPU cost: n/a" not in text
