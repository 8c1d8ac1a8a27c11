"""Benchmark report: Markdown, plots and where the files land.

The golden test pins the whole Markdown so format changes are reviewed as a diff. After an
intended change, regenerate the golden file and review it:

    WATCHKEEPER_UPDATE_GOLDEN=1 .venv/bin/pytest -q tests/test_report.py
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from watchkeeper.analysis.benchmark import (
    ArmSpec,
    ArmStats,
    BenchMethod,
    BenchResult,
    CategoryStats,
    IdentityRecord,
)
from watchkeeper.analysis.recommend import recommend
from watchkeeper.analysis.speculation import predicted_speedup
from watchkeeper.analysis.stats import RatioCI, classify
from watchkeeper.checks.guards import GuardFinding
from watchkeeper.host.info import HostInfo
from watchkeeper.publish.markdown import fence_for
from watchkeeper.publish.plots import make_plots
from watchkeeper.publish.report import (
    VERDICTS,
    render_bench_report,
    write_bench_report,
)

GOLDEN = Path(__file__).parent / "golden" / "bench_report.md"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
COUNT_ORDER = ("identical", "near_tie", "length_only", "mismatch", "batch_variance")
"""Order of the verdict counts `_stats` takes (batch_variance last: added later)."""
PLOTS = {
    "speedup": "speedup.png",
    "tps": "tps.png",
    "acceptance": "acceptance.png",
    "identity": "identity.png",
}


def _stats(
    arm: str, category: str, tps: float, ci: tuple[float, ...] = (), *counts: int
) -> CategoryStats:
    """counts: drafted, accepted, then verdict counts in COUNT_ORDER."""
    drafted, accepted, *rest = (*counts, 0, 0, 0, 0, 0, 0, 0)[:7]
    verdicts = {v: n for v, n in zip(COUNT_ORDER, rest, strict=False) if n}
    total = sum(verdicts.values())
    return CategoryStats(
        arm, category, requests=24 if category == "all" else 12, errors=0, median_tps=tps,
        median_ttft_ms=41.5, median_completion_tokens=128.0,
        speedup=RatioCI(
            *ci, 48 if category == "all" else 24, 12, 4, verdict=classify(*ci, threshold=0.03)
        )
        if ci
        else None,
        acceptance_rate=accepted / drafted if drafted else None, drafted=drafted,
        accepted=accepted, verdicts=verdicts,
        identical_rate=verdicts.get("identical", 0) / total if total else None,
    )  # fmt: skip


def _arm_stats(overall: CategoryStats, rss: int, mean_len: float | None = None,
               mean_acc: float | None = None, cost: float | None = None) -> ArmStats:  # fmt: skip
    bound = efficiency = None
    if overall.acceptance_rate is not None and cost is not None:
        bound = predicted_speedup(overall.acceptance_rate, mean_len or 1.0, cost)
        if overall.speedup is not None:
            efficiency = overall.speedup.estimate / bound.predicted_speedup
    return ArmStats(overall.arm, overall, rss, mean_len, mean_acc, bound, efficiency)


NOISE_FLOOR = {"floor": 0.0312, "positions": 48, "disagreements": 1, "quantile": 0.99,
               "logprob_delta_q": 0.021, "logprob_delta_max": 0.03, "gap_delta_q": 0.0312,
               "gap_delta_max": 0.04, "disagreement_margins": [0.012]}  # fmt: skip
MODEL, DRAFT = "Qwen2.5-1.5B-Instruct-Q4_K_M.gguf", "Qwen2.5-0.5B-Instruct-Q8_0.gguf"
SERVER = f"llama-server -m /models/{MODEL}"


@pytest.fixture
def result() -> BenchResult:
    host = HostInfo("0123456789abcdef", "bench-01", "AMD EPYC 9654 96-Core Processor", 16,
                    128 * (1 << 30), "NVIDIA H100 80GB HBM3, 81559 MiB", "Linux 6.8.0")  # fmt: skip
    arms = (
        ArmSpec("baseline", "baseline", None, None, MODEL, "a" * 64, None, None,
                tuple(shlex.split(f"{SERVER} --port 8081"))),
        ArmSpec("draft4", "candidate", "draft-simple", 4, MODEL, "a" * 64, DRAFT, "b" * 64,
                tuple(shlex.split(f"{SERVER} --spec-type draft-simple --spec-draft-model "
                                  f"'/models/My Drafts/{DRAFT}' --spec-draft-n-max 4")),
                cost_ratio=0.18, cost_note="measured on this host"),
        ArmSpec("ngram", "candidate", "ngram-simple", None, MODEL, "a" * 64, None, None,
                tuple(shlex.split(f"{SERVER} --spec-type ngram-simple")), cost_ratio=0.0),
    )  # fmt: skip
    categories = (
        _stats("baseline", "code", 80.25),
        _stats("baseline", "chat", 82.0),
        _stats("draft4", "code", 130.0, (1.62, 1.41, 1.85), 400, 300, 22, 1, 0, 0, 1),
        _stats("draft4", "chat", 96.75, (1.18, 1.02, 1.33), 400, 220, 24),
        _stats("ngram", "code", 84.3, (1.05, 0.93, 1.19), 120, 60, 23, 0, 0, 1),
        _stats("ngram", "chat", 77.1, (0.94, 0.88, 1.01), 80, 20, 24),
    )
    arm_stats = (
        replace(_arm_stats(_stats("baseline", "all", 81.1), 1_610_612_736),
                probe_median_tps=42.3),
        replace(_arm_stats(_stats("draft4", "all", 112.0, (1.38, 1.22, 1.55), 800, 520, 46,
                                  1, 0, 0, 1),
                           2_147_483_648, mean_len=3.6, mean_acc=2.34, cost=0.18),
                probe_median_tps=104.9),
        _arm_stats(_stats("ngram", "all", 80.5, (0.99, 0.92, 1.07), 200, 80, 47, 0, 0, 1),
                   1_650_000_000, mean_len=2.5, mean_acc=1.0, cost=0.0),
    )  # fmt: skip
    identity = (
        IdentityRecord("draft4", "code-03", "code", 2, "near_tie", 57, 0.0041,
                       "return a + b⟦\n\n```\n⟧", "return a + b⟦```\n\n⟧"),
        IdentityRecord("ngram", "code-05", "code", 1, "mismatch", 12, 1.73,
                       "for i in range(n):⟦ total += i⟧", "for i in range(n):⟦ total -= i⟧",
                       replay={"target_token": {"id": 488, "text": " +=", "logprob": -0.02},
                               "candidate_token": {"id": 593, "text": " -=", "logprob": -3.1},
                               "baseline_token": {"id": 488, "text": " +=", "logprob": -0.02},
                               "margin": 3.08, "floor": 0.0312}, compared="mismatch"),
        IdentityRecord("draft4", "code-07", "code", 5, "batch_variance", 31, 0.21,
                       "x = [⟦i for i in⟧", "x = [⟦ i for i⟧",
                       replay={"target_token": {"id": 72, "text": " i", "logprob": -0.6},
                               "candidate_token": {"id": 72, "text": " i", "logprob": -0.81},
                               "baseline_token": {"id": 17, "text": "i", "logprob": -0.6},
                               "margin": 0.21, "floor": 0.0312}, compared="mismatch"),
    )  # fmt: skip
    finding = GuardFinding(
        kind="length_parity", profile="ngram", severity="medium", category="chat",
        title="ngram/chat: median output length differs from baseline by -21% (101 vs 128 "
        "tokens); tok/s is not comparable",
        evidence={"baseline_median_tokens": 128.0, "candidate_median_tokens": 101.0,
                  "tolerance": 0.15},
    )  # fmt: skip
    method = BenchMethod(rounds=4, warmup_rounds=1, warmup_tasks=2, concurrency=1, tasks=6,
                         categories=("code", "chat"), temperature=0.0, seed=1234,
                         near_tie_threshold=0.05, resamples=2000)  # fmt: skip
    tps = {"baseline": [80.1, 81.0, 82.4, 79.8], "draft4": [101.0, 118.5, 131.2, 96.4],
           "ngram": [78.0, 80.2, 84.9, 83.1]}  # fmt: skip
    return BenchResult(
        campaign_id=7, kind="bench", host=host, build_version="b4567 (abc1234)",
        build_variant="cuda", started_at=datetime(2025, 3, 14, 9, 26, 53, tzinfo=UTC),
        finished_at=datetime(2025, 3, 14, 10, 2, 11, tzinfo=UTC), arms=arms,
        arm_stats=arm_stats, categories=categories,
        control=_stats("control", "all", 81.0, (), 0, 0, 24), identity=identity,
        findings=(finding,), method=method,
        extras={"tps_samples": tps, "noise_floor": NOISE_FLOOR},
    )  # fmt: skip


def test_report_markdown_matches_golden_file(result: BenchResult) -> None:
    markdown = render_bench_report(result, plots=PLOTS, recommendation=recommend(result))
    if os.environ.get("WATCHKEEPER_UPDATE_GOLDEN") == "1":
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN.write_text(markdown, encoding="utf-8")
    assert markdown == GOLDEN.read_text(encoding="utf-8")


def test_report_sections_come_in_the_documented_order(result: BenchResult) -> None:
    markdown = render_bench_report(result, plots=PLOTS, recommendation=recommend(result))
    headings = re.findall(r"^## (.+)$", markdown, flags=re.MULTILINE)
    assert headings == [
        "Summary",
        "Per category",
        "Speed-up bound",
        "Identical output",
        "Findings",
        "Recommendation",
        "Plots",
        "Reproduce",
    ]


def test_headline_lists_each_candidate_speedup_without_a_recommendation(
    result: BenchResult,
) -> None:
    markdown = render_bench_report(result, plots={})
    assert "**draft4 1.38x (95% CI 1.22-1.55); ngram 0.99x (95% CI 0.92-1.07)**" in markdown
    assert "## Recommendation" not in markdown
    assert "No plots were produced." in markdown


def test_report_is_a_pure_function_of_the_result(result: BenchResult) -> None:
    first = render_bench_report(result, plots=PLOTS)
    assert render_bench_report(result, plots=PLOTS) == first
    assert "2025-03-14T09:26:53+00:00" in first


def test_missing_plot_keys_are_simply_not_shown(result: BenchResult) -> None:
    markdown = render_bench_report(result, plots={"speedup": "speedup.png"})
    assert "![Speed-up per category](speedup.png)" in markdown
    assert ".png" not in markdown.replace("speedup.png", "")


def test_excerpt_with_backticks_cannot_break_out_of_its_code_fence(result: BenchResult) -> None:
    nasty = "x" + "`" * 7 + "\n## Injected heading\n````"
    record = replace(result.identity[1], baseline_excerpt=nasty)
    markdown = render_bench_report(replace(result, identity=(record,)), plots={})
    fence = "`" * 8
    assert f"  {fence}\n  x{'`' * 7}\n  ## Injected heading\n  ````\n  {fence}\n" in markdown
    assert not re.search(r"^## Injected heading", markdown, flags=re.MULTILINE)
    assert fence_for("no ticks") == "```"
    assert fence_for("a ``` b") == "````"


def test_long_excerpts_are_capped_at_200_characters(result: BenchResult) -> None:
    record = replace(result.identity[1], candidate_excerpt="y" * 500)
    markdown = render_bench_report(replace(result, identity=(record,)), plots={})
    assert "  " + "y" * 199 + "…\n" in markdown
    assert "y" * 200 not in markdown


def test_finding_evidence_is_capped_json_in_a_fence_it_cannot_close(
    result: BenchResult,
) -> None:
    finding = replace(result.findings[0], evidence={"excerpt": "````" + "z" * 2000})
    markdown = render_bench_report(replace(result, findings=(finding,)), plots={})
    block = re.search(r"^  (`{5})json\n  (.*)\n  \1$", markdown, flags=re.MULTILINE)
    assert block is not None
    assert len(block.group(2)) == 600
    assert block.group(2).startswith('{"excerpt": "````zzz')
    assert block.group(2).endswith("z…")


def test_report_says_keep_the_baseline_when_nothing_beats_it(result: BenchResult) -> None:
    weak = RatioCI(1.03, 0.95, 1.12, 48, 12, 4, verdict="inconclusive", rounds_needed=9)
    arm_stats = tuple(
        replace(s, overall=replace(s.overall, speedup=weak)) if s.arm != "baseline" else s
        for s in result.arm_stats
    )
    categories = tuple(
        replace(c, speedup=weak) if c.arm != "baseline" else c for c in result.categories
    )
    modest = replace(result, arm_stats=arm_stats, categories=categories)
    markdown = render_bench_report(modest, plots={}, recommendation=recommend(modest))
    assert "**keep the baseline: no speculative profile beats it with confidence" in markdown
    assert "| code | keep the baseline | — |" in markdown


def test_table_cells_escape_pipes_from_names(result: BenchResult) -> None:
    arms = (*result.arms[:2], replace(result.arms[2], spec_type="ngram|simple"))
    markdown = render_bench_report(replace(result, arms=arms), plots={})
    assert "| ngram | candidate | ngram\\|simple |" in markdown


def test_plots_are_written_as_png_files(result: BenchResult, tmp_path: Path) -> None:
    plots = make_plots(result, tmp_path)
    assert plots == PLOTS
    for name in plots.values():
        assert (tmp_path / name).read_bytes().startswith(PNG_MAGIC)
    assert not [p for p in tmp_path.iterdir() if p.suffix != ".png"]


def test_plots_are_deterministic(result: BenchResult, tmp_path: Path) -> None:
    make_plots(result, tmp_path / "a")
    make_plots(result, tmp_path / "b")
    for name in PLOTS.values():
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_a_baseline_only_run_renders_without_candidates_or_plots(
    result: BenchResult, tmp_path: Path
) -> None:
    bare = replace(
        result,
        arms=result.arms[:1],
        arm_stats=result.arm_stats[:1],
        categories=result.categories[:2],
        control=None,
        identity=(),
        findings=(),
        extras={},
    )
    assert make_plots(bare, tmp_path) == {}
    markdown = render_bench_report(bare, plots={})
    assert "**no candidate arm was measured**" in markdown
    assert "No guard or correctness finding." in markdown
    assert "Example divergences" not in markdown


def test_arm_names_matplotlib_hides_from_legends_do_not_warn(
    result: BenchResult, tmp_path: Path
) -> None:
    arms = (result.arms[0], replace(result.arms[1], name="_draft4"), result.arms[2])
    stats = tuple(replace(c, arm="_draft4") if c.arm == "draft4" else c for c in result.categories)
    odd = replace(
        result,
        arms=arms[:2],
        categories=stats,
        arm_stats=(
            result.arm_stats[0],
            replace(
                result.arm_stats[1],
                arm="_draft4",
                overall=replace(result.arm_stats[1].overall, arm="_draft4"),
            ),
        ),
    )
    assert "speedup" in make_plots(odd, tmp_path)


def test_plots_without_data_are_skipped(result: BenchResult, tmp_path: Path) -> None:
    arms = tuple(replace(a, spec_type=None) for a in result.arms)
    bare = replace(result, arms=arms, extras={})
    assert set(make_plots(bare, tmp_path)) == {"speedup", "identity"}


def test_write_creates_the_campaign_folder_with_report_and_plots(
    result: BenchResult,
    tmp_path: Path,
) -> None:
    path = write_bench_report(result, tmp_path / "reports")
    folder = tmp_path / "reports" / "2025-03-14-bench-c7"
    assert path == folder / "report.md"
    assert sorted(p.name for p in folder.iterdir()) == sorted(["report.md", *PLOTS.values()])
    assert "![Speed-up per category](speedup.png)" in path.read_text(encoding="utf-8")
    assert path.stat().st_mode & 0o777 == 0o644


def test_latest_md_links_point_into_the_campaign_folder(
    result: BenchResult,
    tmp_path: Path,
) -> None:
    reports = tmp_path / "reports"
    report = write_bench_report(result, reports)
    latest = (reports / "latest.md").read_text(encoding="utf-8")
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", latest)
    assert links == [f"2025-03-14-bench-c7/{name}" for name in PLOTS.values()]
    assert all((reports / link).is_file() for link in links)
    stripped = report.read_text(encoding="utf-8").replace("2025-03-14-bench-c7/", "")
    assert latest.replace("2025-03-14-bench-c7/", "") == stripped


def test_extra_copy_links_are_relative_to_its_own_folder(
    result: BenchResult,
    tmp_path: Path,
) -> None:
    reports = tmp_path / "reports"
    extra = tmp_path / "docs" / "speculative_benchmark.md"
    write_bench_report(result, reports, extra_copy=extra)
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", extra.read_text(encoding="utf-8"))
    assert links[0] == "../reports/2025-03-14-bench-c7/speedup.png"
    assert all((extra.parent / link).is_file() for link in links)


def test_rewriting_the_report_leaves_no_temporary_files(
    result: BenchResult,
    tmp_path: Path,
) -> None:
    write_bench_report(result, tmp_path)
    write_bench_report(result, tmp_path)
    leftovers = [p for p in tmp_path.rglob("*") if p.name.startswith(".")]
    assert leftovers == []


def test_the_identity_table_has_all_five_verdicts_and_the_noise_floor(
    result: BenchResult,
) -> None:
    assert set(VERDICTS) == set(COUNT_ORDER)
    markdown = render_bench_report(result, plots={})
    header = next(line for line in markdown.splitlines() if line.startswith("| arm | compared"))
    assert all(v in header for v in VERDICTS)
    assert "Noise floor: 0.0312 nats" in markdown
    # Replay evidence is shown under the example divergences.
    assert 'picks " i" (-0.600)' in markdown
