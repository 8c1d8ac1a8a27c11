"""Nightly regression detection: tonight's run of a series against its recent good runs.

A series is one (host, build flavour, model+draft, profile, category, concurrency, metric). Each
night brings one new run per series, and the question is whether it is worse — or better — than
the last N good runs. Three gates must all open, because each one alone fails in its own way:

1. A one-sided test with the run as the unit: tonight's run median against the baseline runs'
   medians (Student t prediction test) for continuous metrics, a pooled two-proportion z-test
   for proportions. Corrected across the night's series with Benjamini-Hochberg. Trials of one
   run share that run's conditions (thermals, neighbours, page cache): a test on the pooled
   per-request trials (the Mann-Whitney path this replaced) took 20 requests for 20 replicates
   and flagged ordinary run-to-run wobble on A/A nights. Proportions are still counted over
   requests, so the fence and floor below carry more of their weight.
2. A fence: the change must exceed Q3 + 3*IQR of the series' historical run-to-run changes
   (consecutive good runs' medians): exactly the wobble the test misses, measured with quartiles
   so that one past outlier widens it only a little. For normal wobble it sits near 5 sigma of
   a run median, and that — not the test — sets the smallest change a series can show.
3. A floor per metric: changes too small to act on are never reported, however certain.

Labels, in the order they are decided:
- "insufficient data": fewer than ``min_good_runs`` good runs (or the run has no trials).
- "no change": not significant after BH, or significant but within the floor — certain yet
  immaterial, and crying wolf there teaches people to ignore the detector, so *not* suspicious.
- "suspicious": significant and above the floor but inside the fence — bigger than we care
  about, yet within what this series does on its own from night to night. A look, not a page.
- "regression" / "improvement": all three gates, by the side the median moved. A per-run
  regression is a *candidate*: one night cannot tell a bad build from a bad night. Confirmation
  (and naming the first bad build) is the change-point pass in ``changepoints``.

Runs with errors or identity mismatches (``good=False``) never enter a baseline or a fence,
but tonight's run is tested whatever its flag: its error rate is exactly what must be judged.

Both directions are tested one-sided at ``alpha``, the side chosen by where the median moved,
so the chance of a false flag in *either* direction is up to 2*alpha per series; BH across
series inherits that (each direction is controlled at ``alpha``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from types import MappingProxyType
from typing import Final

import numpy as np

from watchkeeper.analysis.absolute import (
    bh_adjusted,
    prediction_p,
    robust_center_scale,
    run_level_ci,
    run_to_run_fence,
    two_proportion_p,
)
from watchkeeper.analysis.stats import coefficient_of_variation


class Direction(StrEnum):
    HIGHER = "higher is better"
    LOWER = "lower is better"


class MetricKind(StrEnum):
    CONTINUOUS = "continuous"
    PROPORTION = "proportion"


class Side(StrEnum):
    WORSE = "worse"
    BETTER = "better"


class Label(StrEnum):
    REGRESSION = "regression"
    IMPROVEMENT = "improvement"
    SUSPICIOUS = "suspicious"
    INSUFFICIENT = "insufficient data"
    NO_CHANGE = "no change"
    ENVIRONMENT_NOISE = "environment noise"


FLAGS: Final = frozenset({Label.REGRESSION, Label.IMPROVEMENT})


@dataclass(frozen=True, slots=True)
class MetricSpec:
    name: str
    direction: Direction
    kind: MetricKind
    floor: float
    """Smallest change worth reporting: relative for continuous metrics, absolute (a fraction,
    0.02 = 2 points) for proportions — a 2-point acceptance drop matters at 40% as at 90%."""


_C, _P, _HI, _LO = MetricKind.CONTINUOUS, MetricKind.PROPORTION, Direction.HIGHER, Direction.LOWER
# error_rate and identical_rate floors are not in the design notes: 1 point each, because an
# engine that newly fails or diverges on 1 request in 100 is already worth a human's look.
METRICS: Final[Mapping[str, MetricSpec]] = MappingProxyType(
    {
        spec.name: spec
        for spec in (
            MetricSpec("decode_tps", _HI, _C, 0.03),
            MetricSpec("ttft_ms", _LO, _C, 0.03),
            MetricSpec("acceptance_rate", _HI, _P, 0.02),
            MetricSpec("acceptance_length", _HI, _C, 0.03),
            MetricSpec("peak_rss_bytes", _LO, _C, 0.03),
            # The tail moves more than the median night to night: 5% before it is worth a look.
            MetricSpec("ttft_p90_ms", _LO, _C, 0.05),
            MetricSpec("good_fraction", _HI, _P, 0.02),
            MetricSpec("error_rate", _LO, _P, 0.01),
            MetricSpec("identical_rate", _HI, _P, 0.01),
        )
    }
)


@dataclass(frozen=True, slots=True)
class SeriesKey:
    """What must be equal for two runs to be comparable at all.

    ``engine_build`` is the build *flavour* (backend, compile options), not the commit: the
    commit changes every night and is what a series is watched across (``RunPoint.label``).
    """

    host: str
    engine_build: str
    model: str
    """Target model and draft model together."""
    profile_hash: str
    category: str
    concurrency: int
    metric: str

    @property
    def spec(self) -> MetricSpec:
        try:
            return METRICS[self.metric]
        except KeyError:
            raise ValueError(f"unknown metric {self.metric!r}; known: {sorted(METRICS)}") from None


@dataclass(frozen=True, slots=True)
class RunPoint:
    """One run of one series: raw trials for continuous metrics, counts for proportions.

    A run is good exactly when it has no exclusion reason (errors, identity mismatches)."""

    label: str
    """What the run is known by, typically the engine build id it measured."""
    trials: tuple[float, ...] = ()
    successes: int = 0
    attempts: int = 0
    good: bool = True
    excluded_reason: str | None = None

    def __post_init__(self) -> None:
        if not 0 <= self.successes <= self.attempts:
            raise ValueError(f"impossible counts {self.successes}/{self.attempts}")
        if self.good != (self.excluded_reason is None):
            raise ValueError("a run is excluded (good=False) exactly when it has a reason")

    @classmethod
    def of(cls, label: str, trials: Sequence[float], *, excluded: str | None = None) -> RunPoint:
        floats = tuple(float(t) for t in trials)
        return cls(label, floats, good=excluded is None, excluded_reason=excluded)

    @classmethod
    def counts(
        cls, label: str, successes: int, attempts: int, *, excluded: str | None = None
    ) -> RunPoint:
        return cls(label, (), successes, attempts, excluded is None, excluded)

    def size(self, kind: MetricKind) -> int:
        return len(self.trials) if kind is MetricKind.CONTINUOUS else self.attempts

    def center(self, kind: MetricKind) -> float:
        """The run's summary value: median of trials, or the proportion."""
        if kind is MetricKind.CONTINUOUS:
            return float(np.median(self.trials))
        return self.successes / self.attempts


