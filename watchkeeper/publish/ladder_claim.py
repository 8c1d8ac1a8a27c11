"""What the unit may say about the load it serves: the served ladder's figures, kept on the
record (`extra["served_ladder"]`) and read back into the unit's header.

A sweep's speed-up holds for the load it was measured under (one request at a time, one
slot). A unit serving four slots used to carry that figure with a line telling the reader to
measure elsewhere. Once `watchkeeper served-ladder` has measured the pick as served at each
load up to the unit's slots, the header says the speed-up at 1 and at its slots from that
measurement, each with its CI and what the CI is over, and says plainly where the pick was not
shown to pay (then the operator serves fewer slots or keeps the baseline there).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from watchkeeper.analysis.crossover import LevelRatios
from watchkeeper.format import ci

LADDER_KEY = "served_ladder"
PAYS = "faster"
"""The bench's verdict that the pick pays at a level: CI above 1 and beyond the threshold."""


@dataclass(frozen=True, slots=True)
class LevelClaim:
    """One rung: the decode speed-up (per-request tok/s, pick over baseline, paired by task
    and round: the bench's CI) and the E2E p90 ratio (baseline over pick, t interval over
    rounds), both with their CIs."""

    level: int
    campaign_id: int
    estimate: float
    low: float
    high: float
    verdict: str
    pairs: int
    e2e_estimate: float | None = None
    e2e_low: float | None = None
    e2e_high: float | None = None
    e2e_state: str = ""
    slots: int = 0
    """The servers' slots at this rung; 0: kept before rungs recorded it, when a ladder ran
    each rung on as many slots as its level (`served_slots`)."""

    @property
    def served_slots(self) -> int:
        return self.slots or self.level

    @property
    def pays(self) -> bool:
        return self.verdict == PAYS

    def decode_text(self) -> str:
        if self.low == self.high:
            return f"{self.estimate:.2f}x (no CI, {self.verdict})"
        return f"{self.estimate:.2f}x ({ci(self.low, self.high)}, {self.verdict})"

    def e2e_text(self) -> str:
        if self.e2e_estimate is None or self.e2e_low is None or self.e2e_high is None:
            return "not measured"
        return f"{self.e2e_estimate:.2f}x ({ci(self.e2e_low, self.e2e_high)}, {self.e2e_state})"


@dataclass(frozen=True, slots=True)
class ServedLadder:
    arm: str
    baseline: str
    slots: int
    ctx_per_slot: int
    cache_ram_mib: int | None
    report: str
    """The ladder page, relative to the record's folder."""
    rounds: int
    max_tokens: int
    levels: tuple[LevelClaim, ...]
    wall_s: float = 0.0
    hardware: str = ""
    """The host the ladder ran on (`deliverable.hardware_text`; empty: a record from before it
    was kept). A served-ladder run is often a later session's, on another machine than the
    sweep's: the code-edit pick read 1.63x one request at a time in its sweep on an AMD EPYC
    host and 2.73x at c1 in its ladder on an Intel Xeon one, so the header names the ladder's
    host wherever it is not the sweep's."""

    def at(self, level: int) -> LevelClaim | None:
        return next((c for c in self.levels if c.level == level), None)

    @property
    def pays_up_to(self) -> int:
        """The deepest load with every rung up to it shown to pay (0: not even one request)."""
        deepest = 0
        for claim in sorted(self.levels, key=lambda c: c.level):
            if not claim.pays:
                break
            deepest = claim.level
        return deepest

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "levels": [asdict(c) for c in self.levels]}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ServedLadder:
        return cls(
            **{k: data[k] for k in data if k != "levels"},
            levels=tuple(LevelClaim(**c) for c in data.get("levels", [])),
        )


def level_claim(ratios: LevelRatios, campaign_id: int, *, slots: int = 0) -> LevelClaim:
    """The rung as the record keeps it, from the ladder's own readings; `slots`: the servers'
    slots it ran on."""
    speedup = ratios.speedup
    e2e = ratios.reading("e2e_p90")
    return LevelClaim(
        level=int(ratios.level),
        campaign_id=campaign_id,
        estimate=speedup.estimate if speedup else float("nan"),
        low=speedup.low if speedup else float("nan"),
        high=speedup.high if speedup else float("nan"),
        verdict=speedup.verdict if speedup else "not measured",
        pairs=speedup.n_pairs if speedup else 0,
        e2e_estimate=e2e.estimate if e2e else None,
        e2e_low=e2e.low if e2e and e2e.has_ci else None,
        e2e_high=e2e.high if e2e and e2e.has_ci else None,
        e2e_state=e2e.state if e2e else "",
        slots=slots,
    )


