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

import math
import statistics
from collections import defaultdict
from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any

import numpy as np
from scipy.stats import levene

from watchkeeper.config import SoakConfig
from watchkeeper.format import ci
from watchkeeper.soak.depth import block_rows, depth_lines, series_drift
from watchkeeper.soak.dips import block_host_cpu
from watchkeeper.soak.trends import (
    MIN_BLOCKS,
    block_medians,
    level_shift,
    relative_shift,
    relative_trend,
    theil_sen,
    thirds,
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
) -> tuple[list[dict[str, Any]], list[str], list[str]]:
    """Per (profile, concurrency): the slice table, one row per block (`depth.block_rows`:
    kept so the drift can be redone from the figures), its absolute throughput drift and
    level shift, and its acceptance drift. An arm in ``paired`` gets the figures (labelled
    `drift_judged: paired`) but no throughput reason: its pair's ratio is judged instead.
    An unpaired series at concurrency above 1 is judged on its aggregate throughput per
    block (`drift_judged: aggregate`, soak/depth.py): its per-request speeds scatter with
    the batch they shared. ``host_cpu`` (the resource samples' taken_at and host CPU outside
    the servers, in time order) gives each block row its `host_other_cpu`, which may explain a
    dip (soak/dips.py)."""
    reasons: list[str] = []
    notes: list[str] = []
    out: list[dict[str, Any]] = []
    groups: dict[tuple[str, int], list[SoakSampleView]] = defaultdict(list)
    for s in samples:
        if not s.is_probe and s.error is None:
            groups[(s.profile, s.concurrency)].append(s)
    by_series = {key: block_rows(rows, origin, block_s=block_s) for key, rows in groups.items()}
    for key, rows in groups.items():
        host = block_host_cpu(rows, host_cpu)
        for row in by_series[key]:
            row["host_other_cpu"] = host.get(row["block"])
    for (profile, conc), rows in sorted(groups.items()):
        entry = _series_entry(profile, conc, rows, origin, slice_s)
        entry["block_rows"] = by_series[(profile, conc)]
        # The other profiles' blocks: what may explain a dip (soak/dips.py).
        others = [r for (p, _), r in sorted(by_series.items()) if p != profile]
        name = f"{profile} c{conc}"
        if profile in paired:
            entry["drift_judged"] = "paired"
        elif conc > 1:
            entry["drift_judged"] = "aggregate"
            entry["depth_drift"] = series_drift(
                entry["block_rows"],
                threshold=cfg.drift_threshold,
                floor=cfg.autocorrelation_floor,
                others=others,
            )
            reason, note = depth_lines(name, entry["depth_drift"], len(entry["block_rows"]))
            reasons.extend(reason)
            notes.extend(note)
        else:
            entry["drift_judged"] = "absolute"
            reason, missing = _absolute_drift(name, entry, cfg)
            reasons.extend(reason)
            notes.extend(missing)
        reasons.extend(_acceptance_drift(name, entry, cfg))
        out.append(entry)
    return out, reasons, notes


def _series_entry(
    profile: str, conc: int, rows: list[SoakSampleView], origin: datetime, slice_s: float
) -> dict[str, Any]:
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
            {
                "t_h": (index + 0.5) * slice_s / 3600.0,
                "requests": len(part),
                "decode_tps": statistics.median(tps) if tps else None,
                "tokens": sum(s.completion_tokens or 0 for s in part),
                "acceptance": accepted / drafted if drafted else None,
            }
        )
    entry: dict[str, Any] = {"profile": profile, "concurrency": conc, "slices": table}
    span_h = (len(slices) * slice_s) / 3600.0
    # One point per block (its median): the block is the replicate, not the time slice.
    points = [(_hours(when, origin), v) for when, v in block_medians(rows)]
    entry["blocks"] = len(points)
    relative = relative_trend(points, span_h, min_points=MIN_BLOCKS)
    if relative is not None:
        entry["throughput_drift"] = {
            **relative.trend.to_json(),
            "unit": "tok/s per hour",
            "level_tps": relative.level,
            "change": relative.change,
            "change_ci95": [relative.low, relative.high],
        }
    shift = level_shift(rows)
    if shift is not None:
        entry["throughput_shift"] = shift
    acc_points = [(r["t_h"], r["acceptance"]) for r in table if r["acceptance"] is not None]
    acc = theil_sen([tuple(zip(*acc_points, strict=True))]) if len(acc_points) >= 3 else None  # type: ignore[list-item]
    if acc is not None:
        entry["acceptance_drift"] = {
            **acc.to_json(),
            "unit": "acceptance per hour",
            "change_points": acc.slope * span_h,
            "change_ci95": [acc.low * span_h, acc.high * span_h],
        }
    return entry


