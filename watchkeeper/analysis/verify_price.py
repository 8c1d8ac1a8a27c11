"""What verification costs on this host, apart from any drafter: the acceptance a speculation
method needs here before it pays (the break-even), from runs with synthetic acceptance.

llama.cpp 11434's `--spec-synth-len L` (or `--spec-synth-rates P0,...`, "benchmarking only")
replaces verification by a coin: each drafted token is accepted with a fixed probability
(geometric over positions for `L`, the mean accepted length including the target's token),
drawn from a generator seeded with the request's `seed`. The target still evaluates the whole
draft plus one token per step, so such a run prices a speculative step at any acceptance one
asks for, with a tiny random drafter whose own cost is next to nothing (the output is not
valid text; nothing here reads it).

Why one parameter, not a free line through the points: a step that drafts n tokens and accepts
a fraction `a` of them (the server's own counts: accepted / drafted) yields 1 + n a tokens,
and costs the same whatever is accepted (the target verifies n + 1 tokens either way). So the
speed-up over the baseline is s = c (1 + n a), where c is a plain decode step's time over a
speculative step's: the verification price. c is estimated per round from every synthetic
arm of that round (its speed-up is paired with the baseline's requests of the same round, so
the round's drift cancels), and its interval is a t interval over rounds. The break-even is
where s = 1: a* = (1/c - 1) / n. The per-arm c is kept as a check of the model: a c that
moves with the acceptance says the step's cost is not flat (a recurrent model's replay, the
drafter's catch-up), and the report shows it.

A break-even is stated only where it was measured around: an estimate or CI end beyond the
acceptances the synthetic arms reached is printed as "above 73%" (the highest counted one),
never as an extrapolated figure; "no acceptance pays" where even 100% at this draft length
leaves the CI's best end below 1.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from watchkeeper.format import ci, share
from watchkeeper.load.records import RequestSample
from watchkeeper.student import CONFIDENCE, t_half_width

SYNTH_FLAG = "spec-synth-len"
"""The knob the synthetic arms set (a profile's `spec_knobs`): one number per arm, the mean
accepted length including the target's token, from which the build derives geometric
per-position rates."""


def synth_length(draft_n: int, acceptance: float) -> float:
    """`--spec-synth-len` for a counted acceptance `acceptance` at draft length `draft_n`:
    1 + n a (the target's token plus the accepted draft tokens of a step)."""
    if not 0.0 <= acceptance <= 1.0:
        raise ValueError(f"acceptance {acceptance} is not within [0, 1]")
    return round(1.0 + draft_n * acceptance, 6)


@dataclass(frozen=True, slots=True)
class SynthPoint:
    """One synthetic arm in one round: its speed-up over the baseline's requests of the same
    round (geometric mean over the tasks both answered) and its own counted acceptance."""

    arm: str
    asked: float
    """The acceptance the arm asked for (`--spec-synth-len` = 1 + n x asked)."""
    round: int
    speedup: float
    drafted: int
    accepted: int
    tasks: int

    @property
    def acceptance(self) -> float | None:
        return self.accepted / self.drafted if self.drafted > 0 else None


def round_points(
    cells: Mapping[tuple[str, int], Mapping[str, RequestSample]],
    baseline: str,
    asked: Mapping[str, float],
) -> list[SynthPoint]:
    """Every (synthetic arm, round) of `cells` ((arm, round) -> task -> measured request) as a
    point, paired task by task with the baseline's requests of the same round; a cell with no
    clean pair or no drafted token is left out (it prices nothing)."""
    points: list[SynthPoint] = []
    for (arm, rnd), reqs in sorted(cells.items()):
        if arm not in asked:
            continue
        base = cells.get((baseline, rnd), {})
        logs: list[float] = []
        drafted = accepted = 0
        for task, c in reqs.items():
            b = base.get(task)
            if not c.ok or b is None or not b.ok:
                continue
            drafted += c.draft_n or 0
            accepted += c.draft_n_accepted or 0
            if c.decode_tps_server and b.decode_tps_server:
                logs.append(math.log(c.decode_tps_server / b.decode_tps_server))
        if logs and drafted > 0:
            s = math.exp(sum(logs) / len(logs))
            points.append(SynthPoint(arm, asked[arm], rnd, s, drafted, accepted, len(logs)))
    return points


@dataclass(frozen=True, slots=True)
class ArmPrice:
    """One synthetic arm over all rounds."""

    arm: str
    asked: float
    acceptance: float
    drafted: int
    accepted: int
    speedup: float
    """Geometric mean of its rounds' speed-ups."""
    cost: float
    """Its own c = s / (1 + n a): flat across arms where the model holds."""


@dataclass(frozen=True, slots=True)
class BreakEven:
    """The counted acceptance at which a step pays for itself (speed-up 1.0), at the draft
    length of the synthetic arms, with where it was measured."""

    estimate: float
    low: float | None
    high: float | None
    measured_low: float
    measured_high: float
    """The lowest and highest counted acceptance the synthetic arms reached."""
    kind: str
    """'bracketed' (estimate and CI inside the measured range), 'above' / 'below' (the whole
    CI beyond it), 'partly' (an end beyond it), 'none-pays' (even 100% leaves the CI's best
    end below 1), 'no-ci' (one round)."""

    def _at(self, value: float) -> str:
        if value > 1.0 + 1e-9:
            return "over 100%"  # unreachable: at that end no acceptance pays
        if value > self.measured_high + 1e-9:
            return f"above {share(self.measured_high, 0)}"
        if value < self.measured_low - 1e-9:
            return f"below {share(self.measured_low, 0)}"
        return share(value, 0)

    def text(self) -> str:
        """'48% (95% CI 41-55%)', 'above 73%', '70% (95% CI 61% to above 73%)', ..."""
        if self.kind == "none-pays":
            return "no acceptance pays at this draft length (even 100% stays below 1.0x)"
        if self.low is None or self.high is None:
            if self.estimate > 1.0:
                return "no acceptance pays at the estimate (no CI: 1 round)"
            return f"{self._at(self.estimate)} (no CI: 1 round)"
        if self.kind in ("above", "below"):
            return self._at(self.estimate)
        if self.kind == "bracketed":
            return f"{share(self.estimate, 0)} ({ci(self.low * 100, self.high * 100, '.0f')}%)"
        return f"{self._at(self.estimate)} ({ci(self.low, self.high, self._at, ' to ')})"


def _kind(est: float, low: float | None, high: float | None, lo_m: float, hi_m: float) -> str:
    if low is None or high is None:
        return "no-ci"
    if low > 1.0:
        return "none-pays"
    if low > hi_m:
        return "above"
    if high < lo_m:
        return "below"
    if lo_m <= low and high <= hi_m:
        return "bracketed"
    return "partly"


@dataclass(frozen=True, slots=True)
class VerifyPrice:
    """The verification price (c) and the break-even acceptance, with the arms behind them."""

    draft_n: int
    rounds: int
    cost: float
    """c: a plain decode step's time over a speculative step's (drafting n with the tiny
    drafter, verifying n + 1)."""
    cost_low: float | None
    cost_high: float | None
    break_even: BreakEven
    arms: tuple[ArmPrice, ...]
    points: tuple[SynthPoint, ...]
    confidence: float = CONFIDENCE
    about: Mapping[str, str] | None = None
    """Where and how it was measured (target, build, host, date, command), as the pass
    wrote it; the report quotes it."""

    def needed(self, cost_ratio: float = 0.0, cost: float | None = None) -> float:
        """The counted acceptance a method with a drafter costing `cost_ratio` target decode
        steps per drafted token needs to pay here: its step costs 1/c + n x cost_ratio plain
        steps (the tiny drafter's own cost stays in, so this errs high by it)."""
        c = self.cost if cost is None else cost
        return (1.0 / c + self.draft_n * cost_ratio - 1.0) / self.draft_n

    def needed_span(self, cost_ratio: float = 0.0) -> tuple[float | None, float | None]:
        """`needed` at the CI's ends of c (a higher c needs less)."""
        if self.cost_low is None or self.cost_high is None:
            return None, None
        return self.needed(cost_ratio, self.cost_high), self.needed(cost_ratio, self.cost_low)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["about"] = dict(self.about or {})
        data["break_even"]["text"] = self.break_even.text()
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> VerifyPrice:
        be = {k: v for k, v in data["break_even"].items() if k != "text"}
        return cls(
            draft_n=int(data["draft_n"]),
            rounds=int(data["rounds"]),
            cost=float(data["cost"]),
            cost_low=data.get("cost_low"),
            cost_high=data.get("cost_high"),
            break_even=BreakEven(**be),
            arms=tuple(ArmPrice(**a) for a in data["arms"]),
            points=tuple(SynthPoint(**p) for p in data["points"]),
            confidence=float(data.get("confidence", CONFIDENCE)),
            about=dict(data.get("about") or {}),
        )


def _arm_prices(points: Sequence[SynthPoint], n: int) -> list[ArmPrice]:
    out: list[ArmPrice] = []
    for arm in sorted({p.arm for p in points}, key=lambda a: (_asked(points, a), a)):
        mine = [p for p in points if p.arm == arm]
        drafted, accepted = sum(p.drafted for p in mine), sum(p.accepted for p in mine)
        a = accepted / drafted
        s = math.exp(sum(math.log(p.speedup) for p in mine) / len(mine))
        out.append(ArmPrice(arm, mine[0].asked, a, drafted, accepted, s, s / (1 + n * a)))
    return out


def _asked(points: Sequence[SynthPoint], arm: str) -> float:
    return next(p.asked for p in points if p.arm == arm)


def fit(
    points: Sequence[SynthPoint],
    draft_n: int,
    *,
    confidence: float = CONFIDENCE,
    about: Mapping[str, str] | None = None,
) -> VerifyPrice:
    """c per round (mean over that round's arms of ln s - ln(1 + n a)), its t interval over
    rounds, and the break-even acceptance it implies."""
    usable = [p for p in points if p.acceptance is not None and p.speedup > 0]
    if not usable:
        raise ValueError("no synthetic arm drafted a token: nothing prices verification")
    by_round: dict[int, list[float]] = {}
    for p in usable:
        a = p.acceptance or 0.0
        by_round.setdefault(p.round, []).append(math.log(p.speedup) - math.log1p(draft_n * a))
    per_round = np.array([sum(v) / len(v) for _, v in sorted(by_round.items())])
    log_c = float(per_round.mean())
    low = high = None
    if per_round.size >= 2:
        half = t_half_width(per_round, confidence)
        low, high = math.exp(log_c - half), math.exp(log_c + half)
    arms = _arm_prices(usable, draft_n)
    lo_m, hi_m = min(a.acceptance for a in arms), max(a.acceptance for a in arms)

    def star(c: float) -> float:
        return (1.0 / c - 1.0) / draft_n

    est = star(math.exp(log_c))
    be_low = star(high) if high is not None else None
    be_high = star(low) if low is not None else None
    kind = _kind(est, be_low, be_high, lo_m, hi_m)
    return VerifyPrice(
        draft_n=draft_n,
        rounds=int(per_round.size),
        cost=math.exp(log_c),
        cost_low=low,
        cost_high=high,
        break_even=BreakEven(est, be_low, be_high, lo_m, hi_m, kind),
        arms=tuple(arms),
        points=tuple(usable),
        confidence=confidence,
        about=dict(about or {}),
    )


def cost_check(vp: VerifyPrice) -> str:
    """The model's check in words: c per arm (flat where a step's cost does not depend on the
    acceptance)."""
    parts = [f"{a.cost:.2f} at {share(a.acceptance, 0)}" for a in vp.arms]
    spread = max(a.cost for a in vp.arms) / min(a.cost for a in vp.arms) - 1.0
    return f"c per arm: {', '.join(parts)} (spread {spread:.0%})"
