"""How strongly the sweep report may say "Identical output: met".

It read "met" from six exact-mode probes of an arm that drafted in at most two of the probed
categories, and that was token-identical as served in 0 of 16 probes (all near ties). A probe
in a category where the arm drafted nothing compares the baseline with itself: it says nothing
about speculation. So "met" needs probes where the arm drafted, identical in the exact mode, and
where the as-served pass ran, identical there too; anything less is named with its counts.
Pure, so the rule is tested on its own (tests/publish/test_identity_claim.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class IdentityClaim:
    label: str
    """What follows "Identical output:" (met, met in the exact mode only, unresolved, not met)."""
    counts: str
    """The evidence in counts: probes where it drafted, identical of them, and as served."""


def identity_claim(
    probes: Sequence[tuple[str, str]],
    drafted: Mapping[str, tuple[int, int]],
    served: Mapping[str, Any] | None,
    *,
    resolved: bool,
) -> IdentityClaim:
    """``probes``: (category, verdict) of each exact probe of the arm; ``drafted``: category
    -> (tokens drafted, accepted) in the measured rounds; ``served``: the as-served summary
    (counts, probes) where that pass ran; ``resolved``: the identity gate's own reading."""
    used = [(c, v) for c, v in probes if drafted.get(c, (0, 0))[0] > 0]
    idle = sorted({c for c, _ in probes} - {c for c, _ in used})
    same = sum(1 for _, v in used if v == "identical")
    d = sum(drafted.get(c, (0, 0))[0] for c in {c for c, _ in used})
    a = sum(drafted.get(c, (0, 0))[1] for c in {c for c, _ in used})
    counts = (
        f"exact: identical {same} of {len(used)} probes in categories where it drafted "
        f"({d} tokens drafted, {a} accepted there)"
    )
    if idle:
        n = len(probes) - len(used)
        counts += f"; {n} probe(s) in {', '.join(idle)}, where it drafted nothing, not counted"
    s_counts = (served or {}).get("counts") or {}
    s_n = int((served or {}).get("probes") or 0)
    s_same = int(s_counts.get("identical", 0))
    if served:
        counts += f"; as served: identical {s_same} of {s_n}"
    if any(v == "mismatch" for _, v in probes) or s_counts.get("mismatch"):
        return IdentityClaim("not met", counts)
    if not used:
        return IdentityClaim("unresolved (it drafted in none of the probed categories)", counts)
    if not resolved or same < len(used):
        return IdentityClaim("unresolved", counts)
    if served and s_same < s_n:
        return IdentityClaim("met in the exact mode only", counts)
    return IdentityClaim("met", counts)
