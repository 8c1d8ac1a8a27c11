"""Which end of a bisected range a release is like: the rule that places a candidate.

A bisect is asked about a change its ends have already measured: the bad end against the good
end reads a ratio r with a 95% CI. The nightly's rule (bad when the CI lies beyond
`nightly.min_effect`, good when it rules that out) answers another question, *is there a
regression*, and on the way to locating a 35% slowdown it stalls on a release that is 3.4%
slower than the good end (CI 0.935 to 0.997: neither beyond 3% nor clear of it). So a
candidate is judged against the effect the ends bracket, as Chromium's Pinpoint asks "is this
build like the good end or like the bad end?":

- In log space, the candidate against the good end reads y with 95% half-width h_y, and the
  ends read E with half-width h_E. The candidate carries the share q = y / E of the step.
- The share's 95% interval is Fieller's: the q for which y - q·E is within its half-width
  sqrt(h_y² + q²·h_E²) of zero (the two measurements are separate runs, so their errors add in
  quadrature). It carries the ends' uncertainty too: a 3-round ends step with a wide CI makes
  the candidates need more rounds, never a false placement.
- **good** when the share's interval lies under one half (`MIDPOINT`: the candidate is surely
  nearer the good end), **bad** when it lies over one half, **more** rounds otherwise.

Why a share and not the threshold: a test "differs from the good end" flags the 3.4% drift as
a difference (the problem this rule fixes), and "does not differ" is never proven. The share
asks the question a reader asks of the two numbers ("0.966 against 0.645: that release is on
the good side"), it scales with the regression (a 35% step puts the line at 19%, a 10% step at
5%), and it is symmetric: a speed-up (a fix inside the range) is bisected by the same rule.

Why one half and not quarter lines (good under ¼, bad over ¾, a confident middle a finding):
both were replayed on the same 30 seeded ranges of a stand-in host (round drift sd 3%,
request noise sd 3%, task offsets sd 2%, as in `tests/upgrade/test_bisect_steps.py`).
With a 35% step and a 3% drift both named the step in 30 of 30, the
half line in 17.2 rounds a bisect against 20.0; with a 35% and a 15% step in one range the
half line named both in 30 of 30 (38.6 rounds), the quarter lines in 17 of 30 (58.9): a
candidate that carries 73% of the range's change sits on the ¾ line and stays undecided for
12 rounds. With the half line every part the candidate does not carry is still seen: it is
the candidate's own difference from the end it is placed with, which opens a second range
when it is surely beyond the threshold (`upgrade.bisect`). A share that stays near one half
for `max_rounds` (two steps of one size, or a gradual change) splits the range there.

`change` is the two-sided threshold rule for the ends of a range (is there a step to locate at
all, either way) and for the located step against its predecessor; `slowdown` is the bisect's
first question about its own ends (is the bad end slower beyond the threshold).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

MIDPOINT = 0.5
"""A candidate whose share of the step is surely under this is like the good end, surely over
it like the bad end."""

Placement = Literal["good", "bad", "more"]
Change = Literal["slower", "faster", "same", "more"]
Slowdown = Literal["bad", "good", "more"]


@dataclass(frozen=True, slots=True)
class Ratio:
    """A measured ratio (candidate / baseline) with its 95% CI."""

    estimate: float
    low: float
    high: float

    @property
    def log(self) -> float:
        return math.log(self.estimate)

    @property
    def half_width(self) -> float:
        """The CI's half-width in log space (the mean of its two sides)."""
        return (math.log(self.high) - math.log(self.low)) / 2.0

    def valid(self) -> bool:
        return 0 < self.low <= self.high and self.estimate > 0


@dataclass(frozen=True, slots=True)
class Share:
    """The share of the ends' step a candidate carries (0: like the good end, 1: like the
    bad end), with its 95% interval."""

    estimate: float
    low: float
    high: float

    def placement(self) -> Placement:
        if self.high < MIDPOINT:
            return "good"
        if self.low > MIDPOINT:
            return "bad"
        return "more"


def share(candidate: Ratio, ends: Ratio) -> Share | None:
    """Fieller's interval of log(candidate) / log(ends); None when the ends' CI does not
    exclude no change (no step to take a share of) or a CI is missing."""
    if not (candidate.valid() and ends.valid()):
        return None
    y, e = candidate.log, ends.log
    hy, he = candidate.half_width, ends.half_width
    a = e * e - he * he
    if a <= 0:
        return None
    # (y - q e)^2 = hy^2 + q^2 he^2  <=>  a q^2 - 2 y e q + (y^2 - hy^2) = 0
    disc = (y * e) ** 2 - a * (y * y - hy * hy)
    root = math.sqrt(max(disc, 0.0))
    low, high = sorted(((y * e - root) / a, (y * e + root) / a))
    return Share(y / e, low, high)


def place(candidate: Ratio | None, ends: Ratio) -> tuple[Placement, Share | None]:
    """The candidate's placement in the range whose ends read `ends`."""
    found = share(candidate, ends) if candidate is not None else None
    return (found.placement() if found is not None else "more"), found


def change(ratio: Ratio | None, threshold: float) -> Change:
    """Two-sided: slower / faster when the whole CI lies beyond the threshold on that side,
    same when it lies inside the band, more rounds otherwise."""
    if ratio is None or not ratio.valid():
        return "more"
    band = math.log1p(threshold)
    low, high = math.log(ratio.low), math.log(ratio.high)
    if high < -band:
        return "slower"
    if low > band:
        return "faster"
    if low >= -band and high <= band:
        return "same"
    return "more"


def slowdown(ratio: Ratio | None, threshold: float) -> Slowdown:
    """One-sided, the bisect's question about its ends: bad when slower beyond the threshold
    for sure, good when a slowdown beyond it is ruled out (faster is good: the question is
    where a slowdown came from), more rounds otherwise."""
    if ratio is None or not ratio.valid():
        return "more"
    band = math.log1p(threshold)
    if math.log(ratio.high) < -band:
        return "bad"
    if math.log(ratio.low) >= -band:
        return "good"
    return "more"


def difference(a: Ratio, b: Ratio) -> Ratio:
    """a / b for two ratios measured in separate runs against the same baseline: the
    log half-widths add in quadrature (e.g. a bad candidate against the bad end)."""
    d = a.log - b.log
    h = math.hypot(a.half_width, b.half_width)
    return Ratio(math.exp(d), math.exp(d - h), math.exp(d + h))


def excludes_one(ratio: Ratio) -> bool:
    return ratio.valid() and (ratio.high < 1.0 or ratio.low > 1.0)


def percent_text(ratio: Ratio) -> str:
    """'3.4% slower' / '2.0% faster' for a ratio (candidate / baseline)."""
    if ratio.estimate < 1:
        return f"{1 - ratio.estimate:.1%} slower"
    return f"{ratio.estimate - 1:.1%} faster"
