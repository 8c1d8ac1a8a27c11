"""Pick a speculative profile per category and overall — conservatively.

A profile is only recommended when its speed-up CI lies entirely above 1.0 and it has no
correctness finding; among those the highest lower CI bound wins (the best *guaranteed* gain,
not the best point estimate). When nothing qualifies the answer is "keep the baseline", said
plainly.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from watchkeeper.analysis.benchmark import ALL, BenchResult, CategoryStats


@dataclass(frozen=True, slots=True)
class Choice:
    category: str
    profile: str | None
    """None means: keep the baseline."""
    speedup: float | None
    low: float | None
    high: float | None
    reason: str


@dataclass(frozen=True, slots=True)
class Recommendation:
    overall: Choice
    per_category: tuple[Choice, ...]
    wins: tuple[str, ...] = ()
    """Categories where the recommended profile is called faster."""
    loses: tuple[str, ...] = ()
    """Categories where it is called slower."""
    guard: str = ""
    """What the degenerate-output guard said about the recommended profile's outputs."""

    @property
    def headline(self) -> str:
        c = self.overall
        if c.profile is None:
            return f"keep the baseline: {c.reason}"
        wins = ", ".join(self.wins) or "none"
        loses = ", ".join(self.loses) or "none"
        return (
            f"{c.profile}: {c.speedup:.2f}x decode speed-up "
            f"(95% CI {c.low:.2f}-{c.high:.2f}) over the baseline; faster on {wins}, slower on "
            f"{loses}; {self.guard}"
        )


def _choose(category: str, stats: Sequence[CategoryStats], excluded: dict[str, str]) -> Choice:
    # "faster" needs the CI above 1 *and* the estimate beyond the practical threshold.
    faster = [s for s in stats if s.speedup is not None and s.speedup.verdict == "faster"]
    eligible = [s for s in faster if s.arm not in excluded]
    if not eligible:
        measured = [s for s in stats if s.speedup is not None]
        if not measured:
            return Choice(category, None, None, None, None, "no speculative profile was measured")
        if faster:
            # Faster with confidence but disqualified: say why, or the reader thinks it was noise.
            why = "; ".join(
                f"{s.arm} {s.speedup.estimate:.2f}x (CI {s.speedup.low:.2f}-{s.speedup.high:.2f}) "
                f"is excluded by {excluded[s.arm]}"
                for s in faster
                if s.speedup is not None
            )
            return Choice(category, None, None, None, None, f"no eligible profile: {why}")
        best = max(measured, key=lambda s: s.speedup.estimate if s.speedup else 0.0)
        assert best.speedup is not None
        # Without enough replicates there is no CI: printing low == high would read as a
        # perfectly certain estimate.
        ci = (
            f"CI {best.speedup.low:.2f}-{best.speedup.high:.2f}"
            if best.speedup.has_ci
            else f"no CI: {best.speedup.n_clusters} task(s) x {best.speedup.n_rounds} round(s)"
        )
        return Choice(
            category,
            None,
            None,
            None,
            None,
            f"no speculative profile beats it with confidence (best: {best.arm} "
            f"{best.speedup.estimate:.2f}x, {ci})",
        )
    best = max(eligible, key=lambda s: s.speedup.low if s.speedup else 0.0)
    assert best.speedup is not None
    return Choice(
        category,
        best.arm,
        best.speedup.estimate,
        best.speedup.low,
        best.speedup.high,
        "highest lower 95% CI bound among profiles called faster (CI above 1.0, estimate "
        f"beyond {best.speedup.threshold:.0%})",
    )


def recommend(result: BenchResult, *, withheld: Mapping[str, str] | None = None) -> Recommendation:
    """``withheld``: arms the caller will not recommend and why (the sweep: an arm whose
    identity is unresolved, `analysis.identity_gate`), worded to follow "is excluded by"."""
    excluded: dict[str, str] = {}
    for f in result.findings:
        if f.kind in ("correctness", "spec_inactive", "degenerate_output"):
            excluded.setdefault(f.profile, f"a {f.kind.replace('_', ' ')} finding")
    for arm, why in (withheld or {}).items():
        excluded.setdefault(arm, why)
    candidates = [a.name for a in result.arms if a.role == "candidate"]
    overall = _choose(ALL, [s.overall for s in result.arm_stats if s.arm in candidates], excluded)
    categories = sorted({c.category for c in result.categories})
    per_category = tuple(
        _choose(
            cat,
            [c for c in result.categories if c.category == cat and c.arm in candidates],
            excluded,
        )
        for cat in categories
    )
    if overall.profile is None:
        return Recommendation(overall, per_category)
    verdicts = {
        c.category: c.speedup.verdict
        for c in result.categories
        if c.arm == overall.profile and c.speedup is not None
    }
    guard = (
        f"degenerate-output guard on {overall.profile}'s outputs: no repetitive output "
        "found (it would have excluded the profile)"
    )
    return Recommendation(
        overall,
        per_category,
        tuple(c for c, v in sorted(verdicts.items()) if v == "faster"),
        tuple(c for c, v in sorted(verdicts.items()) if v == "slower"),
        guard,
    )
