"""Turn the runs of a paired benchmark into a `BenchResult`. Pure: no I/O.

The inputs are the measured runs (warm-ups are dropped here, never averaged in), the arms'
metadata and the method; the output is everything the console table, the JSON output, the
report and the store need. `analyze` reads as steps: split the runs by purpose, analyse each
arm (throughput, identity verdicts, bound, findings), then the baseline's own control. The
steps that are more than arithmetic live beside it: `bench_identity` (verdicts),
`bench_bound` (the speed-up bound), `bench_findings` (guards); the result types live in
`bench_types` and are re-exported here.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, cast

from watchkeeper.analysis.bench_bound import arm_bound
from watchkeeper.analysis.bench_findings import (
    baseline_findings,
    candidate_guards,
    correctness_finding,
)
from watchkeeper.analysis.bench_identity import (
    ArmVerdicts,
    control_records,
    drift,
    judge_probes,
)
from watchkeeper.analysis.bench_types import (
    ALL,
    CONTROL_ARM,
    REWARM_TOKENS,
    ArmSpec,
    ArmStats,
    BenchExtras,
    BenchMethod,
    BenchResult,
    CategoryStats,
    IdentityRecord,
)
from watchkeeper.analysis.gpu_cost import ArmGpuCost, arm_cost
from watchkeeper.analysis.stats import Pair, median, paired_speedup, quantile_ms
from watchkeeper.analysis.tails import LatencyPair, latency_losses
from watchkeeper.checks.guards import GuardFinding
from watchkeeper.checks.identity import IdentityResult, Verdict
from watchkeeper.host.info import HostInfo
from watchkeeper.load.records import RequestSample, RunPurpose, RunResult
from watchkeeper.server.counters import EMPTY, SpecCounters
from watchkeeper.server.endpoints import spec_counters

__all__ = [
    "ALL",
    "CONTROL_ARM",
    "REWARM_TOKENS",
    "ArmSpec",
    "ArmStats",
    "BenchMethod",
    "BenchResult",
    "CategoryStats",
    "IdentityRecord",
    "analyze",
    "throughput_pairs",
]


def _index(runs: Sequence[RunResult]) -> dict[str, dict[int, dict[str, RequestSample]]]:
    """arm -> round -> task_id -> sample."""
    out: dict[str, dict[int, dict[str, RequestSample]]] = defaultdict(dict)
    for run in runs:
        out[run.arm][run.round] = {s.task_id: s for s in run.samples}
    return out


def _clean_pairs(
    runs: Sequence[RunResult],
    baseline: str,
    candidate: str,
    value: Callable[[RequestSample], float | None],
) -> dict[str, list[tuple[str, int, float, float]]]:
    """(task, round, baseline's value, candidate's value) per category and under ALL: the same
    task in the same measured round, both requests clean and both with a value. Warm-up rounds,
    rewarms and identity probes never pair: only runs whose purpose is MEASURED do."""
    index = _index([r for r in runs if r.purpose == RunPurpose.MEASURED])
    base_rounds = index.get(baseline, {})
    pairs: dict[str, list[tuple[str, int, float, float]]] = defaultdict(list)
    for rnd, cand in sorted(index.get(candidate, {}).items()):
        base = base_rounds.get(rnd, {})
        for task_id, c in cand.items():
            b = base.get(task_id)
            if b is None or not b.ok or not c.ok:
                continue
            bv, cv = value(b), value(c)
            if bv and cv:
                pairs[c.category].append((task_id, rnd, bv, cv))
                pairs[ALL].append((task_id, rnd, bv, cv))
    return pairs


def throughput_pairs(
    runs: Sequence[RunResult], baseline: str, candidate: str
) -> dict[str, list[Pair]]:
    """Decode-speed pairs of `candidate` against `baseline`, per category and under ALL."""
    found = _clean_pairs(runs, baseline, candidate, lambda s: s.decode_tps_server)
    return {k: [Pair(*p) for p in v] for k, v in found.items()}


def latency_pairs(
    runs: Sequence[RunResult], baseline: str, candidate: str
) -> dict[str, list[LatencyPair]]:
    """Request-latency pairs, as `throughput_pairs` pairs speeds: what a stall shows in."""
    found = _clean_pairs(runs, baseline, candidate, lambda s: s.latency_s)
    return {k: [LatencyPair(*p) for p in v] for k, v in found.items()}


def _category_stats(
    arm: str,
    category: str,
    samples: list[RequestSample],
    pairs: list[Pair] | None,
    verdicts: Counter[str] | None,
    method: BenchMethod,
    latencies: list[LatencyPair] | None = None,
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
        latency_losses=latency_losses(latencies or []),
    )


def _counter_delta(runs: Sequence[RunResult]) -> SpecCounters | None:
    """The speculative counters' movement summed over the runs that report them; None when
    none does (no draft, or /metrics off)."""
    deltas = [
        after.since(spec_counters(r.metrics_before))
        for r in runs
        if (after := spec_counters(r.metrics_after)) is not None
    ]
    return sum(deltas, EMPTY) if deltas else None


@dataclass(frozen=True, slots=True)
class _Inputs:
    """What every per-arm step reads: the runs split by purpose and the settings."""

    runs: Sequence[RunResult]
    measured: list[RunResult]
    """Measured rounds only (no warm-up, rewarm or probe)."""
    index: dict[str, dict[int, dict[str, RequestSample]]]
    """arm -> round -> task_id -> sample, probes left out."""
    probes: dict[str, dict[str, RequestSample]]
    """arm -> task_id -> its identity probe."""
    baseline: str
    rounds: list[int]
    method: BenchMethod
    overrides: Mapping[tuple[str, str], IdentityResult]
    replayed: bool
    confounded: frozenset[str]
    degenerate_threshold: float
    length_tolerance: float

    @property
    def base_rounds(self) -> dict[int, dict[str, RequestSample]]:
        return self.index.get(self.baseline, {})


@dataclass(frozen=True, slots=True)
class _ArmAnalysis:
    stats: ArmStats
    categories: list[CategoryStats]
    identity: list[IdentityRecord] = field(default_factory=list)
    findings: list[GuardFinding] = field(default_factory=list)
    compared: dict[str, int] | None = None


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
    identity_extras: Mapping[str, Any] | None = None,
) -> BenchResult:
    """`identity_overrides` maps (arm, task_id) to the verdict `classify_divergence` gave
    with the baseline server's replay and the measured `noise_floor` (`GapFloor.to_json()`);
    they are computed by the caller (I/O) and replace `compare_samples`' verdict for that probe.
    Only `mismatch` becomes a correctness finding, and not for an arm `identity_extras`
    (`IdentityVerdicts.extras()`: modes, token scores, power) marks `confounded` (its settings
    differ from the baseline's and no twin judged it)."""
    baseline = next(a for a in arms if a.role == "baseline")
    inputs = _split_runs(
        runs,
        baseline.name,
        method,
        identity_overrides or {},
        replayed=noise_floor is not None,
        confounded=_confounded(identity_extras),
        degenerate_threshold=degenerate_threshold,
        length_tolerance=length_tolerance,
    )
    per_arm = [_analyze_arm(arm, inputs) for arm in arms]
    identity = [r for a in per_arm for r in a.identity]
    findings = [f for a in per_arm for f in a.findings]
    base_samples = [s for r in inputs.measured if r.arm == baseline.name for s in r.samples]
    findings += baseline_findings(
        baseline.name, base_samples, degenerate_threshold=degenerate_threshold
    )
    control = _control(inputs, identity)
    return BenchResult(
        campaign_id=campaign_id,
        kind=kind,
        host=host,
        build_version=build_version,
        build_variant=build_variant,
        started_at=started_at,
        finished_at=finished_at,
        arms=tuple(arms),
        arm_stats=tuple(a.stats for a in per_arm),
        categories=tuple(c for a in per_arm for c in a.categories),
        control=control,
        identity=tuple(identity),
        findings=tuple(findings),
        method=method,
        extras={
            "noise_floor": dict(noise_floor) if noise_floor is not None else None,
            "compare_samples_verdicts": {
                a.stats.arm: a.compared for a in per_arm if a.compared is not None
            },
            **cast(BenchExtras, identity_extras or {}),
        },
    )


def _split_runs(
    runs: Sequence[RunResult],
    baseline: str,
    method: BenchMethod,
    overrides: Mapping[tuple[str, str], IdentityResult],
    *,
    replayed: bool,
    confounded: frozenset[str] = frozenset(),
    degenerate_threshold: float,
    length_tolerance: float,
) -> _Inputs:
    """Measured runs, every pass of the task set (warm-up or measured) by arm and round, and
    the identity probes by arm: by each run's purpose, never by its name."""
    measured = [r for r in runs if r.purpose == RunPurpose.MEASURED]
    probes = {
        r.arm: {s.task_id: s for s in r.samples} for r in runs if r.purpose == RunPurpose.IDENTITY
    }
    passes = (RunPurpose.MEASURED, RunPurpose.WARMUP)
    return _Inputs(
        runs=runs,
        measured=measured,
        index=_index([r for r in runs if r.purpose in passes]),
        probes=probes,
        baseline=baseline,
        rounds=sorted({r.round for r in measured}),
        method=method,
        overrides=overrides,
        replayed=replayed,
        confounded=confounded,
        degenerate_threshold=degenerate_threshold,
        length_tolerance=length_tolerance,
    )


def _analyze_arm(arm: ArmSpec, inputs: _Inputs) -> _ArmAnalysis:
    """One arm: throughput per category and overall (paired against the baseline for a
    candidate), identity verdicts or drift, the speed-up bound, and its findings."""
    method = inputs.method
    arm_runs = [r for r in inputs.measured if r.arm == arm.name]
    samples = [s for r in arm_runs for s in r.samples]
    by_cat: dict[str, list[RequestSample]] = defaultdict(list)
    for s in samples:
        by_cat[s.category].append(s)
    candidate = arm.role != "baseline"
    judged_spec = candidate and arm.speculative
    pairs = throughput_pairs(inputs.runs, inputs.baseline, arm.name) if candidate else {}
    lat_pairs = latency_pairs(inputs.runs, inputs.baseline, arm.name) if candidate else {}
    judged = ArmVerdicts()
    if candidate:
        judged = judge_probes(
            arm,
            inputs.probes.get(arm.name, {}),
            inputs.probes.get(inputs.baseline, {}),
            inputs.overrides,
            probe_round=method.rounds + 1,
            near_tie_threshold=method.near_tie_threshold,
        )
    verdicts = judged.counts if judged_spec else {}

    def stats(category: str, of: list[RequestSample]) -> CategoryStats:
        paired = pairs.get(category, []) if candidate else None
        return _category_stats(
            arm.name,
            category,
            of,
            paired,
            verdicts.get(category),
            method,
            lat_pairs.get(category) if candidate else None,
        )

    categories = [stats(category, by_cat[category]) for category in sorted(by_cat)]
    overall = stats(ALL, samples)
    counters = _counter_delta(arm_runs)
    drafted_metric = counters.drafted if counters else None
    drafts = counters.drafts if counters else None
    accepted_metric = counters.accepted if counters else None
    mean_len = drafted_metric / drafts if drafted_metric and drafts else None
    mean_acc = accepted_metric / drafts if accepted_metric is not None and drafts else None
    bound = arm_bound(
        arm,
        overall.acceptance_rate,
        overall.speedup,
        samples,
        mean_len=mean_len,
        mean_acc=mean_acc,
        drafts=drafts,
    )
    peaks = [r.peak_rss_bytes for r in arm_runs if r.peak_rss_bytes]
    probes = inputs.probes.get(arm.name, {}).values()
    arm_stats = ArmStats(
        arm.name,
        overall,
        max(peaks) if peaks else None,
        mean_len,
        mean_acc,
        bound.bound,
        bound.efficiency,
        bound.length_source,
        drift(judged.records) if candidate and not arm.speculative else None,
        bound.note,
        median([s.decode_tps_server for s in probes if s.ok]),
        gpu=_gpu_cost(inputs, arm_runs, candidate),
    )
    if not judged_spec:
        return _ArmAnalysis(arm_stats, categories)
    findings = _spec_findings(arm, inputs, arm_runs, samples, by_cat, drafted_metric, judged)
    return _ArmAnalysis(arm_stats, categories, judged.records, findings, judged.compared)


def _spec_findings(
    arm: ArmSpec,
    inputs: _Inputs,
    arm_runs: list[RunResult],
    samples: list[RequestSample],
    by_cat: Mapping[str, list[RequestSample]],
    drafted_metric: float | None,
    judged: ArmVerdicts,
) -> list[GuardFinding]:
    """A speculative candidate's findings: the guards, and a correctness finding from its
    mismatches unless it is `confounded` (no reference with its settings judged it)."""
    findings = candidate_guards(
        arm,
        arm_runs,
        samples,
        by_cat,
        inputs.base_rounds,
        inputs.rounds,
        drafted_metric,
        inputs.degenerate_threshold,
        inputs.length_tolerance,
    )
    mismatches = judged.counts.get(ALL, Counter())[Verdict.MISMATCH]
    wrong = correctness_finding(arm, mismatches, judged.records, replayed=inputs.replayed)
    if wrong is not None and arm.name not in inputs.confounded:
        findings.append(wrong)
    return findings


def _gpu_cost(inputs: _Inputs, arm_runs: list[RunResult], candidate: bool) -> ArmGpuCost | None:
    base = [(r.round, r.gpu) for r in inputs.measured if r.arm == inputs.baseline]
    method = inputs.method
    return arm_cost(
        [(r.round, r.gpu) for r in arm_runs],
        base if candidate else None,
        resamples=method.resamples,
        confidence=method.confidence,
        seed=method.seed,
        threshold=method.threshold,
    )


def _confounded(extras: Mapping[str, Any] | None) -> frozenset[str]:
    """Arms whose divergences are labelled as their settings' (no twin judged them)."""
    modes = (extras or {}).get("identity_modes") or {}
    return frozenset(
        arm for arm, m in modes.items() if isinstance(m, Mapping) and m.get("confounded")
    )


def _control(inputs: _Inputs, identity: list[IdentityRecord]) -> CategoryStats | None:
    """Baseline against its own previous pass (same server, same concurrency); its records
    are appended to `identity`."""
    records, verdicts, samples = control_records(
        inputs.base_rounds, inputs.rounds, inputs.method.near_tie_threshold
    )
    identity.extend(records)
    if not verdicts:
        return None
    return _category_stats(CONTROL_ARM, ALL, samples, None, verdicts, inputs.method)
