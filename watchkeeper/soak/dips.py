"""Blocks that fell off and came back, at depth > 1: which one may be set aside from the slope.

A block beyond both its neighbours, on the same side, by more than `TRANSIENT_Z` block-noise
sds and `TRANSIENT_MIN` is a *dip* (`dip_candidates`). Until 6 Dec 2026 every dip was set aside
from the slope by its shape alone, up to a tenth of the blocks. That hid exactly what a soak
exists to find (issue 75; `benchmarks/soak_dips.py`, 200 series each): a server that stalls
-20% in every 10th block read `no drift` in 200 of 200 series, three late -25% dips on a slow
-6% leak in 197 of 200, and a stall every 7th block (over the cap) flipped the answer back.

So a dip is set aside only when something outside the server explains it: the other arm's
block nearest in time (another profile, so another server process, in the same cycle) dipped
too, by `TRANSIENT_MIN` or more against its own neighbours (`explained`), which a neighbour's
job on the shared host does and the server's own fault does not. At most `MAX_SET_ASIDE` per
series: a second explained dip stays in the slope, as every unexplained dip does, and the
report names them ("judged in part": `dip_note`). The soak records no host-wide CPU (the
sampler reads the server's process tree only), so the other rule the issue names (the host's
CPU busy outside the server's tree in that block's window) cannot be read yet.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

TRANSIENT_Z = 5.0
"""Block-noise sds beyond both neighbours for a block to read as a dip: one short neighbour beside a
quiet soak read a block far outside its line and widened the series' CI several-fold
(docs/measurements.md#figures-behind-the-code). Seeded A/A, step, decline and noisy series show no
dip at 5 (tests/soak)."""
TRANSIENT_MIN = 0.05
"""...and at least this far off (5%), so a quiet series does not name a 2% blip. The other
arm's block must dip this far too to explain one."""
MAX_SET_ASIDE = 1
"""Explained dips set aside per series: more than one is a pattern, and a pattern is judged."""
SAME_TIME = 0.6
"""How near in time (a share of the series' block spacing, one cycle) the other arm's block
must lie to count as the same time: with two arms the other's block sits half a cycle away
on either side, so both neighbours in the cycle count."""
MIN_BLOCKS = 8
"""Blocks a series needs before any block reads as a dip (two neighbours and a noise to
compare with)."""


def block_noise(y: np.ndarray) -> float:
    """The series' block noise: a robust sd (1.4826 x the MAD of the block-to-block changes,
    over sqrt 2), so the dips themselves do not inflate it."""
    steps = np.diff(y)
    return 1.4826 * float(np.median(np.abs(steps - np.median(steps)))) / math.sqrt(2.0)


def dip_candidates(values: Sequence[float]) -> list[int]:
    """Indices of blocks beyond both neighbours, on the same side, by more than `TRANSIENT_Z`
    block-noise sds and `TRANSIENT_MIN`. A slowdown that lasts leaves the next block down too,
    and a step leaves each block level with one neighbour, so neither is a dip; nor are the
    first and last blocks, which have one neighbour."""
    y = np.log(np.asarray(values, float))
    n = y.size
    if n < MIN_BLOCKS:
        return []
    bar = max(TRANSIENT_Z * block_noise(y), TRANSIENT_MIN)
    return [
        i
        for i in range(1, n - 1)
        if (y[i] - y[i - 1]) * (y[i] - y[i + 1]) > 0
        and min(abs(y[i] - y[i - 1]), abs(y[i] - y[i + 1])) > bar
    ]


def deviation(values: Sequence[float], i: int) -> float:
    """Block ``i`` against its neighbours (geometric mean; one neighbour at an end)."""
    near = [values[j] for j in (i - 1, i + 1) if 0 <= j < len(values)]
    if not near:
        return 0.0
    return math.exp(sum(math.log(values[i] / v) for v in near) / len(near)) - 1.0


def explained(
    t_h: float, dip: float, others: Sequence[Sequence[dict[str, Any]]], spacing_h: float
) -> dict[str, Any] | None:
    """The other arm's block that explains a dip of ``dip`` at ``t_h`` hours: among the other
    profiles' series (their `block_rows`), a block within `SAME_TIME` of the series' block
    spacing (the same cycle: blocks alternate, so the other arm's run just before or after)
    that moved the same way by `TRANSIENT_MIN` or more against its own neighbours. None when
    none did (or there is no other arm)."""
    best: dict[str, Any] | None = None
    for rows in others:
        values = [float(r["throughput_tps"]) for r in rows]
        for i, r in enumerate(rows):
            if abs(float(r["t_h"]) - t_h) > SAME_TIME * spacing_h:
                continue
            moved = deviation(values, i) * math.copysign(1.0, dip)
            if moved >= TRANSIENT_MIN and (best is None or moved > best["moved"]):
                best = {"block": r["block"], "t_h": r["t_h"], "deviation": deviation(values, i),
                        "moved": moved}  # fmt: skip
    return best


def split_dips(
    t_h: Sequence[float], values: Sequence[float], others: Sequence[Sequence[dict[str, Any]]]
) -> tuple[list[int], list[int], dict[int, dict[str, Any]]]:
    """(set aside, kept in the slope, the other arm's block that explained each set aside) for
    one series' dips: the explained dip that fell furthest is set aside, up to
    `MAX_SET_ASIDE`; every other dip is kept."""
    found = dip_candidates(values)
    if not found:
        return [], [], {}
    spacing = float(np.median(np.diff(np.asarray(t_h, float)))) if len(t_h) > 1 else 0.0
    why = {}
    for i in found:
        reason = explained(t_h[i], deviation(values, i), others, spacing)
        if reason is not None:
            why[i] = reason
    aside = sorted(why, key=lambda i: -abs(deviation(values, i)))[:MAX_SET_ASIDE]
    return sorted(aside), [i for i in found if i not in aside], {i: why[i] for i in aside}


def dip_notes(name: str, drift: dict[str, Any]) -> list[str]:
    """The dips, by name and size: set aside (with the other arm's block that explains it),
    and kept in the slope (the verdict is judged with them in: recurring or unexplained dips
    are the server's own until something outside it says otherwise)."""
    out = []
    aside = drift.get("transients") or []
    if aside:
        items = ", ".join(
            f"block {t['block']} ({t['deviation']:+.0%}; the other arm's block {t['other_block']} "
            f"{t['other_deviation']:+.0%} at the same time)"
            for t in aside
        )
        out.append(
            f"{name}: set aside from the slope as transient (beyond both neighbours by more "
            f"than {TRANSIENT_Z:.0f} sds of the block noise, and {TRANSIENT_MIN:.0%}, and the "
            f"other arm dipped too): {items}"
        )
    kept = drift.get("dips") or []
    if kept:
        items = ", ".join(f"block {d['block']} ({d['deviation']:+.0%})" for d in kept)
        out.append(
            f"{name}: judged in part: {len(kept)} block(s) fell off and came back and stay in "
            f"the slope ({items} against their neighbours), as nothing outside the server "
            "explains them (the other arm's blocks at the same time held); a recurring dip is "
            "a stability finding, not noise"
        )
    return out
