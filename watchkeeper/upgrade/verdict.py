"""An upgrade check's verdict per profile, from its three findings (pure)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from watchkeeper.analysis.stats import RatioCI
from watchkeeper.format import ci
from watchkeeper.upgrade.flagcheck import FlagCheck

VERDICTS = ("safe", "regression", "improvement", "inconclusive", "breaks config")
IDENTITY_FAILURES = frozenset({"mismatch"})
"""Identity verdicts that make an upgrade unsafe: the speculating server wrote other tokens
than its plain twin where no near-tie or batch effect explains it."""


@dataclass(frozen=True, slots=True)
class ProfileVerdict:
    profile: str
    verdict: str
    flags: FlagCheck
    ratio: RatioCI | None
    identity: tuple[str, ...]
    """Identity verdicts of the candidate's speculating server against its plain twin
    (empty: the profile does not speculate, or the check did not run)."""
    reason: str


def judge(
    profile: str, flags: FlagCheck, ratio: RatioCI | None, identity: Sequence[str]
) -> ProfileVerdict:
    """breaks config > identity mismatch (regression) > the ratio's own classification."""
    ident = tuple(identity)
    if not flags.ok:
        return ProfileVerdict(profile, "breaks config", flags, None, ident, flags.breaks or "")
    bad = [v for v in ident if v in IDENTITY_FAILURES]
    if bad:
        reason = f"{len(bad)} of {len(ident)} outputs differ from the plain server's"
        return ProfileVerdict(profile, "regression", flags, ratio, ident, reason)
    if ratio is None or not ratio.has_ci:
        return ProfileVerdict(profile, "inconclusive", flags, ratio, ident, "too few pairs")
    by_ci = {
        "slower": "regression",
        "faster": "improvement",
        "no change": "safe",
        "within threshold": "safe",
    }
    verdict = by_ci.get(ratio.verdict, "inconclusive")
    reason = (
        f"decode tok/s ratio {ratio.estimate:.3f} ({ci(ratio.low, ratio.high, '.3f', ' to ')}; "
        f"{ratio.n_pairs} pairs, {ratio.n_clusters} tasks x {ratio.n_rounds} rounds): "
        f"{ratio.verdict}"
    )
    return ProfileVerdict(profile, verdict, flags, ratio, ident, reason)


def markdown(
    candidate: str, baseline: str, verdicts: Sequence[ProfileVerdict], *, method: str = ""
) -> str:
    """`method`: how the ratios were measured and judged (rounds, tasks, cap, threshold)."""
    lines = [
        f"# Upgrade check: llama.cpp {candidate} against {baseline}",
        "",
        *([f"Method: {method}", ""] if method else []),
        "| profile | verdict | why | flags | identity |",
        "| --- | --- | --- | --- | --- |",
    ]
    for v in verdicts:
        flags = "; ".join(v.flags.lines()) or "all accepted"
        ident = (
            ", ".join(f"{v.identity.count(k)} {k}" for k in sorted(set(v.identity)))
            if v.identity
            else "n/a"
        )
        lines.append(f"| {v.profile} | **{v.verdict}** | {v.reason} | {flags} | {ident} |")
    return "\n".join(lines) + "\n"
