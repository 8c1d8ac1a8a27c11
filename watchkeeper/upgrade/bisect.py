"""Bisect a throughput regression to the release that made it (Chromium Pinpoint's rule).

The search runs over consecutive releases (`upgrade.releases`) from a known good one to a known
bad one. Each candidate is built (through the build cache: a finished build is never rebuilt)
and measured paired against the good end of its range with the nightly's statistics
(`analysis.stats.paired_speedup`: tasks x rounds, bootstrap no narrower than Student's t over
rounds), in batches of rounds pooled into one table.

1. **The ends first.** The bad end against the good end, with the threshold t
   (`nightly.min_effect`): bad when the whole CI lies beyond t on the slow side, good when it
   rules that out (then the search stops: no change at the ends, and the report suggests the
   nearest releases outside the range), more rounds otherwise; still undecided at
   `max_rounds`, the bisect is inconclusive. The ends get more rounds until their CI's
   half-width is at most `ENDS_PRECISION` of their effect (every placement leans on it).
2. **Each candidate is placed against the bracketed effect** (`upgrade.placement`): the share
   of the ends' log-ratio it carries, with a Fieller interval that carries both measurements'
   uncertainty: good when it surely carries under half the step (nearer the good end), bad
   when surely over half, more rounds otherwise. A 3.4% drift on the way to a 35% step is good
   (and reported), never a stop.
3. **Several steps.** A good candidate that differs from the good end beyond the threshold, or
   a bad one that differs from the bad end beyond it (the combined CI), opens a second range to
   bisect (`[good end, candidate]` with that candidate as its bad end, or `[candidate, bad
   end]`, whose ends are measured first); a candidate still undecided at `max_rounds` (it
   carries about half: two steps of one size, or a gradual change) splits its range in two
   the same way. Smaller sure differences are notes. At most `max_ranges` ranges are bisected,
   each by the same rule (a speed-up, e.g. a slowdown fixed inside the range, is located
   as well).
4. **The answer.** Each located release is measured against its own predecessor; the result
   names every located step, largest first, and its first bad release is the largest
   slowdown.

Everything measured is in a JSON state file (`upgrade.bisect_state`) written after every
batch: a bisect killed half-way resumes without rebuilding a finished build or re-measuring
a finished batch. Decisions are not stored but re-derived from the pooled pairs (the same seed
gives the same CI), so a rerun with more `--max-rounds` measures the undecided steps further.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Literal

from watchkeeper.analysis.stats import DEFAULT_RESAMPLES, RatioCI, paired_speedup
from watchkeeper.errors import ConfigError
from watchkeeper.format import ci as ci_text
from watchkeeper.upgrade.bisect_result import BisectResult, LocatedStep, Role, StepResult
from watchkeeper.upgrade.bisect_state import (
    BisectState,
    Build,
    Built,
    Measure,
    StepRecord,
    save_state,
)
from watchkeeper.upgrade.placement import (
    Ratio,
    Share,
    change,
    difference,
    excludes_one,
    percent_text,
    place,
    slowdown,
)

Decision = Literal["good", "bad", "more"]
Progress = Callable[[str], None]

ENDS_PRECISION = 0.2
"""The ends are measured until their log half-width is at most this share of their log
ratio (or `max_rounds`): a candidate's share cannot be surer than the ends it is a share of."""


def _quiet(_: str) -> None:
    return None


def decide(ci: RatioCI | None, threshold: float) -> Decision:
    """The ends' rule on a bad-end/good-end ratio CI: bad, good, or measure more."""
    return slowdown(_ratio(ci), threshold)


def _ratio(ci: RatioCI | None) -> Ratio | None:
    if ci is None or not ci.has_ci or ci.low <= 0:
        return None
    return Ratio(ci.estimate, ci.low, ci.high)


