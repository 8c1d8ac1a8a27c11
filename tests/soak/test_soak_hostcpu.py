"""The host's CPU used outside the soak's servers (soak/hostcpu.py), read from this host's
kernel: a real process that burns a fixed amount of its own CPU time counts as the server's
when it is in the tree and as the host's when it is not. A busy neighbour only adds to the
host's share, so every assertion is a lower bound on CPU a test process itself used (its own
`time.process_time`, not the wall clock) or an identity of the shares; the windows are
stamped by an injected `now`."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

import psutil

from watchkeeper.soak.hostcpu import HostCpuMeter, HostCpuShare, host_seconds
from watchkeeper.soak.records import Item, ResourcePoint, item_from_json, item_to_json
from watchkeeper.soak.sampler import ResourceSampler

T0 = datetime(2026, 11, 24, 23, 58, tzinfo=UTC)
BURN_S = 0.3
"""CPU seconds each burner spends (its own process time: a starved burner takes longer, it
never burns less)."""
SLACK_S = 0.08
"""The kernel's accounting: /proc/stat counts in ticks (10 ms), a process's time is exact."""
BURNER = (
    "import sys, time\n"
    "print('ready', flush=True)\n"
    "sys.stdin.readline()\n"
    f"while time.process_time() < {BURN_S}:\n"
    "    pass\n"
    "print('done', flush=True)\n"
    "sys.stdin.readline()\n"
)


@contextmanager
def _burner() -> Iterator[subprocess.Popen[str]]:
    with subprocess.Popen(
        [sys.executable, "-c", BURNER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as proc:
        try:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
            yield proc
        finally:
            proc.kill()
            proc.wait(timeout=30)


def _burn(proc: subprocess.Popen[str]) -> None:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("go\n")
    proc.stdin.flush()
    assert proc.stdout.readline().strip() == "done"


def _identities(share: HostCpuShare) -> None:
    assert 0.0 <= share.tree <= share.host <= 1.0
    assert share.other == max(share.host - share.tree, 0.0)
    assert share.core_s > 0


def test_the_server_tree_s_cpu_is_not_the_host_s_and_a_neighbour_s_is() -> None:
    meter = HostCpuMeter()
    with _burner() as server, _burner() as neighbour:
        tree = [psutil.Process(server.pid)]
        assert meter.read(tree, T0) is None  # the baseline
        _burn(server)
        _burn(neighbour)
        share = meter.read(tree, T0 + timedelta(seconds=5))
    assert share is not None
    assert (share.start, share.end) == (T0, T0 + timedelta(seconds=5))
    _identities(share)
    # The server's burn is the tree's; the neighbour's (outside the tree) is the host's.
    assert share.tree * share.core_s >= BURN_S - SLACK_S
    assert share.other * share.core_s >= BURN_S - SLACK_S


def test_a_server_once_shown_stays_the_soak_s_and_one_born_since_counts_in_full() -> None:
    """A paired soak's idle arm is the soak's own server, not a neighbour; a restarted server
    first shown after it started counts from its birth (its model load is the server's)."""
    meter = HostCpuMeter()
    with _burner() as first:
        assert meter.read([psutil.Process(first.pid)], T0) is None
        with _burner() as restarted:
            _burn(first)
            _burn(restarted)
            # Only the new server is active now; the first is still remembered.
            share = meter.read([psutil.Process(restarted.pid)], T0 + timedelta(seconds=5))
    assert share is not None
    _identities(share)
    assert share.tree * share.core_s >= 2 * BURN_S - 2 * SLACK_S


def test_a_server_waiting_on_nothing_used_no_cpu_and_waited_for_no_core() -> None:
    """The servers' run-queue delay (`tree_wait`): a process blocked on a read is not
    runnable, so however busy the host, it neither runs nor waits for a core."""
    meter = HostCpuMeter()
    with _burner() as idle, _burner() as neighbour:
        tree = [psutil.Process(idle.pid)]
        assert meter.read(tree, T0) is None
        _burn(neighbour)
        share = meter.read(tree, T0 + timedelta(seconds=5))
    assert share is not None
    assert share.tree == 0.0 and share.tree_wait == 0.0
    assert share.other * share.core_s >= BURN_S - SLACK_S


def test_host_seconds_leave_out_idle_and_the_guest_time_already_in_user() -> None:
    times = psutil.cpu_times()
    busy, total = host_seconds(times)
    assert 0.0 < busy < total
    fields = times._asdict()
    assert total == sum(fields.values()) - fields.get("guest", 0.0) - fields.get("guest_nice", 0.0)


def test_the_spool_keeps_the_host_share_and_reads_points_written_before_it() -> None:
    point = ResourcePoint(T0, None, host_other_cpu=0.25)
    assert item_from_json(item_to_json(point)) == point
    old = item_to_json(point)
    del old["host_other_cpu"]
    back = item_from_json(old)
    assert isinstance(back, ResourcePoint) and back.host_other_cpu is None


def test_the_sampler_puts_the_host_s_share_on_every_point_after_the_first() -> None:
    """Two reads within one kernel tick have no window (None); the burner between them makes
    one (its CPU, outside any server, is the host's)."""
    emitted: list[Item] = []
    sampler = ResourceSampler(emit=emitted.append, stuck_after_s=60.0, gpu=False)
    try:
        with _burner() as neighbour:
            first = sampler.sample(None)
            _burn(neighbour)
            second = sampler.sample(None)
    finally:
        sampler.close()
    assert first.host_other_cpu is None
    assert second.host_other_cpu is not None and 0.0 < second.host_other_cpu <= 1.0
    assert emitted == [first, second]
