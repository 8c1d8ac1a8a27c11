"""A soak's ratio against its pinned reference as a typed value (soak/paired.py builds it): what
the verdict's lines, the pair's drift (soak/pair_drift.py), the findings and the nightly series
read, by attribute.

`to_json` writes it key for key as the soak's figures (`reference`) have always held it, and
a regression finding keeps that JSON as its evidence; `from_json` reads it back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from watchkeeper.soak.depth_figures import Autocorrelation


@dataclass(frozen=True, slots=True)
class CycleRow:
    """One paired cycle as the report shows it, judged or set aside: each arm's block median,
    which ran first, how many requests each block's median rests on, and its process pair."""

    cycle: int
    current_tps: float
    reference_tps: float
    current_first: bool
    current_requests: int | None
    """None for figures stored before the counts were (`pair_drift.block_requests`)."""
    reference_requests: int | None
    judged: bool
    process_pair: int | None

    @property
    def ratio(self) -> float:
        return self.current_tps / self.reference_tps

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CycleRow:
        return cls(
            int(data["cycle"]),
            data["current_tps"],
            data["reference_tps"],
            bool(data["current_first"]),
            data.get("current_requests"),
            data.get("reference_requests"),
            bool(data["judged"]),
            data.get("process_pair"),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "cycle": self.cycle,
            "current_tps": self.current_tps,
            "reference_tps": self.reference_tps,
            "ratio": self.ratio,
            "current_first": self.current_first,
            "current_requests": self.current_requests,
            "reference_requests": self.reference_requests,
            "judged": self.judged,
            "process_pair": self.process_pair,
        }


@dataclass(frozen=True, slots=True)
class RatioInterval:
    """What a ratio with replicates enough has beyond its estimate: the interval's half-width
    (relative), the sizing of an inconclusive one (a range of pairs, its upper end None past
    the cap), the lag-1 figures, the effective n, each half's estimate and whether both halves
    show a regression alone (`confirmed`)."""

    low: float
    high: float
    half_width: float
    pairs_needed: tuple[int | None, int | None] | None
    autocorrelation: Autocorrelation
    n_eff: float
    halves: tuple[float | None, float | None]
    confirmed: bool


@dataclass(frozen=True, slots=True)
class ReferenceRatio:
    """One (profile, concurrency)'s paired ratio against its pinned reference: the reference,
    the cycles, which were set aside, and the estimate with its verdict; `interval` is None
    below `paired.MIN_CYCLES` replicates (`insufficient data`)."""

    profile: str
    concurrency: int
    reference_arm: str
    reference_id: int
    aa: bool
    host_fingerprint: str
    threshold: float
    cycles: tuple[CycleRow, ...]
    warmup_cycles: tuple[int, ...]
    unbalanced_dropped: tuple[int, ...]
    n_cycles: int
    """Cycles judged."""
    n_pairs: int
    """Replicates: process pairs, or cycles where the servers never restart."""
    estimate: float | None
    verdict: str
    interval: RatioInterval | None = None

    @property
    def label(self) -> str:
        return f"{self.profile} c{self.concurrency}"

    @property
    def ci95(self) -> tuple[float, float] | None:
        i = self.interval
        return None if i is None else (i.low, i.high)

    @property
    def confirmed(self) -> bool:
        return self.interval is not None and self.interval.confirmed

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ReferenceRatio:
        ci = data.get("ci95")
        interval = None
        if ci:
            sized = data.get("pairs_needed")
            ac = data["autocorrelation"]
            first, second = data["halves"]
            interval = RatioInterval(
                ci[0],
                ci[1],
                data["half_width"],
                None if sized is None else _sizing(sized),
                Autocorrelation(ac["estimate"], ac["used"]),
                data["n_eff"],
                (first, second),
                bool(data.get("confirmed")),
            )
        return cls(
            str(data["profile"]),
            int(data["concurrency"]),
            str(data["reference_arm"]),
            int(data["reference_id"]),
            bool(data["aa"]),
            str(data.get("host_fingerprint", "")),
            float(data["threshold"]),
            tuple(CycleRow.from_json(c) for c in data.get("cycles") or ()),
            tuple(int(c) for c in data.get("warmup_cycles") or ()),
            tuple(int(c) for c in data.get("unbalanced_dropped") or ()),
            int(data["n_cycles"]),
            int(data["n_pairs"]),
            data.get("estimate"),
            str(data["verdict"]),
            interval,
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "profile": self.profile,
            "concurrency": self.concurrency,
            "reference_arm": self.reference_arm,
            "reference_id": self.reference_id,
            "aa": self.aa,
            "host_fingerprint": self.host_fingerprint,
            "threshold": self.threshold,
            "cycles": [c.to_json() for c in self.cycles],
            "warmup_cycles": list(self.warmup_cycles),
            "unbalanced_dropped": list(self.unbalanced_dropped),
            "n_cycles": self.n_cycles,
            "n_pairs": self.n_pairs,
        }
        i = self.interval
        if i is None:
            out.update({"estimate": self.estimate, "ci95": None, "verdict": self.verdict})
            return out
        out.update(
            {
                "estimate": self.estimate,
                "ci95": [i.low, i.high],
                "half_width": i.half_width,
                "pairs_needed": None if i.pairs_needed is None else list(i.pairs_needed),
                "autocorrelation": i.autocorrelation.to_json(),
                "n_eff": i.n_eff,
                "verdict": self.verdict,
                "halves": list(i.halves),
                "confirmed": i.confirmed,
            }
        )
        return out


def _sizing(value: int | Sequence[int | None]) -> tuple[int | None, int | None]:
    """A sizing as stored: a range of pairs, or one number (a soak judged before the range),
    read as a range of one."""
    if isinstance(value, int):
        return (value, value)
    low, high = value
    return (low, high)
