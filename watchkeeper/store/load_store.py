"""The database side of latency under load: one `latency_stat` row per figure of an arm at a
load level in a campaign (analysis/latency.py), so a later reader (the nightly's series, a
report re-rendered) finds the percentiles without the per-request gaps."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import delete, select

from watchkeeper.analysis.latency import Estimate, LatencyStats
from watchkeeper.store.db import Database
from watchkeeper.store.schema import LatencyStat


def _rows(campaign_id: int, stats: LatencyStats) -> list[LatencyStat]:
    figures: list[tuple[str, str, Estimate]] = [
        (metric, stat, est) for metric, by in stats.quantiles.items() for stat, est in by.items()
    ]
    if stats.goodput_rps is not None:
        figures.append(("goodput_rps", "mean", stats.goodput_rps))
    if stats.output_tps is not None:
        figures.append(("output_tps", "mean", stats.output_tps))
    return [
        LatencyStat(
            campaign_id=campaign_id,
            arm=stats.arm,
            load=stats.load,
            metric=metric,
            stat=stat,
            estimate=est.estimate,
            low=est.low if est.has_ci else None,
            high=est.high if est.has_ci else None,
            rounds=est.rounds,
        )
        for metric, stat, est in figures
    ]


class LoadStore:
    def __init__(self, db: Database) -> None:
        self._db = db

    def save(self, campaign_id: int, stats: Sequence[LatencyStats]) -> None:
        """Replace the campaign's figures (a re-analysis writes the same rows again)."""
        with self._db.session() as s:
            s.execute(delete(LatencyStat).filter_by(campaign_id=campaign_id))
            for item in stats:
                s.add_all(_rows(campaign_id, item))

    def figures(self, campaign_id: int) -> list[tuple[str, str, str, str, float]]:
        """(arm, load, metric, stat, estimate) of a campaign, sorted."""
        with self._db.session() as s:
            rows = s.scalars(select(LatencyStat).filter_by(campaign_id=campaign_id)).all()
            return sorted((r.arm, r.load, r.metric, r.stat, r.estimate) for r in rows)
