"""The soak report's throughput-drift figures: which estimate each series was judged by, which
series the soak did not run long enough to settle, and how a drift reads in the table.

At concurrency 1 a series' drift is the slope of its block medians (soak/drift.py); above 1,
unpaired, it is the aggregate throughput's slope with its own verdict (soak/depth.py). Split
from publish/soak_report.py, which renders the rest.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from watchkeeper.publish import markdown as md
from watchkeeper.soak.depth import settle_text


def _pct(ci: Sequence[float] | None) -> str:
    return f"{ci[0]:+.0%}..{ci[1]:+.0%}" if ci else md.NONE


def drift_entries(series: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Each series' judged throughput drift: at concurrency 1 the slope of its block medians;
    above 1, where judged on aggregate throughput (soak/depth.py), that slope with its
    verdict (`drift`, `no drift`, `no slowdown`, `inconclusive`) and block count."""
    out = []
    for e in series:
        depth = e.get("depth_drift")
        if depth is not None:
            out.append(
                {
                    "profile": e["profile"],
                    "concurrency": e["concurrency"],
                    "change": depth["change"],
                    "ci95": depth["change_ci95"],
                    "estimator": "aggregate",
                    "verdict": depth["verdict"],
                    "blocks": depth["blocks"],
                    "autocorrelation": depth["autocorrelation"],
                    **{
                        k: depth[k]
                        for k in ("warmup_blocks", "work_requests", "slope_verdict", "dips")
                        if k in depth
                    },
                }
            )
        elif "throughput_drift" in e:
            drift = e["throughput_drift"]
            out.append(
                {
                    "profile": e["profile"],
                    "concurrency": e["concurrency"],
                    "change": drift["change"],
                    "ci95": drift["change_ci95"],
                }
            )
    return out


def unresolved_drift(s: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Series the soak did not run long enough to settle; a `stable` verdict does not cover
    them. Judged on aggregate throughput (depth > 1): its verdict is `inconclusive` (the CI
    reaches past -threshold without a slowdown beyond it; `no slowdown`, a CI that reaches
    past only +threshold, is resolved). Otherwise: the CI reaches past the threshold on the
    losing side without lying wholly beyond it. Both read only the losing side: stability
    asks whether the server slowed."""
    threshold = drift_threshold_of(s)
    return [
        d
        for d in s.get("drift", [])
        if (d.get("verdict") == "inconclusive")
        or ("verdict" not in d and d["ci95"] and d["ci95"][0] < -threshold < d["ci95"][1])
    ]


def drift_threshold_of(s: Mapping[str, Any]) -> float:
    return float(s.get("drift_threshold") or 0.10)


def unjudged_parts(s: Mapping[str, Any]) -> list[str]:
    """What a `stable` verdict says nothing about: series with too few blocks for a drift
    figure, and servers with less RSS history than the leak check needs. A 36-minute soak of
    four series has both; its "stable" means "no error, no restart", not "no drift"."""
    judged = {(d["profile"], d["concurrency"]) for d in s.get("drift", [])}
    series = [
        f"{r['profile']} at concurrency {r['concurrency']}"
        for r in s.get("series", [])
        if (r["profile"], r["concurrency"]) not in judged
    ]
    rss = sorted(p for p, e in (s.get("rss") or {}).items() if e.get("judged") is False)
    parts = []
    if series:
        parts.append(
            f"throughput drift not judged for {', '.join(series)} (too few blocks in "
            f"{s.get('duration')})"
        )
    if rss:
        parts.append(
            f"memory growth not judged for {', '.join(rss)} (less RSS history than the leak "
            "check needs)"
        )
    return parts


def judged_nothing(s: Mapping[str, Any]) -> bool:
    """No series got a drift figure: a `stable` verdict then resolved no drift at all."""
    return bool(s.get("series")) and not s.get("drift")


StabilityState = Literal["not stable", "unjudged", "judged in part", "judged"]


def stability_state(s: Mapping[str, Any]) -> StabilityState:
    """How much a soak's verdict carries, read once for the soak's headline and the sweep
    report's stability line, so the two cannot tell a reader different things: `stable` with
    no drift figure at all is "unjudged", with some series unresolved or unjudged "judged in
    part"."""
    if s.get("verdict") != "stable":
        return "not stable"
    if judged_nothing(s):
        return "unjudged"
    return "judged in part" if unresolved_text(s) is not None else "judged"


def unresolved_text(s: Mapping[str, Any]) -> str | None:
    """The sentence that names the unresolved or unjudged series; None when every series is
    resolved."""
    unresolved = unresolved_drift(s)
    unjudged = unjudged_parts(s)
    if not unresolved:
        return "; ".join(unjudged) or None
    threshold = drift_threshold_of(s)
    # A series held unresolved by recurring dips (soak/dips.py) does not reach past anything.
    dipped = [d for d in unresolved if "slope_verdict" in d]
    unresolved = [d for d in unresolved if "slope_verdict" not in d]
    recurring = [
        f"{d['profile']} at concurrency {d['concurrency']}: {len(d.get('dips') or ())} blocks "
        f"fell off and came back, which nothing outside the server explains (its slope alone "
        f"reads {d['slope_verdict']}, {d['change']:+.0%}, 95% CI {_pct(d['ci95'])})"
        for d in dipped
    ]
    items = "; ".join(
        f"{d['profile']} at concurrency {d['concurrency']} {d['change']:+.0%} "
        f"(95% CI {_pct(d['ci95'])}{_blocks_needed(d, threshold)})"
        for d in unresolved
    )
    reach = (
        [
            f"throughput drift not resolved in {s.get('duration')}: {items} reaches past the "
            f"-{threshold:.0%} threshold (docs/soak.md, "
            '"Soaking the sweep\'s recommendation")'
        ]
        if unresolved
        else []
    )
    return "; ".join([*reach, *recurring, *unjudged])


def _blocks_needed(d: Mapping[str, Any], threshold: float) -> str:
    """How many times its blocks the series' own noise needs (`depth.settle_text`), said
    instead of "a longer soak settles it", which the 130-minute soak of 28 Nov (half-widths
    16-19%, about 3x the blocks short) showed to be a promise."""
    low, high = d["ci95"]
    return f"; at its noise, {settle_text((high - low) / 2.0, d['change'], threshold)}"


def drift_cell(d: Mapping[str, Any] | None) -> str:
    if d is None:
        return "not judged (few blocks)"
    cell = f"{d['change']:+.1%} ({_pct(d['ci95'])})"
    if d.get("estimator") == "aggregate":
        warmup = f" after {d['warmup_blocks']} warm-up" if d.get("warmup_blocks") else ""
        work = f", {d['work_requests']} requests a block" if d.get("work_requests") else ""
        cell += f", {d['verdict']} (aggregate, {d['blocks']} blocks{warmup}{work})"
    return cell
