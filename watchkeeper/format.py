"""Numbers as every page prints them: shares, changes, intervals, speed-up CIs, and the one
marker for a missing value.

The bench report, the console, the PR comment, the digest, the tracker's issues and the nightly
titles each had their own `_pct`, `_ci` or `_num`, with different meanings (`_pct` was a share
in one place and a change of a ratio in another; a speed-up CI printed `[low, high]` on the
console and `(low-high)` in the report) and two markers for "no value" (`—` and `n/a`). Here
each meaning has one name, and a missing value is always `MISSING`.

A base module beside `errors.py` (it imports nothing of the package): the findings' evidence
and the nightly's titles use it as much as `publish/` does, and a stage must not import a
layer above it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

MISSING = "—"
"""The one marker for a value that is not there (not measured, not computable)."""


def fixed(value: float | None, spec: str = ".1f", suffix: str = "") -> str:
    """A plain number in a format spec: fixed(81.94) → '81.9'."""
    return MISSING if value is None else f"{format(value, spec)}{suffix}"


def share(value: float | None, digits: int = 1) -> str:
    """A rate or share of a whole, unsigned: 0.652 → '65.2%'."""
    return MISSING if value is None else f"{value * 100:.{digits}f}%"


def pct(value: float | None, digits: int = 1) -> str:
    """A signed relative change: -0.182 → '-18.2%'."""
    return MISSING if value is None else f"{value * 100:+.{digits}f}%"


def points(value: float | None, digits: int = 1) -> str:
    """A signed change of a proportion in percentage points: 0.05 → '+5.0 pt'."""
    return MISSING if value is None else f"{value * 100:+.{digits}f} pt"


def change_of_ratio(ratio: float | None, digits: int = 1) -> str:
    """A current/reference ratio read as a change: 0.89 → '-11.0%'."""
    return pct(None if ratio is None else ratio - 1.0, digits)


def interval(low: float | None, high: float | None, fmt: Callable[[float | None], str]) -> str:
    """'low to high' in `fmt`'s unit, for changes; MISSING unless both ends are known."""
    return MISSING if low is None or high is None else f"{fmt(low)} to {fmt(high)}"


def span(low: float | None, high: float | None, spec: str = ".2f") -> str:
    """'low-high' for a ratio's interval (ratios are positive, so the dash cannot be a sign)."""
    return MISSING if low is None or high is None else f"{low:{spec}}-{high:{spec}}"


CI_LABEL = "95% CI"
"""How every page names an interval: the one place the level is written in text."""


def ci(
    low: float | None,
    high: float | None,
    spec: str | Callable[[float], str] = ".2f",
    sep: str = "-",
    *,
    over: str = "",
) -> str:
    """An interval, labelled: ci(1.22, 1.55) → '95% CI 1.22-1.55'; a change's ends with its
    own spec and separator: ci(-0.1, 0.05, "+.0%", "..") → '95% CI -10%..+5%'; or with a
    printer of this module: ci(0.01, 0.04, share) → '95% CI 1.0%-4.0%'. An end that is not
    known gives '95% CI —' (every hand-written "95% CI" string used to decide that itself).
    ``over``: what the interval replicates over where it is not the rounds, named in the
    label: ci(0.97, 1.12, over="36 tasks") → '95% CI over 36 tasks 0.97-1.12' (a one-round
    sweep's interval over its tasks, analysis/racing_tasks.py)."""
    label = f"{CI_LABEL} over {over}" if over else CI_LABEL
    if low is None or high is None:
        return f"{label} {MISSING}"
    if callable(spec):
        return f"{label} {spec(low)}{sep}{spec(high)}"
    return f"{label} {low:{spec}}{sep}{high:{spec}}"


_labelled = ci  # `speedup`'s argument is named ci


class SpeedupCI(Protocol):
    """What `analysis.stats.RatioCI` offers a printer (kept structural: no import of stats)."""

    @property
    def estimate(self) -> float: ...
    @property
    def low(self) -> float | None: ...
    @property
    def high(self) -> float | None: ...
    @property
    def has_ci(self) -> bool: ...
    @property
    def n_rounds(self) -> int: ...
    @property
    def over(self) -> str: ...


def speedup(ci: SpeedupCI | None) -> str:
    """A speed-up with its 95% CI: '1.38x (1.22-1.55)', or '1.38x (1 round(s): no CI)'; an
    interval over tasks says so: '1.04x (95% CI over 36 tasks 0.97-1.12)'."""
    if ci is None:
        return MISSING
    if not ci.has_ci:
        return f"{ci.estimate:.2f}x ({ci.n_rounds} round(s): no CI)"
    if ci.over:
        return f"{ci.estimate:.2f}x ({_labelled(ci.low, ci.high, over=ci.over)})"
    return f"{ci.estimate:.2f}x ({span(ci.low, ci.high)})"
