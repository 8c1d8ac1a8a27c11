"""The per-position acceptance curve: parsed from /metrics scrapes, differenced per run, and on
the real server consistent with the accepted-token counter."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from watchkeeper.analysis.acceptance import curve, delta, explain, low_positions
from watchkeeper.analysis.benchmark import BenchResult
from watchkeeper.campaign.campaigns import measure_run
from watchkeeper.config import load_config
from watchkeeper.load.records import Task
from watchkeeper.load.runner import LoadSettings
from watchkeeper.load.tasks import cap_tokens, load_taskset
from watchkeeper.publish.plots import make_plots
from watchkeeper.publish.report import render_bench_report
from watchkeeper.server.endpoints import (
    PER_POSITION,
    SPEC_ACCEPTED_TOKENS,
    SPEC_DRAFT_TOKENS,
    SPEC_DRAFTS,
    spec_counters,
)
from watchkeeper.server.install import ServerBinary
from watchkeeper.server.launch import prepare, serve
from watchkeeper.server.models import ModelFile


def scrape(drafts: float, drafted: float, accepted: float, per: list[float]) -> dict[str, float]:
    out = {SPEC_DRAFTS: drafts, SPEC_DRAFT_TOKENS: drafted, SPEC_ACCEPTED_TOKENS: accepted}
    out.update({f'{PER_POSITION}{{position="{i}"}}': v for i, v in enumerate(per)})
    return out


def test_positions_are_read_from_the_labelled_samples_only() -> None:
    samples = scrape(10, 40, 25, [9, 7, 5, 4])
    samples["llamacpp:prompt_tokens_total"] = 99
    counters = spec_counters(samples)
    assert counters is not None and counters.per_position == (9, 7, 5, 4)
    assert (counters.drafts, counters.drafted, counters.accepted) == (10, 40, 25)
    assert spec_counters({"llamacpp:prompt_tokens_total": 99}) is None


def test_a_curve_is_the_delta_over_the_arms_own_runs_divided_by_its_drafts() -> None:
    before = scrape(100, 400, 250, [90, 70, 50, 40])
    after = scrape(120, 480, 295, [108, 84, 58, 45])
    d = delta(before, after)
    assert d.drafts == 20 and d.accepted == 45 and d.per_position == (18, 14, 8, 5)
    c = curve("draft4", [(before, after), ({}, scrape(10, 40, 20, [8, 6, 4, 2]))], n_max=4)
    assert c is not None
    assert c.drafts == 30 and c.per_position == (26, 20, 12, 7)
    assert c.rates == (26 / 30, 20 / 30, 12 / 30, 7 / 30)
    assert c.consistent and c.position_sum == c.accepted == 65


def test_positions_a_draft_never_reached_read_zero_up_to_n_max() -> None:
    c = curve("draft8", [({}, scrape(10, 30, 9, [6, 3]))], n_max=8)
    assert c is not None and c.per_position == (6, 3, 0, 0, 0, 0, 0, 0)
    assert low_positions(c) == (3, 8)
    assert "positions 3-8 accept under 20%: n_max 8 pays for drafts it throws away" in explain(c)


def test_an_arm_that_never_drafted_has_no_curve_and_inconsistent_counts_are_flagged() -> None:
    assert curve("base", [({}, {"llamacpp:prompt_tokens_total": 5})]) is None
    c = curve("odd", [({}, scrape(10, 40, 30, [9, 7]))])
    assert c is not None and not c.consistent


def test_per_position_counts_add_up_to_the_accepted_tokens_on_the_real_server(
    real_server: tuple[ServerBinary, ModelFile], tmp_path: Path
) -> None:
    """SmolLM2 drafting for itself at n_max 8: after real requests, the per-position counts
    sum to the accepted-token counter, the curve falls with the position, and every rate is a
    share of the drafts."""
    config_path = tmp_path / "watchkeeper.toml"
    config_path.write_text(
        f'[database]\nurl = "sqlite:///{tmp_path / "wk.db"}"\n'
        "[profiles.selfdraft8]\n"
        'model = "smollm2-135m-instruct-q4_1"\ndraft_model = "smollm2-135m-instruct-q4_1"\n'
        'spec_type = "draft-simple"\ndraft_n_max = 8\n'
    )
    config = load_config(config_path)
    # 48-token answers: the sums and the order hold at any length (128: 43 s, 48: 29 s).
    tasks: list[Task] = cap_tokens(
        [t for t in load_taskset(Path("jobs/tasksets/standard.jsonl")) if t.id.endswith("-01")],
        48,
    )
    prepared = prepare(config, "selfdraft8")
    with serve(config, prepared, log_path=tmp_path / "server.log") as server:
        runs = [
            measure_run(
                server,
                config,
                tasks[i : i + 3],
                arm="selfdraft8",
                round_index=i,
                is_warmup=False,
                settings=LoadSettings(),
            )
            for i in (0, 3)
        ]
    assert all(r.error is None for r in runs)
    c = curve("selfdraft8", [(r.metrics_before, r.metrics_after) for r in runs], n_max=8)
    assert c is not None, json.dumps(runs[-1].metrics_after)
    assert c.drafts > 0 and len(c.rates) == 8
    assert c.consistent, (c.position_sum, c.accepted)
    assert all(0.0 <= r <= 1.0 for r in c.rates)
    assert list(c.rates) == sorted(c.rates, reverse=True)
    # Per request, the timings' draft_n_accepted add up to the same accepted tokens.
    from_timings = sum(s.draft_n_accepted or 0 for r in runs for s in r.samples)
    assert abs(from_timings - c.accepted) <= 0.01 * c.accepted


def test_the_report_and_a_plot_show_the_curve_with_its_reading(
    result: BenchResult, tmp_path: Path
) -> None:
    c = curve("draft16", [({}, scrape(100, 1600, 120, [60, 30, 15, 8, 4, 2, 1]))], n_max=16)
    assert c is not None and c.consistent
    with_curve = replace(result, extras={**result.extras, "acceptance_curves": [c.to_json()]})
    text = render_bench_report(with_curve, plots={"acceptance_curve": "acceptance_curve.png"})
    assert "## Acceptance per draft position" in text
    assert (
        "| draft16 | 100 | 1.20 | 60, 30, 15, 8, 4, 2, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0 | yes |" in text
    )
    assert "positions 3-16 accept under 20%: n_max 16 pays for drafts it throws away" in text
    assert "acceptance_curve.png" in make_plots(with_curve, tmp_path).values()
    assert "## Acceptance per draft position" not in render_bench_report(result, plots={})