@dataclass(frozen=True, slots=True)
class DetectorParams:
    window: int = 10
    """How many of the most recent good runs make up the baseline (one value each)."""
    min_good_runs: int = 10
    alpha: float = 0.01
    """Per-test level, and the Benjamini-Hochberg false-discovery rate across a night."""
    fence_multiplier: float = 3.0
    fence_runs: int = 30
    """Good runs whose consecutive changes define the fence: enough for stable quartiles, few
    enough that a regime from months ago stops setting tonight's tolerance."""
    resamples: int = 2000
    confidence: float = 0.95
    seed: int = 0
    storm_fraction: float = 0.2
    storm_one_way: int = 3

    def __post_init__(self) -> None:
        if self.window < 2 or self.min_good_runs < 3 or self.fence_runs < 3:
            raise ValueError("need window >= 2, min_good_runs >= 3 and fence_runs >= 3")
        if not 0 < self.alpha < 1 or not 0 < self.confidence < 1:
            raise ValueError("alpha and confidence must lie in (0, 1)")


@dataclass(frozen=True, slots=True)
class Finding:
    key: SeriesKey
    run: str
    label: Label
    note: str
    """Why this label, in words, for the report."""
    side: Side | None
    delta: float | None
    """Tonight's run median relative to the median of the baseline runs' medians (continuous), or
    the absolute difference of proportions."""
    delta_low: float | None
    delta_high: float | None
    test: str
    p_value: float | None
    p_adjusted: float | None
    current_value: float | None
    baseline_value: float | None
    baseline_runs: int
    baseline_trials: int
    baseline_cv: float | None
    """Coefficient of variation of the baseline runs' medians (or proportions)."""
    fence: float | None
    floor: float
    params: DetectorParams

    @property
    def flagged(self) -> bool:
        return self.label in FLAGS


