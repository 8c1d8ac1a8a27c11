"""Latency distributions under load: TTFT, inter-token latency, time per output token and
end-to-end latency at p50/p90/p99, goodput under service levels and output tok/s, per arm.

Users feel the tail, so medians are not enough; but a p99 of one round is one request of that
round, and rounds drift on a shared host. The replicate is the round (as in analysis/stats.py):
each round's quantile is one value, the estimate is their mean and the CI a Student t interval
over rounds (n - 1 degrees of freedom), honest with 3 rounds where a bootstrap over requests
would be as narrow as if the drift did not exist. Fewer than 2 rounds: no CI.

Definitions (those of vLLM's `bench serve`): TTFT and end-to-end latency count from the
request's arrival (open loop: its scheduled time, so a client-side wait is included); ITL is
every gap between two streamed pieces, pooled over the round's requests; TPOT is one
request's (latency - TTFT) / (output tokens - 1). A request is *good* when it succeeded and
meets every configured level: TTFT, its TPOT (its mean inter-token latency) and end-to-end
latency. Goodput is good requests per second of the arm's active time in the round (closed
loop: the union of its requests' intervals, since the arms alternate; open loop: from the
first arrival to the last answer). Expired requests (past the queueing deadline) count as
arrivals that were not good.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any, Final

import numpy as np

from watchkeeper.analysis.bench_types import BenchResult
from watchkeeper.analysis.stats import CONFIDENCE, log_t_interval
from watchkeeper.analysis.streaming import (
    Saturation,
    acceptance,
    chunk_gaps,
    saturation,
    tokens_per_chunk,
    trim,
)
from watchkeeper.load.records import RequestSample, RunPurpose, RunResult
from watchkeeper.student import t_half_width

LATENCY_KEY: Final = "latency"
"""Where a bench's latency table lives in `BenchResult.extras` (campaign/load_shape.py)."""
QUANTILES = (0.5, 0.9, 0.99)
MIN_TAIL_VALUES = 1.0
"""A per-round q-quantile needs at least this many values beyond it (n (1 - q) >= 1: 100 for
a p99, 10 for a p90); fewer and it is marked `thin`."""
METRICS = ("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms")


@dataclass(frozen=True, slots=True)
class Slo:
    """Service levels in milliseconds; None: not judged."""

    ttft_ms: float | None = 500.0
    itl_ms: float | None = 50.0
    e2e_ms: float | None = None

    @property
    def label(self) -> str:
        parts = [
            f"{name} <= {value:g} ms"
            for name, value in (("TTFT", self.ttft_ms), ("ITL", self.itl_ms), ("E2E", self.e2e_ms))
            if value
        ]
        return " and ".join(parts) or "none (every successful request is good)"


@dataclass(frozen=True, slots=True)
class Estimate:
    """A mean over rounds with its t interval; low == high == estimate without a CI."""

    estimate: float
    low: float
    high: float
    rounds: int
    per_round: tuple[float, ...] = ()
    values_per_round: int = 0
    """Fewest values any round's quantile was read from (0: not a quantile)."""
    thin: bool = False
    """A tail quantile read from too few values per round to trust its CI: a sample p99 of 50
    values is biased low and its CI covered the truth in 91% of simulated benches, of 16
    values in 54% (tests/load/test_latency_stats.py)."""

    @property
    def has_ci(self) -> bool:
        return self.rounds >= 2 and math.isfinite(self.low)


