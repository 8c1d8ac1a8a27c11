"""The soak's judgement as types: what the report, the sweep's stability line, the findings and
`watchkeeper report` read, carried as frozen dataclasses from the verdict to the page.

It used to travel as string-keyed dicts: which estimator judged a series was worked out from
whether a `depth_drift` key was present, and `identical_output_rate` held the *consistent*
rate in one layout and the token-identical one in the next. Here each series' drift names its
estimator, the probe rates are two fields (`identical`, `consistent`), and JSON appears only at
the edge: `SoakSummary.from_json` reads a committed `speculative_soak.json` of either layout,
`to_json` writes the current one with the same keys (a reader of the committed JSON, or of
an older one, keeps working).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from watchkeeper.server.flags import SPELLINGS

Estimator = Literal["block medians", "aggregate"]
"""How a series' throughput drift was judged: the Theil-Sen slope of its block medians
(concurrency 1, or an arm judged on its pair's ratio) or the aggregate throughput's slope with
its own verdict (concurrency above 1, unpaired: soak/depth.py)."""

_COUNTS = ("compared", "identical", "near_tie", "length_only", "unverified", "mismatch")


@dataclass(frozen=True, slots=True)
class ProbeTotals:
    """What the temperature-0 probes found, compared with their reference."""

    compared: int = 0
    identical: int = 0
    near_tie: int = 0
    length_only: int = 0
    unverified: int = 0
    mismatch: int = 0

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ProbeTotals:
        return cls(*(int(data.get(k) or 0) for k in _COUNTS))

    def to_json(self) -> dict[str, int]:
        return {k: int(getattr(self, k)) for k in _COUNTS}


@dataclass(frozen=True, slots=True)
class ProbeTally:
    """One arm and concurrency's probes (the report's identity table row)."""

    profile: str
    concurrency: int
    reference_profile: str | None
    counts: ProbeTotals

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ProbeTally:
        return cls(
            str(data["profile"]),
            int(data["concurrency"]),
            data.get("reference_profile"),
            ProbeTotals.from_json(data),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "profile": self.profile,
            "concurrency": self.concurrency,
            "reference_profile": self.reference_profile,
            **self.counts.to_json(),
        }


@dataclass(frozen=True, slots=True)
class OutputRates:
    """The probes' two rates: `identical` token for token, and `consistent` with the reference
    (identical, a near tie or a length cut), each of those that could be judged."""

    identical: float | None
    consistent: float | None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> OutputRates:
        """Either layout. `identical_output_rate` once held the *consistent* rate, beside
        `strictly_identical_rate`; a JSON without `consistent_output_rate` is that layout and
        reads as it meant."""
        if "consistent_output_rate" in data:
            return cls(data.get("identical_output_rate"), data.get("consistent_output_rate"))
        return cls(data.get("strictly_identical_rate"), data.get("identical_output_rate"))

    def to_json(self) -> dict[str, float | None]:
        return {"identical_output_rate": self.identical, "consistent_output_rate": self.consistent}


@dataclass(frozen=True, slots=True)
class Dip:
    """A block that fell off and came back (soak/dips.py), kept in the slope."""

    block: int
    t_h: float
    deviation: float

    def to_json(self) -> dict[str, Any]:
        return {"block": self.block, "t_h": self.t_h, "deviation": self.deviation}


@dataclass(frozen=True, slots=True)
class SeriesDrift:
    """One series' judged throughput drift: its change over the soak and 95% CI, the estimator
    that produced it and, for the aggregate estimator, its own verdict and figures."""

    profile: str
    concurrency: int
    change: float
    ci95: tuple[float, float] | None
    estimator: Estimator = "block medians"
    verdict: str | None = None
    blocks: int | None = None
    autocorrelation: Mapping[str, float] | None = None
    warmup_blocks: int | None = None
    work_requests: int | None = None
    slope_verdict: str | None = None
    dips: tuple[Dip, ...] | None = None

    @property
    def half_width(self) -> float | None:
        return None if self.ci95 is None else (self.ci95[1] - self.ci95[0]) / 2.0

    @property
    def recurring_dips(self) -> bool:
        """Held unresolved by blocks that fell off and came back (its slope alone resolved)."""
        return self.slope_verdict is not None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SeriesDrift:
        estimator: Estimator = (
            "aggregate" if data.get("estimator") == "aggregate" else "block medians"
        )
        return cls(
            str(data["profile"]),
            int(data["concurrency"]),
            data["change"],
            _pair(data.get("ci95")),
            estimator,
            data.get("verdict"),
            data.get("blocks"),
            data.get("autocorrelation"),
            data.get("warmup_blocks"),
            data.get("work_requests"),
            data.get("slope_verdict"),
            _dips(data.get("dips")),
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "profile": self.profile,
            "concurrency": self.concurrency,
            "change": self.change,
            "ci95": _list(self.ci95),
        }
        if self.estimator != "aggregate":
            return out
        out.update(
            {
                "estimator": self.estimator,
                "verdict": self.verdict,
                "blocks": self.blocks,
                "autocorrelation": self.autocorrelation,
            }
        )
        for key in ("warmup_blocks", "work_requests", "slope_verdict"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        if self.dips is not None:
            out["dips"] = [d.to_json() for d in self.dips]
        return out


@dataclass(frozen=True, slots=True)
class BlockRow:
    """One block of one series (soak/depth.py's `block_rows`): enough to redo its drift. A
    soak from before 28 Nov 2026 read each block over a fixed time `window_s`; later ones the
    request seconds (`busy_s`) of a fixed number of requests (`work_requests`)."""

    block: int
    t_h: float
    requests: int
    tokens: int
    throughput_tps: float
    median_decode_tps: float | None
    work_requests: int | None = None
    busy_s: float | None = None
    window_s: float | None = None
    host_other_cpu: float | None = None
    """The host's CPU outside the soak's servers over the block (soak/dips.py reads it to
    explain a dip); None for soaks that did not record it."""

    @property
    def fixed_work(self) -> bool:
        return self.busy_s is not None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> BlockRow:
        return cls(
            int(data["block"]),
            data["t_h"],
            int(data["requests"]),
            int(data["tokens"]),
            data["throughput_tps"],
            data.get("median_decode_tps"),
            data.get("work_requests"),
            data.get("busy_s"),
            data.get("window_s"),
            data.get("host_other_cpu"),
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"block": self.block, "t_h": self.t_h, "requests": self.requests}
        if self.work_requests is not None:
            out["work_requests"] = self.work_requests
        out["tokens"] = self.tokens
        if self.window_s is not None:
            out["window_s"] = self.window_s
        if self.busy_s is not None:
            out["busy_s"] = self.busy_s
        out["throughput_tps"] = self.throughput_tps
        out["median_decode_tps"] = self.median_decode_tps
        if self.host_other_cpu is not None:
            out["host_other_cpu"] = self.host_other_cpu
        return out


@dataclass(frozen=True, slots=True)
class BlockSeries:
    profile: str
    concurrency: int
    rows: tuple[BlockRow, ...]

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> BlockSeries:
        rows = tuple(BlockRow.from_json(r) for r in data.get("rows", []))
        return cls(str(data["profile"]), int(data["concurrency"]), rows)

    def to_json(self) -> dict[str, Any]:
        return {
            "profile": self.profile,
            "concurrency": self.concurrency,
            "rows": [r.to_json() for r in self.rows],
        }


@dataclass(frozen=True, slots=True)
class RssTrend:
    """One arm's RSS slope over its server processes (pooled), and whether the leak test
    judged it (enough history)."""

    slope_mb_per_h: float | None
    ci95: tuple[float, float] | None
    judged: bool
    span_s: float | None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RssTrend:
        return cls(
            data.get("slope_mb_per_h"),
            _pair(data.get("ci95")),
            bool(data.get("judged", False)),
            data.get("span_s"),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "slope_mb_per_h": self.slope_mb_per_h,
            "ci95": _list(self.ci95),
            "judged": self.judged,
            "span_s": self.span_s,
        }


@dataclass(frozen=True, slots=True)
class SoakUnit:
    """The unit the soak soaked: its path and each arm's ExecStart flags."""

    path: str
    flags: Mapping[str, tuple[str, ...]]

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SoakUnit:
        flags = {str(a): tuple(str(f) for f in fs) for a, fs in (data.get("flags") or {}).items()}
        return cls(str(data["path"]), flags)

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "flags": {a: list(f) for a, f in self.flags.items()}}

    def slots(self, arm: str) -> int | None:
        """The `--parallel` the arm's server ran with; None where its flags do not say."""
        flags = self.flags.get(arm) or ()
        for i, f in enumerate(flags[:-1]):
            if f in SPELLINGS["slots"]:
                return int(flags[i + 1])
        return None


