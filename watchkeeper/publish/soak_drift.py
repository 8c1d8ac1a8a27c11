"""The soak report's throughput-drift figures: which estimate each series was judged by, which
series the soak did not run long enough to settle, and how a drift reads in the table.

At concurrency 1 a series' drift is the slope of its block medians (soak/drift.py); above 1,
unpaired, it is the aggregate throughput's slope with its own verdict (soak/depth.py). Split
from publish/soak_report.py, which renders the rest.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from watchkeeper.format import ci
from watchkeeper.publish import markdown as md
from watchkeeper.publish.soak_summary import SoakSummary
from watchkeeper.soak.depth import settle_text
from watchkeeper.soak.judgement import SeriesDrift
from watchkeeper.soak.series_figures import SeriesTrend


def _pct(ci: Sequence[float] | None) -> str:
    return f"{ci[0]:+.0%}..{ci[1]:+.0%}" if ci else md.NONE


def _ci(ends: Sequence[float] | None) -> str:
    low, high = ends or (None, None)
    return ci(low, high, "+.0%", "..")


def drift_entries(series: Sequence[SeriesTrend]) -> list[SeriesDrift]:
    """Each series' judged throughput drift, by the estimator its figures name: at concurrency
    1 (or paired) the slope of its block medians; above 1, unpaired, the aggregate
    throughput's slope with its verdict (`drift`, `no drift`, `no slowdown`, `inconclusive`)
    and block count (soak/depth.py)."""
    return [d for e in series if (d := e.drift()) is not None]


def unresolved_drift(s: SoakSummary) -> list[SeriesDrift]:
    """Series the soak did not run long enough to settle; a `stable` verdict does not cover
    them. Judged on aggregate throughput (depth > 1): its verdict is `inconclusive` (the CI
    reaches past -threshold without a slowdown beyond it; `no slowdown`, a CI that reaches
    past only +threshold, is resolved). Otherwise: the CI reaches past the threshold on the
    losing side without lying wholly beyond it. Both read only the losing side: stability
    asks whether the server slowed."""
    threshold = s.drift_threshold_or_default
    return [
        d
        for d in s.drift
        if d.verdict == "inconclusive"
        or (d.estimator == "block medians" and d.ci95 and d.ci95[0] < -threshold < d.ci95[1])
    ]


def unjudged_parts(s: SoakSummary) -> list[str]:
    """What a `stable` verdict says nothing about: series with too few blocks for a drift
    figure, and servers with less RSS history than the leak check needs. A 36-minute soak of
    four series has both; its "stable" means "no error, no restart", not "no drift"."""
    judged = {(d.profile, d.concurrency) for d in s.drift}
    series = [
        f"{r.profile} at concurrency {r.concurrency}"
        for r in s.series
        if (r.profile, r.concurrency) not in judged
    ]
    rss = sorted(p for p, e in s.rss.items() if not e.judged)
    parts = []
    if series:
        parts.append(
            f"throughput drift not judged for {', '.join(series)} (too few blocks in {s.duration})"
        )
    if rss:
        parts.append(
            f"memory growth not judged for {', '.join(rss)} (less RSS history than the leak "
            "check needs)"
        )
    return parts


def judged_nothing(s: SoakSummary) -> bool:
    """No series got a drift figure: a `stable` verdict then resolved no drift at all."""
    return bool(s.series) and not s.drift


StabilityState = Literal["not stable", "unjudged", "judged in part", "judged"]


def stability_state(s: SoakSummary) -> StabilityState:
    """How much a soak's verdict carries, read once for the soak's headline and the sweep
    report's stability line, so the two cannot tell a reader different things: `stable` with
    no drift figure at all is "unjudged", with some series unresolved or unjudged "judged in
    part"."""
    if s.verdict != "stable":
        return "not stable"
    if judged_nothing(s):
        return "unjudged"
    return "judged in part" if unresolved_text(s) is not None else "judged"


def unresolved_text(s: SoakSummary) -> str | None:
    """The sentence that names the unresolved or unjudged series; None when every series is
    resolved."""
    unresolved = unresolved_drift(s)
    unjudged = unjudged_parts(s)
    if not unresolved:
        return "; ".join(unjudged) or None
    threshold = s.drift_threshold_or_default
    # A series held unresolved by recurring dips (soak/dips.py) does not reach past anything.
    dipped = [d for d in unresolved if d.recurring_dips]
    unresolved = [d for d in unresolved if not d.recurring_dips]
    recurring = [
        f"{d.profile} at concurrency {d.concurrency}: {len(d.dips or ())} blocks "
        f"fell off and came back, which nothing outside the server explains (its slope alone "
        f"reads {d.slope_verdict}, {d.change:+.0%}, {_ci(d.ci95)})"
        for d in dipped
    ]
    items = "; ".join(
        f"{d.profile} at concurrency {d.concurrency} {d.change:+.0%} "
        f"({_ci(d.ci95)}{_blocks_needed(d, threshold)})"
        for d in unresolved
    )
    reach = (
        [
            f"throughput drift not resolved in {s.duration}: {items} reaches past the "
            f"-{threshold:.0%} threshold (docs/soak.md, "
            '"Soaking the sweep\'s recommendation")'
        ]
        if unresolved
        else []
    )
    return "; ".join([*reach, *recurring, *unjudged])


def _blocks_needed(d: SeriesDrift, threshold: float) -> str:
    """How many times its blocks the series' own noise needs (`depth.settle_text`), said
    instead of "a longer soak settles it", which the 130-minute soak of 28 Nov (half-widths
    16-19%, about 3x the blocks short) showed to be a promise."""
    return f"; at its noise, {settle_text(d.half_width or 0.0, d.change, threshold)}"


def drift_cell(d: SeriesDrift | None) -> str:
    if d is None:
        return "not judged (few blocks)"
    cell = f"{d.change:+.1%} ({_pct(d.ci95)})"
    if d.estimator == "aggregate":
        warmup = f" after {d.warmup_blocks} warm-up" if d.warmup_blocks else ""
        work = f", {d.work_requests} requests a block" if d.work_requests else ""
        cell += f", {d.verdict} (aggregate, {d.blocks} blocks{warmup}{work})"
    return cell
