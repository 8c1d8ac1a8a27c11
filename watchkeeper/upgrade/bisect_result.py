"""What a bisect answers: each measurement (`StepResult`), each located step (`LocatedStep`)
and the whole result (`BisectResult`), with the JSON `watchkeeper bisect --json` prints.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

from watchkeeper.upgrade.releases import tag

Role = Literal["ends", "candidate", "final"]


@dataclass(frozen=True, slots=True)
class StepResult:
    """One piece of evidence: `candidate` against `baseline`, judged in one role."""

    candidate: str
    baseline: str
    decision: str
    estimate: float | None
    low: float | None
    high: float | None
    rounds: int
    role: str = "candidate"
    """ends: a range's bad end against its good end (slowdown rule for the bisect's own ends,
    two-sided for a second range); candidate: a release placed against its range's ends
    (good / bad / undecided); final: a located release against its predecessor
    (slower / faster / same / inconclusive)."""
    share: float | None = None
    """A candidate's share of its range's step (0: like the good end, 1: like the bad end)."""
    share_low: float | None = None
    share_high: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "candidate": self.candidate,
            "baseline": self.baseline,
            "role": self.role,
            "ratio": self.estimate,
            "ci95": [self.low, self.high] if self.low is not None else None,
            "rounds": self.rounds,
            "decision": self.decision,
            "share": self.share,
            "share_ci95": [self.share_low, self.share_high] if self.share_low is not None else None,
        }


@dataclass(frozen=True, slots=True)
class LocatedStep:
    """A release located as a step: measured against its own predecessor."""

    release: str
    predecessor: str
    direction: str
    """The two-sided rule on that pair: slower / faster / same / inconclusive."""
    estimate: float | None
    low: float | None
    high: float | None
    rounds: int
    within: tuple[str, str]
    """The range it was bisected in (good end, bad end)."""

    @property
    def tag(self) -> str:
        return tag(self.release)

    @property
    def size(self) -> float:
        """|log ratio|: how large the step is, either way (0 without a ratio)."""
        return abs(math.log(self.estimate)) if self.estimate else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "release": self.release,
            "tag": self.tag,
            "predecessor": self.predecessor,
            "ratio": self.estimate,
            "ci95": [self.low, self.high] if self.low is not None else None,
            "rounds": self.rounds,
            "decision": self.direction,
            "range": list(self.within),
        }


@dataclass(frozen=True, slots=True)
class BisectResult:
    status: Literal["found", "no difference", "inconclusive"]
    first_bad: str | None
    """The release of the largest slowdown located (status 'found')."""
    last_good: str | None
    against_predecessor: StepResult | None
    """The first bad release measured against the release just before it."""
    steps: tuple[StepResult, ...]
    """Every measurement, in the order the search took them (the report's evidence)."""
    unresolved: tuple[str, str] | None = None
    """(last known good, first known bad) when the search of the range stayed undecided."""
    builds: dict[str, dict[str, Any]] = field(default_factory=dict)
    located: tuple[LocatedStep, ...] = ()
    """Every step located in the range, largest first (the first is `first_bad`'s when that
    is the largest change; a larger speed-up, a fix, can come first)."""
    notes: tuple[str, ...] = ()
    """Differences seen on the way (a drift, a second small step) and ranges left open."""
    nearest: tuple[str, ...] = ()
    """When the ends do not bracket a change: the releases just outside the range to check."""

    @property
    def tag(self) -> str | None:
        """The upstream tag of the first bad release (b<N>)."""
        return tag(self.first_bad) if self.first_bad is not None else None

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "first_bad": self.first_bad,
            "tag": self.tag,
            "last_good": self.last_good,
            "against_predecessor": (
                self.against_predecessor.to_json() if self.against_predecessor else None
            ),
            "steps_found": [s.to_json() for s in self.located],
            "evidence": [s.to_json() for s in self.steps],
            "unresolved": list(self.unresolved) if self.unresolved else None,
            "notes": list(self.notes),
            "nearest": list(self.nearest),
            "builds": self.builds,
        }
