"""The noise floor of identity verdicts: how far batched evaluation moves the top-1 lead.

A speculative arm's token can part from the baseline's only where the target's top-1 leads
its runner-up by less than evaluation noise can move that lead. The A/A control measures that
noise: the baseline's own single-token decode against a replay of the same position on the
same server. Only the change of the *top-1-vs-runner-up* gap counts: alternatives ranked 3-5
never decide a token, and pooling them (as the first floor did) let far-off pairs set it.

One number from few positions is its maximum in disguise (the 99th percentile of 40 values
is their largest): below `MIN_POSITIONS` replayed positions the floor is `underpowered`, and
no verdict rests on it. The flip rate by decode margin is kept beside the number: it shows
at which leads decode and replay actually pick different tokens. Floors are keyed by backend,
build and model: a floor measured on one says nothing of another.

Pure functions; the replay requests are `checks.replay`'s.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from watchkeeper.load.records import TokenLogprob

if TYPE_CHECKING:
    from watchkeeper.checks.replay import ReplayResult

MIN_POSITIONS = 200
"""Below this many replayed positions the floor is `underpowered`: no number is given."""
TARGET_POSITIONS = 240
"""What the bench asks for (positions per probe = this over the probes, rounded up)."""
FLOOR_QUANTILE = 0.99
MARGIN_BANDS = (0.0, 0.1, 0.25, 0.5, 1.0, 2.0, math.inf)
"""Decode-margin bands (nats) of the flip-rate table."""
EXACT_TOLERANCE = 1e-4
"""Logprobs equal within this (the server prints floats) count as the same evaluation."""

MEASURED = "measured"
UNDERPOWERED = "underpowered"


@dataclass(frozen=True, slots=True)
class FloorKey:
    """What a floor is valid for."""

    backend: str
    build: str
    model: str

    def label(self) -> str:
        return f"{self.backend} / build {self.build} / model {self.model[:12]}"


@dataclass(frozen=True, slots=True)
class ReplayedPosition:
    """One A/A position: the decode's lead of top-1 over its runner-up, how much the replay
    moved that lead, and whether the replay picked another token."""

    margin: float
    change: float | None
    """|decode gap - replay gap| of the decode's top-1 and runner-up; None when the replay's
    top-k lacks one of them."""
    flipped: bool
    exact: bool
    """The replay reproduced the decode: same token, same logprobs of both (within
    `EXACT_TOLERANCE`)."""


def replayed_position(decoded: TokenLogprob, replayed: ReplayResult) -> ReplayedPosition | None:
    """The A/A comparison at one position (None without ids or a runner-up)."""
    if decoded.token_id is None or len(decoded.top) < 2:
        return None
    first, second = decoded.top[0], decoded.top[1]
    if first.token_id is None or second.token_id is None:
        return None
    margin = first.logprob - second.logprob
    r1 = replayed.logprob_of(first.token_id)
    r2 = replayed.logprob_of(second.token_id)
    change = abs(margin - (r1 - r2)) if r1 is not None and r2 is not None else None
    flipped = replayed.token.token_id != first.token_id
    exact = (
        not flipped
        and r1 is not None
        and r2 is not None
        and abs(r1 - first.logprob) <= EXACT_TOLERANCE
        and abs(r2 - second.logprob) <= EXACT_TOLERANCE
    )
    return ReplayedPosition(margin, change, flipped, exact)


@dataclass(frozen=True, slots=True)
class MarginBand:
    low: float
    high: float
    positions: int
    flips: int

    @property
    def rate(self) -> float | None:
        return self.flips / self.positions if self.positions else None

    def label(self) -> str:
        high = "inf" if math.isinf(self.high) else f"{self.high:g}"
        return f"[{self.low:g}, {high})"


@dataclass(frozen=True, slots=True)
class GapFloor:
    """The A/A floor: a number only when `state` is `measured`."""

    state: str
    floor: float | None
    positions: int
    """Replayed positions whose top-1 and runner-up the replay also lists."""
    min_positions: int = MIN_POSITIONS
    quantile: float = FLOOR_QUANTILE
    flips: int = 0
    flip_margins: tuple[float, ...] = ()
    change_q: float | None = None
    change_max: float | None = None
    exact_positions: int = 0
    replayed: int = 0
    """All replayed positions (some lack a runner-up in the replay's top-k)."""
    bands: tuple[MarginBand, ...] = ()
    margins: tuple[float, ...] = ()
    """Every replayed position's decode margin: what the offline positive control samples."""
    key: FloorKey | None = None
    plan: str = ""
    """How the positions were drawn, in words ("24 probes x up to 10 positions")."""
    legacy: bool = False
    """Read from a result of the first floor (pooled over every top-k alternative)."""
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def measured(self) -> bool:
        return self.state == MEASURED and self.floor is not None

    @property
    def exact(self) -> bool:
        """Every replayed position reproduced the decode exactly (the exact mode holds)."""
        return self.replayed > 0 and self.exact_positions == self.replayed

    def describe(self) -> str:
        where = f" ({self.key.label()})" if self.key is not None else ""
        if not self.measured:
            return (
                f"noise floor underpowered{where}: {self.positions} replayed position(s), "
                f"at least {self.min_positions} needed"
                + ("; the stored figure pooled every top-k alternative" if self.legacy else "")
            )
        return (
            f"noise floor {self.floor:.4f} nats{where}: {self.quantile * 100:g}th percentile of "
            f"the top-1-vs-runner-up gap change over {self.positions} positions, "
            f"{self.flips} flip(s)"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "floor": self.floor,
            "positions": self.positions,
            "min_positions": self.min_positions,
            "quantile": self.quantile,
            "disagreements": self.flips,
            "disagreement_margins": list(self.flip_margins),
            "gap_delta_q": self.change_q,
            "gap_delta_max": self.change_max,
            "exact_positions": self.exact_positions,
            "replayed": self.replayed,
            "bands": [
                {
                    "low": b.low,
                    "high": None if math.isinf(b.high) else b.high,
                    "positions": b.positions,
                    "flips": b.flips,
                }
                for b in self.bands
            ],
            "margins": [round(m, 5) for m in self.margins],
            "key": (
                {"backend": self.key.backend, "build": self.key.build, "model": self.key.model}
                if self.key is not None
                else None
            ),
            "plan": self.plan,
            "basis": "top-1 vs runner-up gap change",
            "legacy": self.legacy,
            "notes": list(self.notes),
        }

    @staticmethod
    def from_json(raw: Mapping[str, Any]) -> GapFloor:
        """Reads this floor's own JSON and the first floor's (no `state`: pooled over every
        alternative, so never a number here; underpowered below `MIN_POSITIONS` anyway)."""
        key_raw = raw.get("key")
        key = (
            FloorKey(str(key_raw["backend"]), str(key_raw["build"]), str(key_raw["model"]))
            if isinstance(key_raw, Mapping)
            else None
        )
        legacy = "state" not in raw
        positions = int(raw.get("positions") or 0)
        state = UNDERPOWERED if legacy else str(raw["state"])
        bands = tuple(
            MarginBand(
                float(b["low"]),
                math.inf if b["high"] is None else float(b["high"]),
                int(b["positions"]),
                int(b["flips"]),
            )
            for b in raw.get("bands") or []
        )
        return GapFloor(
            state=state,
            floor=None if legacy else raw.get("floor"),
            positions=positions,
            min_positions=int(raw.get("min_positions") or MIN_POSITIONS),
            quantile=float(raw.get("quantile") or FLOOR_QUANTILE),
            flips=int(raw.get("disagreements") or 0),
            flip_margins=tuple(float(m) for m in raw.get("disagreement_margins") or []),
            change_q=raw.get("gap_delta_q"),
            change_max=raw.get("gap_delta_max"),
            exact_positions=int(raw.get("exact_positions") or 0),
            replayed=0 if legacy else int(raw.get("replayed") or positions),
            bands=bands,
            margins=tuple(float(m) for m in raw.get("margins") or []),
            key=key,
            plan=str(raw.get("plan") or ""),
            legacy=legacy,
            notes=tuple(str(n) for n in raw.get("notes") or []),
        )


def quantile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated quantile (numpy's default); 0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    pos = q * (len(ordered) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def margin_bands(positions: Sequence[ReplayedPosition]) -> tuple[MarginBand, ...]:
    """Positions and flips per decode-margin band."""
    bands = []
    for low, high in itertools.pairwise(MARGIN_BANDS):
        inside = [p for p in positions if low <= p.margin < high]
        bands.append(MarginBand(low, high, len(inside), sum(p.flipped for p in inside)))
    return tuple(bands)


def gap_floor(
    positions: Sequence[ReplayedPosition],
    *,
    key: FloorKey | None = None,
    plan: str = "",
    min_positions: int = MIN_POSITIONS,
    q: float = FLOOR_QUANTILE,
) -> GapFloor:
    """The floor from A/A positions: the larger of the `q` quantile of the top-1 gap change
    and the largest decode margin at which the replay picked another token; `underpowered`
    (no number) below `min_positions` positions with a measured change."""
    changes = [p.change for p in positions if p.change is not None]
    flip_margins = sorted(p.margin for p in positions if p.flipped)
    enough = len(changes) >= min_positions
    change_q = quantile(changes, q) if changes else None
    value = max(change_q or 0.0, max(flip_margins, default=0.0)) if enough else None
    return GapFloor(
        state=MEASURED if enough else UNDERPOWERED,
        floor=value,
        positions=len(changes),
        min_positions=min_positions,
        quantile=q,
        flips=len(flip_margins),
        flip_margins=tuple(flip_margins),
        change_q=change_q,
        change_max=max(changes, default=None),
        exact_positions=sum(p.exact for p in positions),
        replayed=len(positions),
        bands=margin_bands(positions),
        margins=tuple(p.margin for p in positions),
        key=key,
        plan=plan,
    )


def positions_per_probe(probes: int, target: int = TARGET_POSITIONS) -> int:
    """Positions to replay in each of `probes` outputs so that together they reach `target`."""
    return max(1, math.ceil(target / probes)) if probes > 0 else 0