@dataclass(frozen=True, slots=True)
class LatencyStats:
    """One arm at one load: what the report, --json and the `latency_stat` table carry."""

    arm: str
    load: str
    """The load level as a label ('c4', '2 req/s poisson')."""
    requests: int
    errors: int
    expired: int
    rounds: int
    quantiles: dict[str, dict[str, Estimate]]
    """metric -> 'p50'/'p90'/'p99' -> estimate over rounds."""
    goodput_rps: Estimate | None
    output_tps: Estimate | None
    good_fraction: float | None
    slo: str
    goodput_by_round: dict[int, float] = field(default_factory=dict)
    output_tps_by_round: dict[int, float] = field(default_factory=dict)
    by_round: dict[str, dict[int, float]] = field(default_factory=dict)
    """Per-round figures the ladder pairs by round: `attainment` (share of requests good) and
    `requests` (how many it was read from: its binomial floor, load_compare), `ttft_p90`,
    `e2e_p90`, `acceptance`, `tokens_per_step`, `tokens_per_chunk`."""
    attainment: Estimate | None = None
    """Share of the round's requests meeting the SLO, mean over rounds: defined (0) where a
    round has no good request, unlike goodput's ratio."""
    acceptance: Estimate | None = None
    """Accepted over drafted tokens (analysis/streaming.py); None: the arm did not draft."""
    tokens_per_step: Estimate | None = None
    """Mean accepted length plus one: output tokens per target decode step."""
    tokens_per_chunk: Estimate | None = None
    chunk_itl: dict[str, Estimate] = field(default_factory=dict)
    """ITL between chunks (pieces closer than 1 ms joined), 'p50'/'p90'/'p99'."""
    saturation: Saturation | None = None
    """Open loop only: completed against offered rate, TTFT against arrival index."""
    trimmed: float = 0.0
    """Share of each round's arrivals left out at each end (ramp-up, drain) of the figures."""

    @property
    def oversaturated(self) -> bool:
        return self.saturation is not None and self.saturation.oversaturated

    def value(self, metric: str, stat: str) -> Estimate | None:
        return self.quantiles.get(metric, {}).get(stat)


def mean_interval(values: Sequence[float], confidence: float = CONFIDENCE) -> Estimate:
    """Mean of per-round values with a t interval over them (no CI below 2 rounds)."""
    arr = np.asarray(values, dtype=float)
    n = arr.size
    mean = float(arr.mean())
    if n < 2:
        return Estimate(mean, mean, mean, n, tuple(values))
    half = t_half_width(arr, confidence)
    return Estimate(mean, mean - half, mean + half, n, tuple(values))


def quantile_over_rounds(
    rounds: Sequence[Sequence[float]], q: float, confidence: float = CONFIDENCE
) -> Estimate | None:
    """The q-quantile of each round's values, then their mean and t interval over rounds.
    Rounds without a value are left out; None when no round has one.

    The sample quantile is Hyndman and Fan's type 8 (approximately median-unbiased): numpy's
    default interpolation reads a right-skewed tail low, and 5 rounds of 400 exponential
    latencies covered the true p99 in 89% of simulated benches with it, 96% with type 8."""
    present = [np.asarray(values, dtype=float) for values in rounds if len(values)]
    if not present:
        return None
    per_round = [float(np.quantile(v, q, method="median_unbiased")) for v in present]
    fewest = min(v.size for v in present)
    est = mean_interval(per_round, confidence)
    return replace(est, values_per_round=fewest, thin=fewest < MIN_TAIL_VALUES / (1.0 - q))


def ratio_over_rounds(
    baseline: Mapping[int, float], candidate: Mapping[int, float]
) -> Estimate | None:
    """Candidate over baseline of a per-round figure (goodput, output tok/s), paired by round:
    the geometric mean of the rounds' ratios with a t interval in log space. None when a
    shared round has no positive figure on either side (a round with no good request): leaving
    that round out would read a ratio off the rounds that happened to have some (a ladder
    level once read goodput 1.97x, CI 1.93-2.00, from the 2 of 3 rounds with any good request,
    where both arms met the SLO on 33% of their requests)."""
    shared = sorted(set(baseline) & set(candidate))
    if any(not (baseline[r] > 0 and candidate[r] > 0) for r in shared):
        return None
    logs = [math.log(candidate[r] / baseline[r]) for r in shared]
    if not logs:
        return None
    arr = np.asarray(logs)
    est = float(math.exp(arr.mean()))
    low, high = log_t_interval(arr)
    if not math.isfinite(low):
        return Estimate(est, est, est, len(logs), tuple(math.exp(v) for v in logs))
    return Estimate(est, math.exp(low), math.exp(high), len(logs), tuple(math.exp(v) for v in logs))


def tpot_s(s: RequestSample) -> float | None:
    if s.latency_s is None or s.ttft_s is None or not s.completion_tokens:
        return None
    if s.completion_tokens < 2:
        return None
    return (s.latency_s - s.ttft_s) / (s.completion_tokens - 1)


