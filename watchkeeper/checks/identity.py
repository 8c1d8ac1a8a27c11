"""Identical-output verdicts: is the speculative output the baseline's output?

Not a statistical question. At temperature 0 a difference is one of:

- `length_only`: one output is a prefix of the other because max_tokens cut it;
- `near_tie`: the candidate took one of the baseline's top-k tokens whose logprob was within
  the near-tie threshold of the baseline's top-1 (margins of 0.005 nats occur in ordinary text);
- `batch_variance`: verifying a batch of draft tokens computes slightly different floats than
  single-token decode. Either the target itself, fed the shared prefix as one batched prompt
  (`checks.replay`), picks the candidate's token, or the candidate's token is within the
  measured numeric noise floor (`checks.gap_floor`) of the baseline's top-1;
- `mismatch`: the target never picks it and the gap is beyond the floor — a correctness bug;
- `unverified`: the outputs differ but no token ids locate or weigh the divergence (a text
  comparison, or a floor too thin to judge by): shown, never a correctness finding. A bug
  claim needs evidence; a text difference alone is not.

`compare_samples` and friends need no server (no replay, no floor): they give identical,
length_only, near_tie or mismatch. `classify_divergence` adds the replay and the floor.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from watchkeeper.checks.replay import ReplayResult
from watchkeeper.load.records import Alternative, RequestSample, TokenLogprob

# Texts llama-server reports for end-of-generation tokens in top_logprobs.
_END_TEXTS = {"", "<|im_end|>", "<|endoftext|>", "</s>", "<end_of_turn>", "<|eot_id|>"}
EXCERPT_TOKENS = 8


class Verdict(StrEnum):
    IDENTICAL = "identical"
    NEAR_TIE = "near_tie"
    BATCH_VARIANCE = "batch_variance"
    MISMATCH = "mismatch"
    LENGTH_ONLY = "length_only"
    UNVERIFIED = "unverified"


VERDICTS: tuple[str, ...] = (
    "identical",
    "near_tie",
    "batch_variance",
    "length_only",
    "unverified",
    "mismatch",
)
"""Every verdict, in the order tables show them."""


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
    replay: dict[str, Any] | None = None
    """From `classify_divergence`: {target_token, candidate_token, baseline_token, margin, floor}
    (tokens as {id, text, logprob}; margin = baseline top-1 minus the candidate token's logprob,
    None when the candidate's token is not in the baseline's top-k)."""


def _excerpt(tokens: Sequence[TokenLogprob], index: int) -> str:
    before = "".join(t.text for t in tokens[max(0, index - EXCERPT_TOKENS) : index])
    after = "".join(t.text for t in tokens[index : index + EXCERPT_TOKENS])
    return f"{before}⟦{after}⟧"


def _margin(token: TokenLogprob) -> float | None:
    if len(token.top) < 2:
        return None
    return token.top[0].logprob - token.top[1].logprob


def _gap(token: TokenLogprob, token_id: int | None, text: str) -> float | None:
    """Baseline top-1 minus the logprob of (token_id, text) among its top-k; None if absent."""
    if not token.top:
        return None
    for alt in token.top[1:]:
        if _is(alt, token_id, text):
            return token.top[0].logprob - alt.logprob
    return None


def _text_choice(token: TokenLogprob, rest: str, *, ended: bool) -> Alternative | None:
    """Which of the baseline's top-k alternatives (other than its own token) the candidate's
    text `rest` continues with: the longest that is a prefix of it, or an end token when the
    candidate ended right here."""
    others = [a for a in token.top if not _is(a, token.token_id, token.text)]
    if ended and not rest:
        return next((a for a in others if a.text in _END_TEXTS), None)
    matches = [a for a in others if a.text and rest.startswith(a.text)]
    return max(matches, key=lambda a: len(a.text), default=None)


def _is(alt: Alternative, token_id: int | None, text: str) -> bool:
    if alt.token_id is not None and token_id is not None:
        return alt.token_id == token_id
    return alt.text == text


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
            end = _text_choice(baseline[shorter], "", ended=True)
            gap = baseline[shorter].top[0].logprob - end.logprob if end is not None else None
            near = margin is not None and gap is not None and gap < near_tie_threshold
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
    gap = _gap(token, candidate[index].token_id, candidate[index].text)
    near = margin is not None and gap is not None and gap < near_tie_threshold
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
    """Fallback without token ids: no margin, no replay, so a real difference is `unverified`
    (shown as such, never a correctness finding)."""
    if baseline == candidate:
        return IdentityResult(Verdict.IDENTICAL, basis="text")
    shorter = min(len(baseline), len(candidate))
    index = next((i for i in range(shorter) if baseline[i] != candidate[i]), shorter)
    excerpt_b = baseline[max(0, index - 30) : index + 30]
    excerpt_c = candidate[max(0, index - 30) : index + 30]
    short_finish = baseline_finish if len(baseline) < len(candidate) else candidate_finish
    if index == shorter and short_finish == "length":
        return IdentityResult(Verdict.LENGTH_ONLY, index, None, excerpt_b, excerpt_c, basis="text")
    return IdentityResult(Verdict.UNVERIFIED, index, None, excerpt_b, excerpt_c, basis="text")


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
        longer = _text_choice(previous, candidate_text[starts[covering - 1] :], ended=False)
        if longer is not None and len(longer.text) > len(previous.text):
            index = covering - 1
    token = baseline[index]
    margin = _margin(token)
    ended = len(candidate_text) == starts[index] and candidate_finish == "stop"
    choice = _text_choice(token, candidate_text[starts[index] :], ended=ended)
    gap = token.top[0].logprob - choice.logprob if choice is not None and token.top else None
    near = margin is not None and gap is not None and gap < near_tie_threshold
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


def is_complete(sample: RequestSample) -> bool:
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
    if is_complete(baseline) and is_complete(candidate):
        assert baseline.tokens is not None and candidate.tokens is not None
        return compare_tokens(
            baseline.tokens, candidate.tokens, near_tie_threshold=near_tie_threshold, **finishes
        )
    if is_complete(baseline):
        assert baseline.tokens is not None
        return compare_against_baseline_tokens(
            baseline.tokens,
            baseline.output_text,
            candidate.output_text,
            near_tie_threshold=near_tie_threshold,
            **finishes,
        )
    return compare_texts(baseline.output_text, candidate.output_text, **finishes)


def _token_json(token_id: int | None, text: str, logprob: float | None) -> dict[str, Any]:
    return {"id": token_id, "text": text, "logprob": logprob}


def classify_divergence(
    baseline_sample: RequestSample,
    candidate_sample: RequestSample,
    *,
    replay: Callable[[int], ReplayResult] | None,
    floor: float | None,
    near_tie_threshold: float,
    exact: bool = False,
) -> IdentityResult:
    """All five verdicts: `compare_samples`, then replay and noise floor for what it calls
    a mismatch.

    `replay(i)` answers what the target picks after the baseline's first `i` output tokens fed
    as one batched prompt (`checks.replay.replayer_for`); None skips the replay (the floor alone
    then decides). `floor` is the measured `GapFloor.floor` in nats, or None where it is
    underpowered: then what the replay does not explain is `unverified`, not a mismatch.
    `exact`: baseline and candidate evaluated every token alone with the same kernels (the
    exact mode, checked by its A/A), so any divergence located by token ids is a mismatch,
    whatever the margin (pass `near_tie_threshold=0`). Divergences located only by text
    (no baseline token ids) stay `unverified`. A replay's `TransportError` propagates: the
    caller decides whether a failed probe voids the verdict.
    """
    base = compare_samples(baseline_sample, candidate_sample, near_tie_threshold=near_tie_threshold)
    index = base.first_divergence
    tokens = baseline_sample.tokens
    if base.verdict != Verdict.MISMATCH or base.basis == "text" or index is None or not tokens:
        return base
    baseline_token = tokens[index] if index < len(tokens) else None
    choice = _candidate_choice(base, baseline_token, candidate_sample, tokens, index)
    gap, cand_logprob = _choice_margin(baseline_token, choice)
    target = replay(index) if replay is not None else None
    target_picks = target is not None and _target_picks(target.token, choice, baseline_token)
    within_floor = gap is not None and floor is not None and gap <= floor
    if exact:
        verdict = Verdict.MISMATCH
    elif target_picks or within_floor:
        verdict = Verdict.BATCH_VARIANCE
    elif floor is None:
        verdict = Verdict.UNVERIFIED
    else:
        verdict = Verdict.MISMATCH
    evidence = {
        "target_token": (
            _token_json(target.token.token_id, target.token.text, target.token.logprob)
            if target is not None
            else None
        ),
        "candidate_token": _token_json(choice.token_id, choice.text, cand_logprob),
        "baseline_token": (
            _token_json(baseline_token.token_id, baseline_token.text, baseline_token.logprob)
            if baseline_token is not None
            else None
        ),
        "margin": gap,
        "floor": floor,
        "mode": "exact" if exact else "batched",
    }
    if verdict == Verdict.UNVERIFIED:
        evidence["note"] = (
            "noise floor underpowered: the replay does not explain it and no floor weighs it"
        )
    return replace(base, verdict=verdict, replay=evidence)


@dataclass(frozen=True, slots=True)
class _Choice:
    """The candidate's choice at the divergence."""

    token_id: int | None
    text: str
    ended: bool
    """The candidate stopped where the baseline went on."""
    rest: str
    """The candidate's text from the divergence on: what a replayed token must begin."""


