"""Turn the runs of a paired benchmark into a `BenchResult`. Pure: no I/O.

The inputs are the measured runs (warm-ups are dropped here, never averaged in), the arms'
metadata and the method; the output is everything the console table, the JSON output, the
report and the store need.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from watchkeeper.analysis.speculation import SpeedupBound, judge_efficiency, measured_bound
from watchkeeper.analysis.stats import (
    DEFAULT_RESAMPLES,
    DEFAULT_THRESHOLD,
    METHOD,
    Pair,
    RatioCI,
    median,
    paired_speedup,
    quantile_ms,
)
from watchkeeper.checks import guards
from watchkeeper.checks.guards import GuardFinding
from watchkeeper.checks.identity import IdentityResult, Verdict, compare_samples
from watchkeeper.host.info import HostInfo
from watchkeeper.load.records import RequestSample, RunResult
from watchkeeper.server.endpoints import SPEC_ACCEPTED_TOKENS, SPEC_DRAFT_TOKENS, SPEC_DRAFTS

ALL = "all"
CONTROL_ARM = "control"
IDENTITY_SUFFIX = "#identity"
REWARM_TOKENS = 16
"""A fresh process's first request pays its cold start (first touch of the weights,
buffers): one short request per arm, the first task cut to this many tokens, takes it."""
"""Arm-name suffix of the identity probe runs: temperature 0 with top-k logprobs, one pass per
arm after the measured rounds, stored as warm-ups so no throughput figure ever reads them."""


@dataclass(frozen=True, slots=True)
class ArmSpec:
    name: str
    role: str
    """'baseline' or 'candidate'."""
    spec_type: str | None
    draft_n_max: int | None
    model: str
    model_sha256: str
    draft_model: str | None
    draft_sha256: str | None
    argv: tuple[str, ...]
    cost_ratio: float | None = None
    """Cost of one draft step in target steps (measured; 0 for n-gram drafting)."""
    cost_note: str = ""
    verify_tokens: int | None = None
    """Batch size (n+1) at which the verification cost was measured on the baseline server."""
    verify_cost: float | None = None
    """Evaluating `verify_tokens` tokens in one target batch, in target decode steps."""
    verify_note: str = ""
    speculative: bool = True
    """Configures speculation. Identity is a claim about speculation: only such arms are
    judged against the baseline; other arms (an A/A twin, another thread count) report output
    drift as information."""


@dataclass(frozen=True, slots=True)
class CategoryStats:
    arm: str
    category: str
    requests: int
    errors: int
    median_tps: float | None
    median_ttft_ms: float | None
    median_completion_tokens: float | None
    speedup: RatioCI | None
    acceptance_rate: float | None
    drafted: int
    accepted: int
    identical_rate: float | None
    verdicts: dict[str, int]
    no_speed: int = 0
    """Requests that succeeded without a decode speed: like errors, they never pair."""
    latency_ms_p95: float | None = None
    latency_ms_p99: float | None = None
    """Tail of the arm's request latencies: where a build that stalls shows first."""


@dataclass(frozen=True, slots=True)
class ArmStats:
    arm: str
    overall: CategoryStats
    peak_rss_bytes: int | None
    mean_draft_length: float | None
    mean_accepted_per_draft: float | None
    bound: SpeedupBound | None
    efficiency: float | None
    draft_length_source: str = "metrics"
    """'metrics' (drafted / drafts from /metrics) or 'n_max' (no counters: an upper bound)."""
    output_drift: dict[str, Any] | None = None
    """For a candidate that does not speculate: how many probe outputs differ from the
    baseline's and at what margins. Information about a config change, never a finding."""
    bound_note: str | None = None
    """Set where the measured speed-up's CI lies above the bound (`efficiency` is then None):
    which input of the bound looks wrong."""
    probe_median_tps: float | None = None
    """Median decode tok/s of the arm's identity probe pass (top-k logprobs). Read by no
    throughput figure; shown beside the clean median so a reader sees what the probes cost."""


