"""Identical-output verdicts: is the speculative output the baseline's output?

Not a statistical question. At temperature 0 a difference is either a *near-tie* — batched
verification changes float rounding, and where the baseline's top-2 logprobs were within a
hair the runner-up wins (margins of 0.005 nats occur in ordinary text) — or a *mismatch*,
which is a correctness bug. A difference that is only length (one output is a prefix of the
other because max_tokens cut it) is neither.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from watchkeeper.records import RequestSample, TokenLogprob

# Texts llama-server reports for end-of-generation tokens in top_logprobs.
_END_TEXTS = {"", "<|im_end|>", "<|endoftext|>", "</s>", "<end_of_turn>", "<|eot_id|>"}
EXCERPT_TOKENS = 8


class Verdict(StrEnum):
    IDENTICAL = "identical"
    NEAR_TIE = "near_tie"
    MISMATCH = "mismatch"
    LENGTH_ONLY = "length_only"


@dataclass(frozen=True, slots=True)
class IdentityResult:
    verdict: Verdict
    first_divergence: int | None = None
    """Token index (or character index when no token ids were available)."""
    margin: float | None = None
    """Baseline's top-1 minus top-2 logprob at the first divergent token, in nats."""
    baseline_excerpt: str = ""
    candidate_excerpt: str = ""
    basis: str = "tokens"


def _excerpt(tokens: Sequence[TokenLogprob], index: int) -> str:
    before = "".join(t.text for t in tokens[max(0, index - EXCERPT_TOKENS) : index])
    after = "".join(t.text for t in tokens[index : index + EXCERPT_TOKENS])
    return f"{before}⟦{after}⟧"


def _margin(token: TokenLogprob) -> float | None:
    if len(token.top) < 2:
        return None
    return token.top[0].logprob - token.top[1].logprob


def _same(a: TokenLogprob, b: TokenLogprob) -> bool:
    if a.token_id is not None and b.token_id is not None:
        return a.token_id == b.token_id
    return a.text == b.text


def compare_tokens(
    baseline: Sequence[TokenLogprob],
    candidate: Sequence[TokenLogprob],
    *,
    baseline_finish: str | None,
    candidate_finish: str | None,
    near_tie_threshold: float,
) -> IdentityResult:
    shorter = min(len(baseline), len(candidate))
    index = next((i for i in range(shorter) if not _same(baseline[i], candidate[i])), None)
    if index is None:
        if len(baseline) == len(candidate):
            return IdentityResult(Verdict.IDENTICAL)
        short_finish = baseline_finish if len(baseline) < len(candidate) else candidate_finish
        if short_finish == "length":
            return IdentityResult(
                Verdict.LENGTH_ONLY,
                first_divergence=shorter,
                baseline_excerpt=_excerpt(baseline, shorter),
                candidate_excerpt=_excerpt(candidate, shorter),
            )
        # One side stopped (end token) where the other went on: a divergence at `shorter`.
        if len(candidate) < len(baseline):
            margin = _margin(baseline[shorter])
            runner_up_is_end = (
                len(baseline[shorter].top) >= 2 and baseline[shorter].top[1].text in _END_TEXTS
            )
            near = margin is not None and margin < near_tie_threshold and runner_up_is_end
        else:
            margin, near = None, False
        return IdentityResult(
            Verdict.NEAR_TIE if near else Verdict.MISMATCH,
            first_divergence=shorter,
            margin=margin,
            baseline_excerpt=_excerpt(baseline, shorter),
            candidate_excerpt=_excerpt(candidate, shorter),
        )
    token = baseline[index]
    margin = _margin(token)
    runner_up = token.top[1] if len(token.top) >= 2 else None
    candidate_took_runner_up = runner_up is not None and (
        (runner_up.token_id is not None and runner_up.token_id == candidate[index].token_id)
        or (runner_up.token_id is None and runner_up.text == candidate[index].text)
    )
    near = margin is not None and margin < near_tie_threshold and candidate_took_runner_up
    return IdentityResult(
        Verdict.NEAR_TIE if near else Verdict.MISMATCH,
        first_divergence=index,
        margin=margin,
        baseline_excerpt=_excerpt(baseline, index),
        candidate_excerpt=_excerpt(candidate, index),
    )


