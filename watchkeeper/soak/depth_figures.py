"""The depth > 1 drift's figures as types (soak/depth.py computes them, soak/dips.py explains
the dips): what a series' aggregate-throughput slope found, read by attribute.

They used to travel as string-keyed dicts, and whether a dip was explained was read from which
keys it had. `to_json` writes each key for key as the soak's figures (`depth_drift`) have
always held it, so the stored summaries and `soak --json` read as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

ESTIMATOR = "ols slope of log aggregate throughput over all blocks"
"""The name the figures give the depth > 1 estimator (`estimator` in the JSON)."""


@dataclass(frozen=True, slots=True)
class OtherBlock:
    """The other arm's block that moved the same way at the same time (`dips.explained`):
    what explains a dip from outside the server, with its own deviation from its neighbours."""

    block: int
    deviation: float


@dataclass(frozen=True, slots=True)
class HostBusy:
    """The host's CPU outside the servers over a block that fell off (`dips.host_explained`):
    its share, the series' usual (median) and the robust z between them."""

    host_other_cpu: float
    host_median: float
    host_z: float


Explanation = OtherBlock | HostBusy


@dataclass(frozen=True, slots=True)
class DipEntry:
    """A dip as the figures keep it: its block, time and deviation from its two neighbours
    (geometric mean), with what outside the server explains it, if anything."""

    block: int
    t_h: float
    deviation: float
    why: Explanation | None = None

    @property
    def explained(self) -> bool:
        return self.why is not None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> DipEntry:
        why: Explanation | None = None
        if "host_other_cpu" in data:
            why = HostBusy(data["host_other_cpu"], data["host_median"], data["host_z"])
        elif "other_block" in data:
            why = OtherBlock(int(data["other_block"]), data["other_deviation"])
        return cls(int(data["block"]), data["t_h"], data["deviation"], why)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"block": self.block, "t_h": self.t_h, "deviation": self.deviation}
        if isinstance(self.why, HostBusy):
            out.update(
                {
                    "host_other_cpu": self.why.host_other_cpu,
                    "host_median": self.why.host_median,
                    "host_z": self.why.host_z,
                }
            )
        elif self.why is not None:
            out.update({"other_block": self.why.block, "other_deviation": self.why.deviation})
        return out


@dataclass(frozen=True, slots=True)
class Autocorrelation:
    """The residuals' lag-1 estimate and the value the interval used (soak/ar1.py's rule)."""

    estimate: float
    used: float

    def to_json(self) -> dict[str, float]:
        return {"estimate": self.estimate, "used": self.used}


@dataclass(frozen=True, slots=True)
class SlopeDrift:
    """The change over the soak from a least-squares slope of log throughput (`slope_drift`),
    its AR(1)-aware interval and verdict; for a whole series (`series_drift`) also the warm-up
    set aside, the work per block, the dips set aside (`transients`) and kept (`dips`), and
    the slope's own verdict where recurring dips held the series unresolved."""

    change: float
    low: float
    high: float
    slope_per_h: float
    span_h: float
    blocks: int
    autocorrelation: Autocorrelation
    n_eff: float
    threshold: float
    verdict: str
    warmup_blocks: int | None = None
    work_requests: int | None = None
    transients: tuple[DipEntry, ...] = ()
    dips: tuple[DipEntry, ...] = ()
    slope_verdict: str | None = None

    @property
    def ci95(self) -> tuple[float, float]:
        return (self.low, self.high)

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2.0

    @property
    def is_slowdown(self) -> bool:
        """A verdict that is a reason: beyond the threshold, and slower."""
        return self.verdict == "drift" and self.change < 0

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SlopeDrift:
        low, high = data["change_ci95"]
        ac = data["autocorrelation"]
        return cls(
            change=data["change"],
            low=low,
            high=high,
            slope_per_h=data["slope_per_h"],
            span_h=data["span_h"],
            blocks=int(data["blocks"]),
            autocorrelation=Autocorrelation(ac["estimate"], ac["used"]),
            n_eff=data["n_eff"],
            threshold=data["threshold"],
            verdict=str(data["verdict"]),
            warmup_blocks=data.get("warmup_blocks"),
            work_requests=data.get("work_requests"),
            transients=tuple(DipEntry.from_json(d) for d in data.get("transients") or ()),
            dips=tuple(DipEntry.from_json(d) for d in data.get("dips") or ()),
            slope_verdict=data.get("slope_verdict"),
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "estimator": ESTIMATOR,
            "change": self.change,
            "change_ci95": [self.low, self.high],
            "half_width": self.half_width,
            "slope_per_h": self.slope_per_h,
            "span_h": self.span_h,
            "blocks": self.blocks,
            "autocorrelation": self.autocorrelation.to_json(),
            "n_eff": self.n_eff,
            "threshold": self.threshold,
            "verdict": self.verdict,
        }
        if self.warmup_blocks is not None:
            out["warmup_blocks"] = self.warmup_blocks
            out["work_requests"] = self.work_requests
        if self.transients:
            out["transients"] = [d.to_json() for d in self.transients]
        if self.dips:
            out["dips"] = [d.to_json() for d in self.dips]
        if self.slope_verdict is not None:
            out["slope_verdict"] = self.slope_verdict
        return out
