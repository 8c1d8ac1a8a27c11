"""Resource samples while a soak runs: memory, CPU, VRAM, the server's own counters, slots.

One `sample()` reads the active server's process tree (RSS, CPU %), the share of the host's
cores everything else used since the previous sample (`soak/hostcpu.py`), the GPU's used memory
through `host.gpu` (NVML, else `nvidia-smi`) when there is one (a machine without a GPU is not
an error: VRAM is just absent), `/metrics` (busy slots, KV usage, speculative counters) and
`/slots`. A slot that has been processing the same task for longer than any request may take
is "stuck": the request's own timeout would have fired long ago, so the server is spinning on
something nobody waits for.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import psutil

from watchkeeper.host import gpu as host_gpu
from watchkeeper.server.endpoints import (
    PROBE_TIMEOUT_S,
    ServerClient,
    fetch_metrics,
    fetch_slots,
    make_http_client,
)
from watchkeeper.server.process import tree_rss_bytes
from watchkeeper.soak.hostcpu import HostCpuMeter
from watchkeeper.soak.records import IncidentRecord, Item, ResourcePoint, RunKey

Emit = Callable[[Item], None]
KV_USAGE_KEYS = ("llamacpp:kv_cache_usage_ratio", "llamacpp:kv_cache_usage")


@dataclass(frozen=True, slots=True)
class Active:
    """What the load is hitting right now."""

    profile: str
    key: RunKey
    base_url: str
    pid: int | None


class ResourceSampler:
    """Call `sample()` every few seconds from one thread; it emits one `ResourcePoint`."""

    def __init__(self, *, emit: Emit, stuck_after_s: float, gpu: bool | None = None) -> None:
        self._emit = emit
        self._stuck_after = stuck_after_s
        self._gpu = host_gpu.available() if gpu is None else gpu
        self._procs: dict[int, psutil.Process] = {}
        self._busy_since: dict[tuple[str, int, Any, Any], datetime] = {}
        self._reported: set[tuple[str, int, Any, Any]] = set()
        self._client: ServerClient | None = None
        self._client_url = ""
        self._self = psutil.Process(os.getpid())
        self._host = HostCpuMeter()
        self.last: ResourcePoint | None = None

    def _http(self, base_url: str) -> ServerClient:
        if self._client is None or self._client_url != base_url:
            if self._client is not None:
                self._client.close()
            self._client = make_http_client(base_url, request_timeout_s=PROBE_TIMEOUT_S)
            self._client_url = base_url
        return self._client

    @staticmethod
    def _tree(pid: int) -> list[psutil.Process] | None:
        try:
            root = psutil.Process(pid)
            return [root, *root.children(recursive=True)]
        except psutil.Error:
            return None

    def _cpu_percent(self, pid: int, procs: list[psutil.Process] | None = None) -> float | None:
        """CPU % of the process tree since the previous sample (psutil keeps the baseline)."""
        procs = self._tree(pid) if procs is None else procs
        if procs is None:
            return None
        # A restarted server's old processes: months of them add up. is_running() also drops
        # an entry whose pid the kernel has given to another process.
        for gone in [pid for pid, proc in self._procs.items() if not proc.is_running()]:
            del self._procs[gone]
        total = 0.0
        for proc in procs:
            cached = self._procs.setdefault(proc.pid, proc)
            with contextlib.suppress(psutil.Error):
                total += cached.cpu_percent(None)
        return total

    def sample(self, active: Active | None, *, answering: bool = True) -> ResourcePoint:
        """One resource point. With ``answering`` False (the server failed its last health
        check) only the process is read: asking a hung server would stall the monitor."""
        now = datetime.now(UTC)
        metrics: dict[str, Any] = {"watchkeeper_rss_bytes": self._self.memory_info().rss}
        rss = cpu = busy = kv = None
        tree: list[psutil.Process] = []
        if active is not None:
            metrics["server_pid"] = active.pid
            if active.pid is not None:
                rss = tree_rss_bytes(active.pid) or None
                tree = self._tree(active.pid) or []
                cpu = self._cpu_percent(active.pid, tree) if tree else None
        share = self._host.read(tree, now)
        if share is not None and share.tree_wait is not None:
            # Recorded for a rule to come (soak/hostcpu.py): did the servers wait for a core?
            metrics["server_run_wait"] = round(share.tree_wait, 4)
        if active is not None and answering:
            client = self._http(active.base_url)
            counters = fetch_metrics(client)
            metrics.update({k: v for k, v in counters.items() if k.startswith("llamacpp:")})
            if "llamacpp:requests_processing" in counters:
                busy = int(counters["llamacpp:requests_processing"])
            kv = next((counters[k] for k in KV_USAGE_KEYS if k in counters), None)
            slots = fetch_slots(client)
            if slots:
                busy = sum(1 for s in slots if s.get("is_processing"))
                metrics["slots"] = [
                    {
                        "id": s.get("id"),
                        "is_processing": bool(s.get("is_processing")),
                        "id_task": s.get("id_task"),
                    }
                    for s in slots
                ]
                self._check_stuck(active, slots, now)
        point = ResourcePoint(
            now,
            active.key if active else None,
            rss,
            cpu,
            host_gpu.memory_used_bytes() if self._gpu else None,
            busy,
            kv,
            metrics,
            share.other if share is not None else None,
        )
        self.last = point
        self._emit(point)
        return point

    def _check_stuck(self, active: Active, slots: list[dict[str, Any]], now: datetime) -> None:
        busy_now = set()
        for slot in slots:
            if not slot.get("is_processing"):
                continue
            ident = (active.profile, active.pid or 0, slot.get("id"), slot.get("id_task"))
            busy_now.add(ident)
            since = self._busy_since.setdefault(ident, now)
            held = (now - since).total_seconds()
            if held > self._stuck_after and ident not in self._reported:
                self._reported.add(ident)
                self._emit(
                    IncidentRecord(
                        f"stuck_slot:{active.profile}:{active.pid}:{slot.get('id')}:"
                        f"{slot.get('id_task')}",
                        "stuck_slot",
                        now,
                        active.profile,
                        active.key,
                        detail=f"slot {slot.get('id')} of {active.profile} busy with task "
                        f"{slot.get('id_task')} for {held:.0f}s (> {self._stuck_after:.0f}s)",
                        evidence={
                            "slot": {k: slot.get(k) for k in ("id", "id_task", "n_ctx")},
                            "busy_s": round(held, 1),
                        },
                    )
                )
        # Forget slots that went idle: a daemon soaks for months, and a task id never recurs.
        for ident in list(self._busy_since):
            if ident not in busy_now:
                del self._busy_since[ident]
        self._reported &= busy_now

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
