"""Per-run summary figures: what `watchkeeper run` prints and stores on the campaign."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from watchkeeper.load.records import RequestSample


@dataclass(frozen=True, slots=True)
class RunSummary:
    requests: int
    errors: int
    median_decode_tps: float | None
    median_decode_tps_client: float | None
    median_ttft_ms: float | None
    completion_tokens: int
    draft_tokens: int
    accepted_tokens: int
    acceptance_rate: float | None
    """Pooled: accepted / drafted over all requests (None when nothing was drafted)."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _median(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def summarize(samples: Sequence[RequestSample]) -> RunSummary:
    ok = [s for s in samples if s.ok]
    drafted = sum(s.draft_n or 0 for s in ok)
    accepted = sum(s.draft_n_accepted or 0 for s in ok)
    ttft = _median([s.ttft_s * 1000 if s.ttft_s is not None else None for s in ok])
    return RunSummary(
        requests=len(samples),
        errors=len(samples) - len(ok),
        median_decode_tps=_median([s.decode_tps_server for s in ok]),
        median_decode_tps_client=_median([s.decode_tps_client for s in ok]),
        median_ttft_ms=ttft,
        completion_tokens=sum(s.completion_tokens or 0 for s in ok),
        draft_tokens=drafted,
        accepted_tokens=accepted,
        acceptance_rate=accepted / drafted if drafted else None,
    )