@dataclass(frozen=True, slots=True)
class SeriesRow:
    """Load requests of one (arm, concurrency): count, errors, median decode tok/s."""

    profile: str
    concurrency: int
    requests: int
    errors: int
    median_tps: float | None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SeriesRow:
        return cls(
            str(data["profile"]),
            int(data["concurrency"]),
            int(data["requests"]),
            int(data["errors"]),
            data.get("median_tps"),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "profile": self.profile,
            "concurrency": self.concurrency,
            "requests": self.requests,
            "errors": self.errors,
            "median_tps": self.median_tps,
        }


def _pair(value: Sequence[float] | None) -> tuple[float, float] | None:
    return None if not value else (value[0], value[1])


def _list(value: tuple[float, float] | None) -> list[float] | None:
    return None if value is None else list(value)


def _dips(value: Sequence[Mapping[str, Any]] | None) -> tuple[Dip, ...] | None:
    if value is None:
        return None
    return tuple(Dip(int(d["block"]), d["t_h"], d["deviation"]) for d in value)


__all__ = [
    "BlockRow",
    "BlockSeries",
    "Dip",
    "Estimator",
    "OutputRates",
    "ProbeTally",
    "ProbeTotals",
    "RssTrend",
    "SeriesDrift",
    "SeriesRow",
    "SoakUnit",
]
