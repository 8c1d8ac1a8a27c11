"""The engine-neutral acceptance record: what a speculative server says it drafted and accepted.

Analysis and checks read this, never an engine's metric names: llama-server's
`llamacpp:spec_decode_*` counters are converted in one place, `server/endpoints.py:spec_counters`
(the llama-server module), the way httpx's errors are converted at its seam. A second engine
(vLLM, SGLang) plugs in by filling the same record from its own metrics; the acceptance curve,
the speed-up bound and the draft-token cross-check then work unchanged.

All four figures are cumulative counts as a server reports them; a run's movement is
`after.since(before)`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SpecCounters:
    """A speculative server's acceptance counters."""

    drafts: float
    """Verification steps that checked a draft."""
    drafted: float
    """Draft tokens proposed."""
    accepted: float
    """Draft tokens the target accepted."""
    per_position: tuple[float, ...] = ()
    """Steps with at least i + 1 tokens accepted, for i = 0 .. the highest position reported
    (summed over positions: the accepted tokens)."""

    def __add__(self, other: SpecCounters) -> SpecCounters:
        n = max(len(self.per_position), len(other.per_position))
        mine = self.per_position + (0.0,) * (n - len(self.per_position))
        theirs = other.per_position + (0.0,) * (n - len(other.per_position))
        return SpecCounters(
            self.drafts + other.drafts,
            self.drafted + other.drafted,
            self.accepted + other.accepted,
            tuple(a + b for a, b in zip(mine, theirs, strict=True)),
        )

    def since(self, before: SpecCounters | None) -> SpecCounters:
        """The movement from `before` (None: a counter that was not there started at 0) to
        these counters, over this record's positions (a fresh process reports a position only
        once it was reached)."""
        b = before or EMPTY
        per = tuple(
            v - (b.per_position[i] if i < len(b.per_position) else 0.0)
            for i, v in enumerate(self.per_position)
        )
        return SpecCounters(
            self.drafts - b.drafts, self.drafted - b.drafted, self.accepted - b.accepted, per
        )


EMPTY = SpecCounters(0.0, 0.0, 0.0, ())
