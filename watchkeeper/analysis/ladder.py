"""A load ladder's result: the levels, their latency and the crossovers, pure data.

Kept apart from `campaign/ladder.py` (which runs the ladder) so that the report
(`publish/ladder_report.py`) reads it without importing the engine.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from watchkeeper.analysis.benchmark import BenchResult
from watchkeeper.analysis.crossover import Crossover
from watchkeeper.analysis.latency import LatencyStats


@dataclass(frozen=True, slots=True)
class LadderLevel:
    level: float
    load: str
    campaign_id: int
    latency: tuple[LatencyStats, ...]
    result: BenchResult


@dataclass(frozen=True, slots=True)
class LadderResult:
    mode: str
    """'concurrency' (closed loop, requests in flight) or 'rate' (open loop, requests/s)."""
    baseline: str
    arms: tuple[str, ...]
    levels: tuple[LadderLevel, ...]
    crossovers: tuple[Crossover, ...]
    wall_s: float
    slo: str
    report_path: str | None = None
    metric: str = "decode"
    """The metric that decided every crossover (analysis/load_compare.py)."""
    saturation: tuple[tuple[str, float], ...] = ()
    """`auto` rate ladders: each arm's saturation rate (req/s) at the ladder's slots."""

    @property
    def unit(self) -> str:
        return "concurrent requests" if self.mode == "concurrency" else "requests/s"

    def to_json(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "baseline": self.baseline,
            "arms": list(self.arms),
            "wall_s": self.wall_s,
            "slo": self.slo,
            "report": self.report_path,
            "crossover_metric": self.metric,
            "saturation_rps": dict(self.saturation),
            "levels": [
                {
                    "level": lv.level,
                    "load": lv.load,
                    "campaign_id": lv.campaign_id,
                    "latency": [_stats_json(s) for s in lv.latency],
                }
                for lv in self.levels
            ],
            "crossovers": [c.to_json() for c in self.crossovers],
        }


def _stats_json(s: LatencyStats) -> dict[str, Any]:
    def est(e: Any) -> dict[str, Any] | None:
        if e is None:
            return None
        return {
            "estimate": e.estimate,
            "low": e.low if e.has_ci else None,
            "high": e.high if e.has_ci else None,
            "rounds": e.rounds,
            "thin": e.thin,
        }

    return {
        "arm": s.arm,
        "requests": s.requests,
        "errors": s.errors,
        "expired": s.expired,
        "good_fraction": s.good_fraction,
        "slo_attainment": est(s.attainment),
        "acceptance_rate": est(s.acceptance),
        "tokens_per_step": est(s.tokens_per_step),
        "tokens_per_chunk": est(s.tokens_per_chunk),
        "chunk_itl_ms": {k: est(v) for k, v in s.chunk_itl.items()},
        "trimmed_each_end": s.trimmed,
        "oversaturated": s.oversaturated,
        "saturation": None
        if s.saturation is None
        else {
            "completed_share": s.saturation.completed_share,
            "ttft_growth": s.saturation.ttft_growth,
            "reason": s.saturation.reason,
        },
        "goodput_rps": est(s.goodput_rps),
        "output_tps": est(s.output_tps),
        "quantiles": {m: {k: est(v) for k, v in by.items()} for m, by in s.quantiles.items()},
    }
