"""What speculative decoding can give at most, from the run's own counters and measured costs.

One verification step turns a draft into 1 + (accepted tokens of that draft) tokens. Its price
is the drafting (draft step cost x drafted tokens) plus one target batch of n+1 tokens, and that
batch is not free: on a CPU it is compute-bound and costs several decode steps. So, in units of
one target decode step,

    speed-up <= (1 + mean accepted per draft) / (c x mean draft length + V(mean draft length + 1))

with the accepted and drafted means from the server's /metrics counters and V measured on the
baseline server (a prompt batch of n+1 tokens on a cached prefix against a decode step).

Not every step drafts: n-gram drafting only proposes where the context repeats (measured on
SmolLM2: 70 drafts for 7135 decoded tokens), and a step without a draft is a plain decode step,
one token for one step. Where the run's totals are known (decoded tokens T, drafts D, accepted
A) the bound is the mixture

    speed-up <= T / ((T - D - A) + D x (c x mean draft length + V))

which is the formula above when every step drafts. Leaving the plain steps out is not safe:
when a draft step loses (its tokens per cost below 1), plain steps pull the run towards 1x, and
the n-gram arm above measured 0.91x [0.84, 0.97] against a draft-steps-only figure of 0.50x
(the mixture: 0.93x).
The remaining inputs err towards a higher figure (V leaves out n output projections, the
draft's catch-up on accepted tokens is not priced), so a measured speed-up above the bound
(beyond its CI) means an input is wrong, and `check_bound` says which one looks off.

The textbook formula (1 - a^(g+1)) / (1 - a) (Leviathan et al., 2023) assumes each token is
accepted independently; real drafts are accepted in runs (draft 16: 40.6% acceptance, yet 6.33
tokens accepted per draft), so it is kept only for comparison (`iid_tokens_per_step`).
"""

from __future__ import annotations

from dataclasses import dataclass

IID = "iid"
MEASURED = "measured"
CONSISTENCY_TOLERANCE = 0.15
"""Relative gap between accepted/drafts and acceptance x drafted/drafts beyond which the counters
and the per-request timings are called inconsistent."""


@dataclass(frozen=True, slots=True)
class SpeedupBound:
    acceptance: float
    draft_length: float
    """Mean drafted tokens per draft (or n_max where the counters are missing)."""
    cost_ratio: float
    """One draft step in target decode steps (0 for n-gram lookup)."""
    expected_tokens_per_step: float
    """Tokens per verification step the bound uses (= tokens_per_step)."""
    predicted_speedup: float
    tokens_per_step: float = 0.0
    """1 + mean accepted tokens per draft."""
    draft_cost_per_step: float = 0.0
    """cost_ratio x draft_length, in target decode steps."""
    verify_cost: float = 1.0
    """Evaluating draft_length + 1 tokens in one target batch, in target decode steps."""
    verify_tokens: float = 1.0
    iid_tokens_per_step: float | None = None
    """What the i.i.d. formula would have said (for comparison only; not a bound)."""
    method: str = IID
    sources: tuple[str, ...] = ()
    """Where each input came from, in words."""
    plain_token_share: float = 0.0
    """Share of decoded tokens made by steps without a draft (one decode step each)."""


def expected_tokens(acceptance: float, draft_length: float) -> float:
    """Tokens per step under i.i.d. acceptance. Real drafts contradict it; comparison only."""
    if acceptance >= 1.0:
        return draft_length + 1.0
    return float((1.0 - acceptance ** (draft_length + 1.0)) / (1.0 - acceptance))


def predicted_speedup(acceptance: float, draft_length: float, cost_ratio: float) -> SpeedupBound:
    """The i.i.d. prediction with free verification. Not a bound: prefer `measured_bound`."""
    acceptance = min(max(acceptance, 0.0), 1.0)
    tokens = expected_tokens(acceptance, draft_length)
    speedup = tokens / (draft_length * cost_ratio + 1.0)
    return SpeedupBound(
        acceptance,
        draft_length,
        cost_ratio,
        tokens,
        speedup,
        tokens_per_step=tokens,
        draft_cost_per_step=draft_length * cost_ratio,
        verify_cost=1.0,
        verify_tokens=draft_length + 1.0,
        iid_tokens_per_step=tokens,
        method=IID,
        sources=("i.i.d. acceptance formula, verification priced at one decode step",),
    )


def verify_cost_at(
    tokens: float, measured_tokens: int | None, measured_cost: float | None
) -> float:
    """Cost of one target batch of `tokens` tokens, in decode steps, on the chord from one token
    (one decode step) to the measured batch. A batch's cost grows at most linearly (flat on a
    GPU, about linear on a CPU), so the chord never prices a batch above its cost."""
    if measured_tokens is None or measured_cost is None or measured_tokens <= 1:
        return 1.0
    slope = (measured_cost - 1.0) / (measured_tokens - 1)
    return max(1.0 + slope * (max(tokens, 1.0) - 1.0), 0.0)


