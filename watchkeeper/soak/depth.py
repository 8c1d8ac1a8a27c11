"""Throughput drift at depth > 1: the server's aggregate throughput per block, a slope over all
blocks.

At concurrency 1 a block's median decode speed is the server's speed. At concurrency 4 it is
not: each request's decode speed depends on which requests share its steps (another slot's
prompt being processed stalls everyone's decode), so per-request speeds scatter and block
medians at depth 4 gave drift CIs far wider than the threshold
(docs/measurements.md#figures-behind-the-code).

What the server does at depth 4 is share a fixed capacity among its slots, so the figure that
compares like with like from block to block is the capacity itself, all requests together,
on the same work in every block (`block_rows`). Since 28 Nov 2026 every block at depth > 1
replays one task order (`plan.block_cycle`); the work is each block's first K requests by
start, K the fewest any full block of the series finished before its deadline (the tail after
it runs unstalled), and the figure is Little's law over them: with `c` requests in flight,
**c x tokens / request seconds**. Why the same work: a block's aggregate depends on which
prompts it drew (a long prefill stalls every slot), and shuffled stretches of the task set
scattered 7.6-10% a block over a 130-minute soak, while the same requests replayed scattered
~1.2% (`benchmarks/depth4_host_wander.py`). Why this figure: a server slowed by any factor
reads exactly that factor slower (every request's seconds scale), where the fixed time window
before (the block's nominal length, a request cut by the deadline counted by its share of
time) moved in steps with the speed once the order was fixed (which request the deadline cuts,
and whether it is still prefilling: a simulated 15% slowdown read as -10%), and the time from
the first start to the last end of the K requests turned on whichever finished last (a tie
flip that lengthens one answer moves it: 3-4% a block on the real replayed soak, where this
figure read ~0.5% for the warm baseline). The first `WARMUP_BLOCKS` of a series are set aside.

The drift (`slope_drift`) is an ordinary least-squares slope of log throughput on time over
**all** blocks (not first against last third: every block informs it), expressed as the change
over the soak's span, `exp(slope * span) - 1`. Its interval allows for lag-1 autocorrelation
between consecutive blocks (they share the hour they ran in): the residuals' lag-1 estimate,
bias-corrected and floored by the soak's one AR(1) rule (`soak/ar1.py`), gives the AR(1)
correlation matrix R, the slope's variance is `s2 * w'Rw` with `w` the OLS weights and `s2`
the residual sum of squares over its AR(1) expectation `n - tr(HR)`, and the t quantile takes
`n/c - 2` degrees of freedom with `c = w'Rw / w'w`.

The verdict: `drift` when the CI excludes 0 and the change is beyond the threshold;
`no drift` when the whole CI lies within +-threshold; `no slowdown` when its lower end lies
within it and only its upper end reaches past (stability asks whether the server slowed: a
rise is never a reason, and depth 1 has always counted such a CI as resolved, see
`publish/soak_drift.unresolved_drift`); `inconclusive` otherwise. A 15% step
halfway reads as a slope of about -22% over the soak (a least-squares line through a step at
the middle drops 1.5 times the step from end to end); the A/A and positive controls and the
CI's width after 150 minutes are simulated in `simulation/soak_series.py`
(`benchmarks/soak_depth4_power.py`, docs/soak.md).
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

import numpy as np

from watchkeeper.format import ci
from watchkeeper.soak.ar1 import correlation_matrix, lag1, used_lag1
from watchkeeper.soak.depth_figures import Autocorrelation, DipEntry, Explanation, SlopeDrift
from watchkeeper.soak.dips import deviation, dip_notes, split_dips
from watchkeeper.soak.judgement import BlockRow
from watchkeeper.soak.views import SoakSampleView
from watchkeeper.student import t_quantile

MIN_DEPTH_BLOCKS = 6
"""Blocks of one series before its slope is judged (as `trends.MIN_BLOCKS`)."""
VERDICTS = ("drift", "no drift", "no slowdown", "inconclusive")
WARMUP_BLOCKS = 2
"""A series' first blocks are warm-up, set aside from its slope: fresh servers ran their first two
blocks well below the rest (the figures: docs/measurements.md#figures-behind-the-code). The paired
soak sets its first cycle aside for the same reason."""


MIN_WORK = 8
"""A block's work (K, `common_work`) below this many requests: its aggregate turns on which few
prompts they are and on one answer's length (a tie flip): on a host half as fast, short blocks'
half-widths came out several times wider (docs/measurements.md#figures-behind-the-code). Below it
the report says so and how much longer a block would reach `TARGET_WORK`."""
TARGET_WORK = 12
"""The work per block the committed replayed soak had (K = 12, block noise 1-4%)."""


RECURRING_DIPS = 2
"""Dips kept in the slope from which a series is never resolved (`no drift`, `no slowdown`):
a server that stalls -20% in every 10th block keeps its slope level, and read `no drift` in 1
of 30 seeded series even with the dips kept (`benchmarks/soak_dips.py`)."""


FULL_BLOCK = 0.75
"""A block whose work is less than this share of the series' median was cut short (the
soak's end, a crash, a stop): it has no row, so it does not shrink every block's work."""


def _by_start(part: Sequence[SoakSampleView]) -> list[SoakSampleView]:
    return sorted(part, key=lambda s: s.started_at)


def _done_under_load(ordered: Sequence[SoakSampleView], block_s: float | None) -> int:
    """How many requests, from the block's first on, all ended before its deadline: those ran
    under the full closed loop. After it no request starts, so the last ones run alone and
    unstalled."""
    if block_s is None:
        return len(ordered)
    t0 = ordered[0].started_at
    n = 0
    for s in ordered:
        if (s.started_at - t0).total_seconds() + float(s.latency_s or 0.0) > block_s:
            break
        n += 1
    return n


def common_work(counts: Sequence[int]) -> int:
    """K: the requests every full block of a series finished under load (`FULL_BLOCK`)."""
    if not counts:
        return 0
    median = statistics.median(counts)
    return min(c for c in counts if c >= FULL_BLOCK * median)


def block_rows(
    rows: Sequence[SoakSampleView], origin: datetime, *, block_s: float | None = None
) -> list[BlockRow]:
    """One row per block of one (arm, concurrency) series, in time order: its start (hours
    from the soak's origin), load requests, the work (its first K requests by start, K of
    `common_work` over what each block finished before its nominal length `block_s`; all
    without it), their tokens and request seconds, the aggregate throughput (concurrency x
    tokens / request seconds, Little's law) and the median per-request decode speed. Errors
    and probes are left out; a block that finished fewer than K under load has no row."""
    by_block: dict[int, list[SoakSampleView]] = defaultdict(list)
    for s in rows:
        if not s.is_probe and s.error is None and s.completion_tokens:
            by_block[s.block].append(s)
    ordered = {block: _by_start(part) for block, part in by_block.items()}
    done = {block: _done_under_load(part, block_s) for block, part in ordered.items()}
    k = common_work(list(done.values()))
    out = []
    for block, part in ordered.items():
        work = part[:k]
        busy = sum(float(s.latency_s or 0.0) for s in work)
        if k < 1 or done[block] < k or busy <= 0:
            continue
        tokens = sum(int(s.completion_tokens or 0) for s in work)
        tps = [s.decode_tps for s in part if s.decode_tps]
        out.append(
            BlockRow(
                block=block,
                t_h=(part[0].started_at - origin).total_seconds() / 3600.0,
                requests=len(part),
                work_requests=k,
                tokens=tokens,
                busy_s=round(busy, 3),
                throughput_tps=max(1, part[0].concurrency) * tokens / busy,
                median_decode_tps=statistics.median(tps) if tps else None,
            )
        )
    return sorted(out, key=lambda r: r.t_h)


def line_and_step(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(design, residuals) of y on a line in x *and* a step halfway: where `slope_drift` reads
    its noise (variance and lag-1 correlation), so a slowdown halfway left in the residuals of
    the line alone does not read as noise and autocorrelation and widen the very interval meant
    to see it."""
    half = (x >= (x[0] + x[-1]) / 2.0).astype(float)
    design = np.column_stack([np.ones(x.size), x - x.mean(), half])
    coef, *_ = np.linalg.lstsq(design, y, rcond=None)
    return design, y - design @ coef


def is_slowdown(drift: SlopeDrift) -> bool:
    """A drift verdict that is a reason: beyond the threshold, and slower."""
    return drift.is_slowdown


def slope_drift(
    t_h: Sequence[float],
    values: Sequence[float],
    *,
    threshold: float,
    floor: float = 0.3,
    confidence: float = 0.95,
) -> SlopeDrift | None:
    """The change over the soak of ``values`` (positive, in time order at ``t_h`` hours) from
    a least-squares slope of their logs, its AR(1)-aware t interval and the verdict. None
    below `MIN_DEPTH_BLOCKS` values or when all share one time."""
    x = np.asarray(t_h, float)
    y = np.log(np.asarray(values, float))
    n = x.size
    if n < MIN_DEPTH_BLOCKS or np.ptp(x) == 0:
        return None
    xc = x - x.mean()
    sxx = float(xc @ xc)
    w = xc / sxx
    slope = float(w @ y)
    design, residuals = line_and_step(x, y)
    r_hat = lag1(residuals)
    r = used_lag1(r_hat, n, floor)
    big_r = correlation_matrix(n, r)
    hat = design @ np.linalg.pinv(design)
    expected_rss = max(float(n - np.trace(hat @ big_r)), 0.5)
    s2 = float(residuals @ residuals) / expected_rss
    c = float(w @ big_r @ w) / float(w @ w)
    se = math.sqrt(s2 * float(w @ big_r @ w))
    df = max(n / c - 2.0, 1.0)
    q = t_quantile(df, confidence)
    span = float(x[-1] - x[0])
    change = math.expm1(slope * span)
    low, high = math.expm1((slope - q * se) * span), math.expm1((slope + q * se) * span)
    return SlopeDrift(
        change=change,
        low=low,
        high=high,
        slope_per_h=slope,
        span_h=span,
        blocks=n,
        autocorrelation=Autocorrelation(r_hat, r),
        n_eff=n / c,
        threshold=threshold,
        verdict=classify_drift(change, low, high, threshold),
    )


def classify_drift(change: float, low: float, high: float, threshold: float) -> str:
    """`drift`: CI excludes 0 and the change passes the threshold; `no drift`: the CI lies
    within +-threshold; `no slowdown`: only its upper end reaches past (the server did not
    slow beyond the threshold; it may have sped up); else `inconclusive` (the soak was too
    short to say whether it slowed)."""
    if (high < 0 and change < -threshold) or (low > 0 and change > threshold):
        return "drift"
    if -threshold < low and high < threshold:
        return "no drift"
    if -threshold < low:
        return "no slowdown"
    return "inconclusive"


def _dip_entry(row: BlockRow, dip: float, why: Explanation | None) -> DipEntry:
    """A dip as the figures keep it, with what outside the server explains it, if anything:
    the other arm's block or the host's CPU outside the servers."""
    return DipEntry(row.block, row.t_h, dip, why)


def series_drift(
    rows: Sequence[BlockRow],
    *,
    threshold: float,
    floor: float,
    others: Sequence[Sequence[BlockRow]] = (),
) -> SlopeDrift | None:
    """`slope_drift` over a series' `block_rows` (their aggregate throughput), its first
    `WARMUP_BLOCKS` set aside, and at most one dip that the other arms' blocks at the same time
    (``others``: the other profiles' `block_rows`) or the host's CPU outside the servers (each
    row's `host_other_cpu`, where recorded) explain (`soak/dips.py`). Every dip is kept
    in the figures with its deviation from its two neighbours (geometric mean) and named in the
    report: `transients` set aside, `dips` kept in the slope."""
    usable = [r for r in rows if r.throughput_tps > 0][WARMUP_BLOCKS:]
    t_h = [r.t_h for r in usable]
    values = [r.throughput_tps for r in usable]
    theirs = [[r for r in o if r.throughput_tps > 0][WARMUP_BLOCKS:] for o in others]
    host = [r.host_other_cpu for r in usable]
    aside, kept, why = split_dips(t_h, values, theirs, host)
    keep = [i for i in range(len(usable)) if i not in aside]
    drift = slope_drift(
        [t_h[i] for i in keep], [values[i] for i in keep], threshold=threshold, floor=floor
    )
    if drift is None:
        return None
    out = replace(
        drift,
        warmup_blocks=WARMUP_BLOCKS,
        work_requests=usable[0].work_requests,
        transients=tuple(_dip_entry(usable[i], deviation(values, i), why.get(i)) for i in aside),
        dips=tuple(_dip_entry(usable[i], deviation(values, i), why.get(i)) for i in kept),
    )
    if len(kept) >= RECURRING_DIPS and out.verdict in ("no drift", "no slowdown"):
        # The slope may sit still while the server stalls every few blocks: not resolved.
        out = replace(out, slope_verdict=out.verdict, verdict="inconclusive")
    return out


def settle_text(half_width: float, change: float, threshold: float) -> str:
    """What an inconclusive series' own noise needs, as a phrase: the half-width shrinks about
    as 1/sqrt(blocks). Where it is wider than the threshold, (half-width / threshold)^2 times
    the blocks bring a series that does not drift inside +-threshold; where it is already
    narrower but off-centre, (half-width / (threshold - |change|))^2 if the change holds."""
    if half_width > threshold:
        return f"about {(half_width / threshold) ** 2:.1f}x the blocks if it does not drift"
    room = threshold - abs(change)
    if room <= 0:
        return "its change is at the threshold: more blocks read it either way"
    return f"about {(half_width / room) ** 2:.1f}x the blocks if its {change:+.0%} holds"


def _warmup(drift: SlopeDrift) -> str:
    return f" after {drift.warmup_blocks} warm-up" if drift.warmup_blocks else ""


def _small_work(name: str, drift: SlopeDrift) -> list[str]:
    """A note when each block's work was under `MIN_WORK` requests: the verdict stands (its CI
    carries the noise) but its power rests on K, and a slow host shrinks K silently, so it is
    said whatever the verdict."""
    k = drift.work_requests
    if k is None or k >= MIN_WORK:
        return []
    return [
        f"{name}: each block's work was only {k} requests finished under load (fewer than "
        f"{MIN_WORK}): the aggregate turns on which few prompts they are; blocks about "
        f"{TARGET_WORK / max(k, 1):.1f}x as long (`--block`) would hold ~{TARGET_WORK}"
    ]


def depth_lines(name: str, drift: SlopeDrift | None, blocks: int) -> tuple[list[str], list[str]]:
    """(reasons, notes) of one depth > 1 series judged on its aggregate throughput: a slowdown
    beyond the threshold is a reason; a speed-up, an inconclusive CI and a resolved `no drift`
    are notes with their figures."""
    if drift is None:
        return [], [
            f"{name}: {blocks} block(s), {max(blocks - WARMUP_BLOCKS, 0)} after "
            f"{WARMUP_BLOCKS} warm-up, fewer than {MIN_DEPTH_BLOCKS}: aggregate throughput "
            "drift not judged"
        ]
    low, high = drift.ci95
    extra = _small_work(name, drift) + dip_notes(name, drift)
    figures = (
        f"{drift.change:+.0%} over the soak (aggregate throughput per block, slope over "
        f"{drift.blocks} blocks{_warmup(drift)}, {ci(low, high, '+.0%', '..')}, lag-1 r "
        f"{drift.autocorrelation.estimate:+.2f}, used {drift.autocorrelation.used:.2f}"
        ")"
    )
    if drift.is_slowdown:
        return [
            f"{name}: throughput drifted {figures} (absolute: the host's load counts too)"
        ], extra
    if drift.verdict == "drift":
        return [], [f"{name}: throughput rose {figures}: not a reason", *extra]
    if drift.verdict == "no drift":
        return [], [
            f"{name}: no throughput drift beyond {drift.threshold:.0%}: {figures}",
            *extra,
        ]
    if drift.verdict == "no slowdown":
        return [], [
            f"{name}: no slowdown beyond {drift.threshold:.0%}: {figures}; only its rise "
            f"is unresolved (up to {high:+.0%}), which is not a reason",
            *extra,
        ]
    if drift.slope_verdict is not None:
        return [], [
            f"{name}: throughput drift not resolved: {len(drift.dips)} blocks fell off and "
            f"came back (named below), where the slope alone reads {drift.slope_verdict}: "
            f"{figures}",
            *extra,
        ]
    return [], [
        f"{name}: throughput drift inconclusive: {figures} reaches past "
        f"-{drift.threshold:.0%} (a slowdown that large is not ruled out); at this noise, "
        f"{settle_text(drift.half_width, drift.change, drift.threshold)}",
        *extra,
    ]
