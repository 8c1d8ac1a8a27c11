"""The soak loop: closed-loop load for a fixed time, moving between profiles in blocks.

The duration is cut into blocks; block b runs (profile, concurrency) number b of the plan's
combinations, round robin, so drift over the night hits every profile. Inside a block,
`concurrency` workers each send their next request when the last one finished (requests in
flight = concurrency), starting staggered so a block never opens with a burst. The task order
is reshuffled every pass through the task set, from (seed, block, pass), so any stretch of
the night can be replayed; deeper than 1, every block replays the same order, so blocks
compare like with like (`plan.block_cycle` says why). Before a block's load starts, when
`soak.probe_interval_s` has passed since that arm's last probe at that concurrency, the
probe task is sent alone at temperature 0 with top-2 logprobs: soak/probes.py weighs those
answers against a reference by tokens, as the bench weighs a divergence.

The workers are one thread pool, and each server one HTTP client (a new one after a restart),
for the whole soak: however long it runs, the soak holds the same threads and clients instead
of building and dropping them every block (the daemon soaks every night for months).

With a reference arm, both servers of the pair restart every `soak.restart_every` cycles (at
a cycle's start, between blocks), so the pair's own offset becomes a replicate (soak/paired.py).
Every block that runs on a server that had just started — the soak's start or resume, a planned
restart, a crash restart — is recorded as a `cold_block` incident; its cycle is warm-up. Profiles
soaked alone keep their process: theirs is the long-lived RSS view.

With an arrival spec (`soak --rate`), each block is open-loop instead (load/openloop.py): its
requests are sent at the spec's arrivals for the block's time, however the server answers,
and the block's concurrency caps the requests in flight (a proxy's limit); one that waits
past the queueing deadline is recorded as an expired error sample, never dropped.

SIGTERM/SIGINT only set the stop event: each worker finishes the request it is in, the block
is closed as interrupted, the spool is flushed and the servers are stopped by the caller.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import replace
from datetime import UTC, datetime

from watchkeeper.config import Config
from watchkeeper.load.client import chat
from watchkeeper.load.openloop import run_open_loop
from watchkeeper.load.records import RequestSample, RunPurpose, Task
from watchkeeper.soak.clients import ServerClients
from watchkeeper.soak.plan import ResumePoint, SoakOutcome, SoakPlan, TaskCycle, block_cycle
from watchkeeper.soak.records import (
    IncidentRecord,
    RunClose,
    RunKey,
    RunOpen,
    SampleRecord,
)
from watchkeeper.soak.sampler import Active, ResourceSampler
from watchkeeper.soak.spool import SpoolingWriter
from watchkeeper.soak.supervisor import ServerSupervisor

OnSample = Callable[[RunKey, RequestSample], None]
Progress = Callable[[str], None]


class SoakLoop:
    def __init__(
        self,
        config: Config,
        plan: SoakPlan,
        *,
        supervisors: dict[str, ServerSupervisor],
        profile_ids: dict[str, int],
        writer: SpoolingWriter,
        stop: threading.Event,
        on_sample: OnSample | None = None,
        progress: Progress | None = None,
    ) -> None:
        self._config, self._plan = config, plan
        self._soak = config.soak
        self._sups, self._ids = supervisors, profile_ids
        self._writer, self._stop = writer, stop
        self._on_sample = on_sample
        self._progress = progress or (lambda _m: None)
        self.timeout_s = self._soak.request_timeout_s or config.server.request_timeout_s
        stuck = self._soak.stuck_after_s or 2 * self.timeout_s
        self._sampler = ResourceSampler(emit=writer.add, stuck_after_s=stuck)
        self._active: Active | None = None
        self._lock = threading.Lock()
        self._completed = self._failed = 0
        self._pool: ThreadPoolExecutor | None = None
        self._generations: dict[str, int] = {}
        """Per profile, the server generation its last block started on (this run)."""
        self._last_probe: dict[tuple[str, int], float] = {}
        """Per (profile, concurrency), when its last probe was sent (monotonic)."""
        self._clients = ServerClients(
            request_timeout_s=self.timeout_s, pool_size=max(plan.concurrencies)
        )

    def run(self, resume: ResumePoint) -> SoakOutcome:
        self._pool = ThreadPoolExecutor(
            max_workers=max(self._plan.concurrencies), thread_name_prefix="soak-worker"
        )
        monitor_stop = threading.Event()
        monitor = threading.Thread(
            target=self._monitor, args=(monitor_stop,), name="soak-monitor", daemon=True
        )
        monitor.start()
        elapsed, block, blocks = resume.elapsed_s, resume.next_block, 0
        try:
            while not self._stop.is_set():
                remaining = self._plan.duration_s - elapsed
                live = [p for p in self._plan.profiles if not self._sups[p].stopped]
                if remaining < 1.0 or not live:
                    break
                profile, concurrency = self._plan.combination(block)
                if self._sups[profile].stopped:
                    block += 1
                    continue
                t0 = time.monotonic()
                if blocks and self._plan.restarts_before(block):
                    self._renew_pairs(block)
                self._run_block(block, profile, concurrency, min(self._plan.block_s, remaining))
                elapsed += time.monotonic() - t0
                block, blocks = block + 1, blocks + 1
                self._writer.drain()
        finally:
            self._pool.shutdown(wait=True)
            self._clients.close()
            monitor_stop.set()
            monitor.join(timeout=30)
            self._sampler.close()
        return SoakOutcome(
            interrupted=self._stop.is_set(),
            blocks=blocks,
            completed=self._completed,
            failed=self._failed,
            restarts=sum(s.restarts for s in self._sups.values()),
            stopped_profiles=tuple(p for p, s in self._sups.items() if s.stopped),
            elapsed_s=elapsed,
        )

    def _renew_pairs(self, block: int) -> None:
        """Fresh processes for both arms of every pair (a replicate of the pair's offset);
        profiles soaked alone keep theirs: their RSS is the long-lived-process view."""
        arms = {arm for pair in self._plan.pairs for arm in pair}
        self._progress(f"block {block}: restarting {', '.join(sorted(arms))} (soak.restart_every)")
        for arm in sorted(arms):
            if not self._sups[arm].stopped:
                self._sups[arm].renew()

    def _mark_cold(self, sup: ServerSupervisor, key: RunKey, why: str) -> None:
        """A block on a process that had just started (or restarted during it): its cycle is
        warm-up, not judged (soak.paired). Recorded, so a resumed soak is judged the same."""
        self._writer.add(
            IncidentRecord(
                f"cold_block:{key.arm}:{key.block}:{key.concurrency}:{sup.generation}",
                "cold_block",
                datetime.now(UTC),
                sup.profile,
                key,
                detail=f"block {key.block} of {key.arm}: {why}",
                evidence={"block": key.block, "generation": sup.generation, "reason": why},
            )
        )

    def _monitor(self, done: threading.Event) -> None:
        while not done.wait(self._soak.sample_interval_s):
            for sup in self._sups.values():
                sup.watch()
            active, answering = self._active, True
            if active is not None:
                sup = self._sups[active.profile]
                _, url = sup.current()
                active = Active(active.profile, active.key, url, sup.pid)
                answering = sup.answering
            with contextlib.suppress(OSError):
                self._sampler.sample(active, answering=answering)

    def _run_block(self, index: int, profile: str, concurrency: int, duration_s: float) -> None:
        sup = self._sups[profile]
        key = RunKey(profile, index, concurrency, self._ids[profile])
        probe_key = replace(key, purpose=RunPurpose.PROBE)
        started = datetime.now(UTC)
        self._writer.add(RunOpen(key, started, sup.argv))
        generation = sup.generation
        seen = self._generations.get(profile)
        self._generations[profile] = generation
        if seen is None:
            self._mark_cold(sup, key, "first block since the soak started or resumed")
        elif seen != generation:
            self._mark_cold(sup, key, "first block on a restarted server")
        self._active = Active(profile, key, sup.base_url, sup.pid)
        self._progress(
            f"block {index}: {profile} at concurrency {concurrency} for {duration_s:.0f}s"
        )
        cycle = block_cycle(
            self._plan.tasks, seed=self._plan.seed, block=index, concurrency=concurrency
        )
        block = _Block(key, probe_key, cycle)
        if self._probe_due(profile, concurrency):
            self._probe(sup, block)
        deadline = time.monotonic() + duration_s
        if self._plan.arrival is not None:
            self._open_block(sup, block, deadline, concurrency, index)
        else:
            self._closed_block(sup, block, deadline, concurrency, profile)
        self._clients.close_retired()
        if sup.generation != generation:
            self._mark_cold(sup, key, "the server restarted during the block")
        status = "interrupted" if self._stop.is_set() else "stopped" if sup.stopped else "completed"
        error = f"{block.failed} of {block.sent} requests failed" if block.failed else None
        now = datetime.now(UTC)
        self._writer.add(RunClose(key, now, status, sup.peak_rss_bytes or None, error))
        if block.probe_opened:
            self._writer.add(RunClose(probe_key, now, status, sup.peak_rss_bytes or None))
        self._progress(
            f"block {index} {status}: {block.sent - block.failed}/{block.sent} requests ok"
        )

    def _closed_block(
        self,
        sup: ServerSupervisor,
        block: _Block,
        deadline: float,
        concurrency: int,
        profile: str,
    ) -> None:
        assert self._pool is not None
        workers = [
            self._pool.submit(
                self._worker,
                sup,
                block,
                deadline,
                i * self._soak.ramp_s / concurrency,
                f"soak-{profile}-{i}",
            )
            for i in range(concurrency)
        ]
        wait(workers)
        for worker in workers:
            if (exc := worker.exception()) is not None:
                # As an uncaught exception in a worker thread always did: printed, and the
                # block goes on with the other workers.
                traceback.print_exception(exc)

    def _open_block(
        self, sup: ServerSupervisor, block: _Block, deadline: float, concurrency: int, index: int
    ) -> None:
        """The block's requests at the plan's arrivals (drawn per block from the soak's seed),
        until its time is up; at most `concurrency` in flight. A server that cannot be
        recovered ends the dispatch, as it ends a closed-loop worker."""
        assert self._plan.arrival is not None
        spec = replace(self._plan.arrival, max_concurrency=concurrency)
        remaining = max(0.0, deadline - time.monotonic())
        # More arrivals than the block can hold (a Poisson draw runs ahead of its mean): the
        # deadline, not the count, ends the block.
        tasks = [block.cycle.next() for _ in range(math.ceil(2 * spec.rate * remaining) + 8)]
        halted = threading.Event()

        def send(_client: object, task: Task, *, seq: int, origin: float) -> RequestSample:
            del seq
            if not self._send(sup, block, task, origin=origin):
                halted.set()
            return RequestSample(task.id, task.category, -1, datetime.now(UTC))

        def expired(sample: RequestSample) -> None:
            if sample.expired:
                self._record(block, block.key, replace(sample, seq=block.next_seq(False)))

        run_open_loop(
            None,  # type: ignore[arg-type]  # `send` talks to the supervisor's current server
            tasks,
            spec,
            request=send,
            stream=index,
            on_sample=expired,
            should_stop=lambda: (
                self._stop.is_set()
                or halted.is_set()
                or sup.stopped
                or time.monotonic() >= deadline
            ),
        )

    def _worker(
        self, sup: ServerSupervisor, block: _Block, deadline: float, delay: float, name: str
    ) -> None:
        threading.current_thread().name = name
        if delay and self._stop.wait(delay):
            return
        while not self._stop.is_set() and time.monotonic() < deadline and not sup.stopped:
            if not self._send(sup, block, None):
                return

    def _probe_due(self, profile: str, concurrency: int) -> bool:
        """At most one probe per (arm, concurrency) every `soak.probe_interval_s`, so each
        level of each arm keeps its own series of probes."""
        now = time.monotonic()
        last = self._last_probe.get((profile, concurrency))
        if last is not None and now - last < self._soak.probe_interval_s:
            return False
        self._last_probe[(profile, concurrency)] = now
        return True

    def _probe(self, sup: ServerSupervisor, block: _Block) -> None:
        """The temperature-0 probe, sent before the block's load starts, with nothing else in flight
        on any server. Why alone: at concurrency 4 a probe shares its batches with load requests,
        and a batch of another size adds its floats in another order, enough to change a healthy
        server's answer (the figures: docs/measurements.md#figures-behind-the-code). Alone, the
        probe asks only what the soak asks: does the server still answer as it did at the start of
        the night."""
        if not self._stop.is_set() and not sup.stopped:
            block.open_probe(self._writer, sup.argv)
            self._send(sup, block, self._plan.probe, probe=True)

    def _send(
        self,
        sup: ServerSupervisor,
        block: _Block,
        task: Task | None,
        *,
        origin: float | None = None,
        probe: bool = False,
    ) -> bool:
        """One request of the block (or its probe), recorded. False: the server failed and
        could not be recovered, so the caller sends no more."""
        gen, url = sup.current()
        client = self._clients.get(sup.profile, gen, url)
        key = block.probe_key if probe else block.key
        if task is None:
            task = block.cycle.next()
        sample = chat(
            client,
            task,
            seq=block.next_seq(probe),
            temperature=0.0,
            top_logprobs=2 if probe else 0,
            seed=self._plan.seed,
            sampling=None if probe else self._plan.sampler(sup.profile),
            origin=origin,
        )
        self._record(block, key, sample)
        if sample.error is not None:
            self._failed_request(sup, key, sample)
            return sup.recover(gen)
        return True

    def _record(self, block: _Block, key: RunKey, sample: RequestSample) -> None:
        self._writer.add(SampleRecord(key, sample))
        block.count(sample)
        with self._lock:
            if sample.ok:
                self._completed += 1
            else:
                self._failed += 1
        if self._on_sample is not None:
            self._on_sample(key, sample)

    def _failed_request(self, sup: ServerSupervisor, key: RunKey, sample: RequestSample) -> None:
        if not (sample.error or "").startswith("timeout"):
            return  # transport errors around a crash are judged by the supervisor
        self._writer.add(
            IncidentRecord(
                f"request_timeout:{key.arm}:{key.block}:{key.concurrency}:{sample.seq}",
                "request_timeout",
                datetime.now(UTC),
                sup.profile,
                key,
                detail=f"{sample.task_id} timed out after {sample.latency_s or 0:.1f}s "
                f"(limit {self.timeout_s:.0f}s between bytes); the loop goes on",
                evidence={"task_id": sample.task_id, "seq": sample.seq, "error": sample.error},
            )
        )


class _Block:
    """Counters shared by the workers of one block."""

    def __init__(self, key: RunKey, probe_key: RunKey, cycle: TaskCycle) -> None:
        self.key, self.probe_key, self.cycle = key, probe_key, cycle
        self._lock = threading.Lock()
        self._seq = {False: 0, True: 0}
        self.probe_opened = False
        self.sent = self.failed = 0

    def open_probe(self, writer: SpoolingWriter, argv: tuple[str, ...]) -> None:
        with self._lock:
            if not self.probe_opened:
                self.probe_opened = True
                writer.add(RunOpen(self.probe_key, datetime.now(UTC), argv))

    def next_seq(self, probe: bool) -> int:
        with self._lock:
            seq = self._seq[probe]
            self._seq[probe] += 1
            return seq

    def count(self, sample: RequestSample) -> None:
        with self._lock:
            self.sent += 1
            if not sample.ok:
                self.failed += 1
