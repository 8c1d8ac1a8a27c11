"""The soak's summary (`speculative_soak.json`) as one typed value: what the soak's page, the
sweep's stability line and `watchkeeper report` read, by attribute.

JSON appears only here, at the edge: `from_json` reads a committed summary of either layout
(the one before 28 Nov 2026 had no block rows or unit, and its `identical_output_rate` was the
consistent rate), `to_json` writes the current layout, key for key what the committed files
hold, so a reader of the JSON keeps working.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from watchkeeper.soak.judgement import (
    BlockSeries,
    OutputRates,
    ProbeTally,
    ProbeTotals,
    RssTrend,
    SeriesDrift,
    SeriesRow,
    SoakUnit,
)


@dataclass(frozen=True, slots=True)
class SoakSummary:
    campaign_id: int | None
    sweep_campaign: int | None
    subject: str
    baseline: str
    duration: str
    command: str
    verdict: str | None
    headline: str | None
    reasons: tuple[str, ...]
    notes: tuple[str, ...]
    requests: int | None
    errors: int | None
    restarts: int | None
    crashes: int | None
    rates: OutputRates
    probe_totals: ProbeTotals | None
    identity: tuple[ProbeTally, ...]
    cache_ram_mib: int | None
    series: tuple[SeriesRow, ...]
    rss: Mapping[str, RssTrend]
    drift: tuple[SeriesDrift, ...]
    blocks: tuple[BlockSeries, ...]
    leak_threshold_mb_per_hour: float | None
    drift_threshold: float | None
    unit: SoakUnit | None
    block_s: float | None = None
    """One block's length where the summary states it; else the `--block` of its command."""

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> SoakSummary:
        """A committed summary of either layout; KeyError, TypeError or ValueError where it
        is not one."""
        totals = d.get("probe_totals")
        unit = d.get("unit")
        block_s = d.get("block_s")
        return cls(
            campaign_id=d.get("campaign_id"),
            sweep_campaign=d.get("sweep_campaign"),
            subject=str(d["subject"]),
            baseline=str(d["baseline"]),
            duration=str(d["duration"]),
            command=str(d["command"]),
            verdict=d.get("verdict"),
            headline=d.get("headline"),
            reasons=tuple(str(x) for x in d.get("reasons") or ()),
            notes=tuple(str(x) for x in d.get("notes") or ()),
            requests=d.get("requests"),
            errors=d.get("errors"),
            restarts=d.get("restarts"),
            crashes=d.get("crashes"),
            rates=OutputRates.from_json(d),
            probe_totals=None if totals is None else ProbeTotals.from_json(totals),
            identity=tuple(ProbeTally.from_json(e) for e in d.get("identity") or ()),
            cache_ram_mib=d.get("cache_ram_mib"),
            series=tuple(SeriesRow.from_json(r) for r in d["series"]),
            rss={str(p): RssTrend.from_json(e) for p, e in (d.get("rss") or {}).items()},
            drift=tuple(SeriesDrift.from_json(e) for e in d.get("drift") or ()),
            blocks=tuple(BlockSeries.from_json(b) for b in d.get("blocks") or ()),
            leak_threshold_mb_per_hour=d.get("leak_threshold_mb_per_hour"),
            drift_threshold=d.get("drift_threshold"),
            unit=SoakUnit.from_json(unit) if unit else None,
            block_s=float(block_s) if isinstance(block_s, int | float) else None,
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "campaign_id": self.campaign_id,
            "sweep_campaign": self.sweep_campaign,
            "subject": self.subject,
            "baseline": self.baseline,
            "duration": self.duration,
            "command": self.command,
            "verdict": self.verdict,
            "headline": self.headline,
            "reasons": list(self.reasons),
            "notes": list(self.notes),
            "requests": self.requests,
            "errors": self.errors,
            "restarts": self.restarts,
            "crashes": self.crashes,
            **self.rates.to_json(),
            "probe_totals": None if self.probe_totals is None else self.probe_totals.to_json(),
            "identity": [e.to_json() for e in self.identity],
            "cache_ram_mib": self.cache_ram_mib,
            "series": [r.to_json() for r in self.series],
            "rss": {p: e.to_json() for p, e in self.rss.items()},
            "drift": [d.to_json() for d in self.drift],
            "blocks": [b.to_json() for b in self.blocks],
            "leak_threshold_mb_per_hour": self.leak_threshold_mb_per_hour,
            "drift_threshold": self.drift_threshold,
            "unit": None if self.unit is None else self.unit.to_json(),
        }
        if self.block_s is not None:
            out["block_s"] = self.block_s
        return out

    @property
    def drift_threshold_or_default(self) -> float:
        return float(self.drift_threshold or 0.10)

    @property
    def levels(self) -> list[str]:
        """The concurrencies soaked, as the report lists them."""
        return sorted({str(r.concurrency) for r in self.series})
