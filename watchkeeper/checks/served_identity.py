"""Identity as served: the sweep's temperature-0 probes on the very servers its rounds
measured (batched prompt processing, batched draft verification), beside the exact pass.

The two modes answer different questions and a user needs both. The exact pass
(`campaign.identity_pass`: every server restarted with `--ubatch-size 1`) asks whether speculation
itself changes the output: with the same kernels on both sides any divergence is speculation's. As
served, verification evaluates a draft as one batch whose float sums round differently from
one-token decoding, so a greedy answer can flip where the baseline's top two tokens were nearly
tied: a soak found the n-gram arm identical in none of its probes as served and in all of them in
the exact mode (docs/measurements.md#figures-behind-the-code). The replay on the baseline and its
A/A noise floor (`checks.classify`) tell a near tie or batch variance from a mismatch; only a
mismatch is a correctness bug.

The probes are stored nowhere a throughput figure reads: they carry logprobs and prefill every
prompt afresh.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from watchkeeper.checks.classify import IdentityVerdicts
from watchkeeper.checks.identity import IdentityResult

ORDER = ("identical", "near_tie", "batch_variance", "length_only", "unverified", "mismatch")


def _gap(r: IdentityResult) -> float | None:
    """The logit gap a divergence was judged on: the replay's (baseline top-1 minus the
    candidate's token) where it ran, else the baseline's top-1 minus top-2 at the divergence."""
    replayed = (r.replay or {}).get("margin")
    if isinstance(replayed, int | float):
        return float(replayed)
    return r.margin


def served_summary(verdicts: IdentityVerdicts, arms: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Per speculative arm: the probes judged (both servers answered), the count of each
    verdict, and the largest gap among its near ties (how near "near" was), for the JSON and
    the report."""
    out: dict[str, dict[str, Any]] = {}
    for arm in arms:
        mine = {t: r for (a, t), r in verdicts.overrides.items() if a == arm}
        counts = Counter(str(r.verdict) for r in mine.values())
        gaps = [g for r in mine.values() if r.verdict == "near_tie" and (g := _gap(r)) is not None]
        mode = verdicts.modes.get(arm, {})
        out[arm] = {
            "probes": len(mine),
            "counts": {k: int(counts.get(k, 0)) for k in ORDER},
            "largest_near_tie_gap": round(max(gaps), 4) if gaps else None,
            "mode": mode.get("mode", "batched"),
        }
    return out


def served_text(summary: Mapping[str, Any] | None) -> str:
    """ "identical 0 of 6, near ties 6 (largest gap 0.031 nats), mismatches 0": one arm's
    as-served counts in words; empty where none were taken."""
    if not summary:
        return ""
    c = summary.get("counts", {})
    n = summary.get("probes", 0)
    gap = summary.get("largest_near_tie_gap")
    ties = f"near ties {c.get('near_tie', 0)}" + (
        f" (largest gap {gap:.3f} nats)" if isinstance(gap, int | float) else ""
    )
    others = [
        f"{k.replace('_', ' ')} {c[k]}"
        for k in ("batch_variance", "length_only", "unverified")
        if c.get(k)
    ]
    return ", ".join(
        [
            f"identical {c.get('identical', 0)} of {n}",
            ties,
            *others,
            f"mismatches {c.get('mismatch', 0)}",
        ]
    )
