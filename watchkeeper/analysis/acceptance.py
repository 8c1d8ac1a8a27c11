"""The per-position acceptance curve of a speculative arm, from its own /metrics counters. Pure.

The server counts, per verification step, how many draft tokens were accepted; the record of
those counts is engine-neutral (`server/counters.py:SpecCounters`, filled from llama-server's
metrics by `server/endpoints.py:spec_counters`): `per_position[i]` is the number of steps
with at least i + 1 tokens accepted, and `drafts` the number of
steps that verified a draft. Their ratio is the acceptance at draft position i: the chance that
a draft survives to position i. It falls with i, and how fast is the drafter's diagnosis (seed
002's EAGLE-3 table: 84/75/74/73% for a well-matched drafter against 65/43/29/20%). A single
acceptance rate hides it: a draft length wins or loses by the positions it pays for and throws
away.

The counters are read before and after each run (the process may be fresh or shared with
earlier runs), so every figure here is a delta over the arm's own measured requests, summed
over its runs. Summed over positions the per-position counts are the accepted tokens (a step
with k tokens accepted counts at positions 0 .. k - 1), which `consistent` checks against
the accepted-token counter.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from watchkeeper.analysis.benchmark import ArmSpec, BenchResult
from watchkeeper.load.records import RunResult
from watchkeeper.server.counters import EMPTY, SpecCounters
from watchkeeper.server.endpoints import spec_counters
from watchkeeper.server.spec_knobs import model_drafter

LOW_ACCEPTANCE = 0.2
"""Positions accepting under this share are the ones a draft length pays for and throws away."""
CONSISTENCY_TOLERANCE = 0.01
"""Relative gap allowed between the per-position sum and the accepted-token counter."""


Samples = Mapping[str, float]
"""One /metrics scrape as `fetch_metrics` returns it (labels folded into the key)."""


Counters = SpecCounters
"""The speculative counters' deltas over some requests: the engine-neutral record."""


@dataclass(frozen=True, slots=True)
class AcceptanceCurve:
    arm: str
    drafts: float
    drafted: float
    accepted: float
    per_position: tuple[float, ...]
    rates: tuple[float, ...]
    """per_position[i] / drafts: acceptance at draft position i."""
    n_max: int | None = None

    @property
    def position_sum(self) -> float:
        return sum(self.per_position)

    @property
    def consistent(self) -> bool:
        """The per-position counts add up to the accepted-token counter (within 1%)."""
        return abs(self.position_sum - self.accepted) <= CONSISTENCY_TOLERANCE * max(
            self.accepted, 1.0
        )

    @property
    def mean_accepted(self) -> float | None:
        return self.accepted / self.drafts if self.drafts else None

    def to_json(self) -> dict[str, object]:
        return {
            "arm": self.arm,
            "drafts": self.drafts,
            "drafted": self.drafted,
            "accepted": self.accepted,
            "per_position": list(self.per_position),
            "rates": [round(r, 6) for r in self.rates],
            "n_max": self.n_max,
            "consistent": self.consistent,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> AcceptanceCurve:
        def floats(key: str) -> tuple[float, ...]:
            raw = data.get(key) or []
            return tuple(float(x) for x in raw) if isinstance(raw, list) else ()

        n_max = data.get("n_max")
        return cls(
            str(data["arm"]),
            float(data.get("drafts") or 0.0),  # type: ignore[arg-type]
            float(data.get("drafted") or 0.0),  # type: ignore[arg-type]
            float(data.get("accepted") or 0.0),  # type: ignore[arg-type]
            floats("per_position"),
            floats("rates"),
            int(n_max) if isinstance(n_max, int) else None,
        )


def delta(before: Samples, after: Samples) -> Counters:
    """The counters' movement between two scrapes of one process. A counter missing from
    `before` started at 0 (a fresh process reports a position only once it was reached)."""
    moved = spec_counters(after)
    return EMPTY if moved is None else moved.since(spec_counters(before))


def curve(
    arm: str, scrapes: Iterable[tuple[Samples, Samples]], n_max: int | None = None
) -> AcceptanceCurve | None:
    """The arm's curve over its runs ((before, after) per run); None when nothing drafted."""
    total = EMPTY
    for before, after in scrapes:
        total = total + delta(before, after)
    if total.drafts <= 0:
        return None
    per = total.per_position
    if n_max is not None:
        # A draft of n_max tokens has exactly n_max positions; one never reached reads 0.
        per = (per + (0.0,) * n_max)[:n_max]
    else:
        while per and per[-1] == 0.0:
            per = per[:-1]
    return AcceptanceCurve(
        arm,
        total.drafts,
        total.drafted,
        total.accepted,
        per,
        tuple(p / total.drafts for p in per),
        n_max,
    )


def low_positions(c: AcceptanceCurve, below: float = LOW_ACCEPTANCE) -> tuple[int, int] | None:
    """The first and last position (1-based, as a reader counts draft tokens) from which on
    every position accepts under `below`; None when every position reaches it."""
    first = None
    for i in range(len(c.rates) - 1, -1, -1):
        if c.rates[i] >= below:
            break
        first = i
    if first is None:
        return None
    return first + 1, len(c.rates)


def explain(c: AcceptanceCurve, below: float = LOW_ACCEPTANCE) -> str:
    """One sentence a report can use to say why a draft length wins or loses."""
    if not c.rates:
        return f"{c.arm}: no per-position counters"
    head = ", ".join(f"{r:.0%}" for r in c.rates[:4])
    more = ", ..." if len(c.rates) > 4 else ""
    text = f"{c.arm}: acceptance by position {head}{more}"
    span = low_positions(c, below)
    if span is None:
        return text + f"; every position accepts at least {below:.0%}"
    lo, hi = span
    where = f"position {lo}" if lo == hi else f"positions {lo}-{hi}"
    text += f"; {where} accept under {below:.0%}"
    if c.n_max and lo <= c.n_max:
        text += f": n_max {c.n_max} pays for drafts it throws away"
    return text


def curves_json(
    arms: Sequence[tuple[str, int | None]],
    runs: Sequence[tuple[str, bool, Samples, Samples]],
) -> list[dict[str, object]]:
    """Curves of `arms` ((name, n_max)) from runs given as (arm, is_warmup, before, after);
    warm-up and probe runs never count. What bench stores in `BenchResult.extras`."""
    out = []
    for name, n_max in arms:
        scrapes = [(b, a) for arm, warm, b, a in runs if arm == name and not warm]
        c = curve(name, scrapes, n_max)
        if c is not None:
            out.append(c.to_json())
    return out


def _curve_n_max(arm: ArmSpec) -> int | None:
    """Draft models draft up to n_max positions; n-gram types size their own drafts."""
    return arm.draft_n_max if model_drafter(arm.spec_type) is not None else None


def with_curves(result: BenchResult, runs: Sequence[RunResult]) -> BenchResult:
    """`result` with every speculative candidate's curve in `extras["acceptance_curves"]`
    (so `--json`, the report and the plot read it), from the measured runs' scrapes."""
    arms = [
        (a.name, _curve_n_max(a)) for a in result.arms if a.role != "baseline" and a.speculative
    ]
    scrapes = [(r.arm, r.is_warmup, r.metrics_before, r.metrics_after) for r in runs]
    return replace(
        result, extras={**result.extras, "acceptance_curves": curves_json(arms, scrapes)}
    )


def result_curves(result: BenchResult) -> list[AcceptanceCurve]:
    raw = result.extras.get("acceptance_curves") or []
    return [AcceptanceCurve.from_json(c) for c in raw if isinstance(c, Mapping)]