def is_good(s: RequestSample, slo: Slo) -> bool:
    return meets_slo(
        s.ok,
        s.ttft_s * 1000.0 if s.ttft_s is not None else None,
        s.latency_s * 1000.0 if s.latency_s is not None else None,
        s.completion_tokens,
        slo,
    )


def meets_slo(
    ok: bool, ttft_ms: float | None, latency_ms: float | None, tokens: int | None, slo: Slo
) -> bool:
    """A good request: it succeeded and meets every configured level (its TPOT, (latency -
    TTFT) / (tokens - 1), stands for its mean inter-token latency). One rule for the bench's
    goodput and the nightly's good-fraction series, on stored rows as on live samples."""
    if not ok or latency_ms is None:
        return False
    if slo.ttft_ms and (ttft_ms is None or ttft_ms > slo.ttft_ms):
        return False
    tpot = None
    if ttft_ms is not None and tokens is not None and tokens >= 2:
        tpot = (latency_ms - ttft_ms) / (tokens - 1)
    if slo.itl_ms and tpot is not None and tpot > slo.itl_ms:
        return False
    return not (slo.e2e_ms and latency_ms > slo.e2e_ms)


def slo_json(slo: Slo) -> dict[str, float | None]:
    return {"ttft_ms": slo.ttft_ms, "itl_ms": slo.itl_ms, "e2e_ms": slo.e2e_ms}


def slo_of(data: Any) -> Slo | None:
    """The SLO a campaign row recorded (`slo_json`); None for a campaign from before."""
    if not isinstance(data, dict):
        return None
    return Slo(data.get("ttft_ms"), data.get("itl_ms"), data.get("e2e_ms"))


def active_seconds(samples: Sequence[RequestSample]) -> float:
    """The time the arm had requests in the round: open loop from the first arrival to the
    last answer; closed loop the union of its requests' intervals (the arms alternate)."""
    spans = []
    for s in samples:
        if s.latency_s is None:
            continue
        arrival = s.started_at - timedelta(seconds=s.queue_s or 0.0)
        spans.append((arrival, arrival + timedelta(seconds=s.latency_s)))
    if not spans:
        return 0.0
    spans.sort()
    if any(s.queue_s is not None for s in samples):
        return (max(e for _, e in spans) - spans[0][0]).total_seconds()
    total = 0.0
    start, end = spans[0]
    for a, b in spans[1:]:
        if a > end:
            total += (end - start).total_seconds()
            start, end = a, b
        else:
            end = max(end, b)
    return total + (end - start).total_seconds()


_VALUES: dict[str, Callable[[RequestSample], list[float]]] = {
    "ttft_ms": lambda s: [s.ttft_s * 1000.0] if s.ttft_s is not None else [],
    "itl_ms": lambda s: [g * 1000.0 for g in s.itl_s or ()],
    "tpot_ms": lambda s: [t * 1000.0] if (t := tpot_s(s)) is not None else [],
    "e2e_ms": lambda s: [s.latency_s * 1000.0] if s.latency_s is not None else [],
}


