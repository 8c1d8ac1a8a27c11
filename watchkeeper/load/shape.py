"""What a command is told about its load beyond `--concurrency`: an open loop's rate and
arrivals, a trace, caps. Plain values from the command line or a job file, handed to the
engine (campaign/load_shape.py shapes a bench plan with them)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from watchkeeper.load.records import Task

if TYPE_CHECKING:
    from watchkeeper.config.requests import OpenLoop

LEVEL_MIN_S = 10.0
"""Seconds of arrivals per open-loop ladder level and round, at least: a level of 6 arrivals
is all ramp-up and drain, never the steady state its rate names."""
LEVEL_MIN_REQUESTS = 10


@dataclass(frozen=True, slots=True)
class LoadShape:
    """What the command line says about the load beyond `--concurrency`."""

    rate: float | None = None
    """Requests per second, open loop; None: the closed loop."""
    arrival: str | None = None
    burstiness: float | None = None
    queue_deadline_s: float | None = None
    max_concurrency: int | None = None
    max_tokens: int = 0
    """Cap on every task's max_tokens (0: the tasks' own), both arms alike."""
    requests: int | None = None
    """Requests per arm and round: the tasks repeated up to it (None: each task once; a
    closed loop at concurrency c sends at least 2 x c so every chunk is full)."""
    trace: Sequence[float] | None = None
    """A trace's arrival offsets (load/traffic.py), replayed at `rate` x its own speed."""
    trace_tasks: tuple[Task, ...] | None = None
    """The trace's requests, in arrival order: they replace the task set."""
    level_min_s: float = LEVEL_MIN_S
    """A ladder's rate level sends at least rate x this many requests per arm and round."""
    level_min_requests: int = LEVEL_MIN_REQUESTS
    """A ladder level sends at least this many requests per arm and round."""

    @classmethod
    def from_request(
        cls, request: OpenLoop, *, max_concurrency: int | None = None
    ) -> LoadShape | None:
        """The open loop a command's request asks for (`rate` and its arrivals: the sweep's
        and the soak's, config/requests.OpenLoop), with the sweep's in-flight cap; None: no
        rate, the closed loop (where a cap alone changes nothing). A trace or a token cap is
        the bench's command line's, never a request's."""
        if request.rate is None:
            return None
        return cls(
            rate=request.rate,
            arrival=request.arrival,
            burstiness=request.burstiness,
            queue_deadline_s=request.queue_deadline_s,
            max_concurrency=max_concurrency,
        )
