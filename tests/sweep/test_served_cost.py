"""The as-served identity pass's replays priced before the race spends the budget on rounds
(`sweep --identity-as-served`): each replayed position is a fresh prefill of the prompt plus
the output so far, so the A/A floor costs positions x prompt tokens / measured prefill speed;
the racer reserves that, or skips the pass with the reason. Synthetic numbers, no server."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest
from support.sweepview import sweep_view

from watchkeeper.analysis.benchmark import BenchResult
from watchkeeper.analysis.racing import start
from watchkeeper.analysis.racing_types import RaceArm, RaceSettings
from watchkeeper.campaign.bench_plan import BenchPlan
from watchkeeper.campaign.racer import EXACT_PROBE_SHARE, PROBE_SHARE, Racer
from watchkeeper.campaign.served_cost import Prefill, prefill_of, served_cost
from watchkeeper.load.records import RequestSample, RunResult
from watchkeeper.publish.sweep_report import render_sweep_sections

T0 = datetime(2026, 11, 28, tzinfo=UTC)
SLOW = Prefill(prompt_tokens=600, output_tokens=64, tps=40.0)
"""The 2026-11-28 host's code-edit probes: ~600-token prompts, 64-token answers, ~40 tok/s."""


def test_the_floor_is_priced_as_positions_times_prompt_tokens_over_prefill_speed() -> None:
    """Three probes: 240 A/A positions over them is 80 each, capped by the 64-token outputs
    (192 in all); each replay prefills 600 + 32 tokens on average at 40 tok/s (15.8 s): 50.6
    min for the floor alone. Each probed arm: 40 token-score positions and 2 divergence
    replays per probe (126 replays, 33.2 min)."""
    assert SLOW.replay_s() == pytest.approx(15.8)
    cost = served_cost(3, SLOW)
    assert (cost.floor_positions, cost.arm_positions) == (192, 126)
    assert cost.floor_s == pytest.approx(192 * 15.8)
    assert cost.arm_s == pytest.approx(126 * 15.8)
    assert cost.seconds(2) == pytest.approx((192 + 2 * 126) * 15.8)
    assert cost.seconds(1, floor=False) == pytest.approx(126 * 15.8)
    assert "replays 192 positions (3 probe(s)), each a ~632-token prompt" in cost.text
    assert "at the measured 40 tok/s (15.8 s a position): 50.6 min" in cost.text
    # Many probes: fewer positions each; short outputs cap them.
    assert served_cost(24, SLOW).floor_positions == 24 * 10
    assert served_cost(3, replace(SLOW, output_tokens=16)).floor_positions == 3 * 16


def _run(arm: str, rnd: int, *, prompt_ms: float = 15000.0, warmup: bool = False) -> RunResult:
    """Six requests of 600-token prompts (40 tok/s at 15 s) and 64-token answers, 60 s each."""
    samples = tuple(
        RequestSample(
            f"{cat}-{i}", cat, i, T0, latency_s=60.0, prompt_tokens=600,
            prompt_ms=prompt_ms * (1 + i / 10), completion_tokens=64,
            decode_tps_server=20.0 * (1.3 if arm != "base" else 1.0) * (1 + i / 50),
            draft_n=None if arm == "base" else 4,
        )
        for cat in ("prose", "code_edit")
        for i in range(3)
    )  # fmt: skip
    return RunResult(arm, arm, rnd, warmup, 1, T0, T0, samples, ())


def test_the_prefill_is_the_baselines_round_one_lower_quartile() -> None:
    """A request whose prompt was partly cached reads fast: the lower quartile errs slow."""
    runs = [
        _run("base", 1),
        _run("base", 1, prompt_ms=100.0, warmup=True),  # warm-up: not measured
        _run("base", 2, prompt_ms=100.0),  # a later round, prompts cached
        _run("ngram", 1, prompt_ms=100.0),
    ]
    found = prefill_of(runs, "base")
    assert found is not None
    assert (found.prompt_tokens, found.output_tokens) == (600, 64)
    # Prompt times 15.0, 16.5, 18.0 s (twice each): the lower quartile is 600 / 18 s.
    assert found.tps == pytest.approx(600 / 18.0)
    assert prefill_of([replace(_run("base", 1), samples=())], "base") is None


def _racer(budget_s: float) -> Racer:
    racer = Racer(
        [RaceArm("base", 0.0, True), RaceArm("ngram", 1.0)], RaceSettings(), budget_s=budget_s,
        clock=lambda: 0.0, progress=lambda _m: None, probe_share=EXACT_PROBE_SHARE,
        probe_fraction=0.5, served=True,
    )  # fmt: skip
    racer.probe_count = 3
    return racer


def test_the_racer_reserves_the_priced_replays_or_skips_the_served_pass_saying_why() -> None:
    """Round 1: 6 x 60 s per arm; three of six tasks probed. Exact probes of base and ngram:
    2.6 x 0.5 x 720 s = 936 s. As served: the probes 1.0 x 0.5 x 720 s = 360 s, the floor and
    ngram's replays, (192 + 126) x (600 + 32) tokens at the measured 33.3 tok/s (6030 s). The
    flat 1.2x round 1 priced the whole served pass at 432 s."""
    runs = [_run("base", 1), _run("ngram", 1)]
    cost = _racer(1e9).served_cost(runs)
    assert cost is not None and cost.probes == 3
    served = 360.0 + cost.floor_s + cost.arm_s
    assert cost.floor_s + cost.arm_s == pytest.approx(318 * 632 / (600 / 18.0))
    assert served > 10 * PROBE_SHARE * 0.5 * 720.0  # what the flat share had reserved
    roomy = _racer(4 * (936.0 + served) + 1.0)
    assert roomy.probe_arms(runs) == ["base", "ngram"]
    assert roomy.served_skipped == ""
    assert roomy.probe_seconds(runs, ["base", "ngram"]) == pytest.approx(936.0 + served)
    # The budget's quarter (2000 s) holds the exact probes, not the served replays: skipped.
    tight = _racer(8000.0)
    assert tight.probe_arms(runs) == ["base", "ngram"]
    why = tight.served_skipped
    assert why.startswith(f"priced at {served / 60:.1f} min on base, ngram (its A/A floor")
    assert "passes the identity pass's 25% of the budget (33.3 min)" in why
    assert tight.probe_seconds(runs, ["base", "ngram"]) == pytest.approx(936.0)
    # Not asked for: nothing priced, nothing skipped.
    plain = _racer(8000.0)
    plain.served = False
    plain.probe_arms(runs)
    assert plain.served_skipped == ""


def test_a_skipped_served_pass_does_not_run_and_the_report_says_why(result: BenchResult) -> None:
    plan = BenchPlan(("base",), (), 1, 0, 0, 1, served_identity=True)
    assert plan.runs_served
    assert not replace(plan, served_gate=lambda: "priced at 90 min").runs_served
    assert replace(plan, served_gate=lambda: "").runs_served
    assert not replace(plan, served_identity=False).runs_served
    view = sweep_view(result, None)
    raced = replace(view, race=start(view.arms), served_skipped="priced at 90 min")
    said = render_sweep_sections(raced)
    assert "The as-served pass (`--identity-as-served`) was skipped: priced at 90 min." in said
