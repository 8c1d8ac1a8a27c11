"""Turn the runs of a paired benchmark into a `BenchResult`. Pure: no I/O.

The inputs are the measured runs (warm-ups are dropped here, never averaged in), the arms'
metadata and the method; the output is everything the console table, the JSON output, the
report and the store need.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from watchkeeper.analysis.speculation import SpeedupBound, predicted_speedup
from watchkeeper.analysis.stats import DEFAULT_RESAMPLES, Pair, RatioCI, median, paired_speedup
from watchkeeper.checks import guards
from watchkeeper.checks.guards import GuardFinding
from watchkeeper.checks.identity import Verdict, compare_samples
from watchkeeper.hostinfo import HostInfo
from watchkeeper.records import RequestSample, RunResult
from watchkeeper.server.endpoints import SPEC_ACCEPTED_TOKENS, SPEC_DRAFT_TOKENS, SPEC_DRAFTS

ALL = "all"
CONTROL_ARM = "control"


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
    ci_method: str = "cluster bootstrap over tasks (percentile), geometric mean of paired ratios"
    order: str = "arms interleaved per round, order reversed on odd rounds (ABC, CBA, ...)"
    metric: str = "server-reported decode tok/s (timings.predicted_per_second)"


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
            pairs, resamples=method.resamples, confidence=method.confidence, seed=method.seed
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
) -> BenchResult:
    measured = [r for r in runs if not r.is_warmup]
    index = _index(runs)
    baseline = next(a for a in arms if a.role == "baseline")
    base_rounds = index.get(baseline.name, {})
    rounds = sorted({r.round for r in measured})
    identity: list[IdentityRecord] = []
    findings: list[GuardFinding] = []
    arm_stats: list[ArmStats] = []
    categories: list[CategoryStats] = []

    def pairs_and_verdicts(
        arm: str, rounds_of_arm: dict[int, dict[str, RequestSample]], against: int
    ) -> tuple[dict[str, list[Pair]], dict[str, Counter[str]]]:
        pairs: dict[str, list[Pair]] = defaultdict(list)
        verdicts: dict[str, Counter[str]] = defaultdict(Counter)
        for rnd in rounds:
            cand = rounds_of_arm.get(rnd, {})
            base = base_rounds.get(rnd - against, {})
            for task_id, c in cand.items():
                b = base.get(task_id)
                if b is None or not b.ok or not c.ok:
                    continue
                if b.decode_tps_server and c.decode_tps_server:
                    pair = Pair(task_id, rnd, b.decode_tps_server, c.decode_tps_server)
                    pairs[c.category].append(pair)
                    pairs[ALL].append(pair)
                result = compare_samples(b, c, near_tie_threshold=method.near_tie_threshold)
                verdicts[c.category][result.verdict] += 1
                verdicts[ALL][result.verdict] += 1
                identity.append(
                    IdentityRecord(
                        arm,
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
        return pairs, verdicts

    for arm in arms:
        arm_runs = [r for r in measured if r.arm == arm.name]
        samples = [s for r in arm_runs for s in r.samples]
        by_cat: dict[str, list[RequestSample]] = defaultdict(list)
        for s in samples:
            by_cat[s.category].append(s)
        if arm.role == "baseline":
            pairs: dict[str, list[Pair]] = {}
            verdicts: dict[str, Counter[str]] = {}
        else:
            pairs, verdicts = pairs_and_verdicts(arm.name, index.get(arm.name, {}), 0)
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
        if arm.role != "baseline" and overall.acceptance_rate is not None:
            length = mean_len or float(arm.draft_n_max or 1)
            length_source = "metrics" if mean_len else "n_max"
            if arm.cost_ratio is not None:
                bound = predicted_speedup(overall.acceptance_rate, length, arm.cost_ratio)
                if overall.speedup is not None and bound.predicted_speedup > 0:
                    efficiency = overall.speedup.estimate / bound.predicted_speedup
        peaks = [r.peak_rss_bytes for r in arm_runs if r.peak_rss_bytes]
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
            )
        )
        if arm.role != "baseline":
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
                        "temperature 0 beyond a near-tie",
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
