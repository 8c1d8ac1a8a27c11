"""Synthetic paired soaks (a current arm and its reference, blocks alternating) for the drift
judges' tests: shared by test_soak_drift and test_soak_series_figures, so neither test module
imports the other (tests/test_import_graph.py)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import numpy as np

from watchkeeper.soak.views import SoakData, SoakSampleView

T0 = datetime(2026, 11, 30, 23, 58, tzinfo=UTC)
CYCLES = 16
Speed = Callable[[float], float]
"""tok/s at a fraction of the soak (0 at the start, 1 at the end)."""


def steady(_: float) -> float:
    return 100.0


def slowing(by: float) -> Speed:
    """100 tok/s for the first half, 100 * (1 - by) for the second: a neighbour's job that
    starts halfway through the night (what the failed CI run met)."""
    return lambda f: 100.0 * (1.0 - by) if f >= 0.5 else 100.0


def sliding(by: float) -> Speed:
    """A linear slide from 100 tok/s to 100 * (1 - by) over the soak."""
    return lambda f: 100.0 * (1.0 - by * f)


def view(arm: str, block: int, i: int, tps: float) -> SoakSampleView:
    at = T0 + timedelta(seconds=60 * block + 10 * i)
    return SoakSampleView(arm, 1, False, f"t{i}", at, 0.5, 64, tps, None, None, None, "ok", block)


def calm(_: float) -> float:
    return 0.0


def paired_soak(
    current: Speed,
    reference: Speed,
    *,
    aa: bool = False,
    seed: int = 0,
    scatter: Speed = calm,
    scattered: tuple[str, ...] = ("s", "s@ref"),
    cycles: int = CYCLES,
    requests: Callable[[str, float], int] = lambda _arm, _f: 5,
    request_sd: float = 0.01,
) -> SoakData:
    """Cycle k: a current block and a reference block back to back, order alternating, five
    requests each (`requests(arm, f)`) with 1% noise (`request_sd`), and a cycle-to-cycle host
    wobble of 2% that hits both.
    `scatter(f)`: the sd (log) of a wobble each block of the `scattered` arms gets on its own:
    a host whose load changes within a cycle."""
    rng = np.random.default_rng(seed)
    samples = []
    for k in range(cycles):
        f = k / (cycles - 1)
        host = float(rng.lognormal(0, 0.02))
        order = (("s", current), ("s@ref", reference))
        for slot, (arm, speed) in enumerate(order if k % 2 == 0 else order[::-1]):
            block = 2 * k + slot
            own = float(rng.lognormal(0, scatter(f))) if arm in scattered else 1.0
            for i in range(requests(arm, f)):
                noise = float(rng.lognormal(0, request_sd))
                samples.append(view(arm, block, i, speed(f) * host * own * noise))
    samples.sort(key=lambda s: s.started_at)
    params = {
        "profiles": ["s", "s@ref"],
        "concurrency": [1],
        "references": {"s": {"arm": "s@ref", "reference_id": 7, "aa": aa, "host_fingerprint": "h"}},
    }
    return SoakData(1, params, "completed", (), tuple(samples), (), ())