def _absolute_drift(name: str, entry: dict[str, Any], cfg: SoakConfig) -> Lines:
    """The unpaired arm's own drift: the Theil-Sen slope first, else the late step."""
    if "throughput_drift" not in entry:
        return [], [
            f"{name}: {entry['blocks']} block(s), fewer than {MIN_BLOCKS}: throughput drift "
            "not judged"
        ]
    drift = entry["throughput_drift"]
    low, high = drift["change_ci95"]
    if drift["change"] < -cfg.drift_threshold and high < 0:
        return [
            f"{name}: throughput drifted {drift['change']:+.0%} over the soak (absolute, an "
            f"arm without a partner: the host's load counts too; {ci(low, high, '+.0%', '..')})"
        ], []
    shift = entry.get("throughput_shift")
    if shift is None:
        return [], []
    low, high = shift["change_ci95"]
    if shift["change"] < -cfg.drift_threshold and high < 0:
        return [
            f"{name}: throughput drifted {shift['change']:+.0%} from the first to the last "
            "third of the soak (absolute, an arm without a partner: the host's load counts "
            f"too; {ci(low, high, '+.0%', '..')})"
        ], []
    return [], []


def _acceptance_drift(name: str, entry: dict[str, Any], cfg: SoakConfig) -> list[str]:
    """Acceptance is a count of tokens, not a speed: a busy host does not move it."""
    acc = entry.get("acceptance_drift")
    if acc is None or not (
        acc["change_points"] < -cfg.acceptance_drift_threshold and acc["ci95"][1] < 0
    ):
        return []
    return [f"{name}: acceptance drifted {acc['change_points'] * 100:+.1f} points"]


# -- two arms: the ratio is judged, the common drift is the host's -----------------------


def pair_drift(entry: dict[str, Any]) -> dict[str, Any]:
    """The drift of one pair (an entry of `paired.reference_ratios`), from its warm cycles in
    time order: `ratio` (current over reference) and `host` (the geometric mean of the two
    arms: what both felt alike), each as a Theil-Sen trend over the cycles and a
    first-third/last-third shift. None for either below `MIN_BLOCKS` cycles."""
    warm = set(entry["warmup_cycles"])
    cycles = [c for c in entry["cycles"] if c["cycle"] not in warm]
    x = [float(c["cycle"]) for c in cycles]
    ratio = [c["current_tps"] / c["reference_tps"] for c in cycles]
    host = [math.sqrt(c["current_tps"] * c["reference_tps"]) for c in cycles]
    return {
        "profile": entry["profile"],
        "concurrency": entry["concurrency"],
        "reference_arm": entry["reference_arm"],
        "aa": entry["aa"],
        "cycles": len(cycles),
        "ratio": _relative_change(x, ratio),
        "host": _relative_change(x, host),
        "arms": {
            "current": relative_shift([c["current_tps"] for c in cycles]),
            "reference": relative_shift([c["reference_tps"] for c in cycles]),
        },
        "spread": ratio_spread(ratio),
        "requests": block_requests(cycles),
    }


