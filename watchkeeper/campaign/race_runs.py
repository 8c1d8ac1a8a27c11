"""What the sweep's racer reads from a round's runs: its cells for the racing rule, each
arm's drafting (the idle rule), what the round cost and what the next will (the budget).
Pure readers of `RunResult`s, kept apart from `campaign/racer.py` so the racer holds its
policy alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from watchkeeper.analysis.racing_types import Cell
from watchkeeper.load.records import RunResult


def cells_of(runs: Sequence[RunResult]) -> list[Cell]:
    """Measured, clean requests as racing cells (server-reported decode tok/s)."""
    return [
        Cell(r.arm, s.task_id, s.category, r.round, s.decode_tps_server)
        for r in runs
        if not r.is_warmup
        for s in r.samples
        if s.ok and s.decode_tps_server
    ]


def drafted_in_round(runs: Sequence[RunResult]) -> dict[str, tuple[int, int]]:
    """Per arm, in the last measured round: (clean requests, draft tokens). llama-server reports
    `draft_n` only when drafting ran, so a request without it drafted nothing."""
    measured = [r for r in runs if not r.is_warmup]
    if not measured:
        return {}
    last = max(r.round for r in measured)
    out: dict[str, tuple[int, int]] = {}
    for r in measured:
        if r.round != last:
            continue
        clean = [s for s in r.samples if s.ok]
        requests, tokens = out.get(r.arm, (0, 0))
        out[r.arm] = (requests + len(clean), tokens + sum(s.draft_n or 0 for s in clean))
    return out


def round_seconds(
    runs: Sequence[RunResult], arms: Sequence[str], round_index: int | None = None
) -> float:
    """What a round (default: the last) cost `arms`: the sum of their requests' latencies."""
    if not runs:
        return 0.0
    which = round_index if round_index is not None else max(r.round for r in runs)
    return sum(
        s.latency_s or 0.0 for r in runs if r.round == which and r.arm in arms for s in r.samples
    )


def next_round_seconds(
    runs: Sequence[RunResult], arms: Sequence[str], later: Mapping[str, float]
) -> float:
    """What the next round will cost `arms`: the last round's, except after round 1, where
    each arm's is scaled by `later` (its later round's price over its round 1's: a kept
    process restores the prompts from round 2 on, campaign/round_price.py); an arm not in
    `later` as measured."""
    if not runs or max(r.round for r in runs) != 1 or all(later.get(a, 1.0) == 1.0 for a in arms):
        return round_seconds(runs, arms)
    return sum(round_seconds(runs, [a]) * later.get(a, 1.0) for a in arms)