def measured_bound(
    *,
    mean_accepted: float,
    draft_length: float,
    cost_ratio: float,
    verify_tokens: int | None,
    verify_cost: float | None,
    acceptance: float,
    sources: tuple[str, ...] = (),
    decoded_tokens: float | None = None,
    drafts: float | None = None,
) -> SpeedupBound:
    """Speed-up bound from the measured mean accepted length, drafted length and costs.

    With the run's ``decoded_tokens`` and ``drafts`` the steps without a draft are priced as
    plain decode steps (the mixture in the module docstring); without them every step is taken
    to draft."""
    tokens = 1.0 + max(mean_accepted, 0.0)
    draft_cost = cost_ratio * draft_length
    verify = verify_cost_at(draft_length + 1.0, verify_tokens, verify_cost)
    notes = list(sources)
    if verify_cost is None:
        notes.append("verification cost not measured: taken as one decode step (too low)")
    cost = draft_cost + verify
    plain = _plain_share(tokens, decoded_tokens, drafts)
    if plain > 0 and decoded_tokens and drafts:
        plain_tokens = decoded_tokens * plain
        total = plain_tokens + drafts * cost
        speedup = decoded_tokens / total if total > 0 else float("inf")
        notes.append(
            f"steps without a draft: {plain:.1%} of {decoded_tokens:.0f} decoded tokens, "
            f"one decode step each ({drafts:.0f} drafts made the rest)"
        )
    else:
        speedup = tokens / cost if cost > 0 else float("inf")
    return SpeedupBound(
        acceptance=acceptance,
        draft_length=draft_length,
        cost_ratio=cost_ratio,
        expected_tokens_per_step=tokens,
        predicted_speedup=speedup,
        tokens_per_step=tokens,
        draft_cost_per_step=draft_cost,
        verify_cost=verify,
        verify_tokens=draft_length + 1.0,
        iid_tokens_per_step=expected_tokens(min(max(acceptance, 0.0), 1.0), draft_length),
        method=MEASURED,
        sources=tuple(notes),
        plain_token_share=plain,
    )


def _plain_share(tokens_per_step: float, decoded: float | None, drafts: float | None) -> float:
    """Share of decoded tokens that no draft step made; 0 when unknown or inconsistent."""
    if not decoded or not drafts or decoded <= 0 or drafts <= 0:
        return 0.0
    return max(decoded - drafts * tokens_per_step, 0.0) / decoded


def check_bound(
    bound: SpeedupBound,
    measured_low: float,
    *,
    measured_verify: tuple[int, float] | None = None,
) -> str | None:
    """None when the measured speed-up's CI reaches down to the bound; else which input looks
    wrong. `measured_verify` is the raw calibration (batch tokens, cost in decode steps)."""
    if measured_low <= bound.predicted_speedup:
        return None
    return _diagnose(bound, measured_low, f"CI low {measured_low:.2f}x", measured_verify)


def judge_efficiency(
    bound: SpeedupBound,
    estimate: float,
    low: float,
    *,
    measured_verify: tuple[int, float] | None = None,
    has_ci: bool = True,
) -> tuple[float | None, str | None]:
    """(efficiency, None), or (None, which input looks off) where the bound is beaten.

    An efficiency above 1 is not a figure: the bound's inputs were wrong for these prompts. A
    bench of smollm2-baseline, -selfdraft and -ngram over ten chat tasks written outside the
    project printed 1.06 for one arm, its CI reaching down to the bound: the verify and draft
    costs had been measured on the standard tasks. Beyond the CI (`check_bound`) or only by
    the estimate, the answer is the same diagnosis instead of the ratio. ``has_ci``: False
    where the speed-up has no CI (one round), so ``low`` is the estimate itself and the note
    must not call it a CI's low (a one-round sweep once printed "CI low 1.30x" for an
    estimate with no interval)."""
    note = check_bound(bound, low, measured_verify=measured_verify) if has_ci else None
    if note is not None:
        return None, note
    if bound.predicted_speedup <= 0:
        return None, None
    efficiency = estimate / bound.predicted_speedup
    if efficiency > 1.0:
        what = "its CI reaches down to the bound" if has_ci else "no CI"
        return None, _diagnose(
            bound, estimate, f"estimate {estimate:.2f}x ({what})", measured_verify
        )
    return efficiency, None


def _diagnose(
    bound: SpeedupBound,
    measured_low: float,
    what: str,
    measured_verify: tuple[int, float] | None,
) -> str:
    # The draft-step cost at which the bound would meet the measurement: per decoded token,
    # plain steps cost 1 and draft steps cost (cost per step) / tokens_per_step.
    plain = bound.plain_token_share
    allowed = (1.0 / measured_low - plain) * bound.tokens_per_step / (1.0 - plain)
    notes = [
        f"measured speed-up ({what}) beats the bound "
        f"{bound.predicted_speedup:.2f}x: one verification step would have to cost at most "
        f"{allowed:.2f} decode steps, the bound priced it at "
        f"{bound.draft_cost_per_step + bound.verify_cost:.2f}"
    ]
    if bound.verify_cost > 1.0:
        raw = (
            f" ({measured_verify[1]:.2f} steps for {measured_verify[0]} tokens)"
            if measured_verify
            else ""
        )
        notes.append(
            f"verify cost measured at {bound.verify_cost:.2f} steps for "
            f"{bound.verify_tokens:.1f} tokens{raw}: too high?"
        )
    if bound.draft_cost_per_step > 0:
        notes.append(
            f"draft cost {bound.cost_ratio:.2f} steps x {bound.draft_length:.2f} drafted: too high?"
        )
    implied = bound.acceptance * bound.draft_length
    accepted = bound.tokens_per_step - 1.0
    if accepted > bound.draft_length + 1e-9 or (
        max(implied, accepted) > 0
        and abs(implied - accepted) > CONSISTENCY_TOLERANCE * max(implied, accepted)
    ):
        notes.append(
            f"accepted per draft from counters ({accepted:.2f}) looks inconsistent with "
            f"acceptance x draft length ({bound.acceptance:.1%} x {bound.draft_length:.2f} = "
            f"{implied:.2f})"
        )
    if len(notes) == 1:
        notes.append("the baseline's decode step may have been slowed (noise, contention)")
    return "; ".join(notes)
