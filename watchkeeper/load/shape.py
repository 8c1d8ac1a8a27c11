"""What a command is told about its load beyond `--concurrency`: an open loop's rate and
arrivals, a trace, caps. Plain values from the command line or a job file, handed to the
engine (campaign/load_shape.py shapes a bench plan with them)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from watchkeeper.load.records import Task


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
