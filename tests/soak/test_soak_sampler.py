"""The soak's resource sampler: stuck slots are reported once, and its bookkeeping stays
bounded through months of tasks and server restarts (the daemon never restarts itself)."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta

from watchkeeper.soak.records import IncidentRecord, Item, RunKey
from watchkeeper.soak.sampler import Active, ResourceSampler

T0 = datetime(2026, 11, 24, 23, 58, tzinfo=UTC)
ACTIVE = Active("smollm2-baseline", RunKey("smollm2-baseline", 0, 1, 1), "http://x", 4242)


def _sampler(emitted: list[Item]) -> ResourceSampler:
    return ResourceSampler(emit=emitted.append, stuck_after_s=60.0, gpu=False)


def _busy(task: int) -> list[dict[str, object]]:
    return [{"id": 0, "is_processing": True, "id_task": task}, {"id": 1, "is_processing": False}]


def test_a_slot_busy_past_the_limit_is_reported_once() -> None:
    emitted: list[Item] = []
    sampler = _sampler(emitted)
    for seconds in (0, 30, 59):
        sampler._check_stuck(ACTIVE, _busy(7), T0 + timedelta(seconds=seconds))
    assert emitted == []
    for seconds in (61, 90, 600):
        sampler._check_stuck(ACTIVE, _busy(7), T0 + timedelta(seconds=seconds))
    assert len(emitted) == 1
    incident = emitted[0]
    assert isinstance(incident, IncidentRecord)
    assert incident.kind == "stuck_slot"
    assert "task 7" in incident.detail


def test_slots_that_went_idle_are_forgotten() -> None:
    emitted: list[Item] = []
    sampler = _sampler(emitted)
    now = T0
    for task in range(500):
        sampler._check_stuck(ACTIVE, _busy(task), now)
        now += timedelta(seconds=120)
        sampler._check_stuck(ACTIVE, _busy(task), now)  # stuck: reported
        now += timedelta(seconds=10)
        sampler._check_stuck(ACTIVE, [{"id": 0, "is_processing": False}], now)
    assert len(emitted) == 500
    assert not sampler._busy_since
    assert not sampler._reported


def test_processes_that_exited_leave_the_cpu_cache() -> None:
    sampler = _sampler([])
    sleepers = [
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"]) for _ in range(2)
    ]
    try:
        first, second = sleepers
        assert sampler._cpu_percent(first.pid) is not None
        assert first.pid in sampler._procs
        first.kill()
        first.wait(timeout=10)
        assert sampler._cpu_percent(first.pid) is None  # gone: no reading, not an error
        assert sampler._cpu_percent(second.pid) is not None
        assert first.pid not in sampler._procs
        assert second.pid in sampler._procs
    finally:
        for proc in sleepers:
            proc.kill()
            proc.wait(timeout=10)
