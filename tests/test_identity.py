"""Identity verdicts on constructed token sequences: each verdict, each edge."""

from __future__ import annotations

from datetime import UTC, datetime

from watchkeeper.checks.identity import (
    Verdict,
    compare_against_baseline_tokens,
    compare_samples,
    compare_texts,
    compare_tokens,
)
from watchkeeper.records import Alternative, RequestSample, TokenLogprob


def tok(
    token_id: int,
    text: str,
    margin: float = 3.0,
    runner: tuple[int, str] = (999, "zz"),
) -> TokenLogprob:
    return TokenLogprob(
        token_id,
        text,
        -0.1,
        (Alternative(token_id, text, -0.1), Alternative(runner[0], runner[1], -0.1 - margin)),
    )


BASE = [tok(1, "The"), tok(2, " cat", 0.004, (3, " dog")), tok(4, " sat")]


def test_same_tokens_are_identical() -> None:
    r = compare_tokens(
        BASE, BASE, baseline_finish="stop", candidate_finish="stop", near_tie_threshold=0.1
    )
    assert r.verdict == Verdict.IDENTICAL and r.first_divergence is None


def test_runner_up_within_the_margin_is_a_near_tie() -> None:
    cand = [BASE[0], tok(3, " dog"), tok(5, " ran")]
    r = compare_tokens(
        BASE, cand, baseline_finish="stop", candidate_finish="stop", near_tie_threshold=0.1
    )
    assert r.verdict == Verdict.NEAR_TIE
    assert r.first_divergence == 1
    assert r.margin is not None and abs(r.margin - 0.004) < 1e-9
    assert "⟦ cat" in r.baseline_excerpt and "⟦ dog" in r.candidate_excerpt


def test_runner_up_beyond_the_margin_is_a_mismatch() -> None:
    cand = [BASE[0], tok(3, " dog"), tok(5, " ran")]
    r = compare_tokens(
        BASE, cand, baseline_finish="stop", candidate_finish="stop", near_tie_threshold=0.001
    )
    assert r.verdict == Verdict.MISMATCH


def test_a_token_that_is_not_the_runner_up_is_a_mismatch_even_at_a_tiny_margin() -> None:
    cand = [BASE[0], tok(7, " cow"), tok(5, " ran")]
    r = compare_tokens(
        BASE, cand, baseline_finish="stop", candidate_finish="stop", near_tie_threshold=0.1
    )
    assert r.verdict == Verdict.MISMATCH and r.first_divergence == 1


def test_prefix_cut_by_max_tokens_is_length_only() -> None:
    r = compare_tokens(
        BASE, BASE[:2], baseline_finish="stop", candidate_finish="length", near_tie_threshold=0.1
    )
    assert r.verdict == Verdict.LENGTH_ONLY and r.first_divergence == 2


def test_candidate_stopping_early_where_the_end_token_was_the_close_runner_up_is_a_near_tie() -> (
    None
):
    base = [tok(1, "Done"), tok(2, ".", 0.01, (0, "<|im_end|>"))]
    r = compare_tokens(
        base, base[:1], baseline_finish="length", candidate_finish="stop", near_tie_threshold=0.1
    )
    assert r.verdict == Verdict.NEAR_TIE and r.first_divergence == 1


def test_text_only_difference_is_a_mismatch_without_margin() -> None:
    r = compare_texts("hello world", "hello there", baseline_finish="stop", candidate_finish="stop")
    assert r.verdict == Verdict.MISMATCH and r.first_divergence == 6 and r.margin is None
    assert r.basis == "text"


def test_speculative_text_against_baseline_tokens_finds_the_near_tie() -> None:
    r = compare_against_baseline_tokens(
        BASE,
        "The cat sat",
        "The dog ran",
        baseline_finish="stop",
        candidate_finish="stop",
        near_tie_threshold=0.1,
    )
    assert r.verdict == Verdict.NEAR_TIE and r.first_divergence == 1
    assert r.basis == "baseline tokens"


def test_a_longer_runner_up_one_token_earlier_is_found() -> None:
    base = [tok(1, "with"), tok(2, " f", 0.05, (3, " fh")), tok(4, ":")]
    r = compare_against_baseline_tokens(
        base,
        "with f:",
        "with fh:",
        baseline_finish="stop",
        candidate_finish="stop",
        near_tie_threshold=0.1,
    )
    assert r.verdict == Verdict.NEAR_TIE and r.first_divergence == 1


def sample(text: str, tokens: list[TokenLogprob] | None, finish: str = "stop") -> RequestSample:
    n = len(tokens) if tokens is not None else len(text.split())
    return RequestSample(
        task_id="t",
        category="prose",
        seq=0,
        started_at=datetime.now(UTC),
        completion_tokens=n + (1 if finish == "stop" else 0),
        finish_reason=finish,
        output_text=text,
        tokens=tuple(tokens) if tokens else None,
    )


def test_samples_use_token_comparison_when_both_sides_have_complete_logprobs() -> None:
    r = compare_samples(
        sample("The cat sat", BASE), sample("The cat sat", BASE), near_tie_threshold=0.1
    )
    assert r.verdict == Verdict.IDENTICAL and r.basis == "tokens"


def test_samples_fall_back_to_baseline_tokens_when_the_candidate_has_none() -> None:
    r = compare_samples(
        sample("The cat sat", BASE), sample("The dog ran", None), near_tie_threshold=0.1
    )
    assert r.verdict == Verdict.NEAR_TIE and r.basis == "baseline tokens"
