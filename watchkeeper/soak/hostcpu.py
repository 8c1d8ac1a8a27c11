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
"""

from __future__ import annotations

import math
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


def _born_after(proc: psutil.Process, when: datetime) -> bool:
    try:
        return float(proc.create_time()) >= when.timestamp()
    except psutil.Error:
        return False


class HostCpuMeter:
    """Call `read(tree, now)` at every resource sample, from one thread: the first call sets
    the baseline (None); each later one returns the window since the previous call."""

    def __init__(self, *, cpu_times: Callable[[], Any] = psutil.cpu_times) -> None:
        self._cpu_times = cpu_times
        self._last: tuple[float, float] | None = None
        self._last_at: datetime | None = None
        self._procs: dict[int, tuple[psutil.Process, float]] = {}

    def _tree_seconds(self, tree: Iterable[psutil.Process]) -> float:
        """CPU seconds the servers' processes used since the previous read; updates the cache
        (exited processes leave it)."""
        used = 0.0
        current: dict[int, tuple[psutil.Process, float]] = {}
        for pid, (proc, before) in self._procs.items():
            spent = _spent(proc)
            if spent is not None:
                current[pid] = (proc, spent)
                used += max(spent - before, 0.0)
        for proc in tree:
            if proc.pid in current:
                continue
            spent = _spent(proc)
            if spent is None:
                continue
            current[proc.pid] = (proc, spent)
            if self._last_at is not None and _born_after(proc, self._last_at):
                used += spent
        self._procs = current
        return used

    def read(self, tree: Iterable[psutil.Process], now: datetime) -> HostCpuShare | None:
        """The window since the previous read, ``tree`` the active server's processes now."""
        busy, total = host_seconds(self._cpu_times())
        tree_s = self._tree_seconds(tree)
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
        return HostCpuShare(last_at, now, host, mine, other, core_s)
