"""Where a bench's wall time went: server starts, cost calibration, warm-ups, measured rounds,
the identity pass in each mode. A sweep's budget is spent on all of them, and the rounds a CI
needs are bought by shrinking the others, so the report shows each (`publish.time_split_text`)
and the JSON keeps them for the next budget's planning.

Durations, not decisions: no verdict or stopping rule reads them (the racer prices rounds from
the requests' own latencies), so the monotonic clock is read here directly, with an injectable
one for tests.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

SERVER_STARTS = "server starts"
CALIBRATION = "cost calibration"
WARMUP = "warm-ups"
ROUNDS = "measured rounds"
SERVED = "identity, as served"
EXACT = "identity, exact"
DISTRIBUTION = "distribution check"
PHASES = (SERVER_STARTS, CALIBRATION, WARMUP, ROUNDS, SERVED, EXACT, DISTRIBUTION)


@dataclass
class TimeSplit:
    clock: Callable[[], float] = time.monotonic
    seconds: dict[str, float] = field(default_factory=dict)
    rounds: list[float] = field(default_factory=list)
    """Each measured round's wall time, in order."""
    _open: dict[str, float] = field(default_factory=dict)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        started = self.clock()
        try:
            yield
        finally:
            self.add(name, self.clock() - started)

    def start(self, name: str) -> None:
        """For a phase that ends in another function (the servers' start, inside `with`)."""
        self._open[name] = self.clock()

    def stop(self, name: str) -> None:
        started = self._open.pop(name, None)
        if started is not None:
            self.add(name, self.clock() - started)

    def add(self, name: str, seconds: float) -> None:
        self.seconds[name] = self.seconds.get(name, 0.0) + max(0.0, seconds)

    def to_json(self) -> dict[str, Any]:
        return {
            "seconds": {k: round(self.seconds[k], 1) for k in PHASES if k in self.seconds},
            "rounds": [round(r, 1) for r in self.rounds],
        }
