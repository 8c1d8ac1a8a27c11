"""The soak as its judges read it back: plain dataclasses of the stored blocks, requests,
resource samples and incidents.

`store/soak_store.py` fills them from the database; the judges (`soak/verdicts.py`,
`soak/paired.py`) take them and never import the store, so they stay pure and testable without
SQL. They live in `soak/`, the stage whose records they are, like `soak/records.py` for the
writes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from watchkeeper.load.records import RunPurpose, TokenLogprob


@dataclass(frozen=True, slots=True)
class SoakSampleView:
    """One stored request, as the verdicts read it."""

    profile: str
    concurrency: int
    is_probe: bool
    task_id: str
    started_at: datetime
    latency_s: float | None
    completion_tokens: int | None
    decode_tps: float | None
    draft_n: int | None
    draft_n_accepted: int | None
    error: str | None
    output_text: str
    block: int = -1
    """The block (run round) the request belongs to: the soak's unit of replication."""
    finish_reason: str | None = None
    tokens: tuple[TokenLogprob, ...] | None = None
    """A probe's token ids and top-2 logprobs (soak/probes.py weighs a divergence by them);
    None for load requests, which never ask for logprobs."""


@dataclass(frozen=True, slots=True)
class ResourceView:
    taken_at: datetime
    profile: str | None
    rss_bytes: int | None
    server_pid: int | None
    counters: dict[str, float] = field(default_factory=dict)
    """The server's speculative counters at that moment, as scraped (labels folded into the
    key; `server/endpoints.py:spec_counters` reads them): cumulative per process, so a
    process's acceptance curve is the delta between its first and last sample."""
    host_other_cpu: float | None = None
    """The share of the host's cores used outside the soak's servers since the previous sample
    (`soak/hostcpu.py`): what may explain a block that fell off (soak/dips.py). None for
    samples stored before it was recorded."""


@dataclass(frozen=True, slots=True)
class IncidentView:
    kind: str
    occurred_at: datetime
    profile: str | None
    detail: str
    evidence: dict[str, Any]


@dataclass(frozen=True, slots=True)
class BlockView:
    arm: str
    block: int
    """The block's index (stored in the run's `round` column)."""
    concurrency: int
    started_at: datetime
    finished_at: datetime | None
    status: str
    purpose: str = RunPurpose.MEASURED

    @property
    def is_probe(self) -> bool:
        return self.purpose == RunPurpose.PROBE


@dataclass(frozen=True, slots=True)
class SoakData:
    campaign_id: int
    params: dict[str, Any]
    status: str
    blocks: tuple[BlockView, ...]
    samples: tuple[SoakSampleView, ...]
    resources: tuple[ResourceView, ...]
    incidents: tuple[IncidentView, ...]