@dataclass(frozen=True, slots=True)
class EnvironmentNoise:
    flagged: int
    total_series: int
    regressions: int
    improvements: int
    reason: str
    label: Label = Label.ENVIRONMENT_NOISE


@dataclass(frozen=True, slots=True)
class AbsoluteNight:
    """One night of the absolute-series detector over every series (not the paired
    profile-night of `commands.nightly.PairedNight`)."""

    verdicts: tuple[Finding, ...]
    """What to act on: flagged and suspicious findings; empty when the night is a storm."""
    environment_noise: EnvironmentNoise | None
    """Set instead of verdicts when too much flagged at once to believe series by series."""
    findings: tuple[Finding, ...]
    """Every series' finding, storm or not, for the record."""


def _proportion_ci(
    current: RunPoint, baseline: Sequence[RunPoint], params: DetectorParams
) -> tuple[float, float]:
    """Percentile bootstrap CI of the difference of proportions (binomial resampling)."""
    rng = np.random.default_rng(params.seed)
    b = params.resamples
    n_base = sum(r.attempts for r in baseline)
    p_base = sum(r.successes for r in baseline) / n_base
    cur_p = rng.binomial(current.attempts, current.successes / current.attempts, b)
    deltas = cur_p / current.attempts - rng.binomial(n_base, p_base, b) / n_base
    tail = (1.0 - params.confidence) / 2.0
    low, high = np.quantile(deltas, [tail, 1.0 - tail])
    return float(low), float(high)


def _assess(
    key: SeriesKey, history: Sequence[RunPoint], current: RunPoint, params: DetectorParams
) -> Finding:
    """Everything about one series except the multiple-testing correction and the label;
    "insufficient data" findings come back final, without a p-value."""
    spec = key.spec
    kind = spec.kind
    continuous = kind is MetricKind.CONTINUOUS
    good = [r for r in history if r.good and r.size(kind) > 0]
    baseline = good[-params.window :]
    if continuous:
        test = "one-sided t prediction test on run medians (one value per run)"
    else:
        test = "one-sided two-proportion z-test"
    base_trials = sum(r.size(kind) for r in baseline)
    blank = Finding(
        key, current.label, Label.INSUFFICIENT, "", None, None, None, None, test, None, None,
        None, None, len(baseline), base_trials, None, None, spec.floor, params,
    )  # fmt: skip
    if len(good) < params.min_good_runs:
        note = f"{len(good)} good runs, need {params.min_good_runs}"
        return replace(blank, note=note)
    if current.size(kind) == 0:
        return replace(blank, note="tonight's run has no trials")

    centers = [r.center(kind) for r in good[-params.fence_runs :]]
    if continuous and min(centers) <= 0:
        raise ValueError(f"{key.metric}: continuous metrics must be positive to compare ratios")
    run_values = [r.center(kind) for r in baseline]
    base_succ = sum(r.successes for r in baseline)
    cur_value = current.center(kind)
    if continuous:
        base_value = robust_center_scale(run_values)[0]
        delta = cur_value / base_value - 1.0
    else:
        base_value = base_succ / base_trials
        delta = cur_value - base_value

    def p_for(side: Side) -> float:  # "less": tonight lies lower, which is worse for HIGHER
        lower = (side is Side.WORSE) == (spec.direction is Direction.HIGHER)
        alternative = "less" if lower else "greater"
        if continuous:
            return prediction_p(cur_value, run_values, alternative)
        cur_succ, cur_n = current.successes, current.attempts
        return two_proportion_p(cur_succ, cur_n, base_succ, base_trials, alternative)

    if delta == 0:
        side = min(Side, key=p_for)
    else:
        side = Side.WORSE if (delta < 0) == (spec.direction is Direction.HIGHER) else Side.BETTER
    if continuous:
        low, high = run_level_ci(cur_value, run_values, params.confidence)
    else:
        low, high = _proportion_ci(current, baseline, params)
    fence = run_to_run_fence(centers, params.fence_multiplier, relative=continuous)
    cv = coefficient_of_variation([r.center(kind) for r in baseline])
    return replace(
        blank, side=side, delta=delta, delta_low=low, delta_high=high, p_value=p_for(side),
        current_value=cur_value, baseline_value=base_value, baseline_cv=cv, fence=fence,
    )  # fmt: skip


