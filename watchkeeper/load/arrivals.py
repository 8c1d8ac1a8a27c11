"""When each request of an open-loop run is sent: an arrival schedule, fixed before any request.

Production traffic is open-loop: requests arrive whether or not the last one has been
answered. A closed loop (load/runner.py) sends the next request only when a worker is free, so
a server that stalls slows the load down and the stall hides in the few requests that waited
(coordinated omission). Here the schedule is drawn first, from a seeded generator, and the
runner (load/openloop.py) sends each request at its time, however the server answers.

Inter-arrival gaps are gamma distributed with mean 1 / rate and shape `burstiness` (as vLLM's
`--burstiness`): 1 is a Poisson process (exponential gaps), below 1 the arrivals bunch into
bursts, above 1 they are more even than Poisson; `constant` spaces them exactly 1 / rate apart.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from watchkeeper.errors import ConfigError

Process = Literal["poisson", "constant"]


@dataclass(frozen=True, slots=True)
class ArrivalSpec:
    """An open-loop load: requests per second, how they arrive, and when a queued request is
    given up. Plain values so the plan, the campaign row and the report can carry it."""

    rate: float
    """Mean requests per second."""
    process: Process = "poisson"
    burstiness: float = 1.0
    """Gamma shape of the gaps (poisson only): 1 Poisson, < 1 bursty, > 1 even."""
    seed: int = 42
    max_concurrency: int | None = None
    """Requests in flight at most (client side); None: no cap, every request is sent on time
    and queues in the server. With a cap, a request that finds it full waits in the client,
    and that wait counts in its latency."""
    queue_deadline_s: float | None = None
    """A request still waiting to be sent this long after its arrival is given up and
    recorded as expired (an error sample), never dropped silently. None: no deadline."""
    offsets: tuple[float, ...] | None = None
    """A trace's own arrival offsets (seconds from the first), replayed instead of drawing
    gaps; `rate` is then the speed factor (2.0: twice as fast as recorded)."""

    def __post_init__(self) -> None:
        if not (self.rate > 0 and math.isfinite(self.rate)):
            raise ConfigError(f"request rate must be a positive number, not {self.rate}")
        if self.process not in ("poisson", "constant"):
            raise ConfigError(f"arrival process must be poisson or constant, not {self.process!r}")
        if not self.burstiness > 0:
            raise ConfigError(f"burstiness must be positive, not {self.burstiness}")
        if self.max_concurrency is not None and self.max_concurrency < 1:
            raise ConfigError("max concurrency must be at least 1")
        if self.queue_deadline_s is not None and not self.queue_deadline_s > 0:
            raise ConfigError("the queueing deadline must be positive")

    @property
    def label(self) -> str:
        if self.offsets is not None:
            return f"trace x{self.rate:g}"
        if self.process == "constant":
            return f"{self.rate:g} req/s constant"
        shape = "" if self.burstiness == 1.0 else f", burstiness {self.burstiness:g}"
        return f"{self.rate:g} req/s poisson{shape}"

    def to_json(self) -> dict[str, object]:
        return {
            "rate": self.rate,
            "process": self.process,
            "burstiness": self.burstiness,
            "seed": self.seed,
            "max_concurrency": self.max_concurrency,
            "queue_deadline_s": self.queue_deadline_s,
            "trace": self.offsets is not None,
        }


def schedule(spec: ArrivalSpec, n: int, *, stream: int = 0) -> list[float]:
    """Send times of `n` requests in seconds from the run's start (the first at 0).

    `stream` gives each round its own draw from the same seed, so rounds differ as real
    traffic would while both arms of one round get the same schedule (a paired comparison)."""
    if n <= 0:
        return []
    if spec.offsets is not None:
        return trace_schedule(spec.offsets, n, speed=spec.rate)
    if spec.process == "constant":
        return [i / spec.rate for i in range(n)]
    rng = np.random.default_rng([spec.seed, stream])
    gaps = rng.gamma(spec.burstiness, 1.0 / (spec.rate * spec.burstiness), size=n - 1)
    return [0.0, *(float(t) for t in np.cumsum(gaps))]


def trace_schedule(offsets: Sequence[float], n: int, *, speed: float = 1.0) -> list[float]:
    """A recorded trace's arrivals in task order (the importer sorts tasks by arrival), shifted
    to start at 0 and compressed by `speed`; a trace shorter than `n` repeats after its own
    span plus one mean gap."""
    if not offsets:
        raise ConfigError("a trace replay needs arrival times")
    start = min(offsets)
    base = [o - start for o in offsets]
    last = max(base)
    span = last + (last / (len(base) - 1) if len(base) > 1 and last > 0 else 1.0)
    out = [base[i % len(base)] + (i // len(base)) * span for i in range(n)]
    return [t / speed for t in out]
