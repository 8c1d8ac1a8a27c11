"""The speed-up bound from measured accepted length and measured costs, on numbers by hand."""

from __future__ import annotations

import pytest

from watchkeeper.analysis.speculation import (
    MEASURED,
    check_bound,
    expected_tokens,
    measured_bound,
    verify_cost_at,
)


def test_runs_of_acceptance_beat_the_iid_formula_and_the_bound_uses_the_counters() -> None:
    # The DESIGN.md case: draft 16, 40.6% acceptance, 6.33 tokens accepted per draft.
    bound = measured_bound(
        mean_accepted=6.33,
        draft_length=15.6,
        cost_ratio=0.2,
        verify_tokens=17,
        verify_cost=3.0,
        acceptance=0.406,
    )
    assert bound.method == MEASURED
    assert bound.tokens_per_step == pytest.approx(7.33)
    assert bound.iid_tokens_per_step == pytest.approx(expected_tokens(0.406, 15.6))
    assert bound.iid_tokens_per_step is not None and bound.iid_tokens_per_step < 1.8
    # Verification on the chord from (1 token, 1 step) to (17 tokens, 3 steps), at 16.6 tokens.
    assert bound.verify_cost == pytest.approx(1 + 2 / 16 * 15.6)
    assert bound.draft_cost_per_step == pytest.approx(0.2 * 15.6)
    assert bound.predicted_speedup == pytest.approx(7.33 / (0.2 * 15.6 + 1 + 2 / 16 * 15.6))


def test_ngram_lookup_is_free_but_its_verification_is_not() -> None:
    free = measured_bound(
        mean_accepted=3.0,
        draft_length=8.0,
        cost_ratio=0.0,
        verify_tokens=9,
        verify_cost=1.0,
        acceptance=0.375,
    )
    priced = measured_bound(
        mean_accepted=3.0,
        draft_length=8.0,
        cost_ratio=0.0,
        verify_tokens=9,
        verify_cost=4.0,
        acceptance=0.375,
    )
    assert free.draft_cost_per_step == 0.0 == priced.draft_cost_per_step
    assert free.predicted_speedup == pytest.approx(4.0)
    assert priced.predicted_speedup == pytest.approx(1.0)


def test_self_drafting_with_a_costly_batch_is_a_loss() -> None:
    bound = measured_bound(
        mean_accepted=4.0,
        draft_length=4.0,
        cost_ratio=1.0,
        verify_tokens=5,
        verify_cost=2.0,
        acceptance=1.0,
    )
    assert bound.predicted_speedup == pytest.approx(5.0 / 6.0)


def test_verify_cost_chord_and_missing_measurement() -> None:
    assert verify_cost_at(5.0, None, None) == 1.0
    assert verify_cost_at(1.0, 17, 5.0) == pytest.approx(1.0)
    assert verify_cost_at(9.0, 17, 5.0) == pytest.approx(3.0)
    assert verify_cost_at(17.0, 17, 5.0) == pytest.approx(5.0)
    unmeasured = measured_bound(
        mean_accepted=2.0,
        draft_length=4.0,
        cost_ratio=0.0,
        verify_tokens=None,
        verify_cost=None,
        acceptance=0.5,
    )
    assert unmeasured.verify_cost == 1.0
    assert any("not measured" in s for s in unmeasured.sources)


def test_a_measurement_within_the_bound_passes_the_check() -> None:
    bound = measured_bound(
        mean_accepted=2.0,
        draft_length=4.0,
        cost_ratio=0.1,
        verify_tokens=5,
        verify_cost=1.4,
        acceptance=0.5,
    )
    assert check_bound(bound, bound.predicted_speedup) is None
    assert check_bound(bound, bound.predicted_speedup * 0.5) is None


def test_a_measurement_above_the_bound_names_the_verify_cost() -> None:
    bound = measured_bound(
        mean_accepted=2.0,
        draft_length=4.0,
        cost_ratio=0.0,
        verify_tokens=5,
        verify_cost=3.0,
        acceptance=0.5,
    )
    note = check_bound(bound, bound.predicted_speedup * 1.5, measured_verify=(5, 3.0))
    assert note is not None
    assert "verify cost measured at 3.00 steps" in note and "too high?" in note
    assert "inconsistent" not in note


def test_counters_that_contradict_the_acceptance_are_named() -> None:
    bound = measured_bound(
        mean_accepted=6.33,
        draft_length=4.0,  # more accepted per draft than drafted: impossible
        cost_ratio=0.0,
        verify_tokens=5,
        verify_cost=1.0,
        acceptance=0.4,
    )
    note = check_bound(bound, bound.predicted_speedup + 1.0)
    assert note is not None
    assert "accepted per draft from counters (6.33) looks inconsistent" in note