def compare_texts(
    baseline: str, candidate: str, *, baseline_finish: str | None, candidate_finish: str | None
) -> IdentityResult:
    """Fallback without token logprobs: no margin, so any real difference is a mismatch."""
    if baseline == candidate:
        return IdentityResult(Verdict.IDENTICAL, basis="text")
    shorter = min(len(baseline), len(candidate))
    index = next((i for i in range(shorter) if baseline[i] != candidate[i]), shorter)
    excerpt_b = baseline[max(0, index - 30) : index + 30]
    excerpt_c = candidate[max(0, index - 30) : index + 30]
    short_finish = baseline_finish if len(baseline) < len(candidate) else candidate_finish
    if index == shorter and short_finish == "length":
        return IdentityResult(Verdict.LENGTH_ONLY, index, None, excerpt_b, excerpt_c, basis="text")
    return IdentityResult(Verdict.MISMATCH, index, None, excerpt_b, excerpt_c, basis="text")


def compare_against_baseline_tokens(
    baseline: Sequence[TokenLogprob],
    baseline_text: str,
    candidate_text: str,
    *,
    baseline_finish: str | None,
    candidate_finish: str | None,
    near_tie_threshold: float,
) -> IdentityResult:
    """Baseline has token logprobs, the candidate only text.

    llama-server does not return logprobs for tokens accepted from a draft (its source says
    "TODO: set result.probs"), so a speculative arm never has them. The baseline's do suffice:
    find the first differing character, map it to the baseline token covering it, and ask
    whether the candidate's text continues with the baseline's runner-up at that token.
    """
    text = compare_texts(
        baseline_text,
        candidate_text,
        baseline_finish=baseline_finish,
        candidate_finish=candidate_finish,
    )
    if text.verdict in (Verdict.IDENTICAL, Verdict.LENGTH_ONLY) or text.first_divergence is None:
        return text
    char = text.first_divergence
    starts = [0]
    for token in baseline:
        starts.append(starts[-1] + len(token.text))
    covering = next((i for i in range(len(baseline)) if starts[i] <= char < starts[i + 1]), None)
    if covering is None:
        return text
    index = covering
    if char == starts[covering] and covering > 0:
        # The candidate may have taken a longer runner-up one token earlier (" fh" for " f"):
        # the texts then agree through that token's own text and part ways only after it.
        previous = baseline[covering - 1]
        runner = previous.top[1].text if len(previous.top) >= 2 else ""
        if len(runner) > len(previous.text) and candidate_text[starts[covering - 1] :].startswith(
            runner
        ):
            index = covering - 1
    token = baseline[index]
    margin = _margin(token)
    runner_up = token.top[1].text if len(token.top) >= 2 else ""
    continues = bool(runner_up) and candidate_text[starts[index] :].startswith(runner_up)
    near = margin is not None and margin < near_tie_threshold and continues
    return IdentityResult(
        Verdict.NEAR_TIE if near else Verdict.MISMATCH,
        first_divergence=index,
        margin=margin,
        baseline_excerpt=_excerpt(baseline, index),
        candidate_excerpt=_text_excerpt(candidate_text, starts[index]),
        basis="baseline tokens",
    )


def _text_excerpt(text: str, start: int, width: int = 30) -> str:
    return f"{text[max(0, start - width) : start]}⟦{text[start : start + width]}⟧"


def _complete(sample: RequestSample) -> bool:
    """Token logprobs cover the whole output (the end token itself is never streamed)."""
    if sample.tokens is None or sample.completion_tokens is None:
        return False
    if "".join(t.text for t in sample.tokens) != sample.output_text:
        return False
    expected = sample.completion_tokens - (1 if sample.finish_reason == "stop" else 0)
    return len(sample.tokens) in (expected, sample.completion_tokens)


def compare_samples(
    baseline: RequestSample, candidate: RequestSample, *, near_tie_threshold: float
) -> IdentityResult:
    finishes = {
        "baseline_finish": baseline.finish_reason,
        "candidate_finish": candidate.finish_reason,
    }
    if _complete(baseline) and _complete(candidate):
        assert baseline.tokens is not None and candidate.tokens is not None
        return compare_tokens(
            baseline.tokens, candidate.tokens, near_tie_threshold=near_tie_threshold, **finishes
        )
    if _complete(baseline):
        assert baseline.tokens is not None
        return compare_against_baseline_tokens(
            baseline.tokens,
            baseline.output_text,
            candidate.output_text,
            near_tie_threshold=near_tie_threshold,
            **finishes,
        )
    return compare_texts(baseline.output_text, candidate.output_text, **finishes)
