"""The idle rule: a speculative arm that drafted nothing in a measured round leaves the race.

Two n-gram types of the 11434 build (ngram-map-k, ngram-map-k4v) drafted nothing in every
round of every sweep on this host and were still raced to the end, each costing a share of
every round for a tie with the baseline."""

from __future__ import annotations

from datetime import UTC, datetime

from watchkeeper.analysis.racing import start
from watchkeeper.analysis.racing_gates import idle_drops
from watchkeeper.analysis.racing_types import RaceArm
from watchkeeper.campaign.race_runs import drafted_in_round
from watchkeeper.load.records import RequestSample, RunResult

T0 = datetime(2026, 11, 27, 23, 58, tzinfo=UTC)


def _run(
    arm: str, round_index: int, drafts: list[int | None], *, warmup: bool = False
) -> RunResult:
    samples = tuple(
        RequestSample(f"t{i}", "prose", i, T0, latency_s=1.0, draft_n=d)
        for i, d in enumerate(drafts)
    )
    return RunResult(arm, arm, round_index, warmup, 1, T0, T0, samples, ())


ARMS = [RaceArm("base", 0.0, baseline=True), RaceArm("ngram", 1.0), RaceArm("idle", 1.0)]


def test_an_arm_that_drafted_nothing_is_dropped_and_one_that_drafted_stays() -> None:
    runs = [
        _run("base", 1, [None, None]),
        _run("ngram", 1, [None, 7]),  # drafted in one request of two: it speculates
        _run("idle", 1, [None, 0]),  # llama-server leaves draft_n out when nothing was drafted
        _run("idle", 0, [5, 5], warmup=True),  # warm-up drafts do not count
    ]
    drafted = drafted_in_round(runs)
    assert drafted == {"base": (2, 0), "ngram": (2, 7), "idle": (2, 0)}
    state = start(ARMS)
    state = idle_drops(state.__class__(1, state.active), drafted, baseline="base")
    assert state.active == ("base", "ngram")
    (drop,) = state.drops
    assert (drop.arm, drop.round, drop.rule) == ("idle", 1, "idle")
    assert "drafted no token in 2 request(s) of round 1" in drop.reason


def test_the_baseline_and_an_arm_with_no_clean_request_are_never_dropped_as_idle() -> None:
    """The baseline never drafts; an arm whose requests all failed says nothing about drafting
    (the failure rules judge it)."""
    failed = RequestSample("t0", "prose", 0, T0, error="HTTP 500", http_status=500)
    runs = [
        _run("base", 1, [None]),
        RunResult("idle", "idle", 1, False, 1, T0, T0, (failed,), ()),
    ]
    state = idle_drops(
        start(ARMS).__class__(1, ("base", "idle")), drafted_in_round(runs), baseline="base"
    )
    assert state.active == ("base", "idle") and state.drops == ()
