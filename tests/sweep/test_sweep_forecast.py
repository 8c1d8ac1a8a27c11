"""The sweep report's forecast at other cost ratios (marked a forecast, checked against the
measured speed-up at this host's ratio), each draft arm's added memory, and the TTFT note when
arms ran in different cache states."""

from __future__ import annotations

from dataclasses import replace

from support.sweepview import sweep_view as _view

from watchkeeper.analysis.benchmark import BenchResult
from watchkeeper.analysis.speculation import measured_bound
from watchkeeper.publish.sweep_forecast import (
    RATIOS,
    forecast_rows,
    forecast_section,
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
