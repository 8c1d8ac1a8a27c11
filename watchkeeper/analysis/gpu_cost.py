"""What one arm costs on the GPU: VRAM, utilisation, power and energy per generated token.

Pure functions over readings (`host/gpu.GpuReading`) and request windows, so a recorded trace
(a real `nvidia-smi -l` trace in the tests) gives the same numbers a live NVML sampler does.

Energy is the device's power integrated over the arm's own measured requests: a paired bench
sends one request at a time, arm after arm, so while a request of arm A runs the GPU works for
A (the other arms' servers idle beside it, and their idle draw is part of what A costs on a
shared card, as it would be in production). Power is interpolated linearly between readings,
so a request shorter than the sampling interval still gets its share. Joules per token divide
that energy by the completion tokens of the same requests; the candidate/baseline ratio is
formed per task and round, like the speed-up, and takes the speed-up's statistics
(`analysis/stats.paired_speedup`): a speculative arm can be faster and cost more energy per
token (the draft model draws power too), and a CI says which.

Everything is None where nothing was measured (no NVML): absent, never zero.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from statistics import median
from typing import Any

from watchkeeper.analysis.stats import Pair, RatioCI, paired_speedup
from watchkeeper.host.gpu import GpuReading
from watchkeeper.host.gpu_monitor import GpuMonitor
from watchkeeper.load.records import RequestSample, RunGpuCost


@dataclass(frozen=True, slots=True)
class Window:
    """One request: when it ran and what it produced."""

    task_id: str
    start: datetime
    end: datetime
    tokens: int


def _power_at(trace: Sequence[GpuReading], at: datetime) -> float | None:
    points = [(r.at, r.power_watts) for r in trace if r.power_watts is not None]
    if not points:
        return None
    if at <= points[0][0]:
        return points[0][1]
    for (t0, p0), (t1, p1) in itertools.pairwise(points):
        if t0 <= at <= t1:
            span = (t1 - t0).total_seconds()
            return p0 if span <= 0 else p0 + (p1 - p0) * (at - t0).total_seconds() / span
    return points[-1][1]


def energy_joules(trace: Sequence[GpuReading], start: datetime, end: datetime) -> float | None:
    """Power integrated from `start` to `end` (trapezoids over the readings in between and the
    interpolated power at both ends); None without power readings."""
    if end <= start or _power_at(trace, start) is None:
        return None
    times = [start, *sorted(r.at for r in trace if start < r.at < end), end]
    powers = [_power_at(trace, t) for t in times]
    total = 0.0
    for t0, t1, p0, p1 in zip(times, times[1:], powers, powers[1:], strict=False):
        assert p0 is not None and p1 is not None
        total += (p0 + p1) / 2.0 * (t1 - t0).total_seconds()
    return total


def run_cost(trace: Sequence[GpuReading], windows: Sequence[Window]) -> RunGpuCost | None:
    """The cost of one run from the readings around it; None with no readings at all."""
    if not trace or not windows:
        return None
    first = min(w.start for w in windows)
    last = max(w.end for w in windows)
    during = [r for r in trace if first <= r.at <= last] or list(trace)
    vrams = [r.tree_vram_bytes for r in during if r.tree_vram_bytes is not None]
    inside = [
        r.utilization_percent
        for r in trace
        if r.utilization_percent is not None and any(w.start <= r.at <= w.end for w in windows)
    ]
    utils = inside or [r.utilization_percent for r in during if r.utilization_percent is not None]
    energy: float | None = 0.0
    seconds = 0.0
    per_task: dict[str, list[float]] = {}
    for w in windows:
        joules = energy_joules(trace, w.start, w.end)
        if joules is None:
            energy = None
            break
        assert energy is not None
        energy += joules
        seconds += (w.end - w.start).total_seconds()
        if w.tokens > 0:
            per_task.setdefault(w.task_id, []).append(joules / w.tokens)
    return RunGpuCost(
        peak_vram_bytes=max(vrams) if vrams else None,
        steady_vram_bytes=int(median(vrams)) if vrams else None,
        utilization_percent=sum(utils) / len(utils) if utils else None,
        power_watts=energy / seconds if energy is not None and seconds > 0 else None,
        energy_joules=energy,
        tokens=sum(w.tokens for w in windows),
        joules_per_token_by_task=(
            {k: sum(v) / len(v) for k, v in per_task.items()} if energy is not None else {}
        ),
    )


def window_of(task_id: str, started: datetime, latency_s: float, tokens: int) -> Window:
    return Window(task_id, started, started + timedelta(seconds=latency_s), tokens)


@dataclass(frozen=True, slots=True)
class ArmGpuCost:
    """An arm over its measured runs, with the energy ratio against the baseline."""

    peak_vram_bytes: int | None
    steady_vram_bytes: int | None
    utilization_percent: float | None
    power_watts: float | None
    joules_per_token: float | None
    energy_ratio: RatioCI | None = None
    """Candidate J/token over the baseline's, paired by task and round (None for the
    baseline, or without energy on either side)."""

    def to_json(self) -> dict[str, Any]:
        ratio = self.energy_ratio
        return {
            "peak_vram_bytes": self.peak_vram_bytes,
            "steady_vram_bytes": self.steady_vram_bytes,
            "utilization_percent": self.utilization_percent,
            "power_watts": self.power_watts,
            "joules_per_token": self.joules_per_token,
            "energy_per_token_ratio": (
                None
                if ratio is None
                else {
                    "estimate": ratio.estimate,
                    "low": ratio.low,
                    "high": ratio.high,
                    "verdict": ratio.verdict,
                }
            ),
        }


def _mean(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


def arm_cost(
    runs: Sequence[tuple[int, RunGpuCost | None]],
    baseline: Sequence[tuple[int, RunGpuCost | None]] | None = None,
    **stats: Any,
) -> ArmGpuCost | None:
    """(round, cost) of an arm's measured runs -> its cost; None when no run was measured.
    `baseline` (the baseline arm's runs) adds the paired energy-per-token ratio; `stats` go
    to `paired_speedup` (resamples, confidence, seed, threshold)."""
    costs = [c for _, c in runs if c is not None]
    if not costs:
        return None
    peaks = [c.peak_vram_bytes for c in costs if c.peak_vram_bytes is not None]
    steady = [c.steady_vram_bytes for c in costs if c.steady_vram_bytes is not None]
    energy = [c.energy_joules for c in costs]
    tokens = sum(c.tokens for c in costs)
    joules = (
        sum(e for e in energy if e is not None) / tokens
        if all(e is not None for e in energy) and tokens > 0
        else None
    )
    ratio = None
    if baseline is not None:
        base = {r: c for r, c in baseline if c is not None}
        pairs = [
            Pair(task, r, base[r].joules_per_token_by_task[task], value)
            for r, c in runs
            if c is not None and r in base
            for task, value in c.joules_per_token_by_task.items()
            if task in base[r].joules_per_token_by_task
        ]
        ratio = paired_speedup(pairs, **stats) if pairs else None
    return ArmGpuCost(
        peak_vram_bytes=max(peaks) if peaks else None,
        steady_vram_bytes=int(median(steady)) if steady else None,
        utilization_percent=_mean([c.utilization_percent for c in costs]),
        power_watts=_mean([c.power_watts for c in costs]),
        joules_per_token=joules,
        energy_ratio=ratio,
    )


def samples_cost(monitor: GpuMonitor | None, samples: Sequence[RequestSample]) -> RunGpuCost | None:
    """A run's cost from its server's monitor over its successful requests (None: no monitor,
    i.e. no NVML, a CPU build or an external server)."""
    windows = [
        window_of(s.task_id, s.started_at, s.latency_s, s.completion_tokens or 0)
        for s in samples
        if s.ok and s.latency_s is not None
    ]
    if monitor is None or not windows:
        return None
    start = min(w.start for w in windows)
    end = max(w.end for w in windows)
    return run_cost(monitor.readings(start, end), windows)
