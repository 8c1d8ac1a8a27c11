"""The soak verdict's figures as one typed value (soak/verdicts.py's `judge` builds it).

The readers (the soak's summary, its findings, `watchkeeper report`) take attributes: the
counts, the probes' two rates, each arm's RSS trend, each series' figures with the estimator
that judged it (soak/series_figures.py), each paired ratio against the reference, and each
pair's drift (soak/pair_drift.py), and each arm's acceptance curve (analysis/acceptance.py's
`AcceptanceCurve`, the type a bench's curves already have; they travelled here as its JSON,
so a reader indexed string keys and `consistent` existed only as a written key). `to_json`
writes the figures key for key as `soak --json` and the campaign's stored summary have always
held them; `AcceptanceCurve.from_json` reads a curve back at the edge.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from watchkeeper.analysis.acceptance import AcceptanceCurve
from watchkeeper.soak.judgement import (
    BlockSeries,
    OutputRates,
    ProbeTally,
    ProbeTotals,
    RssTrend,
)
from watchkeeper.soak.pair_drift import PairDrift
from watchkeeper.soak.paired_figures import ReferenceRatio
from watchkeeper.soak.probes import ProbeGroup
from watchkeeper.soak.series_figures import SeriesTrend
from watchkeeper.soak.trends import Trend


@dataclass(frozen=True, slots=True)
class RssEntry:
    """One arm's RSS history over its server processes: how long, how many processes, and
    the pooled Theil-Sen slope (MB per hour) where there were samples enough."""

    profile: str
    span_s: float
    servers: int
    trend: Trend | None = None
    judged: bool = False
    """Long enough a history for the leak test (`soak.leak_min_span_s`)."""

    @property
    def slope(self) -> float | None:
        return None if self.trend is None else self.trend.slope

    def summary(self) -> RssTrend:
        """The summary's row of this arm (publish/soak_report.py)."""
        t = self.trend
        return RssTrend(
            None if t is None else t.slope,
            None if t is None else (t.low, t.high),
            self.judged,
            self.span_s,
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"profile": self.profile, "span_s": self.span_s}
        out["servers"] = self.servers
        if self.trend is not None:
            out.update({**self.trend.to_json(), "unit": "MB per hour", "judged": self.judged})
        return out


@dataclass(frozen=True, slots=True)
class SoakFigures:
    """Everything `judge` measured of one soak campaign (every block, every resume)."""

    requests: int
    load_requests: int
    probes: int
    errors: int
    timeouts: int
    span_s: float
    slice_s: float
    restarts: int
    crashes: int
    unresponsive: int
    stuck_slots: int
    profiles_stopped: tuple[str, ...]
    db_outages: int
    incidents: Mapping[str, int]
    rates: OutputRates
    probe_totals: ProbeTotals
    identical_output: tuple[ProbeGroup, ...]
    series: tuple[SeriesTrend, ...]
    reference: tuple[ReferenceRatio, ...]
    paired_drift: tuple[PairDrift, ...]
    rss: tuple[RssEntry, ...]
    acceptance_curves: tuple[AcceptanceCurve, ...]
    leak_threshold_mb_per_hour: float

    @property
    def error_rate(self) -> float:
        return self.errors / self.requests

    @property
    def timeout_rate(self) -> float:
        return self.timeouts / self.requests

    @property
    def blocks(self) -> tuple[BlockSeries, ...]:
        """Each series' block rows (soak/depth.py), kept so its drift can be redone."""
        return tuple(BlockSeries(e.profile, e.concurrency, e.block_rows) for e in self.series)

    @property
    def identity(self) -> tuple[ProbeTally, ...]:
        """The probes per arm, concurrency and probe task, as the report's table reads them."""
        return tuple(g.tally() for g in self.identical_output)

    @property
    def ratios(self) -> tuple[ReferenceRatio, ...]:
        """Each paired ratio against the reference, as the findings and the nightly series
        read them."""
        return self.reference

    def to_json(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "load_requests": self.load_requests,
            "probes": self.probes,
            "errors": self.errors,
            "timeouts": self.timeouts,
            "error_rate": self.error_rate,
            "timeout_rate": self.timeout_rate,
            "span_s": self.span_s,
            "slice_s": self.slice_s,
            "restarts": self.restarts,
            "crashes": self.crashes,
            "unresponsive": self.unresponsive,
            "stuck_slots": self.stuck_slots,
            "profiles_stopped": list(self.profiles_stopped),
            "db_outages": self.db_outages,
            "incidents": dict(self.incidents),
            **self.rates.to_json(),
            "probe_totals": self.probe_totals.to_json(),
            "identical_output": [g.to_json() for g in self.identical_output],
            "series": [e.to_json() for e in self.series],
            "reference": [r.to_json() for r in self.reference],
            "paired_drift": [d.to_json() for d in self.paired_drift],
            "rss": [e.to_json() for e in self.rss],
            "acceptance_curves": [c.to_json() for c in self.acceptance_curves],
            "leak_threshold_mb_per_hour": self.leak_threshold_mb_per_hour,
        }
