"""Identity verdicts on constructed token sequences: each verdict, each edge."""

from __future__ import annotations

from datetime import UTC, datetime

from watchkeeper.checks.identity import (
    Verdict,
    classify_divergence,
    compare_against_baseline_tokens,
    compare_samples,
    compare_texts,
    compare_tokens,
)
from watchkeeper.checks.replay import ReplayResult
from watchkeeper.load.records import Alternative, RequestSample, TokenLogprob

STARTED = datetime(2026, 11, 3, 7, 30, tzinfo=UTC)


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
    assert r.verdict == Verdict.UNVERIFIED and r.first_divergence == 6 and r.margin is None
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
        started_at=STARTED,
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


# --- classify_divergence: the five verdicts, top-k (k = 5) samples --------------------------


def topk(token_id: int, text: str, alts: list[tuple[int, str, float]]) -> TokenLogprob:
    """A baseline token at logprob -0.1 with alternatives (id, text, gap below top-1)."""
    rest = tuple(Alternative(i, t, -0.1 - gap) for i, t, gap in alts)
    top = (Alternative(token_id, text, -0.1), *rest)
    return TokenLogprob(token_id, text, -0.1, top)


FIVE = [(3, " dog", 0.3), (7, " cow", 0.6), (8, " pig", 1.0), (9, " hen", 4.0)]
BASE5 = [tok(1, "The"), topk(2, " cat", FIVE), tok(4, " sat")]


def picks(token_id: int, text: str) -> ReplayResult:
    chosen = Alternative(token_id, text, -0.2)
    return ReplayResult(chosen, (chosen, Alternative(2, " cat", -0.25)), prompt_tokens=40)


def never(_: int) -> ReplayResult:
    raise AssertionError("replay must not be asked")


def test_classify_identical_and_length_only_ask_no_replay() -> None:
    same = classify_divergence(
        sample("The cat sat", BASE5),
        sample("The cat sat", BASE5),
        replay=never,
        floor=0.5,
        near_tie_threshold=0.1,
    )
    assert same.verdict == Verdict.IDENTICAL and same.replay is None
    cut = classify_divergence(
        sample("The cat sat", BASE5),
        sample("The cat", BASE5[:2], finish="length"),
        replay=never,
        floor=0.5,
        near_tie_threshold=0.1,
    )
    assert cut.verdict == Verdict.LENGTH_ONLY


def test_classify_third_ranked_token_within_the_threshold_is_a_near_tie() -> None:
    base = [tok(1, "The"), topk(2, " cat", [(3, " dog", 0.01), (7, " cow", 0.02)]), tok(4, " sat")]
    cand = [BASE5[0], tok(7, " cow"), tok(5, " ran")]
    r = classify_divergence(
        sample("The cat sat", base),
        sample("The cow ran", cand),
        replay=never,
        floor=0.0,
        near_tie_threshold=0.1,
    )
    assert r.verdict == Verdict.NEAR_TIE and r.first_divergence == 1


def test_classify_target_replay_picking_the_candidate_token_is_batch_variance() -> None:
    cand = [BASE5[0], tok(8, " pig"), tok(5, " ran")]
    asked: list[int] = []

    def replay(i: int) -> ReplayResult:
        asked.append(i)
        return picks(8, " pig")

    r = classify_divergence(
        sample("The cat sat", BASE5),
        sample("The pig ran", cand),
        replay=replay,
        floor=0.2,
        near_tie_threshold=0.1,
    )
    assert asked == [1]
    assert r.verdict == Verdict.BATCH_VARIANCE and r.first_divergence == 1
    assert r.replay is not None
    assert r.replay["target_token"]["id"] == 8 and r.replay["candidate_token"]["id"] == 8
    assert r.replay["baseline_token"]["id"] == 2
    assert abs(r.replay["margin"] - 1.0) < 1e-9 and r.replay["floor"] == 0.2


def test_classify_gap_within_the_noise_floor_is_batch_variance_without_replay() -> None:
    cand = [BASE5[0], tok(7, " cow"), tok(5, " ran")]
    r = classify_divergence(
        sample("The cat sat", BASE5),
        sample("The cow ran", cand),
        replay=None,
        floor=0.7,
        near_tie_threshold=0.1,
    )
    assert r.verdict == Verdict.BATCH_VARIANCE
    assert r.replay is not None and r.replay["target_token"] is None
    assert abs(r.replay["margin"] - 0.6) < 1e-9


def test_classify_target_keeps_its_token_beyond_the_floor_is_a_mismatch() -> None:
    cand = [BASE5[0], tok(9, " hen"), tok(5, " ran")]
    r = classify_divergence(
        sample("The cat sat", BASE5),
        sample("The hen ran", cand),
        replay=lambda i: picks(2, " cat"),
        floor=0.5,
        near_tie_threshold=0.1,
    )
    assert r.verdict == Verdict.MISMATCH
    assert r.replay is not None and r.replay["target_token"]["id"] == 2
    assert abs(r.replay["margin"] - 4.0) < 1e-9


def test_classify_a_token_outside_the_top_k_is_a_mismatch_unless_the_target_picks_it() -> None:
    cand = [BASE5[0], tok(77, " owl"), tok(5, " ran")]
    kept = classify_divergence(
        sample("The cat sat", BASE5),
        sample("The owl ran", cand),
        replay=lambda i: picks(2, " cat"),
        floor=10.0,
        near_tie_threshold=0.1,
    )
    assert kept.verdict == Verdict.MISMATCH and kept.replay is not None
    assert kept.replay["margin"] is None
    flipped = classify_divergence(
        sample("The cat sat", BASE5),
        sample("The owl ran", cand),
        replay=lambda i: picks(77, " owl"),
        floor=0.0,
        near_tie_threshold=0.1,
    )
    assert flipped.verdict == Verdict.BATCH_VARIANCE


def test_classify_text_only_candidate_uses_the_baseline_top_k() -> None:
    """A speculative arm has no logprobs: its text is matched to the baseline's alternatives."""
    by_replay = classify_divergence(
        sample("The cat sat", BASE5),
        sample("The pig ran", None),
        replay=lambda i: picks(8, " pig"),
        floor=0.0,
        near_tie_threshold=0.1,
    )
    assert by_replay.verdict == Verdict.BATCH_VARIANCE and by_replay.basis == "baseline tokens"
    assert by_replay.replay is not None and by_replay.replay["candidate_token"]["id"] == 8
    beyond = classify_divergence(
        sample("The cat sat", BASE5),
        sample("The pig ran", None),
        replay=lambda i: picks(2, " cat"),
        floor=0.5,
        near_tie_threshold=0.1,
    )
    assert beyond.verdict == Verdict.MISMATCH


def test_classify_candidate_stopping_where_the_target_stops_when_batched() -> None:
    base = [tok(1, "Done"), topk(2, ".", [(3, "!", 0.2), (0, "", 0.4)])]
    r = classify_divergence(
        sample("Done.", base, finish="length"),
        sample("Done", base[:1]),
        replay=lambda i: picks(0, ""),
        floor=0.0,
        near_tie_threshold=0.1,
    )
    assert r.verdict == Verdict.BATCH_VARIANCE and r.first_divergence == 1