def served_ladder(extra: Mapping[str, Any]) -> ServedLadder | None:
    data = extra.get(LADDER_KEY)
    return ServedLadder.from_json(data) if isinstance(data, Mapping) else None


def _load(level: int) -> str:
    return "one request at a time" if level == 1 else f"{level} concurrent requests"


def load_note(
    measured_load: str,
    extra: Mapping[str, Any],
    *,
    speculates: bool = False,
    sweep_hardware: str = "",
) -> str:
    """The header's sentence on load: the served ladder's figures where it ran, else the
    sweep's own load and where to measure another (for a speculating unit serving more slots
    than that: that its own load is not yet measured, and the command that measures it)."""
    ladder = served_ladder(extra)
    if ladder is None:
        slots = int((extra.get("served") or {}).get("slots") or 1)
        if speculates and slots > 1 and extra.get("record"):
            return (
                f"Holds for the load it was measured under: {measured_load}. This unit serves "
                f"{slots} requests at once, a load its speed-up was not measured at: "
                f"`watchkeeper served-ladder --recommendation {extra['record']}` measures it "
                "at 1, 2, ... "
                f"{slots} on servers started as this unit runs them (docs/load.md)."
            )
        return (
            f"Holds for the load it was measured under: {measured_load}. At another load, "
            "measure it there (`watchkeeper bench --load-ladder`, docs/load.md)."
        )
    one, top = ladder.at(1), ladder.at(ladder.slots)
    cache = "off" if ladder.cache_ram_mib == 0 else f"{ladder.cache_ram_mib} MiB"
    rungs = "; ".join(
        f"at {_load(c.level)}{' (its slots)' if c.level == ladder.slots else ''}"
        f"{_fewer(c, ladder.slots)} {c.decode_text()}, E2E p90 {c.e2e_text()}"
        for c in (one, top)
        if c is not None
    )
    as_served = all(c.served_slots == ladder.slots for c in ladder.levels)
    deepest = ladder.pays_up_to
    if deepest >= ladder.slots:
        verdict = f"shown to pay at every load this unit serves (1 to {ladder.slots})"
    elif deepest == 0:
        verdict = (
            "not shown to pay even one request at a time as served: keep the baseline "
            "until a rerun shows otherwise"
        )
    else:
        verdict = (
            f"shown to pay up to {_load(deepest)}, not at {ladder.slots}: serve {deepest} "
            f"slot(s) ([service] slots = {deepest}, re-render) or expect no gain when busy"
        )
    how = (
        f"Measured as this unit serves it ({ladder.slots} slots, {ladder.ctx_per_slot} tokens "
        "a slot"
        if as_served
        else "Measured on this unit's flags, though not every load on its slots (its "
        f"{ladder.ctx_per_slot * ladder.slots} tokens of context over {ladder.slots} slots at "
        f"{ladder.slots} requests, over as many slots as requests below"
    )
    elsewhere = (
        f" The ladder ran on another host than the sweep ({ladder.hardware}; the sweep: "
        f"{sweep_hardware}): its figures and the headline's are two hosts' readings."
        if ladder.hardware and sweep_hardware and ladder.hardware != sweep_hardware
        else ""
    )
    return (
        f"{how}, prompt cache {cache}; {ladder.report}, {ladder.rounds} rounds, "
        "answers cut "
        f"at {ladder.max_tokens or 'their own'} tokens; decode speed-up is per-request tok/s, "
        f"pick over baseline, CI over tasks and rounds; E2E p90 is baseline over pick, CI "
        f"over rounds): {rungs}. {ladder.arm} is {verdict}. The headline's figure is the "
        "sweep's, one request at a time on one slot."
        f"{elsewhere}"
    )


def _fewer(c: LevelClaim, slots: int) -> str:
    """A rung whose servers had fewer slots than the unit says so beside its figure."""
    n = c.served_slots
    return "" if n == slots else f" (on a server of {n} slot{'s' if n != 1 else ''})"
