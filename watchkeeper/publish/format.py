"""Numbers as every page prints them: changes, intervals, and the missing value.

The digest, the tracker's issues, the bench report, the PR comment and the console each had
their own `_pct` and `_ci`, with different meanings (a ratio printed as a ratio in one place and
as a change in another) and two markers for "no value" (`—` and `n/a`). One module, one marker.
"""

from __future__ import annotations

from collections.abc import Callable

MISSING = "—"
"""The one marker for a value that is not there (not measured, not computable)."""


def pct(value: float | None, digits: int = 1) -> str:
    """A signed change as a percentage: 0.052 → '+5.2%'."""
    return MISSING if value is None else f"{value * 100:+.{digits}f}%"


def points(value: float | None, digits: int = 1) -> str:
    """A signed change of a proportion in percentage points: 0.05 → '+5.0 pt'."""
    return MISSING if value is None else f"{value * 100:+.{digits}f} pt"


def interval(low: float | None, high: float | None, fmt: Callable[[float | None], str]) -> str:
    """'low to high' in `fmt`'s unit; MISSING unless both ends are known."""
    return MISSING if low is None or high is None else f"{fmt(low)} to {fmt(high)}"
