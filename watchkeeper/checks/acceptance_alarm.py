"""Two alarms on a speculating server's acceptance: a collapse against its own history (the
drafter no longer fits its target) and a loop (acceptance near 1 on output that repeats
itself). Pure: numbers in, verdicts out; `campaign/acceptance_findings.py` files them.

The unit is the run (a night's or a soak's measured requests of one arm: one value per run
per series), never the pooled requests: the requests of one run share its server, its build
and its minutes. Rules, simulated first (`benchmarks/acceptance_alarm.py`):

- **collapse** needs size and significance. Size: the run's acceptance (accepted over drafted
  tokens of its requests) is below `collapse_fraction` (half) of its history's median and at
  least `threshold_points` (the house's 2 points) under it. Significance: a one-sided
  prediction test of the run against the history's mean, whose variance is the history's
  run-to-run variance (times 1 + 1/k) plus the run's own (its requests' spread over their
  count), Student t with k - 1 degrees of freedom, p < `alpha`. (On the logit scale the test
  lost most of its power near 0.95, where run-to-run spread stretches: simulated, dropped.) Size
  alone is `inconclusive`; a history under `min_history` runs is `not judged`. A fall of 30%
  is neither a collapse nor an alarm here: the nightly's `acceptance_rate` series and the
  soak's acceptance drift see those.
- **loop** needs both halves in the same requests: a request loops when its own acceptance is
  at least `loop_acceptance` over at least `min_request_drafted` drafted tokens AND its output
  repeats itself (`load/repetition.py`, share of repeated word 6-grams at least
  `loop_repeat`). The run loops when at least `loop_min_requests` requests and
  `loop_min_share` of its drafting requests do. A copy edit (acceptance near 1 on output that
  repeats its prompt, not itself) never satisfies the second half.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from scipy.stats import t as student_t

CollapseWord = Literal["collapse", "inconclusive", "no change", "not judged"]


@dataclass(frozen=True, slots=True)
class AlarmParams:
    min_history: int = 3
    window: int = 10
    """Runs of history read (the latest); a drafter that fitted a year ago says little."""
    min_drafted: int = 64
    """Drafted tokens a run needs to count, as history or as the run judged."""
    alpha: float = 0.01
    collapse_fraction: float = 0.5
    threshold_points: float = 0.02
    loop_acceptance: float = 0.9
    loop_repeat: float = 0.5
    min_request_drafted: int = 16
    loop_min_requests: int = 3
    loop_min_share: float = 0.2


@dataclass(frozen=True, slots=True)
class RequestAcceptance:
    """One request's counts as the server's `timings` gave them, and its output's repetition."""

    drafted: int
    accepted: int
    repeat_share: float | None
    category: str = ""


@dataclass(frozen=True, slots=True)
class RunAcceptance:
    """One run of one series: the alarm's unit."""

    label: str
    drafted: int
    accepted: int
    requests: int
    """Requests that drafted."""
    spread: float
    """Standard deviation of those requests' own acceptance (0 with fewer than two)."""
    looped: int
    """Requests that loop (acceptance and repetition, see the module)."""

    @property
    def rate(self) -> float:
        return self.accepted / self.drafted if self.drafted else 0.0


def request_loops(r: RequestAcceptance, params: AlarmParams) -> bool:
    return (
        r.drafted >= params.min_request_drafted
        and r.accepted >= params.loop_acceptance * r.drafted
        and r.repeat_share is not None
        and r.repeat_share >= params.loop_repeat
    )


def run_acceptance(
    label: str, requests: Sequence[RequestAcceptance], params: AlarmParams | None = None
) -> RunAcceptance:
    """The run's value: accepted over drafted tokens of its requests (a ratio of sums, so a
    long request weighs by its tokens), with its requests' spread and its looping requests."""
    p = params or AlarmParams()
    drafting = [r for r in requests if r.drafted > 0]
    rates = [r.accepted / r.drafted for r in drafting]
    return RunAcceptance(
        label=label,
        drafted=sum(r.drafted for r in drafting),
        accepted=sum(r.accepted for r in drafting),
        requests=len(drafting),
        spread=statistics.stdev(rates) if len(rates) > 1 else 0.0,
        looped=sum(request_loops(r, p) for r in drafting),
    )


@dataclass(frozen=True, slots=True)
class CollapseVerdict:
    verdict: CollapseWord
    current: float
    history_median: float | None
    history_runs: int
    p_value: float | None
    threshold: float | None
    """The acceptance the run had to fall below (the size rule), None when not judged."""
    reason: str

    @property
    def fired(self) -> bool:
        return self.verdict == "collapse"

    def to_json(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "acceptance": self.current,
            "history_median": self.history_median,
            "history_runs": self.history_runs,
            "p_value": self.p_value,
            "threshold": self.threshold,
            "reason": self.reason,
        }


def judge_collapse(
    history: Sequence[RunAcceptance], current: RunAcceptance, params: AlarmParams | None = None
) -> CollapseVerdict:
    """The run against its series' history (oldest first; the latest `window` runs with
    enough drafted tokens are read)."""
    p = params or AlarmParams()
    usable = [h.rate for h in history if h.drafted >= p.min_drafted][-p.window :]
    if current.drafted < p.min_drafted or len(usable) < p.min_history:
        why = (
            f"{current.drafted} drafted tokens (fewer than {p.min_drafted})"
            if current.drafted < p.min_drafted
            else f"{len(usable)} runs of history (fewer than {p.min_history})"
        )
        return CollapseVerdict("not judged", current.rate, None, len(usable), None, None, why)
    median = statistics.median(usable)
    threshold = min(p.collapse_fraction * median, median - p.threshold_points)
    k = len(usable)
    own = current.spread**2 / current.requests if current.requests else 0.0
    var = statistics.variance(usable) * (1 + 1 / k) + own
    gap = statistics.fmean(usable) - current.rate
    if var <= 0:
        p_value = 0.0 if gap > 0 else 1.0
    else:
        p_value = float(student_t.sf(gap / math.sqrt(var), k - 1))
    big = current.rate < threshold
    significant = p_value < p.alpha
    verdict: CollapseWord = (
        "collapse" if big and significant else "inconclusive" if big else "no change"
    )
    reason = (
        f"acceptance {current.rate:.1%} against a median of {median:.1%} over {k} runs "
        f"(collapse below {threshold:.1%}, one-sided p = {p_value:.2g}, alpha {p.alpha:g})"
    )
    return CollapseVerdict(verdict, current.rate, median, k, p_value, threshold, reason)


@dataclass(frozen=True, slots=True)
class LoopVerdict:
    fired: bool
    looped: int
    requests: int
    acceptance: float
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {
            "fired": self.fired,
            "looped_requests": self.looped,
            "drafting_requests": self.requests,
            "acceptance": self.acceptance,
            "reason": self.reason,
        }


def judge_loop(current: RunAcceptance, params: AlarmParams | None = None) -> LoopVerdict:
    """Fires when enough of the run's requests loop (acceptance and repetition both high)."""
    p = params or AlarmParams()
    share = current.looped / current.requests if current.requests else 0.0
    fired = current.looped >= p.loop_min_requests and share >= p.loop_min_share
    reason = (
        f"{current.looped} of {current.requests} drafting requests accept at least "
        f"{p.loop_acceptance:.0%} of their draft on output that repeats itself (at least "
        f"{p.loop_repeat:.0%} of its word 6-grams seen before; fires at "
        f"{p.loop_min_requests} requests and {p.loop_min_share:.0%})"
    )
    return LoopVerdict(fired, current.looped, current.requests, current.rate, reason)