@dataclass(frozen=True, slots=True)
class IdentityRecord:
    arm: str
    task_id: str
    category: str
    round: int
    verdict: str
    first_divergence: int | None
    margin: float | None
    baseline_excerpt: str
    candidate_excerpt: str
    basis: str = "tokens"
    """'tokens', 'baseline tokens' (candidate had text only) or 'text' (index is a character)."""
    replay: dict[str, Any] | None = None
    """Evidence behind a non-identical verdict: {target_token, candidate_token, baseline_token,
    margin, floor} from `classify_divergence` (target_token: what the baseline server picks
    after the shared prefix fed as one batched prompt; None where nothing was replayed, with a
    `note` saying why)."""
    compared: str | None = None
    """`compare_samples`' own verdict (no replay, no floor) where the replay changed it."""


@dataclass(frozen=True, slots=True)
class BenchMethod:
    rounds: int
    warmup_rounds: int
    warmup_tasks: int
    concurrency: int
    tasks: int
    categories: tuple[str, ...]
    temperature: float
    seed: int
    near_tie_threshold: float
    resamples: int = DEFAULT_RESAMPLES
    confidence: float = 0.95
    threshold: float = DEFAULT_THRESHOLD
    ci_method: str = METHOD
    order: str = "arms back to back per task, order alternated per task and per round (AB, BA, ...)"
    restart_every: int = 0
    sampling: str = "temperature 0 (greedy)"
    """The throughput requests' sampler (load/sampling.py `label`), arms' own overrides
    after it."""

    @property
    def processes(self) -> str:
        """How server processes relate to rounds: what the CI's replicates include."""
        if self.restart_every <= 0:
            return "one process per arm for the whole campaign"
        every = "every round" if self.restart_every == 1 else f"every {self.restart_every} rounds"
        return (
            f"fresh processes for every arm before {every} (one {REWARM_TOKENS}-token warm-up "
            "request each, not measured), so the rounds carry the processes' own spread"
        )

    metric: str = "server-reported decode tok/s (timings.predicted_per_second)"
    throughput_requests: str = "measured rounds only: no logprobs, nothing beyond the workload"
    identity_requests: str = (
        "one probe pass per arm after the measured rounds (temperature 0, top-k logprobs); "
        "never part of tok/s, TTFT or speed-up"
    )


@dataclass(frozen=True, slots=True)
class BenchResult:
    campaign_id: int
    kind: str
    host: HostInfo
    build_version: str
    build_variant: str
    started_at: datetime
    finished_at: datetime
    arms: tuple[ArmSpec, ...]
    arm_stats: tuple[ArmStats, ...]
    categories: tuple[CategoryStats, ...]
    control: CategoryStats | None
    identity: tuple[IdentityRecord, ...]
    findings: tuple[GuardFinding, ...]
    method: BenchMethod
    report_path: str | None = None
    extras: dict[str, Any] = field(default_factory=dict)

    @property
    def baseline(self) -> ArmSpec:
        return next(a for a in self.arms if a.role == "baseline")

    def stats(self, arm: str, category: str = ALL) -> CategoryStats | None:
        if category == ALL:
            return next((s.overall for s in self.arm_stats if s.arm == arm), None)
        return next((c for c in self.categories if c.arm == arm and c.category == category), None)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["started_at"] = self.started_at.isoformat()
        data["finished_at"] = self.finished_at.isoformat()
        return data


def _index(runs: Sequence[RunResult]) -> dict[str, dict[int, dict[str, RequestSample]]]:
    """arm -> round -> task_id -> sample."""
    out: dict[str, dict[int, dict[str, RequestSample]]] = defaultdict(dict)
    for run in runs:
        out[run.arm][run.round] = {s.task_id: s for s in run.samples}
    return out


