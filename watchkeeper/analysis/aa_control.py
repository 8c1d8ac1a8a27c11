"""The race's negative control: a second baseline server, measured like every arm, whose
speed-up over the baseline must read "no change".

Why it exists: on this project's Qwen sweeps of 7 Dec 2026, arms that drafted nothing at all
(ngram-map-k4v: 0 draft tokens in 12 requests) read 1.08-1.15x over the `--spec-type none`
baseline with intervals above 1, so every ratio of those races carried a handicap of the
baseline's server of about that size, and a rule that picks from intervals would have named a
setting that never speculated. A second server with the baseline's exact settings, started
beside it and raced in every round, measures that handicap directly: where its interval
excludes 1, the race's ratios are biased by about its estimate, and no setting is recommended
from them (analysis/recommend.py). Where it reads "no change", the comparison is sound at the
precision the race reached. It is never dropped, never probed for identity and never picked.
"""

from __future__ import annotations

from dataclasses import dataclass

from watchkeeper.analysis.bench_types import ALL, BenchResult
from watchkeeper.analysis.stats import RatioCI
from watchkeeper.format import ci as ci_text

SUFFIX = "-aa-control"
ROLE = "control"
WHY = (
    "A/A control: a second server with the baseline's settings, raced in every round and "
    "never picked; its speed-up must read no change, else every ratio of the race is biased"
)


def control_name(baseline: str) -> str:
    """The control's arm name for a baseline arm (`qwen-baseline` -> `qwen-aa-control`)."""
    return baseline.removesuffix("-baseline") + SUFFIX


def is_control(name: str) -> bool:
    return name.endswith(SUFFIX)


@dataclass(frozen=True, slots=True)
class ControlReading:
    """The control's pooled speed-up over the baseline and what it says about the race."""

    arm: str
    speedup: RatioCI

    @property
    def has_ci(self) -> bool:
        return self.speedup.has_ci

    @property
    def biased(self) -> bool:
        """Its verdict is faster or slower (`stats.classify`: the interval excludes 1 and the
        estimate lies beyond the practical threshold): the baseline's server runs faster or
        slower than an identical one by more than any verdict may ignore, so every
        candidate's ratio carries that factor. A bias inside the threshold ("within
        threshold") is named but withholds nothing: no verdict can turn on it."""
        return self.speedup.verdict in ("faster", "slower")

    def interval(self) -> str:
        s = self.speedup
        if not s.has_ci:
            return f"{s.estimate:.2f}x (no CI: {s.n_clusters} task(s) x {s.n_rounds} round(s))"
        return f"{s.estimate:.2f}x ({ci_text(s.low, s.high, over=s.over)})"

    def line(self) -> str:
        """One line for the report's first screen."""
        head = f"A/A control ({self.arm}, a second server with the baseline's settings): "
        if not self.has_ci:
            return head + f"{self.interval()}: too few replicates to check the race's bias"
        if self.biased:
            side = "faster" if self.speedup.low > 1.0 else "slower"
            return head + (
                f"{self.interval()}: an identical server reads {side} than the baseline, so "
                "every ratio of this race carries a bias of about that size; no setting is "
                "recommended from it"
            )
        if self.speedup.excludes_one:
            return head + (
                f"{self.interval()}: a bias inside the {self.speedup.threshold:.0%} threshold "
                "every verdict already allows"
            )
        return head + f"{self.interval()}: no bias detected at this precision"

    def withheld_reason(self) -> str:
        """Worded to follow "is excluded by" (analysis/recommend.py)."""
        return f"a biased race (the A/A control reads {self.interval()})"


def control_reading(result: BenchResult) -> ControlReading | None:
    """The race's control, where it ran and was measured; None otherwise."""
    for arm in result.arms:
        if arm.role == ROLE:
            stats = result.stats(arm.name, ALL)
            if stats is not None and stats.speedup is not None:
                return ControlReading(arm.name, stats.speedup)
    return None


def withheld(result: BenchResult) -> dict[str, str]:
    """Every candidate, where the control reads biased: the recommendation's `withheld`. A
    ratio that carries the baseline server's own handicap says nothing about speculation, so
    no arm is named from it, however far its interval clears 1."""
    control = control_reading(result)
    if control is None or not control.biased:
        return {}
    return {a.name: control.withheld_reason() for a in result.arms if a.role == "candidate"}
