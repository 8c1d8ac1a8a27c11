"""Tail regressions: a build that is slow on a few requests, which winsorizing would hide.

`analysis.stats` pulls back cells that fit neither their task nor their round (residual beyond
5 robust sds), assuming such a cell is host noise that hits either arm alike. A build that
stalls now and then produces exactly such cells, all on one side: on tables of the nightly's
shape (24 tasks x 12 rounds, cell sd 2%), 10% of cells 30% slower (true ratio 0.964) read
0.989 and `no change` in 20 of 20 runs once clipped, and 3% of cells 60% slower (0.971) read
0.997. Two checks see it:

* Balance: on an A/A night the few clipped cells split evenly between the arms (a burst lands
  on either request of a pair). A one-sided excess is itself evidence; the sign test asks how
  likely that many of the clipped cells would be slow for the current arm if each were a coin
  flip (one-sided binomial, p < `SIGN_ALPHA`).
* Raw against clipped: the verdict on the unclipped table. When it sees a slowdown the clipped
  one does not, the clipping changed the answer.

Either, with more clipped cells slow than fast, makes the series `suspicious: tail regression`
with the clipped cells listed (task, round, how far below the task + round fit).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scipy import stats as scipy_stats

SIGN_ALPHA = 0.05
SLOW_VERDICTS = ("slower", "within threshold")


@dataclass(frozen=True, slots=True)
class ClippedCell:
    task_id: str
    round: int
    residual: float
    """Log residual from the task + round fit before clipping (negative: the candidate slow)."""

    def describe(self) -> str:
        return f"{self.task_id} round {self.round} ({math.exp(self.residual) - 1:+.0%})"


@dataclass(frozen=True, slots=True)
class TailCheck:
    cells: tuple[ClippedCell, ...]
    sign_p: float
    """One-sided sign test: P(at least this many of the clipped cells slow | balanced)."""
    raw_estimate: float
    raw_low: float
    raw_high: float
    raw_verdict: str
    clipped_verdict: str

    @property
    def slow(self) -> int:
        return sum(c.residual < 0 for c in self.cells)

    @property
    def fast(self) -> int:
        return sum(c.residual > 0 for c in self.cells)

    @property
    def raw_sees_slowdown(self) -> bool:
        """The unclipped table calls a slowdown that the clipped one does not."""
        return (
            self.raw_verdict != self.clipped_verdict
            and self.raw_verdict in SLOW_VERDICTS
            and self.raw_estimate < 1.0
        )

    @property
    def regression(self) -> bool:
        return self.slow > self.fast and (self.sign_p < SIGN_ALPHA or self.raw_sees_slowdown)

    def describe(self, limit: int = 8) -> str:
        listed = ", ".join(
            c.describe() for c in sorted(self.cells, key=lambda c: c.residual)[:limit]
        )
        more = f" and {len(self.cells) - limit} more" if len(self.cells) > limit else ""
        return (
            f"{self.slow} of {len(self.cells)} clipped cells slow for the current arm "
            f"(sign test p={self.sign_p:.2g}); unclipped table {self.raw_estimate:.3f} "
            f"[{self.raw_low:.3f}, {self.raw_high:.3f}] {self.raw_verdict}, clipped "
            f"{self.clipped_verdict}: {listed}{more}"
        )


def sign_test(slow: int, fast: int) -> float:
    """One-sided binomial test of `slow` successes in `slow + fast` fair coin flips."""
    n = slow + fast
    if n == 0:
        return 1.0
    return float(scipy_stats.binomtest(slow, n, 0.5, alternative="greater").pvalue)


LOSS_FACTOR = 1.5
"""A pair is a big loss when one arm's request took this many times the other's: the size of a
stall (a pause of a second on requests of half a second), far beyond the cell noise of a quiet
host (a few %), so on an A/A night such pairs are rare and split between the arms."""


@dataclass(frozen=True, slots=True)
class LatencyPair:
    task_id: str
    round: int
    baseline_s: float
    candidate_s: float


@dataclass(frozen=True, slots=True)
class LatencyLosses:
    """Paired requests where one arm took `LOSS_FACTOR` x the other's latency, by arm.

    A build that stalls now and then loses whole seconds on a few requests, and a pause that
    lands in the prompt phase leaves the decode speed untouched: the ratio of decode speeds
    (and its winsorized cells) can miss it, the request's latency cannot. The arms of a pair
    are exchangeable when nothing changed, so the big losses split like coin flips; the sign
    test asks how likely this many of them would fall on the current arm."""

    slow: tuple[tuple[str, int, float], ...]
    """(task, round, current / reference latency) of the pairs the current arm lost big."""
    fast: int
    """Pairs the reference arm lost big."""
    pairs: int
    sign_p: float

    @property
    def regression(self) -> bool:
        return len(self.slow) > self.fast and self.sign_p < SIGN_ALPHA

    def describe(self, limit: int = 8) -> str:
        worst = sorted(self.slow, key=lambda c: -c[2])[:limit]
        listed = ", ".join(f"{t} round {r} ({f:.1f}x)" for t, r, f in worst)
        more = f" and {len(self.slow) - limit} more" if len(self.slow) > limit else ""
        return (
            f"{len(self.slow)} of {self.pairs} requests took {LOSS_FACTOR:g}x the reference's or "
            f"more, {self.fast} the other way (sign test p={self.sign_p:.2g})"
            + (f": {listed}{more}" if listed else "")
        )


def latency_losses(pairs: list[LatencyPair]) -> LatencyLosses | None:
    """The big losses of a series' pairs; None without pairs."""
    if not pairs:
        return None
    slow = tuple(
        (p.task_id, p.round, p.candidate_s / p.baseline_s)
        for p in pairs
        if p.candidate_s >= LOSS_FACTOR * p.baseline_s
    )
    fast = sum(p.baseline_s >= LOSS_FACTOR * p.candidate_s for p in pairs)
    return LatencyLosses(slow, fast, len(pairs), sign_test(len(slow), fast))