def throughput_pairs(
    runs: Sequence[RunResult], baseline: str, candidate: str
) -> dict[str, list[Pair]]:
    """Throughput pairs of `candidate` against `baseline`, per category and under ALL: the same
    task in the same measured round, both requests clean. Warm-up rounds and identity probes
    never pair (probes are separate arms)."""
    index = _index([r for r in runs if not r.is_warmup])
    base_rounds = index.get(baseline, {})
    pairs: dict[str, list[Pair]] = defaultdict(list)
    for rnd, cand in sorted(index.get(candidate, {}).items()):
        base = base_rounds.get(rnd, {})
        for task_id, c in cand.items():
            b = base.get(task_id)
            if b is None or not b.ok or not c.ok:
                continue
            if b.decode_tps_server and c.decode_tps_server:
                pair = Pair(task_id, rnd, b.decode_tps_server, c.decode_tps_server)
                pairs[c.category].append(pair)
                pairs[ALL].append(pair)
    return pairs


def _category_stats(
    arm: str,
    category: str,
    samples: list[RequestSample],
    pairs: list[Pair] | None,
    verdicts: Counter[str] | None,
    method: BenchMethod,
) -> CategoryStats:
    ok = [s for s in samples if s.ok]
    drafted = sum(s.draft_n or 0 for s in ok)
    accepted = sum(s.draft_n_accepted or 0 for s in ok)
    total_verdicts = sum(verdicts.values()) if verdicts else 0
    return CategoryStats(
        arm=arm,
        category=category,
        requests=len(samples),
        errors=len(samples) - len(ok),
        median_tps=median([s.decode_tps_server for s in ok]),
        median_ttft_ms=median([s.ttft_s * 1000 if s.ttft_s is not None else None for s in ok]),
        median_completion_tokens=median([s.completion_tokens for s in ok]),
        speedup=paired_speedup(
            pairs,
            resamples=method.resamples,
            confidence=method.confidence,
            seed=method.seed,
            threshold=method.threshold,
        )
        if pairs is not None
        else None,
        acceptance_rate=accepted / drafted if drafted else None,
        drafted=drafted,
        accepted=accepted,
        identical_rate=(verdicts[Verdict.IDENTICAL] / total_verdicts)
        if verdicts and total_verdicts
        else None,
        verdicts=dict(verdicts) if verdicts else {},
        no_speed=sum(1 for s in ok if not s.decode_tps_server),
        latency_ms_p95=quantile_ms([s.latency_s for s in ok], 0.95),
        latency_ms_p99=quantile_ms([s.latency_s for s in ok], 0.99),
    )


def _metric_delta(runs: Sequence[RunResult], name: str) -> float | None:
    deltas = [
        r.metrics_after[name] - r.metrics_before.get(name, 0.0)
        for r in runs
        if name in r.metrics_after
    ]
    return sum(deltas) if deltas else None