def block_requests(cycles: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """Each arm's median requests per block in the first and the last third of the cycles
    (None below `MIN_BLOCKS` cycles, or for figures stored before the counts were)."""
    if len(cycles) < MIN_BLOCKS or any(c.get("current_requests") is None for c in cycles):
        return None
    out: dict[str, Any] = {}
    for arm in ("current", "reference"):
        first, last = thirds([int(c[f"{arm}_requests"]) for c in cycles])
        out[arm] = {"first": statistics.median(first), "last": statistics.median(last)}
    return out


FEW_REQUESTS = 2
"""A block whose median rests on this many requests or fewer is one request's noise."""
COLLAPSE_FACTOR = 3.0
"""How many times fewer requests per block, in one third than the other, make a collapse."""


def blocks_collapsed(drift: dict[str, Any]) -> str | None:
    """Why the cycles' blocks stopped being replicates, or None: both arms' blocks held at least 3x
    fewer requests in one third than in the other, down to `FEW_REQUESTS` or fewer. Then a block's
    median is one request, and which arm's block a slow request lands in is chance: an A/A soak
    beside a neighbour read a paired drift from such blocks, which the scatter guard
    (`host_unshared`) did not catch (docs/measurements.md#figures-behind-the-code). Both arms,
    because one arm that slows alone finishes fewer requests per block too: that is its drift,
    judged as before."""
    requests = drift.get("requests")
    if not requests:
        return None
    seen = []
    for arm in ("current", "reference"):
        few, many = sorted((requests[arm]["first"], requests[arm]["last"]))
        if not (few <= FEW_REQUESTS and many >= COLLAPSE_FACTOR * max(few, 1)):
            return None
        seen.append(f"{requests[arm]['first']:g} -> {requests[arm]['last']:g}")
    return (
        f"both arms' blocks went from a median of {seen[0]} and {seen[1]} requests (first to "
        "last third): a block of one or two requests is one request's noise, not a replicate"
    )


def ratio_spread(ratios: Sequence[float]) -> dict[str, Any] | None:
    """How much the cycles' log ratio scatters in the first and the last third, and whether
    that changed (Brown-Forsythe: Levene's test about the medians, robust to the odd slow
    block). The paired design assumes both blocks of a cycle meet the same host; a host whose
    load changes faster than a block (two decode threads on two cores collapsing 20-40x
    whenever a neighbour takes a core, measured beside a one-core neighbour) breaks that, and
    the ratio then scatters: an A/A soak read a -51% "drift" with a CI of -98%..-4%."""
    first, last = thirds([math.log(r) for r in ratios])
    if len(first) < 3:
        # Two values a third: their deviations from the median are equal, so the test's
        # denominator is 0 (a divide-by-zero warning, and no evidence either way).
        return None
    with np.errstate(divide="ignore", invalid="ignore"):
        _, p = levene(first, last, center="median")
    return {
        "first_sd": statistics.stdev(first),
        "last_sd": statistics.stdev(last),
        "p": float(p) if math.isfinite(p) else 1.0,
    }


SPREAD_FACTOR = 2.0
"""How much more the log ratio must scatter in one third than the other before the pairs are
taken not to share a host (with SPREAD_P)."""
SPREAD_P = 0.01


def host_unshared(drift: dict[str, Any], threshold: float) -> str | None:
    """Why the pairs of this drift stopped sharing one host, or None while they do: the host
    changed (both arms' geometric mean, CI excluding no change) and each arm's median moved
    the same way beyond the threshold (an arm that degrades alone is that arm's fault, and
    the guard never hides it: its partner's median stays put), *and* the cycles' ratio
    scatters at least twice as much in one third as in the other, with confidence. Each
    arm's own CI is not asked for: the scatter that defines the case makes it too wide to
    exclude anything. Either way round: a neighbour arriving, or one leaving."""
    arms = drift.get("arms") or {}
    spread = drift.get("spread")
    host = (drift.get("host") or {}).get("shift")
    current, reference = arms.get("current"), arms.get("reference")
    if spread is None or host is None or current is None or reference is None:
        return None
    low, high = host["change_ci95"]
    sign = -1.0 if high < 0 else 1.0 if low > 0 else 0.0
    both_moved = sign != 0.0 and all(sign * s["change"] > threshold for s in (current, reference))
    quiet, busy = sorted((spread["first_sd"], spread["last_sd"]))
    scattered = busy >= SPREAD_FACTOR * quiet and spread["p"] < SPREAD_P
    if not (both_moved and scattered):
        return None
    return (
        f"both arms {'slowed' if sign < 0 else 'sped up'} ({current['change']:+.0%} and "
        f"{reference['change']:+.0%}, first to last third) and their cycle ratio's scatter went "
        f"from {spread['first_sd']:.0%} to {spread['last_sd']:.0%} (Brown-Forsythe p = "
        f"{spread['p']:.3f}): the host's load changed within cycles, so the two blocks of a "
        "cycle no longer met the same host"
    )


def _relative_change(x: list[float], values: list[float]) -> dict[str, Any] | None:
    if len(values) < MIN_BLOCKS:
        return None
    trend = theil_sen([(x, [math.log(v) for v in values])])
    span = x[-1] - x[0]
    out: dict[str, Any] = {"shift": relative_shift(values)}
    if trend is not None:
        out["trend"] = {
            "change": math.expm1(trend.slope * span),
            "change_ci95": [math.expm1(trend.low * span), math.expm1(trend.high * span)],
            "points": trend.points,
        }
    return out


def pair_lines(drift: dict[str, Any], threshold: float) -> Lines:
    """Reasons and notes of one pair: the ratio's drift against one arm, the host's drift as
    a note. On an A/A soak (both arms the same system) a ratio drift can only be noise or the
    server instance, so it is a note, as an A/A ratio verdict is."""
    name = f"{drift['profile']} c{drift['concurrency']}"
    partner = drift["reference_arm"]
    if drift["ratio"] is None:
        return [], [
            f"{name} beside {partner}: {drift['cycles']} warm cycle(s), fewer than "
            f"{MIN_BLOCKS}: paired throughput drift not judged"
        ]
    notes = [_host_note(name, partner, drift["host"])]
    collapsed = blocks_collapsed(drift)
    if collapsed is not None:
        return [], [
            *notes,
            f"{name} beside {partner}: paired throughput drift not judged: {collapsed} (rerun "
            "on a quieter host, with longer blocks, or with fewer server threads than cores)",
        ]
    unshared = host_unshared(drift, threshold)
    if unshared is not None:
        return [], [
            *notes,
            f"{name} beside {partner}: paired throughput drift not judged: {unshared} (rerun "
            "on a quieter host, or give the servers fewer threads than the host has cores)",
        ]
    found = ratio_beyond(drift["ratio"], threshold)
    if found is None:
        return [], notes
    change, low, high, current_slower, when = found
    slower, other = (
        (name, partner)
        if current_slower
        else (f"{partner} c{drift['concurrency']}", drift["profile"])
    )
    text = (
        f"{slower}: throughput drifted {change:+.0%} against {other} {when} (paired: the ratio "
        f"of the two arms, {ci(low, high, '+.0%', '..')})"
    )
    if drift["aa"]:
        return [], [*notes, text + " on an A/A soak: a false alarm"]
    return [text], notes


def ratio_beyond(
    ratio: dict[str, Any], threshold: float
) -> tuple[float, float, float, bool, str] | None:
    """(change of the slower arm against the other, its CI, whether the slower arm is the
    current one, over what span) for the first of trend and shift beyond the threshold with
    its CI excluding no change; the change is symmetric in the arms (a reference slower by
    12% is a ratio 13.6% up)."""
    candidates = (
        (ratio.get("trend"), "over the soak"),
        (ratio.get("shift"), "from the first to the last third of the soak"),
    )
    for figures, when in candidates:
        if figures is None:
            continue
        change = figures["change"]
        low, high = figures["change_ci95"]
        if change < -threshold and high < 0:
            return change, low, high, True, when
        flipped = 1.0 / (1.0 + change) - 1.0
        if flipped < -threshold and low > 0:
            return flipped, 1.0 / (1.0 + high) - 1.0, 1.0 / (1.0 + low) - 1.0, False, when
    return None


def _host_note(name: str, partner: str, host: dict[str, Any] | None) -> str:
    """The size of what both arms felt alike: the late step if measured, else the slope."""
    for key, when in (
        ("shift", "from the first to the last third of the soak"),
        ("trend", "over the soak"),
    ):
        figures = (host or {}).get(key)
        if figures is not None:
            low, high = figures["change_ci95"]
            return (
                f"{name} beside {partner}: both arms drifted {figures['change']:+.0%} alike "
                f"{when} ({ci(low, high, '+.0%', '..')}): the host's drift "
                "(other load, heat), judged against neither arm"
            )
    return f"{name} beside {partner}: the host's drift not measured"
