"""What a paired benchmark's analysis produces: arms, per-category and per-arm statistics,
identity records, the method and the whole `BenchResult`.

Plain frozen dataclasses with no logic beyond lookups, so every step of the analysis
(`analysis.benchmark`, `bench_identity`, `bench_bound`, `bench_findings`) and every reader
(report, console, store, tracker) can import them without importing the analysis itself.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any, TypedDict

from watchkeeper.analysis.gpu_cost import ArmGpuCost
from watchkeeper.analysis.speculation import SpeedupBound
from watchkeeper.analysis.stats import DEFAULT_RESAMPLES, DEFAULT_THRESHOLD, METHOD, RatioCI
from watchkeeper.analysis.tails import LatencyLosses
from watchkeeper.checks.guards import GuardFinding
from watchkeeper.host.info import HostInfo

ALL = "all"
CONTROL_ARM = "control"
REWARM_TOKENS = 16
"""A fresh process's first request pays its cold start (first touch of the weights,
buffers): one short request per arm, the first task cut to this many tokens, takes it."""


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
    external: dict[str, Any] | None = None
    """For an arm whose server watchkeeper did not start (a url profile): what the server
    said about itself (`server/external.py:ExternalIdentity`: url, build_info, model_path,
    n_ctx, total_slots, speculative, models); "unknown" where it did not say."""


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
    latency_losses: LatencyLosses | None = None
    """A candidate's paired requests lost big in latency, by arm (analysis.tails): stalls."""


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
    gpu: ArmGpuCost | None = None
    """VRAM, utilisation, power, J/token and the energy ratio (`analysis/gpu_cost.py`);
    None where NVML measured nothing (a CPU host): shown as n/a, never as 0."""


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
    renewed: tuple[str, ...] = ()
    """Arms given a fresh process before every round while the rest keep theirs (the sweep's
    ngram-mod and ngram-cache: their n-gram state outlives requests, so a process that has
    answered a task would draft it from memory the next round)."""
    sampling: str = "temperature 0 (greedy)"
    """The throughput requests' sampler (load/sampling.py `label`), arms' own overrides
    after it."""

    @property
    def processes(self) -> str:
        """How server processes relate to rounds: what the CI's replicates include."""
        if self.restart_every <= 0 and self.renewed:
            return (
                f"a fresh process every round for {', '.join(self.renewed)} (their n-gram "
                "state outlives requests); one process for the whole campaign for the others"
            )
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


class BenchExtras(TypedDict, total=False):
    """What a bench keeps beside its figures (`BenchResult.extras`, the JSON's `extras`), by
    key: each key's writer and type named once, so a reader's key is checked (a typo, or a key
    no writer sets, is a mypy error). The values are the writers' JSON."""

    noise_floor: dict[str, Any] | None
    """The baseline's A/A identity floor (analysis/benchmark.py)."""
    compare_samples_verdicts: dict[str, Any]
    identity_modes: dict[str, dict[str, Any]]
    """Which mode judged each arm's identical output, and why (checks/classify.py)."""
    token_scores: dict[str, dict[str, Any]]
    identity_power: dict[str, Any]
    """The identity check's positive controls."""
    identity_references: dict[str, dict[str, Any]]
    identity_served: dict[str, Any]
    """Each arm probed as served (campaign/bench.py)."""
    offload: dict[str, dict[str, str]]
    """Each arm's GPU offload as seen (server/serverset.py)."""
    time_split: dict[str, Any]
    tps_samples: dict[str, Any]
    distribution: list[dict[str, Any]]
    """The distribution check per arm (campaign/distribution.py)."""
    latency: tuple[Any, ...]
    """The latency table at the bench's load: analysis/latency.py's `LatencyStats` per arm
    (values, not JSON: `to_json` writes them; campaign/load_shape.py)."""
    request_acceptance: dict[str, dict[str, dict[str, Any]]]
    acceptance_curves: list[dict[str, Any]]
    greedy_echo: list[dict[str, Any]]
    sizing: str
    """What review-pr sized down, in words."""
    fit_at_context: list[dict[str, Any]]


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
    extras: BenchExtras = field(default_factory=BenchExtras)

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
