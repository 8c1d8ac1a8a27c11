"""Every candidate token scored, not only the first divergence.

The per-probe verdict looks at one token: where the candidate first parts from the baseline.
After that the candidate runs on its own prefix, and a bug that strikes later (or a drafter
that nudges tokens without flipping the first one) goes unseen. Here the baseline server
replays the *candidate's own* prefix at each scored position and says whether it picks the
candidate's next token. The arm-level statistic sets the share it does not pick against the
A/A replay's (the baseline's own tokens, same server, same mode): a one-sided Fisher exact
test. In the exact mode the A/A share is 0 by construction, and any unpicked token counts.

Cheap where the exact mode holds: every evaluation is single-token, so replays reuse the
cached prefix and each scored position costs one token. Elsewhere each position is a fresh
batched prefill, so only `positions` per probe are scored.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from scipy import stats as scipy_stats

from watchkeeper.checks.replay import replayer_for, sample_positions
from watchkeeper.load.records import RequestSample, Task
from watchkeeper.server.endpoints import ServerClient

SIGNIFICANCE = 0.01


@dataclass(frozen=True, slots=True)
class TokenScore:
    position: int
    picked: bool
    """The baseline server, after the candidate's own prefix, picks the candidate's token."""
    gap: float | None
    """Replay top-1 minus the candidate token's replay logprob (None: outside the top-k)."""


def score_sample(
    client: ServerClient,
    task: Task,
    sample: RequestSample,
    *,
    n_probs: int,
    positions: int | None,
    cache_prompt: bool,
    agree: int = 0,
) -> list[TokenScore]:
    """Score `positions` spread positions of one candidate output (None: every position)
    after its first `agree` tokens: those are the baseline's own decoded tokens (the target
    picked each of them, so they count as picked without a request)."""
    tokens = sample.tokens
    if not sample.ok or not tokens or any(t.token_id is None for t in tokens):
        return []
    agree = min(max(agree, 0), len(tokens))
    scores = [TokenScore(i, True, 0.0) for i in range(agree)]
    if agree == len(tokens):
        return scores
    replay = replayer_for(client, task, sample, n_probs=n_probs, cache_prompt=cache_prompt)
    rest = len(tokens) - agree
    chosen = [
        agree + i
        for i in (list(range(rest)) if positions is None else sample_positions(rest, positions))
    ]
    for i in chosen:
        token_id = tokens[i].token_id
        assert token_id is not None
        r = replay(i)
        lp = r.logprob_of(token_id)
        top1 = r.top[0].logprob if r.top else r.token.logprob
        gap = top1 - lp if lp is not None else None
        scores.append(TokenScore(i, r.token.token_id == token_id, gap))
    return scores


@dataclass(frozen=True, slots=True)
class ArmScore:
    """One arm's scored tokens against the A/A replay."""

    scored: int
    unpicked: int
    aa_positions: int
    aa_flips: int
    exact: bool
    p_value: float | None
    worst_gap: float | None
    """Largest gap of an unpicked token (None: none, or all outside the top-k)."""

    @property
    def rate(self) -> float | None:
        return self.unpicked / self.scored if self.scored else None

    @property
    def aa_rate(self) -> float | None:
        return self.aa_flips / self.aa_positions if self.aa_positions else None

    @property
    def excess(self) -> bool:
        """More unpicked tokens than the A/A shows: any at all in the exact mode, else a
        one-sided Fisher test below `SIGNIFICANCE`."""
        if self.exact:
            return self.unpicked > 0
        return self.p_value is not None and self.p_value < SIGNIFICANCE

    def describe(self) -> str:
        if not self.scored:
            return "no token scored"
        rate = f"{self.unpicked} of {self.scored} scored tokens not the target's pick"
        if self.exact:
            return rate + (" (exact mode: each one a mismatch)" if self.unpicked else "")
        aa = f"A/A {self.aa_flips} of {self.aa_positions}"
        p = f", one-sided Fisher p {self.p_value:.3g}" if self.p_value is not None else ""
        return f"{rate}; {aa}{p}" + ("; more than the A/A shows" if self.excess else "")

    def to_json(self) -> dict[str, Any]:
        return {
            "scored": self.scored,
            "unpicked": self.unpicked,
            "rate": self.rate,
            "aa_positions": self.aa_positions,
            "aa_flips": self.aa_flips,
            "aa_rate": self.aa_rate,
            "exact": self.exact,
            "p_value": self.p_value,
            "worst_gap": self.worst_gap,
            "excess": self.excess,
            "summary": self.describe(),
        }


def arm_score(
    scores: Sequence[TokenScore], *, aa_positions: int, aa_flips: int, exact: bool
) -> ArmScore:
    unpicked = [s for s in scores if not s.picked]
    p: float | None = None
    if scores and aa_positions and not exact:
        table = [
            [len(unpicked), len(scores) - len(unpicked)],
            [aa_flips, aa_positions - aa_flips],
        ]
        p = float(scipy_stats.fisher_exact(table, alternative="greater").pvalue)
    gaps = [s.gap for s in unpicked if s.gap is not None]
    return ArmScore(
        scored=len(scores),
        unpicked=len(unpicked),
        aa_positions=aa_positions,
        aa_flips=aa_flips,
        exact=exact,
        p_value=p,
        worst_gap=max(gaps, default=None),
    )