def arm_latency(
    arm: str, load: str, runs: Sequence[RunResult], slo: Slo, *, trim_fraction: float = 0.0
) -> LatencyStats:
    """One arm's measured runs (one per round) at one load level. An open loop's figures
    leave out `trim_fraction` of each round's arrivals at each end (ramp-up and drain); its
    saturation is read from every arrival."""
    measured = [r for r in runs if r.arm == arm and r.purpose == RunPurpose.MEASURED]
    full: dict[int, list[RequestSample]] = defaultdict(list)
    for run in measured:
        full[run.round].extend(run.samples)
    open_loop = any(s.queue_s is not None for r in full.values() for s in r)
    fraction = trim_fraction if open_loop else 0.0
    by_round = {rnd: trim(samples, fraction) for rnd, samples in sorted(full.items())}
    rounds_ok = [[s for s in samples if s.ok] for samples in by_round.values()]
    quantiles: dict[str, dict[str, Estimate]] = {}
    for metric in METRICS:
        quantiles[metric] = _quantiles(
            [[v for s in ok for v in _VALUES[metric](s)] for ok in rounds_ok]
        )
    chunk_itl = _quantiles([[g * 1000.0 for s in ok for g in chunk_gaps(s)] for ok in rounds_ok])
    per = _per_round(by_round, slo)
    all_samples = [s for samples in by_round.values() for s in samples]
    good = sum(is_good(s, slo) for s in all_samples)

    def est(key: str) -> Estimate | None:
        return mean_interval(list(per[key].values())) if per[key] else None

    return LatencyStats(
        arm=arm,
        load=load,
        requests=len(all_samples),
        errors=sum(not s.ok for s in all_samples),
        expired=sum(s.expired for s in all_samples),
        rounds=len(by_round),
        quantiles=quantiles,
        goodput_rps=est("goodput"),
        output_tps=est("output_tps"),
        good_fraction=good / len(all_samples) if all_samples else None,
        slo=slo.label,
        goodput_by_round=per["goodput"],
        output_tps_by_round=per["output_tps"],
        by_round={k: v for k, v in per.items() if k not in ("goodput", "output_tps")},
        attainment=est("attainment"),
        acceptance=est("acceptance"),
        tokens_per_step=est("tokens_per_step"),
        tokens_per_chunk=est("tokens_per_chunk"),
        chunk_itl=chunk_itl,
        saturation=saturation(list(full.values())) if open_loop else None,
        trimmed=fraction,
    )


def _quantiles(rounds: Sequence[Sequence[float]]) -> dict[str, Estimate]:
    found = {f"p{round(q * 100)}": quantile_over_rounds(rounds, q) for q in QUANTILES}
    return {k: v for k, v in found.items() if v is not None}


def _per_round(
    by_round: Mapping[int, Sequence[RequestSample]], slo: Slo
) -> dict[str, dict[int, float]]:
    """Each round's figures, keyed by round so two arms pair by it."""
    out: dict[str, dict[int, float]] = {
        k: {}
        for k in (
            "goodput",
            "output_tps",
            "attainment",
            "ttft_p90",
            "e2e_p90",
            "acceptance",
            "tokens_per_step",
            "tokens_per_chunk",
            "requests",
        )
    }
    for rnd, samples in by_round.items():
        seconds = active_seconds(samples)
        n_good = sum(is_good(s, slo) for s in samples)
        if samples:
            out["attainment"][rnd] = n_good / len(samples)
            out["requests"][rnd] = float(len(samples))
        if seconds > 0:
            out["goodput"][rnd] = n_good / seconds
            out["output_tps"][rnd] = (
                sum(s.completion_tokens or 0 for s in samples if s.ok) / seconds
            )
        for key, metric in (("ttft_p90", "ttft_ms"), ("e2e_p90", "e2e_ms")):
            values = [v for s in samples if s.ok for v in _VALUES[metric](s)]
            if values:
                out[key][rnd] = float(np.quantile(values, 0.9, method="median_unbiased"))
        if (acc := acceptance(samples)) is not None:
            out["acceptance"][rnd], out["tokens_per_step"][rnd] = acc
        if (chunk := tokens_per_chunk(samples)) is not None:
            out["tokens_per_chunk"][rnd] = chunk
    return out


def latency_table(
    runs: Sequence[RunResult],
    arms: Sequence[str],
    load: str,
    slo: Slo,
    *,
    trim_fraction: float = 0.0,
) -> tuple[LatencyStats, ...]:
    return tuple(arm_latency(arm, load, runs, slo, trim_fraction=trim_fraction) for arm in arms)


def result_latency(result: BenchResult) -> tuple[LatencyStats, ...]:
    found = result.extras.get(LATENCY_KEY)
    return tuple(found) if isinstance(found, tuple) else ()


def slo_from(ttft_ms: float, itl_ms: float, e2e_ms: float) -> Slo:
    """The config's levels (0: not judged)."""
    return Slo(ttft_ms or None, itl_ms or None, e2e_ms or None)


def load_label(concurrency: int, arrival: Any | None) -> str:
    """'c4' for a closed loop at 4 in flight; the arrival spec's label for an open loop."""
    return str(arrival.label) if arrival is not None else f"c{concurrency}"
