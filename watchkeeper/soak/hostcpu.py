"""The host's CPU used outside the soak's servers, sample by sample: what may explain a block
that fell off and came back (soak/dips.py).

A soak shares its host. When a neighbour's job (a test run, a compiler, another helper's
benchmark) takes the cores for a minute, the server's block in that minute reads slow, and
nothing in the server's own figures says why. The kernel does: `/proc/stat` counts every
core's busy time, each process's `/proc/<pid>/stat` its own. Between two reads, the host's
busy core-seconds minus those of the server's process tree are the CPU that everything else
used (`HostCpuShare.other`, a share of all cores over the window: 0.5 on a 2-core host is one
core busy all along).

The window is measured in the kernel's own units: its length is the change in the host's
total CPU time (idle included), so the shares need no clock and a slow read cannot skew them.
The injected ``now`` only stamps the window, so the judges can match it to a block's minutes.

"The server's tree" is every server process this meter has been shown (the active server and
its children), kept while it runs: in a paired soak the idle arm's server is the soak's own,
not a neighbour. A process first shown after the previous read counts in full when it was
born since then (a restarted server loading its model), else from its first read on. A
process that exits between reads takes its last window's CPU with it, which then reads as the
host's; guest time is already in `user` on Linux and is not counted twice. Memory pressure
the server causes (kswapd, kernel threads) also reads as the host's: the dip rule sets aside
at most one block a series for that reason.

What the CPU figures cannot tell: on a host kept busy by idle-priority neighbours (nice 19,
this 2-core host on 7 Dec 2026 read 100% busy in every 5-second window for 8 minutes), a
server that stalls on its own hands its cores to them, and the host's share rises exactly as
if a neighbour had taken them (docs/statistics-checks.md). The servers' threads' run-queue
delay does tell (`tree_wait`: the seconds they were runnable but waited for a core, per second
of the window, from `/proc/<pid>/task/*/schedstat`): a neighbour that takes the cores makes
the server wait; a stall of its own does not. It is recorded (the sampler's `server_run_wait`
metric) for a rule to be sized on real soaks; no verdict reads it yet.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psutil

IDLE_FIELDS = ("idle", "iowait")
"""`psutil.cpu_times` fields that are not busy time."""
DOUBLE_COUNTED = ("guest", "guest_nice")
"""Fields Linux already counts inside `user` and `nice`."""


@dataclass(frozen=True, slots=True)
class HostCpuShare:
    """One window's CPU, as shares of all cores (0..1) between two reads."""

    start: datetime
    end: datetime
    host: float
    """Every process's, busy over the window."""
    tree: float
    """The soak's servers' processes'."""
    other: float
    """The rest (`host - tree`, at least 0): what a neighbour used."""
    core_s: float
    """The window in core-seconds (its length times the cores): shares x this = seconds."""
    tree_wait: float | None = None
    """Seconds the servers' threads waited for a core, per second of the window (summed over
    threads: 2.0 is two threads waiting all along); None where /proc has no schedstat."""


def host_seconds(times: Any) -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole host from one `psutil.cpu_times()` reading."""
    fields: dict[str, float] = times._asdict()
    total = sum(v for k, v in fields.items() if k not in DOUBLE_COUNTED)
    idle = sum(fields.get(k, 0.0) for k in IDLE_FIELDS)
    return total - idle, total


def _spent(proc: psutil.Process) -> float | None:
    """A process's user + system CPU seconds; None once it is gone (or its pid reused)."""
    try:
        if not proc.is_running():
            return None
        t = proc.cpu_times()
    except psutil.Error:
        return None
    return float(t.user + t.system)


def _run_delay(proc: psutil.Process) -> float | None:
    """Seconds the process's threads have waited on a run queue (Linux schedstat, second
    field, ns), over the threads alive now; None without /proc schedstat."""
    try:
        tasks = list(os.scandir(f"/proc/{proc.pid}/task"))
    except OSError:
        return None
    total = 0
    for task in tasks:
        try:
            with open(f"{task.path}/schedstat", encoding="ascii") as f:
                total += int(f.read().split()[1])
        except (OSError, IndexError, ValueError):
            continue  # a thread that ended between the listing and the read
    return total / 1e9


def _born_after(proc: psutil.Process, when: datetime) -> bool:
    try:
        return float(proc.create_time()) >= when.timestamp()
    except psutil.Error:
        return False


class HostCpuMeter:
    """Call `read(tree, now)` at every resource sample, from one thread: the first call sets
    the baseline (None); each later one returns the window since the previous call."""

    def __init__(
        self, *, cpu_times: Callable[[], Any] = psutil.cpu_times, cores: int | None = None
    ) -> None:
        self._cpu_times = cpu_times
        self._cores = cores or psutil.cpu_count(logical=True) or 1
        self._last: tuple[float, float] | None = None
        self._last_at: datetime | None = None
        self._procs: dict[int, tuple[psutil.Process, float, float | None]] = {}
        self._wait_known = True

    def _tree_seconds(self, tree: Iterable[psutil.Process]) -> tuple[float, float]:
        """(CPU seconds, run-queue seconds) of the servers' processes since the previous read;
        updates the cache (exited processes leave it)."""
        used = waited = 0.0
        known = True
        current: dict[int, tuple[psutil.Process, float, float | None]] = {}
        for pid, (proc, before, delay_before) in self._procs.items():
            spent, delay = _spent(proc), _run_delay(proc)
            if spent is not None:
                current[pid] = (proc, spent, delay)
                used += max(spent - before, 0.0)
                if delay is None or delay_before is None:
                    known = False
                else:
                    waited += max(delay - delay_before, 0.0)
        for proc in tree:
            if proc.pid in current:
                continue
            spent, delay = _spent(proc), _run_delay(proc)
            if spent is None:
                continue
            current[proc.pid] = (proc, spent, delay)
            if self._last_at is not None and _born_after(proc, self._last_at):
                used += spent
                waited += delay or 0.0
                known = known and delay is not None
        self._procs = current
        self._wait_known = known
        return used, waited

    def read(self, tree: Iterable[psutil.Process], now: datetime) -> HostCpuShare | None:
        """The window since the previous read, ``tree`` the active server's processes now."""
        busy, total = host_seconds(self._cpu_times())
        tree_s, wait_s = self._tree_seconds(tree)
        last, last_at = self._last, self._last_at
        self._last, self._last_at = (busy, total), now
        if last is None or last_at is None:
            return None
        core_s = total - last[1]
        if core_s <= 0:
            return None
        host = min(max((busy - last[0]) / core_s, 0.0), 1.0)
        mine = min(tree_s / core_s, 1.0)
        other = max(host - mine, 0.0)
        if not math.isfinite(other):
            return None
        wait = wait_s / (core_s / self._cores) if self._wait_known else None
        return HostCpuShare(last_at, now, host, mine, other, core_s, wait)
