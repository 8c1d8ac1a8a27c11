"""The crossover in one sentence: what paid, from where it stopped, which metric decided, how
sure the interval is, and what is left out or unresolved.

Kept apart from `analysis/crossover.py` (which reads the curve) so the words can change
without touching the reading. The sentence names a non-monotone curve as such instead of
reading a crossing off it (a ladder once reported n-gram "crossing near 2.35" from estimates
1.27, 0.46, 0.98 at 2, 4, 8 in flight)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from watchkeeper.analysis.load_compare import LABELS, Reading


class LevelRatios(Protocol):
    """What the words read of a level (analysis/crossover.py's `LevelRatios`)."""

    @property
    def level(self) -> float: ...
    @property
    def oversaturated(self) -> tuple[str, ...]: ...
    @property
    def excluded(self) -> bool: ...
    def reading(self, metric: str) -> Reading | None: ...


def _g(x: float) -> str:
    return f"{x:.3g}"


def _state(lv: LevelRatios, metric: str) -> str:
    r = lv.reading(metric)
    return r.state if r is not None else "no pairs"


def sentence(
    arm: str,
    metric: str,
    ordered: Sequence[LevelRatios],
    pays_up_to: float | None,
    first_not: float | None,
    crossings: tuple[float | None, float | None, float | None],
    non_monotone: bool,
    unit: str,
) -> str:
    label = LABELS[metric]
    if not ordered:
        return f"{arm}: no load level measured"
    used = [lv for lv in ordered if not lv.excluded]
    left = _left_out(ordered, unit)
    if not used:
        return f"{arm}: the baseline was oversaturated at every level: no crossover read{left}"
    with_ci = [lv for lv in used if (r := lv.reading(metric)) is not None and r.has_ci]
    if not with_ci:
        return (
            f"{arm}: no level has a CI on {label} (3 rounds and 3 tasks needed): "
            f"no crossover read{left}"
        )
    tail = f" (decided on {label}){_needed(used, metric, unit)}{left}"
    if non_monotone:
        return _non_monotone(arm, label, with_ci, metric, unit) + tail
    est, low, high = crossings
    where = ""
    if est is not None:
        span = (
            f" (CI bounds cross between {_g(low) if low else '?'} and {_g(high) if high else '?'})"
            if low is not None or high is not None
            else ""
        )
        where = f"; the estimate crosses no change near {_g(est)} {unit}{span}"
    if pays_up_to is None:
        first = used[0]
        state = _state(first, metric)
        verdict = "keep the baseline" if state == "costs" else "no gain shown"
        later = [_g(lv.level) for lv in used if _state(lv, metric) == "pays"]
        if later:
            verdict += f" (pays at {', '.join(later)} only)"
        return (
            f"{arm} does not pay even at {_g(first.level)} {unit} ({state}): {verdict}{where}{tail}"
        )
    if first_not is None:
        return f"{arm} pays at every load measured, up to {_g(pays_up_to)} {unit}{where}{tail}"
    at = next(lv for lv in used if lv.level == first_not)
    state = _state(at, metric)
    verdict = "keep the baseline" if state == "costs" else "no gain shown"
    return (
        f"{arm} pays up to {_g(pays_up_to)} {unit} here; from {_g(first_not)} on "
        f"{state}: {verdict}{where}{tail}"
    )


def _non_monotone(
    arm: str, label: str, with_ci: Sequence[LevelRatios], metric: str, unit: str
) -> str:
    points = []
    for lv in with_ci:
        r = lv.reading(metric)
        if r is not None:
            value = f"{r.estimate:+.2f}" if r.difference else f"{r.estimate:.2f}"
            points.append(f"{value} at {_g(lv.level)}")
    return (
        f"{arm}: the curve is non-monotone ({', '.join(points)} {unit}): it falls and rises "
        "again by more than the threshold, so no single crossover is read; more rounds per "
        "level, or levels in between, would tell noise from shape"
    )


def _needed(used: Sequence[LevelRatios], metric: str, unit: str) -> str:
    """The rounds that would resolve the first unresolved level, where one is."""
    for lv in used:
        r = lv.reading(metric)
        if r is None or r.state != "no clear difference":
            continue
        if r.rounds_needed is None:
            return (
                f"; at {_g(lv.level)} {unit} (first unresolved) no practical number of rounds "
                "would resolve it: the estimate lies within the threshold"
            )
        return (
            f"; at {_g(lv.level)} {unit} (first unresolved) about {r.rounds_needed} rounds "
            f"would resolve it ({r.rounds} measured)"
        )
    return ""


def _left_out(ordered: Sequence[LevelRatios], unit: str) -> str:
    out = [_g(lv.level) for lv in ordered if lv.excluded]
    alone = [_g(lv.level) for lv in ordered if lv.oversaturated and not lv.excluded]
    text = ""
    if out:
        text += f"; left out, baseline oversaturated: {', '.join(out)} {unit}"
    if alone:
        text += f"; the candidate alone was oversaturated at {', '.join(alone)} {unit} (kept)"
    return text