def analyze(
    *,
    campaign_id: int,
    kind: str,
    host: HostInfo,
    build_version: str,
    build_variant: str,
    started_at: datetime,
    finished_at: datetime,
    arms: Sequence[ArmSpec],
    runs: Sequence[RunResult],
    method: BenchMethod,
    degenerate_threshold: float,
    length_tolerance: float,
    identity_overrides: Mapping[tuple[str, str], IdentityResult] | None = None,
    noise_floor: Mapping[str, Any] | None = None,
) -> BenchResult:
    """`identity_overrides` maps (arm, task_id) to the verdict `classify_divergence` gave
    with the baseline server's replay and the measured `noise_floor` (`NoiseFloor.to_json()`);
    they are computed by the caller (I/O) and replace `compare_samples`' verdict for that probe.
    Only `mismatch` becomes a correctness finding."""
    overrides = identity_overrides or {}
    measured = [r for r in runs if not r.is_warmup]
    index = _index([r for r in runs if not r.arm.endswith(IDENTITY_SUFFIX)])
    probes = {
        r.arm.removesuffix(IDENTITY_SUFFIX): {s.task_id: s for s in r.samples}
        for r in runs
        if r.arm.endswith(IDENTITY_SUFFIX)
    }
    baseline = next(a for a in arms if a.role == "baseline")
    base_rounds = index.get(baseline.name, {})
    rounds = sorted({r.round for r in measured})
    identity: list[IdentityRecord] = []
    findings: list[GuardFinding] = []
    arm_stats: list[ArmStats] = []
    categories: list[CategoryStats] = []

    base_probes = probes.get(baseline.name, {})

    compared_counts: dict[str, dict[str, int]] = {}

    def judged(arm: ArmSpec) -> tuple[dict[str, Counter[str]], list[IdentityRecord]]:
        """Identity verdicts from the probe pass: the arm's probe against the baseline's."""
        verdicts: dict[str, Counter[str]] = defaultdict(Counter)
        records: list[IdentityRecord] = []
        before: Counter[str] = Counter()
        for task_id, c in probes.get(arm.name, {}).items():
            b = base_probes.get(task_id)
            if b is None or not b.ok or not c.ok:
                continue
            compared = compare_samples(b, c, near_tie_threshold=method.near_tie_threshold)
            before[str(compared.verdict)] += 1
            result = overrides.get((arm.name, task_id), compared)
            verdicts[c.category][result.verdict] += 1
            verdicts[ALL][result.verdict] += 1
            records.append(
                IdentityRecord(
                    arm.name,
                    task_id,
                    c.category,
                    method.rounds + 1,
                    str(result.verdict),
                    result.first_divergence,
                    result.margin,
                    result.baseline_excerpt,
                    result.candidate_excerpt,
                    result.basis,
                    result.replay,
                    str(compared.verdict) if compared.verdict != result.verdict else None,
                )
            )
        if arm.speculative:
            compared_counts[arm.name] = dict(before)
        return verdicts, records

    for arm in arms:
        arm_runs = [r for r in measured if r.arm == arm.name]
        samples = [s for r in arm_runs for s in r.samples]
        by_cat: dict[str, list[RequestSample]] = defaultdict(list)
        for s in samples:
            by_cat[s.category].append(s)
        pairs: dict[str, list[Pair]] = {}
        verdicts: dict[str, Counter[str]] = {}
        drift: dict[str, Any] | None = None
        if arm.role != "baseline":
            pairs = throughput_pairs(runs, baseline.name, arm.name)
            found, records = judged(arm)
            if arm.speculative:
                verdicts = found
                identity.extend(records)
            else:
                drift = _drift(records)
        for category in sorted(by_cat):
            categories.append(
                _category_stats(
                    arm.name,
                    category,
                    by_cat[category],
                    pairs.get(category, []) if arm.role != "baseline" else None,
                    verdicts.get(category),
                    method,
                )
            )
        overall = _category_stats(
            arm.name,
            ALL,
            samples,
            pairs.get(ALL, []) if arm.role != "baseline" else None,
            verdicts.get(ALL),
            method,
        )
        drafted_metric = _metric_delta(arm_runs, SPEC_DRAFT_TOKENS)
        drafts = _metric_delta(arm_runs, SPEC_DRAFTS)
        accepted_metric = _metric_delta(arm_runs, SPEC_ACCEPTED_TOKENS)
        mean_len = drafted_metric / drafts if drafted_metric and drafts else None
        mean_acc = accepted_metric / drafts if accepted_metric is not None and drafts else None
        bound = None
        efficiency = None
        length_source = "metrics"
        bound_note = None
        if arm.role != "baseline" and overall.acceptance_rate is not None:
            length = mean_len or float(arm.draft_n_max or 1)
            length_source = "metrics" if mean_len else "n_max"
            if arm.cost_ratio is not None:
                decoded = sum(max((x.completion_tokens or 0) - 1, 0) for x in samples if x.ok)
                bound = _bound(
                    arm,
                    overall.acceptance_rate,
                    length,
                    mean_len,
                    mean_acc,
                    decoded_tokens=float(decoded) if mean_len else None,
                    drafts=drafts if mean_len else None,
                )
                if overall.speedup is not None and bound.predicted_speedup > 0:
                    measured_verify = (
                        (arm.verify_tokens, arm.verify_cost)
                        if arm.verify_tokens is not None and arm.verify_cost is not None
                        else None
                    )
                    efficiency, bound_note = judge_efficiency(
                        bound,
                        overall.speedup.estimate,
                        overall.speedup.low,
                        measured_verify=measured_verify,
                    )
        peaks = [r.peak_rss_bytes for r in arm_runs if r.peak_rss_bytes]
        probe_tps = median([s.decode_tps_server for s in probes.get(arm.name, {}).values() if s.ok])
        arm_stats.append(
            ArmStats(
                arm.name,
                overall,
                max(peaks) if peaks else None,
                mean_len,
                mean_acc,
                bound,
                efficiency,
                length_source,
                drift,
                bound_note,
                probe_tps,
            )
        )
        if arm.role != "baseline" and arm.speculative:
            findings.extend(
                _guards(
                    arm,
                    arm_runs,
                    samples,
                    by_cat,
                    base_rounds,
                    rounds,
                    drafted_metric,
                    degenerate_threshold,
                    length_tolerance,
                )
            )
            mismatches = verdicts.get(ALL, Counter())[Verdict.MISMATCH]
            if mismatches:
                examples = [
                    i for i in identity if i.arm == arm.name and i.verdict == Verdict.MISMATCH
                ]
                findings.append(
                    GuardFinding(
                        kind="correctness",
                        profile=arm.name,
                        severity="high",
                        title=f"{arm.name}: {mismatches} output(s) differ from the baseline at "
                        "temperature 0 beyond a near-tie"
                        + (
                            " and the measured noise floor; batched replay does not pick them"
                            if noise_floor is not None
                            else ""
                        ),
                        evidence={
                            "mismatches": mismatches,
                            "examples": [asdict(e) for e in examples[:3]],
                        },
                    )
                )
    base_samples = [s for r in measured if r.arm == baseline.name for s in r.samples]
    findings.extend(
        f
        for f in (
            guards.degenerate_output(baseline.name, base_samples, threshold=degenerate_threshold),
        )
        if f
    )
    control = _control(baseline.name, base_rounds, rounds, method, identity)
    return BenchResult(
        campaign_id=campaign_id,
        kind=kind,
        host=host,
        build_version=build_version,
        build_variant=build_variant,
        started_at=started_at,
        finished_at=finished_at,
        arms=tuple(arms),
        arm_stats=tuple(arm_stats),
        categories=tuple(categories),
        control=control,
        identity=tuple(identity),
        findings=tuple(findings),
        method=method,
        extras={
            "noise_floor": dict(noise_floor) if noise_floor is not None else None,
            "compare_samples_verdicts": compared_counts,
        },
    )


