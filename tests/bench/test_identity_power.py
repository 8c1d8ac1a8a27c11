"""The identity check's modes, floor, token scores, positive controls and like-for-like
references: pure functions on hand-built probes and on the real CUDA bench's records."""

from __future__ import annotations

import gzip
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from watchkeeper.analysis.bench_findings import mismatch_title
from watchkeeper.analysis.bench_types import IdentityRecord
from watchkeeper.checks.gap_floor import GapFloor
from watchkeeper.checks.identity import Verdict, classify_divergence
from watchkeeper.checks.like_for_like import settings_differ, twin_profile
from watchkeeper.checks.power import NO_POWER, frequent_token, offline_control
from watchkeeper.checks.replay import ReplayResult
from watchkeeper.checks.token_scores import TokenScore, arm_score
from watchkeeper.config import ProfileConfig
from watchkeeper.load.records import Alternative, RequestSample, TokenLogprob
from watchkeeper.publish.identity_lines import identity_section

DATA = Path(__file__).parent / "data"
T0 = datetime(2026, 11, 26, tzinfo=UTC)


def _tok(token_id: int, margin: float) -> TokenLogprob:
    """A decoded token whose runner-up (id + 1000) trails by `margin` nats."""
    top = (
        Alternative(token_id, f"t{token_id}", -0.5),
        Alternative(token_id + 1000, f"r{token_id}", -0.5 - margin),
        Alternative(token_id + 2000, f"s{token_id}", -0.5 - margin - 3.0),
    )
    return TokenLogprob(token_id, f"t{token_id}", -0.5, top)


def _sample(tokens: tuple[TokenLogprob, ...], task_id: str = "t") -> RequestSample:
    return RequestSample(
        task_id=task_id,
        category="prose",
        seq=0,
        started_at=T0,
        completion_tokens=len(tokens),
        finish_reason="length",
        output_text="".join(t.text for t in tokens),
        tokens=tokens,
    )


MARGINS = (0.01, 0.05, 0.2, 0.4, 0.9, 1.5, 3.0, 6.0)
BASE = _sample(tuple(_tok(i + 1, m) for i, m in enumerate(MARGINS)))


def test_the_offline_control_is_a_mismatch_exactly_beyond_the_floor() -> None:
    control = offline_control(
        [BASE], positions_per_probe=len(MARGINS), floor=0.5, exact=False, near_tie_threshold=0.1
    )
    assert len(control.positions) == len(MARGINS) and control.consistent
    by_margin = {round(p.margin, 3): p.verdict for p in control.positions}
    assert by_margin == {
        0.01: "near_tie",
        0.05: "near_tie",
        0.2: "batch_variance",
        0.4: "batch_variance",
        0.9: "mismatch",
        1.5: "mismatch",
        3.0: "mismatch",
        6.0: "mismatch",
    }
    assert control.detected == 4 and control.blind_fraction == pytest.approx(0.5)
    assert "blind fraction 50%" in control.describe()


def test_in_the_exact_mode_every_forged_token_is_caught() -> None:
    control = offline_control(
        [BASE], positions_per_probe=len(MARGINS), floor=None, exact=True, near_tie_threshold=0.1
    )
    assert control.consistent and control.detected == len(MARGINS)
    assert control.blind_fraction == 0.0


def test_an_underpowered_floor_catches_nothing_and_says_so() -> None:
    control = offline_control(
        [BASE], positions_per_probe=len(MARGINS), floor=None, exact=False, near_tie_threshold=0.1
    )
    assert control.consistent and control.detected == 0 and control.blind_fraction == 1.0
    assert {p.verdict for p in control.positions} == {"near_tie", "unverified"}
    assert NO_POWER in control.describe()
    text = identity_section({"identity_power": {"offline": control.to_json()}})
    assert text is not None and NO_POWER in text and "no mismatch" not in text


def cuda_bench() -> dict[str, Any]:
    with gzip.open(DATA / "cuda_bench.json.gz", "rt", encoding="utf-8") as f:
        data: dict[str, Any] = json.load(f)
    return data


def _from_evidence(rec: dict[str, Any]) -> RequestSample:
    """One decoded position rebuilt from a CUDA record's replay evidence: the baseline's token
    and the candidate's, with the decode logprobs the record kept."""
    ev = rec["replay"]
    b, c = ev["baseline_token"], ev["candidate_token"]
    top = (
        Alternative(b["id"], b["text"], b["logprob"]),
        Alternative(c["id"], c["text"], c["logprob"]),
    )
    return _sample((TokenLogprob(b["id"], b["text"], b["logprob"], top),), rec["task_id"])


def test_on_the_cuda_bench_the_floor_is_underpowered_and_the_check_had_no_power() -> None:
    data = cuda_bench()
    floor = GapFloor.from_json(data["extras"]["noise_floor"])
    assert floor.state == "underpowered" and floor.floor is None and floor.legacy
    assert floor.positions == 40 and floor.flips == 4
    assert "40 replayed position(s), at least 200 needed" in floor.describe()
    replayed = [
        r for r in data["identity"]
        if r["replay"] and r["replay"].get("baseline_token") and r["replay"].get("candidate_token")
    ]  # fmt: skip
    samples = [_from_evidence(r) for r in replayed]
    margins = sorted(round(s.tokens[0].top[0].logprob - s.tokens[0].top[1].logprob, 3)
                     for s in samples if s.tokens)  # fmt: skip
    assert len(samples) == 14 and max(margins) < 0.45
    now = offline_control(samples, positions_per_probe=1, floor=None, exact=False,
                          near_tie_threshold=0.1)  # fmt: skip
    assert now.consistent and now.detected == 0 and now.blind_fraction == 1.0
    # main's floor (1.08 nats, pooled over every alternative) was just as blind at them
    legacy = offline_control(samples, positions_per_probe=1, floor=1.0837, exact=False,
                             near_tie_threshold=0.1)  # fmt: skip
    assert legacy.detected == 0 and legacy.blind_fraction == 1.0
    # in the exact mode each of them would have been a mismatch
    exact = offline_control(samples, positions_per_probe=1, floor=None, exact=True,
                            near_tie_threshold=0.1)  # fmt: skip
    assert exact.detected == 14


