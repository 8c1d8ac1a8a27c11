"""The bisect's state file: every build and every batch of pairs a bisect has measured.

Written after every batch (write-then-rename), so a bisect killed half-way resumes without
rebuilding a finished build or re-measuring a finished batch (`upgrade.bisect.Bisector` runs
the search over it). Decisions are not stored but re-derived from the pooled pairs.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from watchkeeper.analysis.stats import Pair
from watchkeeper.errors import ConfigError
from watchkeeper.upgrade.placement import Ratio

STATE_VERSION = 2
"""2: decisions are re-derived from the pooled pairs (1 stored them); a 1 file resumes."""


@dataclass(frozen=True, slots=True)
class Built:
    """A built release, as the bisect records it (the measure function gets these)."""

    version: str
    path: str
    sha256: str
    build_seconds: float | None = None
    """Seconds this bisect spent building it (None: it was in the cache already)."""
    identity: str = ""


Build = Callable[[str], Built]
Measure = Callable[[Built, Built, int, int], list[Pair]]
"""(baseline, candidate, rounds, first_round) -> pairs; round numbers from first_round on, so
batches pool into one tasks x rounds table."""


@dataclass(slots=True)
class StepRecord:
    """One comparison: `candidate` against `baseline`, in batches of rounds."""

    candidate: str
    baseline: str
    batches: list[list[list[Any]]] = field(default_factory=list)
    """Pairs per finished batch, as [task_id, round, baseline, candidate]."""
    decision: str = ""
    """The last decision taken on it (informative: a resume re-derives it from the pairs)."""
    estimate: float | None = None
    low: float | None = None
    high: float | None = None
    rounds: int = 0

    def pairs(self) -> list[Pair]:
        return [
            Pair(str(t), int(r), float(b), float(c))
            for batch in self.batches
            for t, r, b, c in batch
        ]

    @property
    def finished(self) -> bool:
        return bool(self.decision)

    def ratio(self) -> Ratio | None:
        if self.estimate is None or self.low is None or self.high is None:
            return None
        return Ratio(self.estimate, self.low, self.high)


@dataclass(slots=True)
class BisectState:
    good: str
    bad: str
    profile: str
    threshold: float
    versions: list[str]
    builds: dict[str, dict[str, Any]] = field(default_factory=dict)
    steps: dict[str, StepRecord] = field(default_factory=dict)
    """Keyed 'candidate|baseline'."""
    order: list[str] = field(default_factory=list)
    """Step keys in the order the search last took them (the report's evidence; rebuilt
    by every run)."""
    outcome: dict[str, Any] = field(default_factory=dict)
    version: int = STATE_VERSION
    findings: list[int] = field(default_factory=list)
    """Regression findings this bisect was run for or linked to: the daemon bisects a finding
    once (`upgrade.suggest.pick_auto`)."""
    comments: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Tracker comments that carry the result, keyed 'forge:owner/repo#N|outcome': a rerun
    of the same bisect posts nothing twice (`tracker.bisect_link`)."""

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["steps"] = {k: asdict(v) for k, v in self.steps.items()}
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BisectState:
        steps = {k: StepRecord(**v) for k, v in data.get("steps", {}).items()}
        return cls(
            good=data["good"],
            bad=data["bad"],
            profile=data["profile"],
            threshold=float(data["threshold"]),
            versions=list(data["versions"]),
            builds=dict(data.get("builds", {})),
            steps=steps,
            order=list(data.get("order", [])),
            outcome=dict(data.get("outcome", {})),
            version=int(data.get("version", STATE_VERSION)),
            findings=[int(i) for i in data.get("findings", [])],
            comments=dict(data.get("comments", {})),
        )


def save_state(state: BisectState, path: Path) -> None:
    """Write-then-rename: a crash mid-write leaves the previous state, never half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(state.to_json(), indent=1), encoding="utf-8")
    os.replace(partial, path)


def load_state(path: Path) -> BisectState | None:
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            raise TypeError("not a JSON object")
        return BisectState.from_json(data)
    except (OSError, ValueError, TypeError, KeyError, RecursionError) as exc:
        raise ConfigError(
            f"{path}: not a bisect state file ({type(exc).__name__}: {exc})"[:300],
            hint="pass another --state file, or remove this one to start afresh",
        ) from None


def recorded_findings(folder: Path) -> set[int]:
    """Every finding a state file in `folder` records (started, finished or interrupted): the
    daemon's once-per-finding record. A file that does not parse records nothing."""
    found: set[int] = set()
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else ():
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict):
            found.update(int(i) for i in data.get("findings", []) if isinstance(i, int))
    return found


def start_or_resume(
    path: Path,
    *,
    good: str,
    bad: str,
    profile: str,
    threshold: float,
    versions: Sequence[str],
) -> BisectState:
    """The state to run: the file's when it is this same bisect, else a fresh one (a state
    file of another bisect is refused rather than overwritten)."""
    if good not in versions or bad not in versions:
        raise ConfigError(f"{good} and {bad} must both be releases of the range")
    if versions.index(good) >= versions.index(bad):
        raise ConfigError(f"the good release {good} must come before the bad one {bad}")
    found = load_state(path)
    if found is not None:
        if (found.good, found.bad, found.profile) != (good, bad, profile):
            raise ConfigError(
                f"{path} holds another bisect ({found.good}..{found.bad}, {found.profile})",
                hint="pass another --state file or remove that one",
            )
        return found
    window = list(versions[versions.index(good) : versions.index(bad) + 1])
    return BisectState(good, bad, profile, threshold, window)
