"""A background sampler of one server's GPU cost: device power and utilisation, and the VRAM of
its process tree, read through `host/gpu.py` (NVML) every `interval_s` while the server lives.

A measuring command asks it for the readings inside a run's request windows
(`analysis/gpu_cost.py` integrates them); a test injects a `RecordedGpuMonitor` fed a real
trace instead. Where NVML is absent nothing is started and the cost stays absent (None), never
zero: a CPU host has no GPU cost to report, not a cost of 0 J.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Protocol

import psutil

from watchkeeper.host import gpu
from watchkeeper.host.gpu import GpuReading

INTERVAL_S = 0.2
"""Five readings a second: NVML's power figure is itself a ~1 s average on recent boards, and
a bench request lasts 0.1-10 s; the integral interpolates between readings."""


class GpuMonitor(Protocol):
    def readings(self, start: datetime, end: datetime) -> list[GpuReading]:
        """Readings from `start` to `end`, plus the last one before and the first after
        (so a window shorter than the interval can still be interpolated)."""
        ...

    def stop(self) -> None: ...


def _window(trace: Sequence[GpuReading], start: datetime, end: datetime) -> list[GpuReading]:
    before = [r for r in trace if r.at < start]
    inside = [r for r in trace if start <= r.at <= end]
    after = [r for r in trace if r.at > end]
    return before[-1:] + inside + after[:1]


class RecordedGpuMonitor:
    """A fixed trace (a test's, or one parsed from `nvidia-smi -l` output)."""

    def __init__(self, trace: Sequence[GpuReading]) -> None:
        self._trace = sorted(trace, key=lambda r: r.at)

    def readings(self, start: datetime, end: datetime) -> list[GpuReading]:
        return _window(self._trace, start, end)

    def stop(self) -> None:
        return None


class LiveGpuMonitor:
    """Samples NVML for one process tree until stopped or until the process is gone."""

    def __init__(
        self,
        pid: int,
        *,
        interval_s: float = INTERVAL_S,
        read: Callable[[int, datetime], GpuReading | None] = gpu.read_for_tree,
    ) -> None:
        self._pid, self._interval, self._read = pid, interval_s, read
        self._trace: list[GpuReading] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="gpu-monitor", daemon=True)

    def start(self) -> LiveGpuMonitor:
        self._sample()
        self._thread.start()
        return self

    def _sample(self) -> None:
        reading = self._read(self._pid, datetime.now(UTC))
        if reading is not None:
            with self._lock:
                self._trace.append(reading)

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            if not psutil.pid_exists(self._pid):
                return
            self._sample()

    def readings(self, start: datetime, end: datetime) -> list[GpuReading]:
        self._sample()  # the run just ended: its last moment is read, not waited for
        with self._lock:
            trace = list(self._trace)
        return _window(trace, start, end)

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)


def monitor_for(pid: int, fallback_vram_bytes: int | None = None) -> LiveGpuMonitor | None:
    """A started monitor of this process tree where NVML answers, else None.
    `fallback_vram_bytes`: the tree's VRAM where NVML lists none of its PIDs (the device's
    growth over the server's start: `gpu.vram_since`)."""
    if not gpu.nvml_available():
        return None

    def read(pid: int, at: datetime) -> GpuReading | None:
        return gpu.read_for_tree(pid, at, fallback_vram_bytes=fallback_vram_bytes)

    return LiveGpuMonitor(pid, read=read).start()