def _replay(token_id: int) -> ReplayResult:
    top = (Alternative(token_id, "x", -0.4), Alternative(token_id + 1, "y", -0.5))
    return ReplayResult(top[0], top, prompt_tokens=10)


def test_exact_mode_calls_a_near_tie_a_mismatch_and_an_underpowered_floor_unverified() -> None:
    base = _sample((_tok(1, 0.02), _tok(2, 0.3)))
    runner_up = base.tokens[1].top[1] if base.tokens else None
    assert runner_up is not None
    cand = _sample((_tok(1, 0.02), TokenLogprob(runner_up.token_id, runner_up.text, 0.0, ())))
    batched = classify_divergence(base, cand, replay=lambda i: _replay(2), floor=None,
                                  near_tie_threshold=0.1)  # fmt: skip
    assert batched.verdict == Verdict.UNVERIFIED and batched.replay is not None
    assert "underpowered" in batched.replay["note"]
    measured = classify_divergence(base, cand, replay=lambda i: _replay(2), floor=0.1,
                                   near_tie_threshold=0.1)  # fmt: skip
    assert measured.verdict == Verdict.MISMATCH
    exact = classify_divergence(base, cand, replay=lambda i: _replay(2), floor=None,
                                near_tie_threshold=0.0, exact=True)  # fmt: skip
    assert exact.verdict == Verdict.MISMATCH and exact.replay is not None
    assert exact.replay["mode"] == "exact"


def test_the_arm_statistic_sets_unpicked_tokens_against_the_aa() -> None:
    like_aa = arm_score([TokenScore(i, i % 50 != 0, 0.1) for i in range(200)],
                        aa_positions=240, aa_flips=4, exact=False)  # fmt: skip
    assert like_aa.unpicked == 4 and not like_aa.excess and like_aa.p_value is not None
    worse = arm_score([TokenScore(i, i % 5 != 0, 1.5) for i in range(200)],
                      aa_positions=240, aa_flips=4, exact=False)  # fmt: skip
    assert worse.unpicked == 40 and worse.excess and worse.worst_gap == 1.5
    assert worse.p_value is not None and worse.p_value < 1e-6
    exact = arm_score([TokenScore(0, False, 2.0), TokenScore(1, True, 0.0)],
                      aa_positions=100, aa_flips=0, exact=True)  # fmt: skip
    assert exact.excess and exact.p_value is None and "mismatch" in exact.describe()


def test_settings_that_differ_are_named_and_the_twin_does_not_speculate() -> None:
    """The CUDA run's q8_0-KV self-draft arm against its f16 baseline."""
    base = ProfileConfig(model="smollm2-135m-instruct-q4_1")
    q8 = ProfileConfig(model="smollm2-135m-instruct-q4_1", draft_model="smollm2-135m-instruct-q4_1",
                       spec_type="draft-simple", draft_n_max=4, cache_type_k="q8_0",
                       cache_type_v="q8_0", flash_attn="on")  # fmt: skip
    plain = ProfileConfig(model="smollm2-135m-instruct-q4_1", draft_model="smollm2-135m-instruct-q4_1",
                          spec_type="draft-simple", draft_n_max=4)  # fmt: skip
    assert settings_differ(base, plain) == []
    assert settings_differ(base, q8) == [
        "cache_type_k: default -> q8_0",
        "cache_type_v: default -> q8_0",
        "flash_attn: default -> on",
    ]
    twin = twin_profile(q8)
    assert not twin.speculative and twin.cache_type_k == "q8_0" and twin.flash_attn == "on"
    assert settings_differ(twin, q8) == []


def _record(replay: dict[str, Any] | None) -> IdentityRecord:
    return IdentityRecord("spec", "t", "prose", 1, "mismatch", 3, 0.5, "", "", "tokens", replay)


def test_a_finding_title_claims_only_what_was_done() -> None:
    unreplayed = mismatch_title("spec", 1, [_record({"target_token": None, "floor": None})])
    assert "replay" not in unreplayed and "floor" not in unreplayed
    replayed = mismatch_title(
        "spec", 1, [_record({"target_token": {"id": 1}, "floor": 0.3, "mode": "batched"})]
    )
    assert "batched replay picked another token at 1 of 1" in replayed
    assert "noise floor (0.300 nats)" in replayed
    exact = mismatch_title("spec", 1, [_record({"target_token": {"id": 1}, "mode": "exact"})])
    assert "exact mode" in exact and "noise floor" not in exact


def test_the_frequent_token_skips_end_and_blank_tokens() -> None:
    toks = tuple(TokenLogprob(i, t, -0.1) for i, t in [(5, " the"), (6, "<|im_end|>"), (5, " the"),
                                                        (7, " "), (7, " "), (7, " ")])  # fmt: skip
    assert frequent_token([_sample(toks)]) == (5, " the")
