"""Measurement guards, each on constructed samples, and the recommendation rule."""

from __future__ import annotations

from datetime import UTC, datetime

from watchkeeper.checks.guards import (
    acceptance_cross_check,
    degenerate_output,
    length_parity,
    repetition,
    speculation_inactive,
)
from watchkeeper.load.records import RequestSample
from watchkeeper.server.endpoints import SPEC_DRAFT_TOKENS, parse_prometheus

STARTED = datetime(2026, 11, 3, 7, 30, tzinfo=UTC)


def s(
    text: str = "a b c", tokens: int = 10, draft: int | None = None, task: str = "t"
) -> RequestSample:
    return RequestSample(
        task_id=task,
        category="prose",
        seq=0,
        started_at=STARTED,
        completion_tokens=tokens,
        output_text=text,
        draft_n=draft,
        draft_n_accepted=draft,
    )


def test_speculation_that_never_drafted_is_flagged() -> None:
    finding = speculation_inactive("p", [s(), s()], metrics_draft_delta=0.0)
    assert finding is not None and finding.kind == "spec_inactive"
    assert speculation_inactive("p", [s(draft=4)], metrics_draft_delta=4.0) is None


def test_repetitive_output_is_flagged_as_degenerate() -> None:
    loop = " ".join(["the same words again"] * 30)
    fresh = " ".join(f"word{i}" for i in range(120))
    assert repetition(loop) > 0.9 and repetition(fresh) == 0.0
    finding = degenerate_output(
        "p", [s(loop, task="a"), s(loop, task="b"), s(fresh)], threshold=0.5
    )
    assert finding is not None and finding.evidence["flagged_tasks"] == ["a", "b"]
    assert degenerate_output("p", [s(fresh)], threshold=0.5) is None


def test_a_large_output_length_difference_is_flagged() -> None:
    base = [s(tokens=100), s(tokens=110)]
    assert length_parity("p", "prose", base, [s(tokens=50)], tolerance=0.25) is not None
    assert length_parity("p", "prose", base, [s(tokens=100)], tolerance=0.25) is None


def test_timings_and_metrics_must_agree_on_drafted_tokens() -> None:
    samples = [s(draft=40), s(draft=40)]
    assert (
        acceptance_cross_check("p", samples, {SPEC_DRAFT_TOKENS: 10.0}, {SPEC_DRAFT_TOKENS: 90.0})
        is None
    )
    mismatch = acceptance_cross_check(
        "p", samples, {SPEC_DRAFT_TOKENS: 0.0}, {SPEC_DRAFT_TOKENS: 200.0}
    )
    assert mismatch is not None and mismatch.evidence["timings_draft_n_total"] == 80


def test_prometheus_text_keeps_labels_in_the_key() -> None:
    text = (
        "# HELP x\nllamacpp:spec_decode_num_draft_tokens_total 12\n"
        'llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="0"} 5\n'
    )
    parsed = parse_prometheus(text)
    assert parsed[SPEC_DRAFT_TOKENS] == 12.0
    assert parsed['llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="0"}'] == 5.0
