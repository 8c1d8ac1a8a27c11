"""The soak against the pinned reference: one ratio per series, process pairs as replicates.

A soak's absolute tok/s wander +-10% from block to block on a shared host (measured: one
series 134.5 then 120.5 tok/s while another moved +9% in the same minutes), so a drift check
on them alone cannot tell a slower build from a noisy night. With the nightly's pinned
reference running as one more arm, each cycle of blocks holds a current block and a reference
block at the same concurrency, back to back; the ratio of their medians cancels what hit both.

What cycles cannot cancel is the server *instance*: two processes of the same binary and model
run a few percent apart for their whole lives (4.8% through a whole A/A soak here, every cycle
1.02-1.06; sd ~0.8% between process pairs by benchmarks/instance_effect.py). So both servers
of a pair restart every `soak.restart_every` cycles (soak/loop.py), and the *process pair* is
the replicate: the first cycle after every start (planned, after a crash, after a resume) is
warm-up and set aside, the judged cycles of one pair are averaged, and the interval runs over
the pairs. The order of the two blocks alternates over the judged cycles and is balanced
before judging (as many current-first as reference-first). The interval allows for lag-1
autocorrelation between consecutive pairs (`soak/ar1.py:ar1_t_interval`). The verdict rules are the
nightly's (`analysis.stats.classify`), and a regression is confirmed inside the soak when both
halves of it show the drop on their own. docs/soak.md has the design and the measurements.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
from scipy import stats as scipy_stats

from watchkeeper.analysis.stats import SERIES_VERDICTS, classify
from watchkeeper.soak.ar1 import (
    CONFIDENCE,
    ar1_rows,
    ar1_t_interval,
    lag1,
    standard_series,
    used_lag1,
    variance_factor,
)
from watchkeeper.soak.depth_figures import Autocorrelation
from watchkeeper.soak.paired_figures import CycleRow, RatioInterval, ReferenceRatio
from watchkeeper.soak.views import IncidentView, SoakSampleView

MIN_CYCLES = 4
"""Judged replicates (process pairs; cycles when the servers never restart) needed for a CI."""
WARMUP_CYCLES = 1
"""The first cycle is always set aside, whether or not the soak recorded its cold blocks (a
campaign from before `cold_block` incidents): in a real A/A soak here it read 1.238 against
1.02-1.06 for the rest (both servers' first minutes under load)."""
SIZING_POWER = 0.8
"""A longer soak is sized to decide 8 times in 10, not half the time."""
SIZING_REPS = 200
MAX_SIZED_PAIRS = 400
SIGMA_CONFIDENCE = 0.8
"""The range's upper end sizes at the spread's 80% upper confidence bound (chi-square on the
series' effective degrees of freedom): six pairs estimate a spread within a factor ~2."""
MIN_LAG1_PAIRS = 30
"""From this many pairs the sizing reads the series' own lag-1 (bias-corrected, floored);
below, it is fixed at the configured floor: from 6 pairs the estimate scatters by +-0.4 and
moved the old hint several-fold from draw to draw."""
MIN_SIZING_PAIRS = 8
"""Below this many pairs a hint never says "not even `MAX_SIZED_PAIRS`": the spread is not
known well enough to give up on a longer soak."""


class Sizing(NamedTuple):
    """How many process pairs would decide a ratio: at its point spread (`low`) and at the
    spread's upper confidence bound (`high`). None: more than `MAX_SIZED_PAIRS`."""

    low: int | None
    high: int | None


def pairs_needed(logs: Sequence[float], *, threshold: float, floor: float) -> Sizing | None:
    """How many process pairs would decide an `inconclusive` ratio 8 times in 10, if its
    estimate holds, as a range: the operator's next step is a longer soak, and "inconclusive"
    alone does not say how much longer.

    By simulation, not by formula: at few pairs the bias-corrected, floored lag-1 and the t
    quantile's degrees of freedom vary from series to series, and a power formula with point
    values under-sizes short soaks. AR(1) series of m pairs are drawn at the estimate and a
    spread, and judged by the interval itself; m is the smallest reaching SIZING_POWER (common
    random numbers: the same draws for every m, all rows judged at once).

    What it no longer reads from the few pairs it has (issue 75): their own lag-1 estimate
    (below `MIN_LAG1_PAIRS` the draws and the spread's correction use the configured ``floor``,
    fixed), and a single spread: the range runs from the point spread to its `SIGMA_CONFIDENCE`
    upper bound. Sized from 6 pairs of a series that 14 pairs decide, the old single hint ran 7
    to 400+ over 20 draws and gave up ("not even 400") in some;
    `benchmarks/pairs_needed_scatter.py`. None below 2 pairs."""
    x = np.asarray(logs, float)
    n = x.size
    if n < 2:
        return None
    r = floor
    if n >= MIN_LAG1_PAIRS:  # enough pairs for the series' own lag-1, bias-corrected
        r = used_lag1(lag1(x), n, floor)
    c = float(variance_factor(n, r))
    sigma = math.sqrt(float(x.var(ddof=1)) * (n - 1) / max(n - c, 0.5))
    df = max(n / c - 1.0, 1.0)
    upper = sigma * math.sqrt(df / float(scipy_stats.chi2.ppf(1.0 - SIGMA_CONFIDENCE, df)))
    mean = float(x.mean())
    draws = ar1_draws(r)
    point = fewest_pairs(draws, mean, sigma, threshold=threshold, floor=floor)
    if point is None:
        return Sizing(None, None)
    return Sizing(point, fewest_pairs(draws, mean, upper, threshold=threshold, floor=floor))


def ar1_draws(r: float) -> np.ndarray:
    """`SIZING_REPS` standard AR(1) series of lag-1 ``r`` at the longest sized length, seeded:
    a soak of m pairs is the first m of each row (common random numbers for every m)."""
    return standard_series(r, SIZING_REPS, MAX_SIZED_PAIRS)


def fewest_pairs(
    draws: np.ndarray, mean: float, spread: float, *, threshold: float, floor: float
) -> int | None:
    """The fewest pairs (`MIN_CYCLES` to `MAX_SIZED_PAIRS`) whose interval reads the verdict
    ``mean`` implies in `SIZING_POWER` of the ``draws`` scaled by ``spread``; None when even
    the longest does not."""
    band = math.log1p(threshold)
    want = "no change" if abs(mean) < band else ("slower" if mean < 0 else "faster")

    def power(m: int) -> float:
        drawn = ar1_rows(mean + spread * draws[:, :m], floor, CONFIDENCE)
        hits = sum(
            classify(math.exp(mu), math.exp(mu - h), math.exp(mu + h), threshold) == want
            for mu, h in zip(drawn.mean.tolist(), drawn.half.tolist(), strict=True)
        )
        return hits / SIZING_REPS

    low, high = MIN_CYCLES, MAX_SIZED_PAIRS
    if power(high) < SIZING_POWER:
        return None
    while low < high:
        mid = (low + high) // 2
        if power(mid) >= SIZING_POWER:
            high = mid
        else:
            low = mid + 1
    return low


def cycle_length(params: dict[str, Any]) -> int:
    return max(1, len(params.get("profiles") or ()) * len(params.get("concurrency") or ()))


def _block_medians(
    samples: Sequence[SoakSampleView],
) -> dict[tuple[str, int, int], tuple[float, int]]:
    """(arm, concurrency, block) -> median decode tok/s of its measured load requests, and
    how many there were (a block of one request is one request's noise: soak/drift.py)."""
    values: dict[tuple[str, int, int], list[float]] = defaultdict(list)
    for s in samples:
        if not s.is_probe and s.error is None and s.decode_tps:
            values[(s.profile, s.concurrency, s.block)].append(s.decode_tps)
    return {key: (float(np.median(v)), len(v)) for key, v in values.items()}


def _geomean(values: Sequence[float]) -> float | None:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def cold_blocks(incidents: Sequence[IncidentView]) -> set[tuple[str, int]]:
    """(arm, block) of every block the soak ran on a server that had just started."""
    return {
        (str(i.profile), int(i.evidence["block"]))
        for i in incidents
        if i.kind == "cold_block" and i.profile is not None and "block" in i.evidence
    }


@dataclass(frozen=True, slots=True)
class _Cycle:
    index: int
    current_tps: float
    reference_tps: float
    current_first: bool
    current_requests: int = 0
    reference_requests: int = 0

    @property
    def log_ratio(self) -> float:
        return math.log(self.current_tps / self.reference_tps)


def _balanced(cycles: list[_Cycle]) -> tuple[list[_Cycle], list[int]]:
    """As many current-first as reference-first cycles, the latest surplus dropped: an order
    effect (the second block of a pair runs warmer, or cooler) cancels only in balance."""
    first = sum(1 for c in cycles if c.current_first)
    surplus, majority = abs(2 * first - len(cycles)), first * 2 > len(cycles)
    dropped: list[int] = []
    kept = list(cycles)
    for c in reversed(cycles):
        if len(dropped) == surplus:
            break
        if c.current_first == majority:
            kept.remove(c)
            dropped.append(c.index)
    return kept, sorted(dropped)


def reference_ratios(
    samples: Sequence[SoakSampleView],
    params: dict[str, Any],
    *,
    threshold: float,
    cold: set[tuple[str, int]] | None = None,
    autocorrelation_floor: float = 0.3,
) -> list[ReferenceRatio]:
    """One entry per (profile, concurrency) soaked beside a reference arm; [] without one.

    ``params`` is the campaign's: ``references`` maps each current profile to its reference
    arm, the reference's id and whether the two are identical (an A/A soak). ``cold``: the
    blocks run on a freshly started server (`cold_blocks`); their cycles are warm-up.

    The replicate is the process pair: the judged cycles between two starts are averaged
    (in logs) into one value, and the interval runs over those values in time order."""
    refs: dict[str, dict[str, Any]] = params.get("references") or {}
    if not refs:
        return []
    length = cycle_length(params)
    medians = _block_medians(samples)
    cold = cold or set()
    by_pair = int(params.get("restart_every") or 0) >= 2
    out = []
    for profile, ref in sorted(refs.items()):
        arms = (profile, ref["arm"])
        warm_up = {block // length for arm, block in cold if arm in arms}
        for conc in params.get("concurrency") or ():
            cycles = _paired_cycles(medians, profile, ref["arm"], conc, length)
            complete = [c.index for c in cycles]
            skipped = set(complete[:WARMUP_CYCLES]) | (warm_up & set(complete))
            segments = _process_pairs(cycles, skipped)
            judged, unbalanced = _balanced([c for c in cycles if c.index not in skipped])
            values = _replicates(judged, segments, by_pair=by_pair)
            estimate, verdict, interval = _ratio_verdict(values, threshold, autocorrelation_floor)
            out.append(
                ReferenceRatio(
                    profile=profile,
                    concurrency=conc,
                    reference_arm=ref["arm"],
                    reference_id=ref["reference_id"],
                    aa=bool(ref.get("aa")),
                    host_fingerprint=ref.get("host_fingerprint", ""),
                    threshold=threshold,
                    cycles=_cycle_rows(cycles, judged, segments),
                    warmup_cycles=tuple(sorted(skipped)),
                    unbalanced_dropped=tuple(unbalanced),
                    n_cycles=len(judged),
                    n_pairs=len(values),
                    estimate=estimate,
                    verdict=verdict,
                    interval=interval,
                )
            )
    return out


def _paired_cycles(
    medians: dict[tuple[str, int, int], tuple[float, int]],
    profile: str,
    reference: str,
    conc: int,
    length: int,
) -> list[_Cycle]:
    """The cycles, in order, where both the current arm and its reference ran a block at this
    concurrency: a cycle with one side missing has no ratio."""
    arms = (profile, reference)
    by_cycle: dict[int, dict[str, tuple[int, float, int]]] = defaultdict(dict)
    for (arm, c, block), (value, n) in medians.items():
        if c != conc or arm not in arms:
            continue
        by_cycle[block // length][arm] = (block, value, n)
    return [
        _Cycle(
            k,
            by_cycle[k][profile][1],
            by_cycle[k][reference][1],
            by_cycle[k][profile][0] < by_cycle[k][reference][0],
            by_cycle[k][profile][2],
            by_cycle[k][reference][2],
        )
        for k in sorted(k for k, v in by_cycle.items() if len(v) == 2)
    ]


def _process_pairs(cycles: Sequence[_Cycle], skipped: set[int]) -> dict[int, int]:
    """Cycle index -> the process pair it ran on, for the cycles judged: every warm-up cycle
    marks a (re)start, so the count of warm-ups before a cycle numbers its pair."""
    segment, segments = 0, {}
    for cycle in cycles:
        if cycle.index in skipped:
            segment += 1
        else:
            segments[cycle.index] = segment
    return segments


def _replicates(
    judged: Sequence[_Cycle], segments: dict[int, int], *, by_pair: bool
) -> list[float]:
    """The values the interval runs over, in time order: each process pair's mean log ratio,
    or each cycle's where the servers never restart."""
    units: dict[int, list[float]] = defaultdict(list)
    for cycle in judged:
        # Without planned restarts the pair lives all night: its cycles are the units
        # (and the pair's own offset is invisible to them: hence a high threshold).
        units[segments[cycle.index] if by_pair else cycle.index].append(cycle.log_ratio)
    return [float(np.mean(v)) for _, v in sorted(units.items())]


def _cycle_rows(
    cycles: Sequence[_Cycle], judged: Sequence[_Cycle], segments: dict[int, int]
) -> tuple[CycleRow, ...]:
    """Every paired cycle as the report shows it, judged or set aside."""
    return tuple(
        CycleRow(
            cycle=c.index,
            current_tps=c.current_tps,
            reference_tps=c.reference_tps,
            current_first=c.current_first,
            current_requests=c.current_requests,
            reference_requests=c.reference_requests,
            judged=c in judged,
            process_pair=segments.get(c.index),
        )
        for c in cycles
    )


def _ratio_verdict(
    values: Sequence[float], threshold: float, autocorrelation_floor: float
) -> tuple[float | None, str, RatioInterval | None]:
    """The estimate, the verdict and the interval; `insufficient data` (and no interval)
    below MIN_CYCLES replicates, and a regression is `confirmed` only when both halves show
    it alone."""
    if len(values) < MIN_CYCLES:
        estimate = math.exp(float(np.mean(values))) if values else None
        return estimate, "insufficient data", None
    interval = ar1_t_interval(values, floor=autocorrelation_floor)
    estimate, low, high = (math.exp(v) for v in (interval.mean, interval.low, interval.high))
    verdict = SERIES_VERDICTS[classify(estimate, low, high, threshold)]
    half = len(values) // 2
    halves = (_geomean_logs(values[:half]), _geomean_logs(values[half:]))
    sizing = (
        pairs_needed(values, threshold=threshold, floor=autocorrelation_floor)
        if verdict == "inconclusive"
        else None
    )
    return (
        estimate,
        verdict,
        RatioInterval(
            low=low,
            high=high,
            half_width=math.sqrt(high / low) - 1.0,
            pairs_needed=None if sizing is None else (sizing.low, sizing.high),
            autocorrelation=Autocorrelation(interval.r_estimate, interval.r_used),
            n_eff=interval.n_eff,
            halves=halves,
            # Both halves beyond the threshold on their own: the drop is not one bad hour.
            confirmed=verdict == "regression"
            and all(h is not None and h < 1.0 - threshold for h in halves),
        ),
    )


def _geomean_logs(logs: Sequence[float]) -> float | None:
    return math.exp(float(np.mean(logs))) if len(logs) else None
