"""Plain dataclasses that stages hand to each other.

The load stage produces them, the store persists them, checks and analysis read them. None of
them knows about HTTP responses or ORM rows, so every stage can be tested with values built
by hand.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any


class RunPurpose(StrEnum):
    """Why a run was made: only `MEASURED` runs enter a throughput figure.

    Stored in its own column beside the arm's plain name, so a reader selects runs by what
    they are for instead of parsing the arm name (which once carried `#identity`, `#rewarm`
    and `:probe` suffixes)."""

    MEASURED = "measured"
    WARMUP = "warmup"
    """Warm-up rounds before the measured ones (and calibration passes, never stored)."""
    REWARM = "rewarm"
    """The short request each fresh process gets after a restart, paying its cold start."""
    IDENTITY = "identity"
    """The bench's identity probe pass: temperature 0 with top-k logprobs."""
    PROBE = "probe"
    """The soak's periodic temperature-0 probe requests."""


@dataclass(frozen=True, slots=True)
class Alternative:
    token_id: int | None
    text: str
    logprob: float


@dataclass(frozen=True, slots=True)
class TokenLogprob:
    """One generated token with the server's top alternatives (sorted, best first)."""

    token_id: int | None
    text: str
    logprob: float
    top: tuple[Alternative, ...] = ()

    def to_json(self) -> list[Any]:
        return [
            self.token_id,
            self.text,
            self.logprob,
            [[a.token_id, a.text, a.logprob] for a in self.top],
        ]

    @staticmethod
    def from_json(raw: list[Any]) -> TokenLogprob:
        top = tuple(
            Alternative(int(a[0]) if a[0] is not None else None, a[1], a[2]) for a in raw[3]
        )
        return TokenLogprob(raw[0], raw[1], raw[2], top)


@dataclass(frozen=True, slots=True)
class Task:
    """One chat request of a task set."""

    id: str
    category: str
    messages: tuple[dict[str, Any], ...]
    max_tokens: int
    tools: tuple[dict[str, Any], ...] | None = None


@dataclass(frozen=True, slots=True)
class RequestSample:
    """Everything measured about one request; `error` is set instead of raising."""

    task_id: str
    category: str
    seq: int
    started_at: datetime
    ttft_s: float | None = None
    latency_s: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    prompt_ms: float | None = None
    predicted_ms: float | None = None
    decode_tps_server: float | None = None
    decode_tps_client: float | None = None
    draft_n: int | None = None
    draft_n_accepted: int | None = None
    finish_reason: str | None = None
    output_text: str = ""
    tokens: tuple[TokenLogprob, ...] | None = None
    http_status: int | None = None
    error: str | None = None
    queue_s: float | None = None
    """Open-loop only: seconds between the request's scheduled arrival and its send (a full
    client-side cap); `ttft_s` and `latency_s` then count from the arrival and include it."""
    itl_s: tuple[float, ...] | None = None
    """Seconds between consecutive streamed pieces (inter-token latencies); not stored
    per request, summarised per run (analysis/latency.py)."""
    expired: bool = False
    """Given up unsent: it waited past the queueing deadline (`error` says how long)."""

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True, slots=True)
class RunGpuCost:
    """One run (arm x round) on the GPU (`analysis/gpu_cost.run_cost`); absent without NVML."""

    peak_vram_bytes: int | None
    steady_vram_bytes: int | None
    """Median of the tree's VRAM over the run's readings: what the arm holds while it works."""
    utilization_percent: float | None
    """Mean device utilisation over the readings inside the arm's requests."""
    power_watts: float | None
    """Mean power over the arm's requests (energy / their total duration)."""
    energy_joules: float | None
    tokens: int
    joules_per_token_by_task: dict[str, float]

    @property
    def joules_per_token(self) -> float | None:
        if self.energy_joules is None or self.tokens <= 0:
            return None
        return self.energy_joules / self.tokens

    def to_json(self) -> dict[str, Any]:
        return {
            "peak_vram_bytes": self.peak_vram_bytes,
            "steady_vram_bytes": self.steady_vram_bytes,
            "utilization_percent": self.utilization_percent,
            "power_watts": self.power_watts,
            "energy_joules": self.energy_joules,
            "tokens": self.tokens,
            "joules_per_token": self.joules_per_token,
        }


@dataclass(frozen=True, slots=True)
class RunResult:
    """One pass of a task set through one server configuration."""

    arm: str
    profile_name: str
    round: int
    is_warmup: bool
    concurrency: int
    started_at: datetime
    finished_at: datetime
    samples: tuple[RequestSample, ...]
    server_argv: tuple[str, ...]
    peak_rss_bytes: int | None = None
    metrics_before: dict[str, float] = field(default_factory=dict)
    metrics_after: dict[str, float] = field(default_factory=dict)
    error: str | None = None
    purpose: RunPurpose | None = None
    """None: taken from `is_warmup` (WARMUP or MEASURED)."""
    gpu: RunGpuCost | None = None
    """The run's GPU cost where NVML measured it (`analysis/gpu_cost.py`), else None."""

    def __post_init__(self) -> None:
        if self.purpose is None:
            purpose = RunPurpose.WARMUP if self.is_warmup else RunPurpose.MEASURED
            object.__setattr__(self, "purpose", purpose)
