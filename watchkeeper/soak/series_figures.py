"""One (arm, concurrency) series of a soak as a typed value: its slice table, its block rows,
its throughput and acceptance trends, and the estimator that judged its drift, named as a field.

The judge (soak/drift.py) builds a `SeriesTrend` per series and the readers take attributes;
which estimator judged a series was once read from whether a `depth_drift` key was present.
`to_json` writes each key for key as the soak's figures (`series` in `soak --json` and the
campaign's stored summary) have always held them; `from_json` reads that back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from watchkeeper.soak.depth_figures import SlopeDrift
from watchkeeper.soak.judgement import BlockRow, Dip, SeriesDrift
from watchkeeper.soak.trends import RelativeTrend, Shift, Trend

DriftJudged = Literal["paired", "aggregate", "absolute"]
"""How a series' throughput drift was judged: on its pair's ratio (soak/pair_drift.py), on its
aggregate throughput's slope (concurrency above 1, unpaired: soak/depth.py), or on its own
block medians (concurrency 1, unpaired: the host's load counts too)."""


@dataclass(frozen=True, slots=True)
class Slice:
    """One time slice of a series: its load requests, their median decode speed, tokens and
    acceptance (the report's slice table)."""

    t_h: float
    requests: int
    decode_tps: float | None
    tokens: int
    acceptance: float | None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Slice:
        return cls(
            data["t_h"],
            int(data["requests"]),
            data.get("decode_tps"),
            int(data["tokens"]),
            data.get("acceptance"),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "t_h": self.t_h,
            "requests": self.requests,
            "decode_tps": self.decode_tps,
            "tokens": self.tokens,
            "acceptance": self.acceptance,
        }


@dataclass(frozen=True, slots=True)
class AcceptanceTrend:
    """Acceptance over the soak: the Theil-Sen slope over the slices, and the change in points
    over the slices' span with its CI (`of`)."""

    trend: Trend
    change_points: float
    low: float
    high: float

    @classmethod
    def of(cls, trend: Trend, span_h: float) -> AcceptanceTrend:
        return cls(trend, trend.slope * span_h, trend.low * span_h, trend.high * span_h)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> AcceptanceTrend:
        low, high = data["change_ci95"]
        return cls(_trend(data), data["change_points"], low, high)

    def to_json(self) -> dict[str, Any]:
        return {
            **self.trend.to_json(),
            "unit": "acceptance per hour",
            "change_points": self.change_points,
            "change_ci95": [self.low, self.high],
        }


@dataclass(frozen=True, slots=True)
class SeriesTrend:
    """One series' figures and the estimator its throughput drift was judged by (`judged`);
    `depth_drift` is that estimator's verdict where it is the aggregate one (None there too
    when the series had too few blocks)."""

    profile: str
    concurrency: int
    judged: DriftJudged
    depth_drift: SlopeDrift | None = None
    slices: tuple[Slice, ...] = ()
    blocks: int = 0
    """Blocks with a measured request: the replicates of the block-median trend."""
    throughput_drift: RelativeTrend | None = None
    """Theil-Sen over the block medians, as a change over the slices' span."""
    throughput_shift: Shift | None = None
    """The last third of the blocks against the first (`trends.level_shift`)."""
    acceptance_drift: AcceptanceTrend | None = None
    block_rows: tuple[BlockRow, ...] = ()

    @property
    def name(self) -> str:
        return f"{self.profile} c{self.concurrency}"

    def drift(self) -> SeriesDrift | None:
        """The summary's drift of this series, by the estimator `judged` names; None where it
        has no drift figure (too few blocks)."""
        depth = self.depth_drift
        if self.judged == "aggregate" and depth is not None:
            return SeriesDrift(
                self.profile,
                self.concurrency,
                depth.change,
                depth.ci95,
                "aggregate",
                depth.verdict,
                depth.blocks,
                depth.autocorrelation.to_json(),
                depth.warmup_blocks,
                depth.work_requests,
                depth.slope_verdict,
                tuple(Dip(d.block, d.t_h, d.deviation) for d in depth.dips) or None,
            )
        drift = self.throughput_drift
        if drift is None:
            return None
        return SeriesDrift(self.profile, self.concurrency, drift.change, (drift.low, drift.high))

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SeriesTrend:
        drift, shift, acc = (data.get(k) for k in _TRENDS)
        depth = data.get("depth_drift")
        judged: DriftJudged = data["drift_judged"]
        return cls(
            str(data["profile"]),
            int(data["concurrency"]),
            judged,
            None if depth is None else SlopeDrift.from_json(depth),
            tuple(Slice.from_json(s) for s in data.get("slices") or ()),
            int(data.get("blocks") or 0),
            None if drift is None else _relative(drift),
            None if shift is None else _shift(shift),
            None if acc is None else AcceptanceTrend.from_json(acc),
            tuple(BlockRow.from_json(r) for r in data.get("block_rows") or ()),
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "profile": self.profile,
            "concurrency": self.concurrency,
            "slices": [s.to_json() for s in self.slices],
            "blocks": self.blocks,
        }
        if self.throughput_drift is not None:
            r = self.throughput_drift
            out["throughput_drift"] = {
                **r.trend.to_json(),
                "unit": "tok/s per hour",
                "level_tps": r.level,
                "change": r.change,
                "change_ci95": [r.low, r.high],
            }
        if self.throughput_shift is not None:
            s = self.throughput_shift
            out["throughput_shift"] = {
                "first_third_tps": s.first_third,
                "last_third_tps": s.last_third,
                "blocks": list(s.n),
                "change": s.change,
                "change_ci95": [s.low, s.high],
            }
        if self.acceptance_drift is not None:
            out["acceptance_drift"] = self.acceptance_drift.to_json()
        # Every row names its host figure here, None where none was recorded.
        out["block_rows"] = [
            {**r.to_json(), "host_other_cpu": r.host_other_cpu} for r in self.block_rows
        ]
        out["drift_judged"] = self.judged
        if self.judged == "aggregate":
            out["depth_drift"] = None if self.depth_drift is None else self.depth_drift.to_json()
        return out


_TRENDS = ("throughput_drift", "throughput_shift", "acceptance_drift")


def _trend(data: Mapping[str, Any]) -> Trend:
    low, high = data["ci95"]
    return Trend(data["slope"], low, high, int(data["points"]))


def _relative(data: Mapping[str, Any]) -> RelativeTrend:
    low, high = data["change_ci95"]
    return RelativeTrend(_trend(data), data["level_tps"], data["change"], low, high)


def _shift(data: Mapping[str, Any]) -> Shift:
    low, high = data["change_ci95"]
    first, last = data["blocks"]
    return Shift(
        data["first_third_tps"], data["last_third_tps"], (first, last), data["change"], low, high
    )
