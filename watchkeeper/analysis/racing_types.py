"""The racing rule's data (analysis/racing.py): cells, arms, settings, drops, decisions, the
race's state, and the table that pairs cells. Kept apart from the rule so the sweep, its report
and the benchmark can name these types without the rule's statistics.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from watchkeeper.analysis.stats import MIN_ROUNDS, Pair, RatioCI, paired_speedup
from watchkeeper.server.spec_knobs import lookup_only

ROUND_DRIFT_SD = 0.06
"""Round-to-round drift of one arm's half of a round, as a log-ratio sd: DESIGN.md measured
2.8-5.9% per round with identical servers on this host; the early rule's error uses the top."""


@dataclass(frozen=True, slots=True)
class Cell:
    arm: str
    task_id: str
    category: str
    round: int
    tps: float


@dataclass(frozen=True, slots=True)
class RaceArm:
    name: str
    cost: float
    """Lower is cheaper: a tie goes to the cheaper arm (baseline 0)."""
    baseline: bool = False
    control: bool = False
    """The A/A control (analysis/aa_control.py): measured every round the race runs, never
    dropped, never a leader or a winner."""


@dataclass(frozen=True, slots=True)
class RaceSettings:
    min_effect: float = 0.03
    alpha: float = 0.05
    max_rounds: int = 5
    min_rounds: int = MIN_ROUNDS
    early_margin: float = 0.5
    """Early rule: slower than 1 / (1 + early_margin) of the baseline (0.5: below 0.67x)."""
    round_drift_sd: float = ROUND_DRIFT_SD
    ceiling_slack: float = 0.10
    """Ceiling rule: the calibration's own error allowed for (a draft setting is dropped before
    round 1 only when its bound at perfect acceptance, raised by this much, still cannot tie
    the baseline)."""
    resamples: int = 1000
    seed: int = 0

    @property
    def looks(self) -> int:
        return max(1, self.max_rounds - self.min_rounds + 1)

    @property
    def look_confidence(self) -> float:
        return 1.0 - self.alpha / self.looks

    @property
    def ceiling_cut(self) -> float:
        """Below this bound at perfect acceptance a draft setting cannot tie the baseline."""
        return 1.0 / (1.0 + self.min_effect) / (1.0 + self.ceiling_slack)

    @property
    def method(self) -> str:
        return (
            f"Bonferroni split of alpha {self.alpha:g} over {self.looks} planned look(s) "
            f"(rounds {self.min_rounds}-{self.max_rounds}): each look at "
            f"{self.look_confidence:.2%} confidence; early rule before round {self.min_rounds}: "
            f"below {1 / (1 + self.early_margin):.2f}x the baseline on every task; ceiling rule "
            f"before round 1: a draft setting whose speed-up at perfect acceptance, priced with "
            f"the costs calibrated on this host, is below {self.ceiling_cut:.2f}x"
        )


@dataclass(frozen=True, slots=True)
class Drop:
    arm: str
    round: int
    rule: str
    """'ceiling' (before round 1, from the calibrated costs), 'early', 'ci' or 'idle' (drafted
    nothing in a round)."""
    reason: str
    error: float | None = None
    """Early rule: the chance such a drop is wrong (see `early_error`)."""


@dataclass(frozen=True, slots=True)
class Ceiling:
    """A draft setting's speed-up bound if every drafted token were accepted, from the costs
    calibrated before round 1 (analysis/bench_bound.perfect_acceptance_bound)."""

    arm: str
    bound: float
    how: str
    """The prices behind it, for the report: draft cost, verification cost, draft length."""


@dataclass(frozen=True, slots=True)
class CategoryDecision:
    category: str
    status: str
    """'decided' or 'unresolved'."""
    winner: str | None
    """Decided: the winner. Unresolved: None (see `provisional`)."""
    leader: str
    """Highest paired ratio to the baseline (point estimate)."""
    runner_up: str | None
    versus_runner_up: RatioCI | None
    """Decided: runner-up / winner at the look's confidence. Unresolved: the CI that blocks,
    `contender` / `runner_up`."""
    versus_baseline: RatioCI | None
    """The pick against the baseline (95%): what the report quotes as the winner's CI."""
    reason: str
    rounds_needed: int | None = None
    provisional: str | None = None
    """Unresolved: the pick until it is settled (an arm called faster than the baseline at the
    look's confidence, else the baseline)."""
    contender: str | None = None
    """Unresolved: the arm whose ratio to `runner_up` is the open comparison."""

    @property
    def pick(self) -> str:
        return self.winner or self.provisional or self.leader


@dataclass(frozen=True, slots=True)
class RaceState:
    rounds: int
    active: tuple[str, ...]
    drops: tuple[Drop, ...] = ()
    decisions: tuple[CategoryDecision, ...] = ()
    rounds_by_arm: dict[str, int] = field(default_factory=dict)

    @property
    def decided(self) -> bool:
        return bool(self.decisions) and all(d.status == "decided" for d in self.decisions)

    def unresolved(self) -> list[CategoryDecision]:
        return [d for d in self.decisions if d.status != "decided"]


class Table:
    """Cells indexed for pairing: arm -> (task, round) -> (category, tok/s)."""

    def __init__(self, cells: Iterable[Cell]) -> None:
        self.by_arm: dict[str, dict[tuple[str, int], Cell]] = defaultdict(dict)
        for c in cells:
            if c.tps > 0:
                self.by_arm[c.arm][(c.task_id, c.round)] = c

    def categories(self, arm: str) -> list[str]:
        return sorted({c.category for c in self.by_arm.get(arm, {}).values()})

    def rounds(self, arm: str) -> int:
        return len({r for _, r in self.by_arm.get(arm, {})})

    def pairs(self, candidate: str, reference: str, category: str | None) -> list[Pair]:
        ref = self.by_arm.get(reference, {})
        out = []
        for key, c in sorted(self.by_arm.get(candidate, {}).items()):
            b = ref.get(key)
            if b is not None and (category is None or c.category == category):
                out.append(Pair(c.task_id, c.round, b.tps, c.tps))
        return out

    def ratio(
        self,
        candidate: str,
        reference: str,
        category: str | None,
        settings: RaceSettings,
        confidence: float,
    ) -> RatioCI | None:
        if candidate == reference:
            return None
        return paired_speedup(
            self.pairs(candidate, reference, category),
            resamples=settings.resamples,
            confidence=confidence,
            seed=settings.seed,
            threshold=settings.min_effect,
            min_rounds=settings.min_rounds,
        )


def cells_from_rows(rows: Iterable[Mapping[str, object]]) -> list[Cell]:
    """Cells from plain dicts (a JSON fixture or stored rows)."""
    return [
        Cell(
            str(r["arm"]),
            str(r["task_id"]),
            str(r["category"]),
            int(r["round"]),  # type: ignore[call-overload]
            float(r["tps"]),  # type: ignore[arg-type]
        )
        for r in rows
    ]


def arm_cost(spec_type: str | None, draft_n_max: int | None, speculative: bool) -> float:
    """Cheaper first: the baseline, then n-gram lookup (no draft model), then drafts by size."""
    if not speculative:
        return 0.0
    if lookup_only(spec_type):
        return 1.0
    return 2.0 + float(draft_n_max or 16)
