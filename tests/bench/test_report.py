"""Benchmark report: Markdown, plots and where the files land.

The golden test pins the whole Markdown so format changes are reviewed as a diff. After an
intended change, regenerate the golden file and review it:

    WATCHKEEPER_UPDATE_GOLDEN=1 .venv/bin/pytest -q tests/bench/test_report.py
"""

from __future__ import annotations

import os
import re
from dataclasses import replace
from pathlib import Path

from support.benchresult import COUNT_ORDER, PLOTS

from watchkeeper.analysis.benchmark import (
    BenchResult,
)
from watchkeeper.analysis.recommend import recommend
from watchkeeper.analysis.stats import RatioCI
from watchkeeper.publish.markdown import fence_for
from watchkeeper.publish.plots import make_plots
from watchkeeper.publish.report import (
    VERDICTS,
    render_bench_report,
    write_bench_report,
)

GOLDEN = Path(__file__).parents[1] / "golden" / "bench_report.md"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


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
        "GPU cost",
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
    # Keeping the baseline still names the arm that came closest and what would settle it.
    assert (
        "| code | keep the baseline | best: draft4 1.03x (95% CI 0.95-1.12, inconclusive) | "
        "about 9 measured rounds |"
    ) in markdown


def test_the_method_names_the_arms_that_got_a_fresh_process_every_round(
    result: BenchResult,
) -> None:
    """A sweep renews ngram-mod and ngram-cache each round while the rest keep one process;
    the report used to say "one process per arm for the whole campaign" for all of them."""
    renewed = replace(result, method=replace(result.method, renewed=("ngram",)))
    markdown = render_bench_report(renewed, plots={}, recommendation=recommend(renewed))
    assert (
        "- server processes: a fresh process every round for ngram (their n-gram state "
        "outlives requests); one process for the whole campaign for the others"
    ) in markdown
    plain = render_bench_report(result, plots={}, recommendation=recommend(result))
    assert "- server processes: one process per arm for the whole campaign" in plain


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


def test_the_identity_table_has_every_verdict_and_the_noise_floor(
    result: BenchResult,
) -> None:
    assert set(VERDICTS) == set(COUNT_ORDER)
    markdown = render_bench_report(result, plots={})
    header = next(line for line in markdown.splitlines() if line.startswith("| arm | compared"))
    assert all(v in header for v in VERDICTS)
    assert "noise floor 0.0312 nats (cuda / build b4500" in markdown
    assert "| [0, 0.1) | 30 | 1 | 3.3% |" in markdown  # the flip rate by margin
    assert "judged in the **batched** mode against baseline" in markdown
    assert "blind fraction 17%" in markdown
    # Replay evidence is shown under the example divergences.
    assert 'picks " i" (-0.600)' in markdown
