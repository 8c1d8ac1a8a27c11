"""Throughput drift of two arms soaked side by side: the ratio is judged, the common drift is
the host's (soak/drift.py says why; the one-arm half lives there).

Each pair's drift is one typed value (`PairDrift`), built from a paired ratio's cycles
(soak/paired.py) and read by attribute; `to_json` writes it key for key as the soak's
figures (`paired_drift`) have always held it.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.stats import levene

from watchkeeper.format import ci
from watchkeeper.soak.drift import Lines
from watchkeeper.soak.paired_figures import CycleRow, ReferenceRatio
from watchkeeper.soak.trends import MIN_BLOCKS, Shift, relative_shift, theil_sen, thirds


@dataclass(frozen=True, slots=True)
class TrendChange:
    """A Theil-Sen trend over the cycles as the relative change over their span, with its CI."""

    change: float
    low: float
    high: float
    points: int

    def to_json(self) -> dict[str, Any]:
        return {"change": self.change, "change_ci95": [self.low, self.high], "points": self.points}


@dataclass(frozen=True, slots=True)
class RelativeChange:
    """One series over the cycles (the ratio of the two arms, or the host's geometric mean):
    its first-third/last-third shift and, where one was fitted, its trend over the soak."""

    shift: Shift | None
    trend: TrendChange | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"shift": None if self.shift is None else self.shift.to_json()}
        if self.trend is not None:
            out["trend"] = self.trend.to_json()
        return out


@dataclass(frozen=True, slots=True)
class Spread:
    """The cycles' log ratio's standard deviation in the first and the last third, and the
    Brown-Forsythe p that they differ (`ratio_spread`)."""

    first_sd: float
    last_sd: float
    p: float

    def to_json(self) -> dict[str, Any]:
        return {"first_sd": self.first_sd, "last_sd": self.last_sd, "p": self.p}


@dataclass(frozen=True, slots=True)
class BlockRequests:
    """One arm's median requests per block in the first and the last third of the cycles."""

    first: float
    last: float

    def to_json(self) -> dict[str, Any]:
        return {"first": self.first, "last": self.last}


@dataclass(frozen=True, slots=True)
class PairDrift:
    """The drift of one pair (a profile beside its reference at one concurrency), from its
    warm cycles: the ratio's and the host's change, each arm's own shift, the ratio's
    scatter and the requests per block (`pair_drift`)."""

    profile: str
    concurrency: int
    reference_arm: str
    aa: bool
    cycles: int
    """Warm cycles judged."""
    ratio: RelativeChange | None
    """Current over reference; None below `MIN_BLOCKS` cycles."""
    host: RelativeChange | None
    """The geometric mean of the two arms: what both felt alike."""
    current: Shift | None
    reference: Shift | None
    spread: Spread | None
    requests: tuple[BlockRequests, BlockRequests] | None
    """(current, reference); None below `MIN_BLOCKS` cycles or without stored counts."""

    def to_json(self) -> dict[str, Any]:
        def plain(value: Shift | Spread | RelativeChange | None) -> dict[str, Any] | None:
            return None if value is None else value.to_json()

        requests = self.requests
        return {
            "profile": self.profile,
            "concurrency": self.concurrency,
            "reference_arm": self.reference_arm,
            "aa": self.aa,
            "cycles": self.cycles,
            "ratio": plain(self.ratio),
            "host": plain(self.host),
            "arms": {"current": plain(self.current), "reference": plain(self.reference)},
            "spread": plain(self.spread),
            "requests": None
            if requests is None
            else {"current": requests[0].to_json(), "reference": requests[1].to_json()},
        }


def pair_drift(entry: ReferenceRatio) -> PairDrift:
    """The drift of one pair (an entry of `paired.reference_ratios`), from its warm cycles in
    time order: `ratio` (current over reference) and `host` (the geometric mean of the two
    arms: what both felt alike), each as a Theil-Sen trend over the cycles and a
    first-third/last-third shift. None for either below `MIN_BLOCKS` cycles."""
    warm = set(entry.warmup_cycles)
    cycles = [c for c in entry.cycles if c.cycle not in warm]
    x = [float(c.cycle) for c in cycles]
    ratio = [c.current_tps / c.reference_tps for c in cycles]
    host = [math.sqrt(c.current_tps * c.reference_tps) for c in cycles]
    return PairDrift(
        profile=entry.profile,
        concurrency=entry.concurrency,
        reference_arm=entry.reference_arm,
        aa=entry.aa,
        cycles=len(cycles),
        ratio=_relative_change(x, ratio),
        host=_relative_change(x, host),
        current=relative_shift([c.current_tps for c in cycles]),
        reference=relative_shift([c.reference_tps for c in cycles]),
        spread=ratio_spread(ratio),
        requests=block_requests(cycles),
    )


def block_requests(
    cycles: Sequence[CycleRow],
) -> tuple[BlockRequests, BlockRequests] | None:
    """Each arm's median requests per block in the first and the last third of the cycles,
    (current, reference) (None below `MIN_BLOCKS` cycles, or for figures stored before the
    counts were)."""
    if len(cycles) < MIN_BLOCKS or any(c.current_requests is None for c in cycles):
        return None

    def arm(counts: Sequence[int | None]) -> BlockRequests:
        first, last = thirds([int(n or 0) for n in counts])
        return BlockRequests(statistics.median(first), statistics.median(last))

    return (
        arm([c.current_requests for c in cycles]),
        arm([c.reference_requests for c in cycles]),
    )


FEW_REQUESTS = 2
"""A block whose median rests on this many requests or fewer is one request's noise."""
COLLAPSE_FACTOR = 3.0
"""How many times fewer requests per block, in one third than the other, make a collapse."""


def blocks_collapsed(drift: PairDrift) -> str | None:
    """Why the cycles' blocks stopped being replicates, or None: both arms' blocks held at least 3x
    fewer requests in one third than in the other, down to `FEW_REQUESTS` or fewer. Then a block's
    median is one request, and which arm's block a slow request lands in is chance: an A/A soak
    beside a neighbour read a paired drift from such blocks, which the scatter guard
    (`host_unshared`) did not catch (docs/measurements.md#figures-behind-the-code). Both arms,
    because one arm that slows alone finishes fewer requests per block too: that is its drift,
    judged as before."""
    if not drift.requests:
        return None
    seen = []
    for arm in drift.requests:
        few, many = sorted((arm.first, arm.last))
        if not (few <= FEW_REQUESTS and many >= COLLAPSE_FACTOR * max(few, 1)):
            return None
        seen.append(f"{arm.first:g} -> {arm.last:g}")
    return (
        f"both arms' blocks went from a median of {seen[0]} and {seen[1]} requests (first to "
        "last third): a block of one or two requests is one request's noise, not a replicate"
    )


def ratio_spread(ratios: Sequence[float]) -> Spread | None:
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
    return Spread(
        statistics.stdev(first), statistics.stdev(last), float(p) if math.isfinite(p) else 1.0
    )


SPREAD_FACTOR = 2.0
"""How much more the log ratio must scatter in one third than the other before the pairs are
taken not to share a host (with SPREAD_P)."""
SPREAD_P = 0.01


def host_unshared(drift: PairDrift, threshold: float) -> str | None:
    """Why the pairs of this drift stopped sharing one host, or None while they do: the host
    changed (both arms' geometric mean, CI excluding no change) and each arm's median moved
    the same way beyond the threshold (an arm that degrades alone is that arm's fault, and
    the guard never hides it: its partner's median stays put), *and* the cycles' ratio
    scatters at least twice as much in one third as in the other, with confidence. Each
    arm's own CI is not asked for: the scatter that defines the case makes it too wide to
    exclude anything. Either way round: a neighbour arriving, or one leaving."""
    spread, current, reference = drift.spread, drift.current, drift.reference
    host = None if drift.host is None else drift.host.shift
    if spread is None or host is None or current is None or reference is None:
        return None
    sign = -1.0 if host.high < 0 else 1.0 if host.low > 0 else 0.0
    both_moved = sign != 0.0 and all(sign * s.change > threshold for s in (current, reference))
    quiet, busy = sorted((spread.first_sd, spread.last_sd))
    scattered = busy >= SPREAD_FACTOR * quiet and spread.p < SPREAD_P
    if not (both_moved and scattered):
        return None
    return (
        f"both arms {'slowed' if sign < 0 else 'sped up'} ({current.change:+.0%} and "
        f"{reference.change:+.0%}, first to last third) and their cycle ratio's scatter went "
        f"from {spread.first_sd:.0%} to {spread.last_sd:.0%} (Brown-Forsythe p = "
        f"{spread.p:.3f}): the host's load changed within cycles, so the two blocks of a "
        "cycle no longer met the same host"
    )


def _relative_change(x: list[float], values: list[float]) -> RelativeChange | None:
    if len(values) < MIN_BLOCKS:
        return None
    trend = theil_sen([(x, [math.log(v) for v in values])])
    span = x[-1] - x[0]
    return RelativeChange(
        relative_shift(values),
        None
        if trend is None
        else TrendChange(
            math.expm1(trend.slope * span),
            math.expm1(trend.low * span),
            math.expm1(trend.high * span),
            trend.points,
        ),
    )


def pair_lines(drift: PairDrift, threshold: float) -> Lines:
    """Reasons and notes of one pair: the ratio's drift against one arm, the host's drift as
    a note. On an A/A soak (both arms the same system) a ratio drift can only be noise or the
    server instance, so it is a note, as an A/A ratio verdict is."""
    name = f"{drift.profile} c{drift.concurrency}"
    partner = drift.reference_arm
    if drift.ratio is None:
        return [], [
            f"{name} beside {partner}: {drift.cycles} warm cycle(s), fewer than "
            f"{MIN_BLOCKS}: paired throughput drift not judged"
        ]
    notes = [_host_note(name, partner, drift.host)]
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
    found = ratio_beyond(drift.ratio, threshold)
    if found is None:
        return [], notes
    change, low, high, current_slower, when = found
    slower, other = (
        (name, partner) if current_slower else (f"{partner} c{drift.concurrency}", drift.profile)
    )
    text = (
        f"{slower}: throughput drifted {change:+.0%} against {other} {when} (paired: the ratio "
        f"of the two arms, {ci(low, high, '+.0%', '..')})"
    )
    if drift.aa:
        return [], [*notes, text + " on an A/A soak: a false alarm"]
    return [text], notes


def ratio_beyond(
    ratio: RelativeChange, threshold: float
) -> tuple[float, float, float, bool, str] | None:
    """(change of the slower arm against the other, its CI, whether the slower arm is the
    current one, over what span) for the first of trend and shift beyond the threshold with
    its CI excluding no change; the change is symmetric in the arms (a reference slower by
    12% is a ratio 13.6% up)."""
    candidates: tuple[tuple[TrendChange | Shift | None, str], ...] = (
        (ratio.trend, "over the soak"),
        (ratio.shift, "from the first to the last third of the soak"),
    )
    for figures, when in candidates:
        if figures is None:
            continue
        change, low, high = figures.change, figures.low, figures.high
        if change < -threshold and high < 0:
            return change, low, high, True, when
        flipped = 1.0 / (1.0 + change) - 1.0
        if flipped < -threshold and low > 0:
            return flipped, 1.0 / (1.0 + high) - 1.0, 1.0 / (1.0 + low) - 1.0, False, when
    return None


def _host_note(name: str, partner: str, host: RelativeChange | None) -> str:
    """The size of what both arms felt alike: the late step if measured, else the slope."""
    candidates: tuple[tuple[TrendChange | Shift | None, str], ...] = (
        (None if host is None else host.shift, "from the first to the last third of the soak"),
        (None if host is None else host.trend, "over the soak"),
    )
    for figures, when in candidates:
        if figures is not None:
            return (
                f"{name} beside {partner}: both arms drifted {figures.change:+.0%} alike "
                f"{when} ({ci(figures.low, figures.high, '+.0%', '..')}): the host's drift "
                "(other load, heat), judged against neither arm"
            )
    return f"{name} beside {partner}: the host's drift not measured"