def _bound(
    arm: ArmSpec,
    acceptance: float,
    length: float,
    mean_len: float | None,
    mean_acc: float | None,
    *,
    decoded_tokens: float | None = None,
    drafts: float | None = None,
) -> SpeedupBound:
    """The speed-up bound from the counters and the measured costs (`measured_bound`).

    Without /metrics counters the accepted length falls back to acceptance x n_max (an upper
    bound on accepted per draft) and the drafting to that many tokens (a lower bound on it)."""
    cost = arm.cost_ratio or 0.0
    sources = [f"draft cost {cost:.2f} steps per drafted token: {arm.cost_note or 'given'}"]
    if mean_acc is not None and mean_len:
        accepted, drafted = mean_acc, mean_len
        sources.append(
            f"accepted {mean_acc:.2f} and drafted {mean_len:.2f} per draft: /metrics counters"
        )
    else:
        accepted = drafted = acceptance * length
        sources.append(
            f"no /metrics counters: accepted per draft taken as acceptance x n_max "
            f"({acceptance:.1%} x {length:g}), drafted as the same (upper bound)"
        )
    if arm.verify_cost is not None:
        sources.append(
            f"verification: {arm.verify_cost:.2f} decode steps for a batch of "
            f"{arm.verify_tokens} tokens ({arm.verify_note or 'measured'}), chord to 1 step at 1"
        )
    return measured_bound(
        mean_accepted=accepted,
        draft_length=drafted,
        cost_ratio=cost,
        verify_tokens=arm.verify_tokens,
        verify_cost=arm.verify_cost,
        acceptance=acceptance,
        sources=tuple(sources),
        decoded_tokens=decoded_tokens,
        drafts=drafts,
    )


