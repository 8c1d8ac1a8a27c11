"""Closed-loop load: `concurrency` workers, each sending its next request when the last one
finished, so the number of requests in flight is exactly the concurrency (no burst, no queue
building up behind a slow server). With `LoadSettings.arrival` set, `run_tasks` sends
open-loop instead (load/openloop.py): at a request rate, on a schedule the responses never
delay.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from watchkeeper.load.arrivals import ArrivalSpec
from watchkeeper.load.client import chat
from watchkeeper.load.openloop import run_open_loop
from watchkeeper.load.probe_client import probe_chat
from watchkeeper.load.records import RequestSample, Task
from watchkeeper.load.sampling import SamplingSettings
from watchkeeper.server.endpoints import ServerClient

if TYPE_CHECKING:
    from watchkeeper.server.launch import PreparedProfile

OnSample = Callable[[RequestSample], None]


@dataclass(frozen=True, slots=True)
class LoadSettings:
    concurrency: int = 1
    temperature: float = 0.0
    top_logprobs: int = 0
    """0 for every request whose timings become throughput: on a GPU top-2 logprobs halved the
    baseline's decode speed. Identity probes are separate requests that set it."""
    seed: int = 42
    sampling: SamplingSettings | None = None
    """The full sampler (load/sampling.py); when set it replaces `temperature` and `seed`."""
    cache_prompt: bool = False
    """Let the server reuse a cached prompt (load/client.build_payload): only for requests
    whose tokens nobody compares and whose figure is decode speed (the sweep's rounds)."""
    arrival: ArrivalSpec | None = None
    """Open-loop: requests sent at this schedule's arrivals (load/arrivals.py) instead of by
    `concurrency` workers; `concurrency` is then only the server's slots."""
    stream: int = 0
    """Which draw of the arrival schedule (the round: both arms of a round get the same)."""
    streamed: bool = True
    """False for identity probes (load/probe_client.py): unstreamed, every output token comes
    with its id, draft-accepted and tool-call tokens included. Never for timed requests."""

    def sampler_options(self) -> dict[str, Any]:
        """The sampler keywords both request functions take (load/client.chat for timed
        requests, load/probe_client.probe_chat for probes): one place, so the two never
        drift apart."""
        return {
            "temperature": self.temperature,
            "top_logprobs": self.top_logprobs,
            "seed": self.seed,
            "sampling": self.sampling,
        }


def arm_load_settings(
    prepared: Sequence[PreparedProfile],
    sampling: SamplingSettings,
    concurrency: int,
    *,
    cache_prompt: bool = False,
    arrival: ArrivalSpec | None = None,
) -> dict[str, LoadSettings]:
    """Each arm's throughput-request settings: the command's sampler under its own keys. No
    logprobs: they slow the baseline's decode (DESIGN.md) and would bias every speed-up."""
    return {
        p.name: LoadSettings(
            concurrency=concurrency,
            temperature=s.temperature,
            seed=s.seed,
            sampling=s,
            cache_prompt=cache_prompt,
            arrival=arrival,
        )
        for p in prepared
        for s in [sampling.with_profile(p.profile)]
    }


def run_tasks(
    client: ServerClient,
    tasks: Sequence[Task],
    settings: LoadSettings,
    *,
    on_sample: OnSample | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> list[RequestSample]:
    """Send every task once; returns samples in task order (seq = position in `tasks`)."""
    if settings.arrival is not None:
        return run_open_loop(
            client,
            tasks,
            settings.arrival,
            stream=settings.stream,
            on_sample=on_sample,
            should_stop=should_stop,
            cache_prompt=settings.cache_prompt,
            **settings.sampler_options(),
        )
    work: queue.Queue[tuple[int, Task]] = queue.Queue()
    for seq, task in enumerate(tasks):
        work.put((seq, task))
    results: dict[int, RequestSample] = {}
    lock = threading.Lock()

    def worker() -> None:
        while should_stop is None or not should_stop():
            try:
                seq, task = work.get_nowait()
            except queue.Empty:
                return
            sample = (
                chat(
                    client,
                    task,
                    seq=seq,
                    cache_prompt=settings.cache_prompt,
                    **settings.sampler_options(),
                )
                if settings.streamed
                else probe_chat(client, task, seq=seq, **settings.sampler_options())
            )
            with lock:
                results[seq] = sample
            if on_sample is not None:
                on_sample(sample)

    if settings.concurrency == 1:
        worker()
    else:
        threads = [
            threading.Thread(target=worker, name=f"load-{i}", daemon=True)
            for i in range(settings.concurrency)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    return [results[seq] for seq in sorted(results)]
