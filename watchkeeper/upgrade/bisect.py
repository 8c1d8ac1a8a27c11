"""Bisect a throughput regression to the first bad llama.cpp release (Chromium Pinpoint's rule).

The search runs over consecutive releases (`upgrade.releases`) from a known good one to a known
bad one. Each candidate is built (through the build cache: a finished build is never rebuilt)
and measured paired against the good release with the nightly's statistics
(`analysis.stats.paired_speedup`: tasks x rounds, bootstrap no narrower than Student's t over
rounds). The decision per candidate, with the threshold t and band b = log(1 + t):

- `bad`  when the whole CI lies beyond the threshold on the slow side (log high < -b);
- `good` when the CI rules a slowdown beyond the threshold out (log low >= -b): the evidence
  bounds the effect, Pinpoint's `same` (a candidate faster than the good end is good here: the
  question is where the slowdown came from);
- otherwise `more`: another batch of rounds is measured and pooled with the earlier ones, up to
  `max_rounds`; a candidate still undecided then ends the search as `inconclusive`, naming the
  range it could not split rather than guessing.

The bad end is measured first: when it is not `bad` against the good end, no release in the
range differs beyond the threshold and the search says so. The first bad release is finally
measured against its own predecessor, the ratio the report names.

Everything finished is in a JSON state file written after every batch: a bisect killed half-way
resumes without rebuilding a finished build or re-measuring a finished batch.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from watchkeeper.analysis.stats import Pair, RatioCI, paired_speedup
from watchkeeper.errors import ConfigError
from watchkeeper.upgrade.releases import tag

Decision = Literal["good", "bad", "more"]
Progress = Callable[[str], None]

STATE_VERSION = 1


def _quiet(_: str) -> None:
    return None


def decide(ci: RatioCI | None, threshold: float) -> Decision:
    """Pinpoint's rule on a candidate/good ratio CI: bad, good, or measure more."""
    if ci is None or not ci.has_ci or ci.low <= 0:
        return "more"
    band = math.log1p(threshold)
    if math.log(ci.high) < -band:
        return "bad"
    if math.log(ci.low) >= -band:
        return "good"
    return "more"


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
    """good / bad / inconclusive once finished; '' while measuring."""
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
    """Step keys in the order the search took them (the report's evidence)."""
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
    return BisectState.from_json(json.loads(path.read_text(encoding="utf-8")))


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


@dataclass(frozen=True, slots=True)
class StepResult:
    candidate: str
    baseline: str
    decision: str
    estimate: float | None
    low: float | None
    high: float | None
    rounds: int


@dataclass(frozen=True, slots=True)
class BisectResult:
    status: Literal["found", "no difference", "inconclusive"]
    first_bad: str | None
    """The first bad release (status 'found')."""
    last_good: str | None
    against_predecessor: StepResult | None
    """The first bad release measured against the release just before it."""
    steps: tuple[StepResult, ...]
    unresolved: tuple[str, str] | None = None
    """(last known good, first known bad) when a step stayed inconclusive."""
    builds: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def tag(self) -> str | None:
        """The upstream tag of the first bad release (b<N>)."""
        return tag(self.first_bad) if self.first_bad is not None else None


class Bisector:
    """Runs (or resumes) one bisect; `build` and `measure` are injected (real builds and
    servers in the command, stand-ins in the tests)."""

    def __init__(
        self,
        state: BisectState,
        *,
        state_path: Path,
        build: Build,
        measure: Measure,
        rounds: int = 3,
        max_rounds: int = 12,
        progress: Progress = _quiet,
    ) -> None:
        if rounds < 1 or max_rounds < rounds:
            raise ConfigError("bisect needs rounds >= 1 and max_rounds >= rounds")
        self.state = state
        self._path = state_path
        self._build_fn = build
        self._measure = measure
        self._rounds = rounds
        self._max_rounds = max_rounds
        self._progress = progress
        self._built: dict[str, Built] = {}

    def _build(self, version: str) -> Built:
        if version in self._built:
            return self._built[version]
        built = self._build_fn(version)
        self._built[version] = built
        recorded = self.state.builds.get(version)
        if recorded is None or built.build_seconds is not None:
            self.state.builds[version] = asdict(built)
            save_state(self.state, self._path)
        return built

    def _step(self, candidate: str, baseline: str) -> StepRecord:
        key = f"{candidate}|{baseline}"
        step = self.state.steps.get(key)
        if step is None:
            step = StepRecord(candidate, baseline)
            self.state.steps[key] = step
        if key not in self.state.order:
            self.state.order.append(key)
        if step.finished:
            self._progress(f"{candidate} vs {baseline}: {step.decision} (from the state file)")
            return step
        base, cand = self._build(baseline), self._build(candidate)
        while True:
            pairs = step.pairs()
            ci = paired_speedup(pairs, threshold=self.state.threshold) if pairs else None
            verdict = decide(ci, self.state.threshold) if step.batches else "more"
            if ci is not None:
                step.estimate = ci.estimate
                step.low, step.high = (ci.low, ci.high) if ci.has_ci else (None, None)
            if verdict != "more" or step.rounds >= self._max_rounds:
                step.decision = verdict if verdict != "more" else "inconclusive"
                save_state(self.state, self._path)
                self._progress(f"{candidate} vs {baseline}: {step.decision} {_ratio_text(step)}")
                return step
            batch = min(self._rounds, self._max_rounds - step.rounds)
            new = self._measure(base, cand, batch, step.rounds)
            step.batches.append([[p.task_id, p.round, p.baseline, p.candidate] for p in new])
            step.rounds += batch
            save_state(self.state, self._path)

    def run(self) -> BisectResult:
        s = self.state
        versions = s.versions
        lo, hi = versions.index(s.good), versions.index(s.bad)
        ends = self._step(s.bad, s.good)
        if ends.decision == "good":
            return self._finish("no difference", None, None, None)
        if ends.decision == "inconclusive":
            return self._finish("inconclusive", None, None, (s.good, s.bad))
        while hi - lo > 1:
            mid = (lo + hi) // 2
            step = self._step(versions[mid], s.good)
            if step.decision == "bad":
                hi = mid
            elif step.decision == "good":
                lo = mid
            else:
                return self._finish("inconclusive", None, None, (versions[lo], versions[hi]))
        first_bad, last_good = versions[hi], versions[lo]
        final = self._step(first_bad, last_good)
        return self._finish("found", first_bad, last_good, None, final)

    def _finish(
        self,
        status: Literal["found", "no difference", "inconclusive"],
        first_bad: str | None,
        last_good: str | None,
        unresolved: tuple[str, str] | None,
        final: StepRecord | None = None,
    ) -> BisectResult:
        steps = tuple(_result(self.state.steps[k]) for k in self.state.order)
        result = BisectResult(
            status,
            first_bad,
            last_good,
            _result(final) if final is not None else None,
            steps,
            unresolved,
            dict(self.state.builds),
        )
        self.state.outcome = {
            "status": status,
            "first_bad": first_bad,
            "last_good": last_good,
            "unresolved": list(unresolved) if unresolved else None,
        }
        save_state(self.state, self._path)
        return result


def _result(step: StepRecord) -> StepResult:
    return StepResult(
        step.candidate,
        step.baseline,
        step.decision,
        step.estimate,
        step.low,
        step.high,
        step.rounds,
    )


def _ratio_text(step: StepRecord) -> str:
    if step.estimate is None:
        return "(no pairs)"
    ci = f", 95% CI {step.low:.3f}-{step.high:.3f}" if step.low and step.high else ""
    return f"(ratio {step.estimate:.3f}{ci}, {step.rounds} rounds)"


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
