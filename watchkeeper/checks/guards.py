"""Measurement guards: conditions under which a benchmark's numbers would mislead.

Each guard is a small function that returns a `GuardFinding` or None, tested directly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from watchkeeper.analysis.stats import median
from watchkeeper.load.records import RequestSample
from watchkeeper.server.endpoints import spec_counters


@dataclass(frozen=True, slots=True)
class GuardFinding:
    kind: str
    profile: str
    severity: str
    title: str
    evidence: dict[str, Any] = field(default_factory=dict)
    category: str | None = None


def repetition(text: str, n: int = 4) -> float:
    """Share of word n-grams that repeat an earlier one: 0 for fresh text, near 1 for a loop."""
    words = text.split()
    grams = [tuple(words[i : i + n]) for i in range(len(words) - n + 1)]
    if len(grams) < 8:
        return 0.0
    return 1.0 - len(set(grams)) / len(grams)


def speculation_inactive(
    profile: str, samples: Sequence[RequestSample], metrics_draft_delta: float | None
) -> GuardFinding | None:
    ok = [s for s in samples if s.ok]
    drafted = sum(s.draft_n or 0 for s in ok)
    if not ok or drafted > 0 or (metrics_draft_delta or 0) > 0:
        return None
    return GuardFinding(
        kind="spec_inactive",
        profile=profile,
        severity="high",
        title=f"{profile}: speculation configured but inactive (no drafted token on any request)",
        evidence={
            "requests": len(ok),
            "draft_n_total": drafted,
            "metrics_draft_tokens_delta": metrics_draft_delta,
        },
    )


def degenerate_output(
    profile: str, samples: Sequence[RequestSample], *, threshold: float
) -> GuardFinding | None:
    ok = [s for s in samples if s.ok and s.output_text]
    scores = [repetition(s.output_text) for s in ok]
    flagged = [s.task_id for s, score in zip(ok, scores, strict=True) if score > threshold]
    if not ok or len(flagged) / len(ok) <= 0.25:
        return None
    return GuardFinding(
        kind="degenerate_output",
        profile=profile,
        severity="medium",
        title=f"{profile}: {len(flagged)}/{len(ok)} outputs are repetitive "
        f"(repeated 4-gram share > {threshold:.0%}); acceptance and tok/s are inflated",
        evidence={"flagged_tasks": sorted(set(flagged))[:20], "median_repetition": median(scores)},
    )


def length_parity(
    profile: str,
    category: str,
    baseline: Sequence[RequestSample],
    candidate: Sequence[RequestSample],
    *,
    tolerance: float,
) -> GuardFinding | None:
    base = median([s.completion_tokens for s in baseline if s.ok])
    cand = median([s.completion_tokens for s in candidate if s.ok])
    if not base or cand is None:
        return None
    diff = (cand - base) / base
    if abs(diff) <= tolerance:
        return None
    return GuardFinding(
        kind="length_parity",
        profile=profile,
        category=category,
        severity="medium",
        title=f"{profile}/{category}: median output length differs from baseline by {diff:+.0%} "
        f"({cand:.0f} vs {base:.0f} tokens); tok/s is not comparable",
        evidence={
            "baseline_median_tokens": base,
            "candidate_median_tokens": cand,
            "tolerance": tolerance,
        },
    )


def acceptance_cross_check(
    profile: str,
    samples: Sequence[RequestSample],
    metrics_before: dict[str, float],
    metrics_after: dict[str, float],
    *,
    tolerance: float = 0.02,
) -> GuardFinding | None:
    """Per-request `timings.draft_n` must add up to the /metrics counter delta."""
    after = spec_counters(metrics_after)
    if after is None:
        return None
    delta = after.since(spec_counters(metrics_before)).drafted
    total = sum(s.draft_n or 0 for s in samples if s.ok)
    if max(delta, total) == 0 or abs(delta - total) <= max(2.0, tolerance * max(delta, total)):
        return None
    return GuardFinding(
        kind="acceptance_cross_check",
        profile=profile,
        severity="medium",
        title=f"{profile}: per-request draft tokens ({total}) disagree with /metrics ({delta:.0f})",
        evidence={"timings_draft_n_total": total, "metrics_draft_tokens_delta": delta},
    )
