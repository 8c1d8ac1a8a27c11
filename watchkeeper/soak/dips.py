"""Blocks that fell off and came back, at depth > 1: which one may be set aside from the slope.

A block beyond both its neighbours, on the same side, by more than `TRANSIENT_Z` block-noise
sds and `TRANSIENT_MIN` is a *dip* (`dip_candidates`). Until 6 Dec 2026 every dip was set aside
from the slope by its shape alone, up to a tenth of the blocks. That hid exactly what a soak
exists to find (issue 75; `benchmarks/soak_dips.py`, 200 series each): a server that stalls
-20% in every 10th block read `no drift` in 200 of 200 series, three late -25% dips on a slow
-6% leak in 197 of 200, and a stall every 7th block (over the cap) flipped the answer back.

So a dip is set aside only when something outside the server explains it:

- the other arm's block nearest in time (another profile, so another server process, in the
  same cycle) dipped too, by `TRANSIENT_MIN` or more against its own neighbours (`explained`),
  which a neighbour's job on the shared host does and the server's own fault does not; or
- the host's CPU used outside the soak's servers in the block's minutes (the sampler's
  `host_other_cpu`, soak/hostcpu.py, averaged over the block: `block_host_cpu`) was both busy
  in absolute terms (`HOST_BUSY` of all cores) and an outlier against the series' other
  blocks (robust z of `HOST_Z`; `host_explained`): a neighbour took the cores then, and only
  then. A dip that rose (a block faster than both neighbours) is never the host's.

At most `MAX_SET_ASIDE` per series: a second explained dip stays in the slope, as every
unexplained dip does, and the report names them ("judged in part": `dip_notes`). Blocks stored
before the sampler recorded the host's CPU (migration 0014: NULL) are judged as before, by the
other arm alone. Rates on seeded soaks: `benchmarks/soak_dips.py` (docs/statistics-checks.md).
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

import numpy as np

from watchkeeper.soak.depth_figures import DipEntry, Explanation, HostBusy, OtherBlock
from watchkeeper.soak.views import SoakSampleView

if TYPE_CHECKING:
    from watchkeeper.soak.depth_figures import SlopeDrift
    from watchkeeper.soak.judgement import BlockRow

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
HOST_BUSY = 0.10
"""A block's host CPU outside the soak's servers (a share of all cores, averaged over the
block) below this never explains a dip, however unusual: on this 2-core host the 47-second
nice-19 test run that read a block 19% low on 29 Nov 2026 took about one core for 47 s of a
2-minute block, ~0.2 of the cores (an estimate: the soak recorded no host CPU then); a tenth
is half that."""
HOST_Z = 4.0
"""...and its robust z against the series' other blocks (median, 1.4826 x MAD) at least this:
a host that is always busy (a shared machine) explains nothing by being busy; only a burst
beyond its own usual does."""
HOST_SCALE_FLOOR = 0.01
"""The robust sd is never taken below a hundredth of the cores: a quiet host's block means sit
within a fraction of a percent of each other, and a z over that would call any flicker an
outlier (`HOST_BUSY` guards too)."""


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
    t_h: float, dip: float, others: Sequence[Sequence[BlockRow]], spacing_h: float
) -> OtherBlock | None:
    """The other arm's block that explains a dip of ``dip`` at ``t_h`` hours: among the other
    profiles' series (their `block_rows`), a block within `SAME_TIME` of the series' block
    spacing (the same cycle: blocks alternate, so the other arm's run just before or after)
    that moved the same way by `TRANSIENT_MIN` or more against its own neighbours. None when
    none did (or there is no other arm)."""
    best: OtherBlock | None = None
    best_moved = 0.0
    for rows in others:
        values = [float(r.throughput_tps) for r in rows]
        for i, r in enumerate(rows):
            if abs(float(r.t_h) - t_h) > SAME_TIME * spacing_h:
                continue
            moved = deviation(values, i) * math.copysign(1.0, dip)
            if moved >= TRANSIENT_MIN and (best is None or moved > best_moved):
                best, best_moved = OtherBlock(r.block, deviation(values, i)), moved
    return best


def host_explained(host: Sequence[float | None], i: int) -> HostBusy | None:
    """The host's CPU outside the soak's servers that explains block ``i`` falling off: its
    share (``host``: one per block, None where not recorded) at least `HOST_BUSY` and `HOST_Z`
    robust sds above the median of the series' other recorded blocks (at least
    `MIN_BLOCKS` - 1 of them). None otherwise."""
    mine = host[i] if i < len(host) else None
    rest = np.asarray([h for j, h in enumerate(host) if j != i and h is not None], float)
    if mine is None or rest.size < MIN_BLOCKS - 1:
        return None
    centre = float(np.median(rest))
    scale = max(1.4826 * float(np.median(np.abs(rest - centre))), HOST_SCALE_FLOOR)
    z = (mine - centre) / scale
    if mine < HOST_BUSY or z < HOST_Z:
        return None
    return HostBusy(mine, centre, z)


def split_dips(
    t_h: Sequence[float],
    values: Sequence[float],
    others: Sequence[Sequence[BlockRow]],
    host: Sequence[float | None] = (),
) -> tuple[list[int], list[int], dict[int, Explanation]]:
    """(set aside, kept in the slope, what explained each explained dip) for one series' dips:
    the explained dip that fell furthest is set aside, up to `MAX_SET_ASIDE`; every other dip
    is kept. An explanation is the other arm's block (`explained`) or, for a block that fell,
    the host's CPU (`host_explained`, ``host`` one share a block)."""
    found = dip_candidates(values)
    if not found:
        return [], [], {}
    spacing = float(np.median(np.diff(np.asarray(t_h, float)))) if len(t_h) > 1 else 0.0
    why: dict[int, Explanation] = {}
    for i in found:
        dip = deviation(values, i)
        reason: Explanation | None = explained(t_h[i], dip, others, spacing)
        if reason is None and dip < 0:
            reason = host_explained(host, i)
        if reason is not None:
            why[i] = reason
    aside = sorted(why, key=lambda i: -abs(deviation(values, i)))[:MAX_SET_ASIDE]
    return sorted(aside), [i for i in found if i not in aside], why