def _candidate_choice(
    base: IdentityResult,
    baseline_token: TokenLogprob | None,
    candidate: RequestSample,
    tokens: Sequence[TokenLogprob],
    index: int,
) -> _Choice:
    """The candidate's own token when it has token logprobs, else the baseline's top-k
    alternative its text continues with (or just its text); an ended candidate chose the
    end-of-generation token where the baseline's top-k names one."""
    cand_id: int | None = None
    cand_text = ""
    cand_ended = False
    if base.basis == "tokens" and candidate.tokens is not None:
        if index < len(candidate.tokens):
            cand_id = candidate.tokens[index].token_id
            cand_text = candidate.tokens[index].text
        else:
            cand_ended = True
        rest = cand_text
    else:
        start = sum(len(t.text) for t in tokens[:index])
        rest = candidate.output_text[start:]
        cand_ended = not rest and candidate.finish_reason == "stop"
        choice = _text_choice(baseline_token, rest, ended=cand_ended) if baseline_token else None
        if choice is not None:
            cand_id, cand_text = choice.token_id, choice.text
        else:
            cand_text = rest[:16]
    if cand_ended and baseline_token is not None and baseline_token.top:
        end = _text_choice(baseline_token, "", ended=True)
        if end is not None:
            cand_id, cand_text = end.token_id, end.text
    return _Choice(cand_id, cand_text, cand_ended, rest)


def _choice_margin(
    baseline_token: TokenLogprob | None, choice: _Choice
) -> tuple[float | None, float | None]:
    """How far below the baseline's pick the candidate's choice scored at the divergence
    (nats), and its logprob; (None, None) where the baseline's top-k does not name it."""
    if baseline_token is None or not baseline_token.top:
        return None, None
    gap = _gap(baseline_token, choice.token_id, choice.text)
    if gap is None:
        return None, None
    return gap, baseline_token.top[0].logprob - gap


def _target_picks(
    picked: Alternative, choice: _Choice, baseline_token: TokenLogprob | None
) -> bool:
    """Whether the target, replayed at the divergence, picks what the candidate picked: then
    batching explains the divergence. By token id where both have one, else by text."""
    if choice.token_id is not None and picked.token_id is not None:
        return picked.token_id == choice.token_id
    if choice.ended:
        return picked.text in _END_TEXTS
    not_baseline = baseline_token is None or not _is(
        picked, baseline_token.token_id, baseline_token.text
    )
    return bool(picked.text) and not_baseline and choice.rest.startswith(picked.text)
