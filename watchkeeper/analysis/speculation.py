"""What speculative decoding *should* give, from measured acceptance and draft cost.

The standard analysis (Leviathan et al., 2023; Chen et al., 2023): with per-token acceptance
probability a, draft length g and a draft step costing c target steps, one verification
yields (1 - a^(g+1)) / (1 - a) tokens for the price of (g*c + 1) target steps. Putting the
prediction next to the measured speed-up tells a user whether a loss comes from acceptance
(prediction low too) or from overhead (prediction high, measurement low).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SpeedupBound:
    acceptance: float
    draft_length: float
    cost_ratio: float
    expected_tokens_per_step: float
    predicted_speedup: float


def expected_tokens(acceptance: float, draft_length: float) -> float:
    if acceptance >= 1.0:
        return draft_length + 1.0
    return float((1.0 - acceptance ** (draft_length + 1.0)) / (1.0 - acceptance))


def predicted_speedup(acceptance: float, draft_length: float, cost_ratio: float) -> SpeedupBound:
    acceptance = min(max(acceptance, 0.0), 1.0)
    tokens = expected_tokens(acceptance, draft_length)
    speedup = tokens / (draft_length * cost_ratio + 1.0)
    return SpeedupBound(acceptance, draft_length, cost_ratio, tokens, speedup)