def test_verify_cost_calibration_times_n_plus_1_fresh_tokens_against_a_decode_step(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`measure_verify_cost` with a fake server: a batch of k tokens costs 2 ms + 1 ms per token, a
    decode step 2.5 ms; answers that evaluated anything but k tokens are dropped."""
    from types import SimpleNamespace
    from typing import Any

    from watchkeeper.campaign import calibration as bench

    prefix_len = bench.VERIFY_PREFIX_TOKENS
    calls: list[dict[str, Any]] = []

    def fake_complete(client: object, payload: dict[str, Any]) -> dict[str, Any]:
        calls.append(payload)
        fresh = len(payload["prompt"]) - prefix_len if len(calls) > 1 else prefix_len
        if payload["n_predict"] > 1:
            n = payload["n_predict"]
            return {"timings": {"prompt_n": fresh, "predicted_n": n, "predicted_ms": 2.5 * n}}
        return {"timings": {"prompt_n": fresh, "prompt_ms": 2.0 + fresh, "predicted_n": 1}}

    monkeypatch.setattr(bench, "complete", fake_complete)
    monkeypatch.setattr(bench, "tokenize", lambda client, text: list(range(len(text) // 4)))
    config: Any = SimpleNamespace(server=SimpleNamespace(request_timeout_s=5.0))
    server: Any = SimpleNamespace(base_url="http://127.0.0.1:9")
    verify = bench.measure_verify_cost(config, server, 4, lambda _: None)
    assert verify.tokens == 5
    assert verify.cost == pytest.approx((2.0 + 5) / 2.5)
    assert "batch of 5 tokens" in verify.note
    assert len(calls) == 1 + 2 * bench.VERIFY_REPEATS
    batches = [c["prompt"] for c in calls[1:] if c["n_predict"] == 1]
    assert all(b[:prefix_len] == calls[0]["prompt"] for b in batches)
    assert len({tuple(b[prefix_len:]) for b in batches}) == bench.VERIFY_REPEATS


def test_steps_without_a_draft_are_plain_decode_steps_in_the_bound() -> None:
    """The n-gram arm of a real SmolLM2 bench (2026-11-23): 70 drafts of 32.4 tokens, 6.5
    accepted each, 7135 decoded tokens, a 49-token batch at 21.52 decode steps. Priced as if
    every step drafted, the bound said 0.50x and the measurement (0.91x, CI 0.84-0.97) beat
    it; with the other 6610 tokens made by plain steps it says 0.93x, and bounds."""
    common = dict(
        mean_accepted=6.5,
        draft_length=32.43,
        cost_ratio=0.0,
        verify_tokens=49,
        verify_cost=21.52,
        acceptance=0.2,
    )
    every_step = measured_bound(**common)  # type: ignore[arg-type]
    mixed = measured_bound(**common, decoded_tokens=7135.0, drafts=70.0)  # type: ignore[arg-type]
    assert every_step.predicted_speedup == pytest.approx(0.50, abs=0.01)
    assert mixed.plain_token_share == pytest.approx((7135 - 70 * 7.5) / 7135)
    cost = 7135 - 70 * 7.5 + 70 * mixed.verify_cost
    assert mixed.predicted_speedup == pytest.approx(7135 / cost)
    assert 0.93 < mixed.predicted_speedup < 0.95
    assert check_bound(mixed, 0.84) is None
    assert check_bound(every_step, 0.84) is not None
    # A draft on every step: the mixture is the per-step formula.
    dense = measured_bound(**common, decoded_tokens=70 * 7.5, drafts=70.0)  # type: ignore[arg-type]
    assert dense.plain_token_share == 0.0
    assert dense.predicted_speedup == pytest.approx(every_step.predicted_speedup)


def test_a_mixed_bound_beaten_names_the_draft_step_cost_it_would_need() -> None:
    mixed = measured_bound(
        mean_accepted=6.5,
        draft_length=32.43,
        cost_ratio=0.0,
        verify_tokens=49,
        verify_cost=21.52,
        acceptance=0.2,
        decoded_tokens=7135.0,
        drafts=70.0,
    )
    note = check_bound(mixed, 0.99)
    assert note is not None
    # At 0.99x the 70 draft steps may cost (7135 / 0.99 - 6610) / 70 = 8.5 steps each.
    allowed = (7135 / 0.99 - (7135 - 70 * 7.5)) / 70
    assert f"at most {allowed:.2f} decode steps" in note
