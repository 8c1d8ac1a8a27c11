"""Is an arm's identity resolved? A recommendation names only arms whose output was checked.

At temperature 0 an arm's identity rests on its probe pass: every compared probe identical, or
different only where the baseline itself is undecided (near_tie, batch_variance) or cut
(length_only). No probe compared (the arm was never probed, every probe failed) or a verdict
that says nothing either way (e.g. `unverified`) leaves it unresolved; a `mismatch` is a
correctness finding, which the recommendation excludes on its own. At T > 0 the distribution
check must also say `same distribution`: output identity is then a claim about the sampler's
distribution, which the temperature-0 probes do not cover.
"""

from __future__ import annotations

from dataclasses import dataclass

from watchkeeper.analysis.bench_types import ALL, BenchResult

HARMLESS = ("identical", "near_tie", "batch_variance", "length_only")
"""Verdicts that resolve identity in the arm's favour (analysis/bench_identity.py)."""
SAME = "same distribution"


@dataclass(frozen=True, slots=True)
class IdentityStatus:
    arm: str
    resolved: bool
    compared: int
    """Temperature-0 probes compared with the baseline's."""
    text: str
    """One line for the report: the counts, or why it is unresolved."""


def identity_status(result: BenchResult, arm: str) -> IdentityStatus:
    stats = result.stats(arm, ALL)
    verdicts = dict(stats.verdicts) if stats is not None else {}
    compared = sum(verdicts.values())
    counts = ", ".join(f"{k} {v}" for k, v in sorted(verdicts.items()) if v) or "none"
    if compared == 0:
        return IdentityStatus(arm, False, 0, "unresolved: no temperature-0 probe compared")
    if verdicts.get("mismatch"):
        return IdentityStatus(
            arm, False, compared, f"failed: {verdicts['mismatch']} mismatch(es) ({counts})"
        )
    other = {k: v for k, v in verdicts.items() if k not in HARMLESS and v}
    if other:
        return IdentityStatus(arm, False, compared, f"unresolved: {counts}")
    text = f"{compared} probes: {counts}"
    if result.method.temperature > 0:
        dist = next((d for d in result.extras.get("distribution", []) if d.get("arm") == arm), None)
        if dist is None:
            return IdentityStatus(
                arm, False, compared, f"{text}; unresolved at T > 0: no distribution check"
            )
        if dist.get("verdict") != SAME:
            return IdentityStatus(
                arm, False, compared, f"{text}; distribution check: {dist.get('verdict')}"
            )
        text += f"; distribution check: {SAME}"
    return IdentityStatus(arm, True, compared, text)


def withheld(result: BenchResult) -> dict[str, str]:
    """Speculative candidates whose identity is not resolved in their favour, and why: the
    recommendation's `withheld` (worded to follow "is excluded by")."""
    out: dict[str, str] = {}
    for a in result.arms:
        if a.role != "candidate" or not a.speculative:
            continue
        status = identity_status(result, a.name)
        if not status.resolved:
            out[a.name] = f"its identity ({status.text})"
    return out
