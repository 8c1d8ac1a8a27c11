"""The report's per-request acceptance (analysis/request_acceptance.py, publish/acceptance_section.py):
counts always with their percentage, the mean beside deciles and a 10-bin histogram, per arm
and category, measured runs only."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from watchkeeper.analysis.bench_types import BenchResult
from watchkeeper.analysis.request_acceptance import request_acceptance, with_request_acceptance
from watchkeeper.load.records import RequestSample, RunPurpose, RunResult
from watchkeeper.publish.acceptance_section import request_acceptance_rows
from watchkeeper.publish.report import render_bench_report

T0 = datetime(2026, 12, 6, tzinfo=UTC)


def _run(arm: str, pairs: list[tuple[str, int | None, int]], purpose: RunPurpose) -> RunResult:
    samples = tuple(
        RequestSample(f"t{i}", cat, i, T0, draft_n=d, draft_n_accepted=a)
        for i, (cat, d, a) in enumerate(pairs)
    )
    return RunResult(arm, arm, 1, False, 1, T0, T0, samples, (), purpose=purpose)


RUNS = [
    _run("base", [("code", None, 0), ("prose", None, 0)], RunPurpose.MEASURED),
    _run(
        "draft",
        [("code", 100, 95), ("code", 100, 90), ("prose", 50, 10), ("prose", 50, 40)],
        RunPurpose.MEASURED,
    ),
    _run("draft", [("code", 1000, 0)], RunPurpose.WARMUP),
]


def test_only_drafting_requests_of_measured_runs_count() -> None:
    found = request_acceptance(RUNS)
    assert set(found) == {"draft"}
    overall = found["draft"]["all"]
    assert (overall["requests"], overall["drafted"], overall["accepted"]) == (4, 300, 235)
    assert overall["mean"] == (0.95 + 0.9 + 0.2 + 0.8) / 4
    assert overall["bins"] == [0, 0, 1, 0, 0, 0, 0, 0, 1, 2]
    assert found["draft"]["prose"]["bins"] == [0, 0, 1, 0, 0, 0, 0, 0, 1, 0]


def test_the_report_shows_counts_with_percentages_and_a_histogram(result: BenchResult) -> None:
    rendered = with_request_acceptance(result, RUNS)
    rows = request_acceptance_rows(rendered)
    assert [r[:5] for r in rows] == [
        ["draft", "all", "4", "300", "235 (78.3%)"],
        ["draft", "code", "2", "200", "185 (92.5%)"],
        ["draft", "prose", "2", "100", "50 (50.0%)"],
    ]
    assert rows[0][7] == "0 0 1 0 0 0 0 0 1 2"
    markdown = render_bench_report(rendered, plots={})
    assert "## Per-request acceptance" in markdown and "235 (78.3%)" in markdown
    untouched = render_bench_report(replace(result, extras={}), plots={})
    assert "## Per-request acceptance" not in untouched
