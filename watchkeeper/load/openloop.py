"""Open-loop load: every request is sent at its scheduled arrival, however the server answers.

A dispatcher walks the schedule (load/arrivals.py) and hands each request to a thread of its
own at its time; nothing it does waits for a response. A server that stalls therefore sees
the requests pile up in its queue exactly as production would send them, and each request's
TTFT and latency include that queueing. Where the spec caps requests in flight
(`max_concurrency`, a client-side limit such as a proxy's), a request that finds the cap full
waits in the client; its latency is still counted from its scheduled arrival (the wait is
`queue_s`), and one that waits past `queue_deadline_s` is recorded as expired: an error sample
in the run, so every scheduled request is accounted for (coordinated omission avoided).

The clock and the sleep are injected so the dispatcher's timing can be tested on a fake
server; both default to the monotonic `time.perf_counter` and `time.sleep`.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from watchkeeper.load.arrivals import ArrivalSpec, schedule
from watchkeeper.load.client import chat
from watchkeeper.load.records import RequestSample, Task
from watchkeeper.server.endpoints import ServerClient

Clock = Callable[[], float]
Sleep = Callable[[float], None]
OnSample = Callable[[RequestSample], None]
Chat = Callable[..., RequestSample]


class FifoCap:
    """At most `n` holders, waiters served in arrival order (a proxy's queue is first come,
    first served; a semaphore's wake-up order is not, and a later arrival could overtake an
    earlier one and push it past its deadline)."""

    def __init__(self, n: int) -> None:
        self._free = n
        self._lock = threading.Lock()
        self._waiting: deque[threading.Event] = deque()

    def acquire(self, timeout: float | None) -> bool:
        with self._lock:
            if self._free > 0 and not self._waiting:
                self._free -= 1
                return True
            granted = threading.Event()
            self._waiting.append(granted)
        if granted.wait(timeout):
            return True
        with self._lock:
            if granted.is_set():  # handed over between the timeout and this lock
                return True
            self._waiting.remove(granted)
            return False

    def release(self) -> None:
        with self._lock:
            if self._waiting:
                self._waiting.popleft().set()
            else:
                self._free += 1


def expired_sample(task: Task, seq: int, waited_s: float, deadline_s: float) -> RequestSample:
    """The record of a request given up unsent: counted as a failure, never silently gone."""
    return RequestSample(
        task_id=task.id,
        category=task.category,
        seq=seq,
        started_at=datetime.now(UTC),
        queue_s=waited_s,
        error=f"queue deadline exceeded: not sent within {deadline_s:g} s of its arrival "
        f"(waited {waited_s:.3f} s)",
        expired=True,
    )


def run_open_loop(
    client: ServerClient,
    tasks: Sequence[Task],
    spec: ArrivalSpec,
    *,
    request: Chat | None = None,
    stream: int = 0,
    on_sample: OnSample | None = None,
    should_stop: Callable[[], bool] | None = None,
    clock: Clock = time.perf_counter,
    sleep: Sleep = time.sleep,
    **chat_options: object,
) -> list[RequestSample]:
    """Send `tasks` at the arrivals of `spec` (round `stream`'s draw); samples in task order.

    `request` replaces `load.client.chat` (same keywords); `chat_options` are passed to it
    (temperature, seed, sampling, ...)."""
    send: Chat = request or chat
    times = schedule(spec, len(tasks), stream=stream)
    cap = FifoCap(spec.max_concurrency) if spec.max_concurrency else None
    results: dict[int, RequestSample] = {}
    lock = threading.Lock()
    threads: list[threading.Thread] = []

    def record(seq: int, sample: RequestSample) -> None:
        with lock:
            results[seq] = sample
        if on_sample is not None:
            on_sample(sample)

    def one(seq: int, task: Task, due: float) -> None:
        if cap is not None:
            timeout = None
            if spec.queue_deadline_s is not None:
                timeout = max(0.0, due + spec.queue_deadline_s - clock())
            if not cap.acquire(timeout=timeout):
                record(seq, expired_sample(task, seq, clock() - due, spec.queue_deadline_s or 0))
                return
        try:
            record(seq, send(client, task, seq=seq, origin=due, **chat_options))
        finally:
            if cap is not None:
                cap.release()

    start = clock()
    for seq, (task, offset) in enumerate(zip(tasks, times, strict=True)):
        due = start + offset
        wait = due - clock()
        if wait > 0:
            sleep(wait)
        # Asked after the wait: a stop (or a soak block's end) that came while waiting for
        # this arrival sends nothing more.
        if should_stop is not None and should_stop():
            break
        thread = threading.Thread(target=one, args=(seq, task, due), name=f"arrival-{seq}")
        thread.daemon = True
        thread.start()
        threads.append(thread)
    for thread in threads:
        thread.join()
    return [results[seq] for seq in sorted(results)]