def _labelled(finding: Finding, p_adjusted: float) -> Finding:
    assert finding.delta is not None and finding.fence is not None
    alpha, size = finding.params.alpha, abs(finding.delta)
    unit = "" if finding.key.spec.kind is MetricKind.PROPORTION else " relative"
    if p_adjusted > alpha:
        label, note = Label.NO_CHANGE, f"not significant (BH-adjusted p {p_adjusted:.3g} > {alpha})"
    elif size <= finding.floor:
        label, note = Label.NO_CHANGE, f"significant but within the{unit} floor {finding.floor:.3g}"
    elif size <= finding.fence:
        label = Label.SUSPICIOUS
        note = f"significant, above the floor, inside the run-to-run fence {finding.fence:.3g}"
    else:
        label = Label.REGRESSION if finding.side is Side.WORSE else Label.IMPROVEMENT
        note = f"significant, beyond the floor and the run-to-run fence {finding.fence:.3g}"
    return replace(finding, label=label, note=note, p_adjusted=p_adjusted)


def detect_series(
    key: SeriesKey,
    history: Sequence[RunPoint],
    current: RunPoint,
    params: DetectorParams | None = None,
) -> Finding:
    """One series on its own (BH over a single p-value leaves it unchanged).

    ``history`` is chronological, oldest first, and may include bad runs; they are skipped."""
    return detect_night({key: (history, current)}, params).findings[0]


def detect_night(
    series: Mapping[SeriesKey, tuple[Sequence[RunPoint], RunPoint]],
    params: DetectorParams | None = None,
    *,
    storm_eligible: Callable[[SeriesKey], bool] | None = None,
) -> AbsoluteNight:
    """Every series of one night: test each, correct with BH across them, label, check for a
    storm. Series with insufficient data take no part in the correction.

    ``storm_eligible`` limits the storm check to series where nothing but the environment can
    explain a move — e.g. those whose engine build did not change since their baseline. A new
    build that slows every series at once is then filed as a regression, not waved off as
    noise (the storm rule alone cannot tell the two apart)."""
    params = params or DetectorParams()
    assessed = [_assess(key, hist, cur, params) for key, (hist, cur) in series.items()]
    adjusted = iter(bh_adjusted([f.p_value for f in assessed if f.p_value is not None]))
    findings = tuple(f if f.p_value is None else _labelled(f, next(adjusted)) for f in assessed)
    scope = [f for f in findings if storm_eligible is None or storm_eligible(f.key)]
    if storm(
        scope, len(scope), max_fraction=params.storm_fraction, min_one_way=params.storm_one_way
    ):
        return AbsoluteNight((), _environment_noise(scope, params.storm_fraction), findings)
    verdicts = tuple(f for f in findings if f.flagged or f.label is Label.SUSPICIOUS)
    return AbsoluteNight(verdicts, None, findings)


def storm(
    findings: Sequence[Finding],
    total_series: int,
    *,
    max_fraction: float = 0.2,
    min_one_way: int = 3,
) -> bool:
    """Too many flags at once to believe one by one.

    True when more than ``max_fraction`` of the series flag, or when at least ``min_one_way``
    flags all point the same way. Real engine changes move a few series; a hot machine, a noisy
    neighbour or a throttled disk moves everything together. The price: a build that truly
    slows every series also reads as a storm tonight — the per-series findings are kept, and
    the change-point pass over the next nights is what names it."""
    flags = [f for f in findings if f.flagged]
    if len(flags) < 2:
        # A single flag is one finding either way; calling it noise would only hide it.
        return False
    if total_series > 0 and len(flags) / total_series > max_fraction:
        return True
    return len(flags) >= min_one_way and len({f.label for f in flags}) == 1


def _environment_noise(findings: Sequence[Finding], fraction: float) -> EnvironmentNoise:
    total, regressions = len(findings), sum(f.label is Label.REGRESSION for f in findings)
    flagged = sum(f.flagged for f in findings)
    if total and flagged / total > fraction:
        reason = f"{flagged} of {total} series flagged (> {fraction:.0%})"
    else:
        reason = f"all {flagged} flags are {'regressions' if regressions else 'improvements'}"
    return EnvironmentNoise(flagged, total, regressions, flagged - regressions, reason)
