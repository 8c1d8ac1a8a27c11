"""The task x round table of log ratios that `analysis.stats.paired_speedup` reads: its round
and task effects (fitted around empty cells), the per-round statistic, and the winsorizing of
cells that fit neither their task nor their round. Apart from stats.py so the CI's own steps
(bootstrap, floor, verdict) read on their own; numbers in, numbers out.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from watchkeeper.analysis.floor import trimmed_mean

OUTLIER_K = 5.0
"""Residuals (after task and round effects) beyond this many robust sds are winsorized."""
POLISH_ITERATIONS = 4
FIT_ITERATIONS = 6
"""Alternating-means passes of the task + round fit over a table with empty cells."""
WINSORIZE_FROM = 5
"""Rounds needed before any cell is judged an outlier. With 3 rounds the median polish leaves
an exact zero residual in every task's row (a third of all residuals), so the MAD shrinks and
clipping starts inside the ordinary noise: a 3-round SmolLM2 bench (18 tasks) clipped 9 of 54
cells of its self-draft arm, and 18-task tables of Gaussian cells (200 simulated) lose 5.7% of
their cells at 3 rounds, 0.4-0.6% at 4-5 rounds, 0.03% at 12."""


def fit_effects(table: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(per-round values, per-task values) of a table of log ratios.

    A full table: the plain column and row means. With empty cells (failed requests, a task
    missing from a round) a column mean mixes task effects into the round's (a slow task
    missing from round 3 makes round 3 look fast), so the table is fitted as grand + task +
    round effects by least squares (alternating means over the cells present) and each round
    reads grand + its round effect, each task grand + its task effect."""
    if not np.isnan(table).any():
        return table.mean(axis=0), table.mean(axis=1)
    present = ~np.isnan(table)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an all-empty row or column
        grand = float(np.nanmean(table))
        rows = np.zeros(table.shape[0])
        cols = np.zeros(table.shape[1])
        for _ in range(FIT_ITERATIONS):
            rows = np.nanmean(table - grand - cols[None, :], axis=1)
            rows = np.where(np.isnan(rows), 0.0, rows)
            rows -= rows[present.any(axis=1)].mean()
            cols = np.nanmean(table - grand - rows[:, None], axis=0)
            cols = np.where(np.isnan(cols), 0.0, cols)
            cols -= cols[present.any(axis=0)].mean()
    per_round = np.where(present.any(axis=0), grand + cols, np.nan)
    per_task = np.where(present.any(axis=1), grand + rows, np.nan)
    return per_round, per_task


def round_stat(table: np.ndarray) -> float:
    """Trimmed mean over rounds (columns) of the mean over tasks (rows); empty cells are
    fitted around (`fit_effects`), never let task effects into the round's value."""
    if not np.isnan(table).any():
        per_round = table.mean(axis=0)
    elif np.isnan(table).all():
        return math.nan
    else:
        per_round, _ = fit_effects(table)
        per_round = per_round[~np.isnan(per_round)]
    if per_round.size == 0:
        return math.nan
    return trimmed_mean(per_round)


def winsorize(table: np.ndarray, k: float = OUTLIER_K) -> tuple[np.ndarray, int]:
    """The table with cell residuals beyond ``k`` robust sds pulled back, and how many were.

    Residuals come from a median polish (task + round effects), so a whole slow round or a
    whole slow task is left alone; only a cell that fits neither moves. Tables with fewer than
    3 tasks or `WINSORIZE_FROM` rounds are returned as they are: there is no pattern to judge a
    cell against."""
    clipped, moved, _ = winsorize_cells(table, k)
    return clipped, int(np.count_nonzero(moved))


def winsorize_cells(
    table: np.ndarray, k: float = OUTLIER_K
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`winsorize` with the mask of the cells moved and every cell's residual (before
    clipping), so a caller can list them and test their balance (analysis.tails)."""
    none = np.zeros(table.shape, dtype=bool)
    if table.shape[0] < 3 or table.shape[1] < WINSORIZE_FROM or np.isnan(table).all():
        return table, none, np.zeros(table.shape)
    resid = table.copy()
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an all-empty row or column
        for _ in range(POLISH_ITERATIONS):
            resid -= np.nan_to_num(np.nanmedian(resid, axis=1, keepdims=True))
            resid -= np.nan_to_num(np.nanmedian(resid, axis=0, keepdims=True))
        scale = 1.4826 * float(np.nanmedian(np.abs(resid)))
    if not scale > 0:
        return table, none, resid
    bound = k * scale
    clipped = np.clip(resid, -bound, bound)
    moved = np.abs(resid) > bound
    return table - resid + clipped, moved, resid
