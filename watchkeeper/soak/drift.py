"""Throughput drift of a soak, judged where the host cannot fake it.

A soak runs for hours on a host that other work shares. When one arm's blocks alternate with
a partner's (the current system beside its pinned reference, soak/paired.py), whatever slows
the host in those minutes slows both: a fresh-clone CI run beside a 3-minute CPU job read an
A/A soak's reference arm 12% slower from the first to the last third, and its twin alike. So
for the arms of a pair, drift is judged on the *ratio* of the two arms, cycle by cycle: one
arm slowing against the other is a reason; both slowing alike is the host's drift, a note with
its size (the cycle's geometric mean of the two arms), never a reason against either arm.

An arm without a partner (a single-arm soak, or a profile soaked without a reference) keeps
the absolute drift check on its own blocks, labelled as such in its reason: there the host's
load counts too, and nothing can tell the two apart.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Collection, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from watchkeeper.config import SoakConfig
from watchkeeper.format import ci
from watchkeeper.soak.depth import block_rows, depth_lines, series_drift
from watchkeeper.soak.depth_figures import SlopeDrift
from watchkeeper.soak.dips import block_host_cpu
from watchkeeper.soak.judgement import BlockRow
from watchkeeper.soak.series_figures import AcceptanceTrend, DriftJudged, SeriesTrend, Slice
from watchkeeper.soak.trends import (
    MIN_BLOCKS,
    block_medians,
    level_shift,
    relative_trend,
    theil_sen,
)
from watchkeeper.soak.views import SoakSampleView

Lines = tuple[list[str], list[str]]
"""(reasons, notes) a rule adds to the verdict."""


def paired_arms(params: dict[str, Any]) -> set[str]:
    """Every arm that runs beside a partner: the current profiles and their references."""
    refs: dict[str, dict[str, Any]] = params.get("references") or {}
    return {name for profile, ref in refs.items() for name in (profile, str(ref["arm"]))}


def _hours(t: datetime, origin: datetime) -> float:
    return (t - origin).total_seconds() / 3600.0


# -- one arm: figures for every series, reasons only for the unpaired ----------------------


def series_trends(
    samples: Sequence[SoakSampleView],
    origin: datetime,
    slice_s: float,
    cfg: SoakConfig,
    *,
    paired: Collection[str] = (),
    block_s: float | None = None,
    host_cpu: Sequence[tuple[datetime, float]] = (),
) -> tuple[list[SeriesTrend], list[str], list[str]]:
    """Per (profile, concurrency): the slice table, one row per block (`depth.block_rows`:
    kept so the drift can be redone from the figures), its absolute throughput drift and
    level shift, and its acceptance drift. An arm in ``paired`` gets the figures (judged
    `paired`) but no throughput reason: its pair's ratio is judged instead. An unpaired series
    at concurrency above 1 is judged on its aggregate throughput per block (`aggregate`,
    soak/depth.py): its per-request speeds scatter with the batch they shared. ``host_cpu``
    (the resource samples' taken_at and host CPU outside the servers, in time order) gives
    each block row its `host_other_cpu`, which may explain a dip (soak/dips.py)."""
    reasons: list[str] = []
    notes: list[str] = []
    out: list[SeriesTrend] = []
    groups: dict[tuple[str, int], list[SoakSampleView]] = defaultdict(list)
    for s in samples:
        if not s.is_probe and s.error is None:
            groups[(s.profile, s.concurrency)].append(s)
    by_series = {}
    for key, rows in groups.items():
        host = block_host_cpu(rows, host_cpu)
        by_series[key] = [
            replace(row, host_other_cpu=host.get(row.block))
            for row in block_rows(rows, origin, block_s=block_s)
        ]
    for (profile, conc), rows in sorted(groups.items()):
        mine = by_series[(profile, conc)]
        # The other profiles' blocks: what may explain a dip (soak/dips.py).
        others = [r for (p, _), r in sorted(by_series.items()) if p != profile]
        judged: DriftJudged = (
            "paired" if profile in paired else "aggregate" if conc > 1 else "absolute"
        )
        depth = None
        if judged == "aggregate":
            depth = series_drift(
                mine,
                threshold=cfg.drift_threshold,
                floor=cfg.autocorrelation_floor,
                others=others,
            )
        entry = _series_entry(profile, conc, rows, origin, slice_s, judged, depth, mine)
        if judged == "aggregate":
            reason, note = depth_lines(entry.name, depth, len(mine))
            reasons.extend(reason)
            notes.extend(note)
        elif judged == "absolute":
            reason, missing = _absolute_drift(entry, cfg)
            reasons.extend(reason)
            notes.extend(missing)
        reasons.extend(_acceptance_drift(entry, cfg))
        out.append(entry)
    return out, reasons, notes


def _series_entry(
    profile: str,
    conc: int,
    rows: list[SoakSampleView],
    origin: datetime,
    slice_s: float,
    judged: DriftJudged,
    depth: SlopeDrift | None,
    mine: Sequence[BlockRow],
) -> SeriesTrend:
    slices: dict[int, list[SoakSampleView]] = defaultdict(list)
    for s in rows:
        slices[int((s.started_at - origin).total_seconds() // slice_s)].append(s)
    table = []
    for index in sorted(slices):
        part = slices[index]
        tps = [s.decode_tps for s in part if s.decode_tps]
        drafted = sum(s.draft_n or 0 for s in part)
        accepted = sum(s.draft_n_accepted or 0 for s in part)
        table.append(
            Slice(
                t_h=(index + 0.5) * slice_s / 3600.0,
                requests=len(part),
                decode_tps=statistics.median(tps) if tps else None,
                tokens=sum(s.completion_tokens or 0 for s in part),
                acceptance=accepted / drafted if drafted else None,
            )
        )
    span_h = (len(slices) * slice_s) / 3600.0
    # One point per block (its median): the block is the replicate, not the time slice.
    points = [(_hours(when, origin), v) for when, v in block_medians(rows)]
    acc_points = [(r.t_h, r.acceptance) for r in table if r.acceptance is not None]
    acc = theil_sen([tuple(zip(*acc_points, strict=True))]) if len(acc_points) >= 3 else None  # type: ignore[list-item]
    return SeriesTrend(
        profile=profile,
        concurrency=conc,
        judged=judged,
        depth_drift=depth,
        slices=tuple(table),
        blocks=len(points),
        throughput_drift=relative_trend(points, span_h, min_points=MIN_BLOCKS),
        throughput_shift=level_shift(rows),
        acceptance_drift=None if acc is None else AcceptanceTrend.of(acc, span_h),
        block_rows=tuple(mine),
    )


def _absolute_drift(entry: SeriesTrend, cfg: SoakConfig) -> Lines:
    """The unpaired arm's own drift: the Theil-Sen slope first, else the late step."""
    name = entry.name
    drift = entry.throughput_drift
    if drift is None:
        return [], [
            f"{name}: {entry.blocks} block(s), fewer than {MIN_BLOCKS}: throughput drift not judged"
        ]
    low, high = drift.low, drift.high
    if drift.change < -cfg.drift_threshold and high < 0:
        return [
            f"{name}: throughput drifted {drift.change:+.0%} over the soak (absolute, an "
            f"arm without a partner: the host's load counts too; {ci(low, high, '+.0%', '..')})"
        ], []
    shift = entry.throughput_shift
    if shift is None:
        return [], []
    low, high = shift.low, shift.high
    if shift.change < -cfg.drift_threshold and high < 0:
        return [
            f"{name}: throughput drifted {shift.change:+.0%} from the first to the last "
            "third of the soak (absolute, an arm without a partner: the host's load counts "
            f"too; {ci(low, high, '+.0%', '..')})"
        ], []
    return [], []


def _acceptance_drift(entry: SeriesTrend, cfg: SoakConfig) -> list[str]:
    """Acceptance is a count of tokens, not a speed: a busy host does not move it."""
    acc = entry.acceptance_drift
    if acc is None or not (
        acc.change_points < -cfg.acceptance_drift_threshold and acc.trend.high < 0
    ):
        return []
    return [f"{entry.name}: acceptance drifted {acc.change_points * 100:+.1f} points"]