def block_host_cpu(
    samples: Sequence[SoakSampleView], points: Sequence[tuple[datetime, float]]
) -> dict[int, float]:
    """Each block's host CPU outside the soak's servers: the mean of the resource points
    (``points``: taken_at, `host_other_cpu`, in time order) whose window (back to the point
    before) overlaps the block's minutes, from its first request's start to its last one's end.
    Blocks with no such point are left out."""
    if len(points) < 2:
        return {}
    times = [p[0] for p in points]
    spans: dict[int, tuple[datetime, datetime]] = {}
    for s in samples:
        end = s.started_at + timedelta(seconds=float(s.latency_s or 0.0))
        lo, hi = spans.get(s.block, (s.started_at, end))
        spans[s.block] = (min(lo, s.started_at), max(hi, end))
    out = {}
    for block, (lo, hi) in spans.items():
        # Point k covers (times[k-1], times[k]]: it overlaps (lo, hi) from the first point
        # after lo through the first at or after hi.
        first, last = max(1, bisect_right(times, lo)), bisect_left(times, hi)
        near = [points[k][1] for k in range(first, min(last, len(points) - 1) + 1)]
        if near:
            out[block] = sum(near) / len(near)
    return out


def _why(t: DipEntry) -> str:
    why = t.why
    if isinstance(why, HostBusy):
        return (
            f"the host's CPU outside the servers {why.host_other_cpu:.0%} of its cores then, "
            f"against {why.host_median:.0%} usually"
        )
    assert why is not None
    return f"the other arm's block {why.block} {why.deviation:+.0%} at the same time"


def dip_notes(name: str, drift: SlopeDrift) -> list[str]:
    """The dips, by name and size: set aside (with what outside the server explains it), and
    kept in the slope (the verdict is judged with them in: recurring or unexplained dips are
    the server's own until something outside it says otherwise; an explained one beyond
    `MAX_SET_ASIDE` is named with its explanation)."""
    out = []
    aside = drift.transients
    if aside:
        items = ", ".join(f"block {t.block} ({t.deviation:+.0%}; {_why(t)})" for t in aside)
        out.append(
            f"{name}: set aside from the slope as transient (beyond both neighbours by more "
            f"than {TRANSIENT_Z:.0f} sds of the block noise, and {TRANSIENT_MIN:.0%}, and "
            f"explained from outside the server): {items}"
        )
    kept = drift.dips
    if kept:
        items = ", ".join(
            f"block {d.block} ({d.deviation:+.0%}"
            + (
                f"; {_why(d)}, but only {MAX_SET_ASIDE} a series is set aside"
                if d.explained
                else ""
            )
            + ")"
            for d in kept
        )
        out.append(
            f"{name}: judged in part: {len(kept)} block(s) fell off and came back and stay in "
            f"the slope ({items} against their neighbours): nothing outside the server "
            "explains them (the other arm's blocks at the same time held, and the host's CPU "
            "outside the servers was not unusually busy, or was not recorded), or more than "
            f"{MAX_SET_ASIDE} did; a recurring dip is a stability finding, not noise"
        )
    return out