def _guards(
    arm: ArmSpec,
    arm_runs: list[RunResult],
    samples: list[RequestSample],
    by_cat: dict[str, list[RequestSample]],
    base_rounds: dict[int, dict[str, RequestSample]],
    rounds: list[int],
    drafted_metric: float | None,
    degenerate_threshold: float,
    length_tolerance: float,
) -> list[GuardFinding]:
    found: list[GuardFinding | None] = [
        guards.speculation_inactive(arm.name, samples, drafted_metric),
        guards.degenerate_output(arm.name, samples, threshold=degenerate_threshold),
    ]
    found.extend(
        guards.acceptance_cross_check(arm.name, list(r.samples), r.metrics_before, r.metrics_after)
        for r in arm_runs
    )
    base_by_cat: dict[str, list[RequestSample]] = defaultdict(list)
    for rnd in rounds:
        for s in base_rounds.get(rnd, {}).values():
            base_by_cat[s.category].append(s)
    for category, cand in sorted(by_cat.items()):
        found.append(
            guards.length_parity(
                arm.name, category, base_by_cat.get(category, []), cand, tolerance=length_tolerance
            )
        )
    unique: dict[tuple[str, str | None], GuardFinding] = {}
    for f in found:
        if f is not None:
            unique.setdefault((f.kind, f.category), f)
    return list(unique.values())


def _control(
    baseline: str,
    base_rounds: dict[int, dict[str, RequestSample]],
    rounds: list[int],
    method: BenchMethod,
    identity: list[IdentityRecord],
) -> CategoryStats | None:
    """Baseline against its own previous pass (same server, same concurrency)."""
    verdicts: Counter[str] = Counter()
    samples: list[RequestSample] = []
    for rnd in rounds:
        previous = base_rounds.get(rnd - 1, {})
        for task_id, c in base_rounds.get(rnd, {}).items():
            b = previous.get(task_id)
            if b is None or not b.ok or not c.ok:
                continue
            result = compare_samples(b, c, near_tie_threshold=method.near_tie_threshold)
            verdicts[result.verdict] += 1
            samples.append(c)
            identity.append(
                IdentityRecord(
                    CONTROL_ARM,
                    task_id,
                    c.category,
                    rnd,
                    str(result.verdict),
                    result.first_divergence,
                    result.margin,
                    result.baseline_excerpt,
                    result.candidate_excerpt,
                )
            )
    if not verdicts:
        return None
    return _category_stats(CONTROL_ARM, ALL, samples, None, verdicts, method)


def _drift(records: list[IdentityRecord]) -> dict[str, Any]:
    differ = [r for r in records if r.verdict != Verdict.IDENTICAL]
    margins = sorted(r.margin for r in differ if r.margin is not None)
    return {
        "tasks": len(records),
        "differ": len(differ),
        "margins": [round(m, 4) for m in margins],
        "note": "no speculation configured: output differences between two configurations "
        "(thread count, build, flags) are float rounding, reported as drift, not as a "
        "correctness finding",
    }
