"""The race's A/A control (analysis/aa_control.py) on simulated sweeps: how often an identical
twin reads biased (every pick withheld for nothing) and how often a real handicap of the
baseline's server is caught, through the intervals the sweep itself computes: over tasks for a
one-round sweep (`racing_tasks.arm_task_cis`), over rounds and tasks otherwise
(`Table.ratio`, the bootstrap the race reads).

The shapes are the ones real servers gave: cell noise per arm from the A/A bench of
7 Dec 2026 on this host (two identical `--spec-type none` servers: per-task log ratios with
sd ~0.08, so ~0.057 per arm), a drift shared by an arm's half of a round, and a stall shape
(a few cells of the baseline 30% slow, the recurring-dip shape of issue 75).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from watchkeeper.analysis.racing_tasks import arm_task_cis
from watchkeeper.analysis.racing_types import Cell, RaceSettings, Table
from watchkeeper.analysis.stats import classify

BASE, CONTROL = "base", "control"
BIASED = ("faster", "slower")
CATEGORIES = ("prose", "tool_call", "code_edit", "code_gen", "summarize", "multi_turn")


@dataclass(frozen=True, slots=True)
class Shape:
    cell_sd: float = 0.057
    round_sd: float = 0.02
    """Drift shared by an arm's half of a round (the race's `round_drift_sd`): only where
    there are rounds to drift between; a one-round sweep has its process offsets instead."""
    instance_sd: float = 0.0057
    """Each server process's own offset for the whole sweep: 0.8% between process pairs
    here (`benchmarks/instance_effect.py`), so 0.8% / sqrt(2) an arm."""
    stall_share: float = 0.0
    """Share of the baseline's cells that stall (30% slower): a recurring dip."""


def sweep_cells(
    rng: np.random.Generator, *, tasks: int, rounds: int, handicap: float, shape: Shape
) -> list[Cell]:
    """tok/s cells of the baseline and its twin; the baseline's server decodes `handicap`
    slower (0.1: 10%) than an identical one."""
    out = []
    offset = {arm: rng.normal(0, shape.instance_sd) for arm in (BASE, CONTROL)}
    round_sd = shape.round_sd if rounds > 1 else 0.0
    for r in range(1, rounds + 1):
        drift = {arm: offset[arm] + rng.normal(0, round_sd) for arm in (BASE, CONTROL)}
        for t in range(tasks):
            category = CATEGORIES[t % len(CATEGORIES)]
            effect = rng.normal(math.log(20.0), 0.2)
            for arm in (BASE, CONTROL):
                log_tps = effect + drift[arm] + rng.normal(0, shape.cell_sd)
                if arm == BASE:
                    log_tps += math.log(1.0 - handicap)
                    if rng.random() < shape.stall_share:
                        log_tps += math.log(0.7)
                out.append(Cell(arm, f"{category}-{t}", category, r, math.exp(log_tps)))
    return out


def biased(cells: list[Cell], rounds: int, settings: RaceSettings) -> bool | None:
    """Whether the control reads biased (None: no interval): its verdict faster or slower,
    read the way the sweep reads it: over tasks after one round, over rounds and tasks after
    several."""
    table = Table(cells)
    if rounds == 1:
        ci = arm_task_cis(table, [CONTROL], BASE).get(CONTROL)
        if ci is None:
            return None
        return classify(ci.estimate, ci.low, ci.high, settings.min_effect) in BIASED
    ratio = table.ratio(CONTROL, BASE, None, settings, 0.95)
    return None if ratio is None or not ratio.has_ci else ratio.verdict in BIASED


def alarm_rate(
    *, sweeps: int, tasks: int, rounds: int, handicap: float, shape: Shape, seed: int = 0
) -> tuple[int, int]:
    """(sweeps whose control read biased, sweeps with an interval)."""
    rng = np.random.default_rng(seed)
    settings = RaceSettings(resamples=200)
    hits = counted = 0
    for _ in range(sweeps):
        cells = sweep_cells(rng, tasks=tasks, rounds=rounds, handicap=handicap, shape=shape)
        verdict = biased(cells, rounds, settings)
        if verdict is None:
            continue
        counted += 1
        hits += verdict
    return hits, counted
