"""The sweep report's forecast at other cost ratios (marked a forecast, checked against the
measured speed-up at this host's ratio), each draft arm's added memory, and the TTFT note when
arms ran in different cache states."""

from __future__ import annotations

from dataclasses import replace

from support.sweepview import sweep_view as _view

from watchkeeper.analysis.benchmark import BenchResult
from watchkeeper.analysis.latency import LATENCY_KEY, LatencyStats, ratio_over_rounds
from watchkeeper.analysis.speculation import measured_bound
from watchkeeper.publish.sweep_forecast import (
    RATIOS,
    forecast_rows,
    forecast_section,
    latency_rows,
    memory_rows,
    ttft_note,
)
from watchkeeper.publish.sweep_report import render_sweep_sections


def test_each_measured_draft_arm_is_forecast_at_every_ratio_and_checked(
    result: BenchResult,
) -> None:
    (row,) = forecast_rows(_view(result, None))
    assert row[:3] == ["draft4", "4", "2.34 (520/800 tokens)"]
    # Verification priced as this host's: one decode step for the fixture's i.i.d. bound.
    want = [measured_bound(mean_accepted=2.34, draft_length=3.6, cost_ratio=c, verify_tokens=5,
                           verify_cost=1.0, acceptance=0.0).predicted_speedup for c in RATIOS]  # fmt: skip
    assert row[3 : 3 + len(RATIOS)] == [f"{x:.2f}x" for x in want]
    assert want == sorted(want, reverse=True)  # a dearer draft never forecasts faster
    assert row[-2] == "2.03x at 0.18"
    assert row[-1] == "measured 1.38x: at or below the forecast, as a bound must be"
    text = "\n".join(forecast_section(_view(result, None)))
    assert "**A forecast, not a measurement**" in text
    assert memory_rows(_view(result, None)) == [
        ["draft4", "Qwen2.5-0.5B-Instruct-Q8_0.gguf", "—", "+512 MiB"]
    ]


def test_a_dropped_draft_arm_keeps_its_row_saying_nothing_was_measured(result: BenchResult) -> None:
    dropped = replace(result, arm_stats=tuple(s for s in result.arm_stats if s.arm != "draft4"))
    (row,) = forecast_rows(_view(dropped, None))
    assert row[0] == "draft4" and row[-1].startswith("not measured (dropped")


def test_ttft_is_marked_not_comparable_across_cache_states(result: BenchResult) -> None:
    assert ttft_note(_view(result, None)) == []
    renewed = replace(result, method=replace(result.method, renewed=("ngram",)))
    (note, _) = ttft_note(_view(renewed, None))
    assert note.startswith("TTFT is not comparable between baseline, draft4 and ngram:")
    assert note in render_sweep_sections(_view(renewed, None))


def _latency(arm: str, e2e: list[float], ttft: list[float]) -> LatencyStats:
    return LatencyStats(
        arm, "c1", 24, 0, 0, len(e2e), {}, None, None, None, "none",
        by_round={"e2e_p90": dict(enumerate(e2e)), "ttft_p90": dict(enumerate(ttft))},
    )  # fmt: skip


def test_end_to_end_latency_sits_beside_the_decode_speed_up_with_a_ci(result: BenchResult) -> None:
    table = (
        _latency("baseline", [1000.0, 1100.0, 1050.0], [40.0, 42.0, 41.0]),
        _latency("draft4", [760.0, 800.0, 770.0], [44.0, 45.0, 46.0]),
        _latency("ngram", [1300.0, 1400.0, 1320.0], [41.0, 43.0, 42.0]),
    )
    with_lat = replace(result, extras={**result.extras, LATENCY_KEY: table})
    rows = {r[0]: r for r in latency_rows(_view(with_lat, None))}
    want = ratio_over_rounds(dict(enumerate([1000.0, 1100.0, 1050.0])),
                             dict(enumerate([760.0, 800.0, 770.0])))  # fmt: skip
    assert want is not None
    assert rows["draft4"][:3] == [
        "draft4", "1.38x (1.22-1.55)", f"{want.estimate:.2f}x ({want.low:.2f}-{want.high:.2f})"
    ]  # fmt: skip
    assert rows["draft4"][-1] == "same cache state"
    # ngram decodes no faster here; were it called faster, its 1.27x e2e would be flagged.
    faster = replace(with_lat, arm_stats=tuple(
        replace(s, overall=replace(s.overall, speedup=replace(s.overall.speedup, verdict="faster")))
        if s.arm == "ngram" and s.overall.speedup else s for s in with_lat.arm_stats))  # fmt: skip
    assert latency_rows(_view(faster, None))[1][-1].startswith("decodes faster but costs")
    renewed = replace(with_lat, method=replace(with_lat.method, renewed=("ngram",)))
    row = latency_rows(_view(renewed, None))[1]
    assert row[2:4] == ["—", "—"] and row[-1].startswith("not comparable")