Judge = Callable[[StepRecord], tuple[str, bool]]
"""A step's decision from its pooled pairs, and whether it needs more rounds."""


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
        max_ranges: int = 4,
        resamples: int = DEFAULT_RESAMPLES,
        progress: Progress = _quiet,
    ) -> None:
        if rounds < 1 or max_rounds < rounds:
            raise ConfigError("bisect needs rounds >= 1 and max_rounds >= rounds")
        if max_ranges < 1:
            raise ConfigError("bisect needs max_ranges >= 1 (the range asked about)")
        self.state = state
        self._path = state_path
        self._build_fn = build
        self._measure = measure
        self._rounds = rounds
        self._max_rounds = max_rounds
        self._max_ranges = max_ranges
        self._resamples = resamples
        self._progress = progress
        self._built: dict[str, Built] = {}
        self._evidence: list[StepResult] = []
        self._notes: list[str] = []
        self._located: list[LocatedStep] = []
        self._open: list[tuple[str, str]] = []

    # -- measuring -----------------------------------------------------------------------

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

    def _update(self, step: StepRecord) -> None:
        """The step's ratio and CI from its pooled pairs (seeded: the same pairs give the
        same CI, so a resume re-derives every decision)."""
        pairs = step.pairs()
        ci = (
            paired_speedup(pairs, threshold=self.state.threshold, resamples=self._resamples)
            if pairs
            else None
        )
        if ci is not None:
            step.estimate = ci.estimate
            step.low, step.high = (ci.low, ci.high) if ci.has_ci else (None, None)

    def _step(self, candidate: str, baseline: str, judge: Judge, *, undecided: str) -> StepRecord:
        """Measure `candidate` against `baseline` in batches until `judge` needs no more
        rounds or `max_rounds` is reached (then a "more" decision becomes `undecided`)."""
        key = f"{candidate}|{baseline}"
        step = self.state.steps.get(key)
        if step is None:
            step = StepRecord(candidate, baseline)
            self.state.steps[key] = step
        self.state.order.append(key)
        stored = step.rounds
        while True:
            self._update(step)
            decision, more = judge(step) if step.batches else ("more", True)
            if not more or step.rounds >= self._max_rounds:
                # At max_rounds a decided step that wanted precision keeps its decision.
                step.decision = decision if decision != "more" else undecided
                save_state(self.state, self._path)
                where = " (from the state file)" if stored and step.rounds == stored else ""
                self._progress(
                    f"{candidate} vs {baseline}: {step.decision} {_ratio_text(step)}{where}"
                )
                return step
            base, cand = self._build(baseline), self._build(candidate)
            batch = min(self._rounds, self._max_rounds - step.rounds)
            new = self._measure(base, cand, batch, step.rounds)
            step.batches.append([[p.task_id, p.round, p.baseline, p.candidate] for p in new])
            step.rounds += batch
            save_state(self.state, self._path)

    def _record(self, step: StepRecord, role: Role, found: Share | None = None) -> StepResult:
        result = StepResult(
            step.candidate,
            step.baseline,
            step.decision,
            step.estimate,
            step.low,
            step.high,
            step.rounds,
            role,
            found.estimate if found is not None else None,
            found.low if found is not None else None,
            found.high if found is not None else None,
        )
        self._evidence.append(result)
        return result

    def _ends(self, good: str, bad: str, *, asked: bool) -> StepRecord:
        """The range's bad end against its good end: the bisect's own ends with the slowdown
        rule, a second range two-sided; decided ends get rounds until they are precise."""
        threshold = self.state.threshold

        def judge(step: StepRecord) -> tuple[str, bool]:
            ratio = step.ratio()
            decision: str = slowdown(ratio, threshold) if asked else change(ratio, threshold)
            if decision == "more":
                return decision, True
            changed = decision in ("bad", "slower", "faster")
            loose = ratio is not None and ratio.half_width > ENDS_PRECISION * abs(ratio.log)
            return decision, changed and loose

        step = self._step(bad, good, judge, undecided="inconclusive")
        self._record(step, "ends")
        return step

    def _place(self, candidate: str, good: str, ends: Ratio) -> tuple[StepRecord, Share | None]:
        def judge(step: StepRecord) -> tuple[str, bool]:
            placement, _ = place(step.ratio(), ends)
            return placement, placement == "more"

        step = self._step(candidate, good, judge, undecided="undecided")
        found = place(step.ratio(), ends)[1]
        self._record(step, "candidate", found)
        return step, found

    def _final(self, release: str, predecessor: str, within: tuple[str, str]) -> LocatedStep:
        threshold = self.state.threshold

        def judge(step: StepRecord) -> tuple[str, bool]:
            decision = change(step.ratio(), threshold)
            return decision, decision == "more"

        step = self._step(release, predecessor, judge, undecided="inconclusive")
        result = self._record(step, "final")
        located = LocatedStep(
            release,
            predecessor,
            step.decision,
            result.estimate,
            result.low,
            result.high,
            result.rounds,
            within,
        )
        self._located.append(located)
        return located

    # -- the search ----------------------------------------------------------------------

    def run(self) -> BisectResult:
        s = self.state
        s.order = []
        self._evidence, self._notes, self._located, self._open = [], [], [], []
        ends = self._ends(s.good, s.bad, asked=True)
        if ends.decision == "good":
            return self._finish("no difference", None)
        if ends.decision != "bad":
            return self._finish("inconclusive", (s.good, s.bad))
        queue: deque[tuple[str, str]] = deque([(s.good, s.bad)])
        taken = 0
        seen: set[tuple[str, str]] = set()
        while queue:
            good, bad = queue.popleft()
            if (good, bad) in seen:  # two routes to one range: bisected once
                continue
            seen.add((good, bad))
            if taken >= self._max_ranges:
                self._notes.append(
                    f"not bisected: {good}..{bad} (--max-ranges {self._max_ranges} reached; "
                    f"`watchkeeper bisect --good {good} --bad {bad}` bisects it)"
                )
                continue
            taken += 1
            self._range(good, bad, queue, asked=taken == 1)
        slow = [step for step in self._located if (step.estimate or 1.0) < 1.0]
        if not slow:
            return self._finish("inconclusive", self._open[0] if self._open else (s.good, s.bad))
        return self._finish("found", None, max(slow, key=lambda step: step.size))

    def _range(self, good: str, bad: str, queue: deque[tuple[str, str]], *, asked: bool) -> None:
        """Bisect one range whose ends differ; second ranges it shows go on `queue`."""
        versions = self.state.versions
        threshold = self.state.threshold
        ends_step = self._ends(good, bad, asked=asked) if not asked else self._asked_ends()
        if not asked:
            if ends_step.decision == "same":
                self._notes.append(
                    f"{bad} against {good}: {_ratio_text(ends_step)}, no change beyond the "
                    f"{threshold:.0%} threshold: no second step there"
                )
                return
            if ends_step.decision not in ("slower", "faster"):
                self._open.append((good, bad))
                self._notes.append(
                    f"{bad} against {good} stayed undecided {_ratio_text(ends_step)}: that "
                    "range is left open"
                )
                return
        ends = ends_step.ratio()
        if ends is None:  # decided without a CI cannot happen; kept for the type checker
            self._open.append((good, bad))
            self._notes.append(f"{bad} against {good} has no CI: that range is left open")
            return
        lo, hi = versions.index(good), versions.index(bad)
        opened_low = opened_high = False
        while hi - lo > 1:
            mid = (lo + hi) // 2
            version = versions[mid]
            step, found = self._place(version, good, ends)
            ratio = step.ratio()
            if step.decision == "good":
                if ratio is not None and not opened_low:
                    opened_low = self._aside(
                        ratio, version, good, queue, (good, version), direct=True
                    )
                lo = mid
            elif step.decision == "bad":
                if ratio is not None and not opened_high:
                    rest = difference(ends, ratio)
                    opened_high = self._aside(
                        rest, bad, version, queue, (version, bad), direct=False
                    )
                hi = mid
            else:
                share = f"{found.estimate:.0%} of the step" if found else "an unknown share"
                self._notes.append(
                    f"{version} carries {share} from {good} to {bad} ({step.decision} after "
                    f"{step.rounds} rounds): the range is split there"
                )
                if ratio is not None and change(ratio, threshold) in ("slower", "faster"):
                    queue.appendleft((good, version))
                queue.appendleft((version, bad))
                return
        self._final(versions[hi], versions[lo], (good, bad))

    def _asked_ends(self) -> StepRecord:
        s = self.state
        return s.steps[f"{s.bad}|{s.good}"]

    def _aside(
        self,
        ratio: Ratio,
        later: str,
        earlier: str,
        queue: deque[tuple[str, str]],
        span: tuple[str, str],
        *,
        direct: bool,
    ) -> bool:
        """A difference seen on the way (`later` against `earlier`). Measured `direct`ly (a
        good candidate against the good end): its range is queued as a second one when the
        difference is surely beyond the threshold. Derived (the bad end against a bad
        candidate, two runs' CIs in quadrature, so wider than one paired run's): queued when
        it surely differs and its estimate lies beyond the threshold; the range's own ends
        are then measured paired and decide. True when queued; a smaller sure difference is a
        note; none is nothing."""
        threshold = self.state.threshold
        ci = f"{ratio.estimate:.3f}, {ci_text(ratio.low, ratio.high, '.3f', ' to ')}"
        beyond = abs(ratio.log) > math.log1p(threshold)
        if change(ratio, threshold) in ("slower", "faster") or (
            not direct and beyond and excludes_one(ratio)
        ):
            how = "its ends measured first" if not direct else "beyond the threshold"
            self._notes.append(
                f"{later} is {percent_text(ratio)} than {earlier} ({ci}): a second step "
                f"between them: bisected as a range of its own ({how})"
            )
            queue.append(span)
            return True
        if excludes_one(ratio):
            self._notes.append(
                f"{later} is {percent_text(ratio)} than {earlier} ({ci}): a second, smaller "
                f"step? (not surely beyond the {threshold:.0%} threshold: not bisected)"
            )
        return False

    def _finish(
        self,
        status: Literal["found", "no difference", "inconclusive"],
        unresolved: tuple[str, str] | None,
        first: LocatedStep | None = None,
    ) -> BisectResult:
        located = tuple(sorted(self._located, key=lambda step: -step.size))
        against = None
        if first is not None:
            against = next(
                e
                for e in reversed(self._evidence)
                if e.role == "final"
                and (e.candidate, e.baseline) == (first.release, first.predecessor)
            )
        notes = list(self._notes)
        result = BisectResult(
            status,
            first.release if first else None,
            first.predecessor if first else None,
            against,
            tuple(self._evidence),
            unresolved,
            dict(self.state.builds),
            located,
            tuple(notes),
        )
        self.state.outcome = {
            "status": status,
            "first_bad": result.first_bad,
            "last_good": result.last_good,
            "unresolved": list(unresolved) if unresolved else None,
            "steps_found": [step.to_json() for step in located],
            "notes": list(notes),
        }
        save_state(self.state, self._path)
        return result


def _ratio_text(step: StepRecord) -> str:
    if step.estimate is None:
        return "(no pairs)"
    ci = f", {ci_text(step.low, step.high, '.3f')}" if step.low and step.high else ""
    return f"(ratio {step.estimate:.3f}{ci}, {step.rounds} rounds)"
