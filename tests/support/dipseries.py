"""Seeded synthetic soak series for the dips tests (tests/soak/test_soak_dips.py and
test_soak_dips_host.py): one arm's block rows, the other arm's, and dips cut into them: both files
judge the same series, of the length and lag benchmarks/soak_dips.py draws."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from watchkeeper.simulation.soak_series import ORIGIN, SoakModel, simulate_series
from watchkeeper.soak.depth import WARMUP_BLOCKS, block_rows
from watchkeeper.soak.judgement import BlockRow

MODEL = SoakModel()
MINUTES = 300.0
SEEDS = range(12)
OTHER_LAG_H = 2 * MODEL.block_s / 3600.0
Rows = list[BlockRow]


def rows(model: SoakModel, seed: int) -> Rows:
    return block_rows(simulate_series(model, MINUTES, seed), ORIGIN, block_s=model.block_s)


def other(seed: int) -> Rows:
    """The other arm: its own seed, its blocks two block lengths after this one's."""
    return [replace(r, t_h=r.t_h + OTHER_LAG_H) for r in rows(MODEL, 1000 + seed)]


def dip(series: Rows, at: Sequence[int], factor: float) -> Rows:
    """Blocks at ``at`` (indices after warm-up) multiplied by ``factor``."""
    hit = {WARMUP_BLOCKS + i for i in at}
    return [
        replace(r, throughput_tps=r.throughput_tps * factor) if i in hit else r
        for i, r in enumerate(series)
    ]
