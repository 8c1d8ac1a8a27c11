"""One answer is the answer: the sweep's headline, its record's top-level fields (what `unit`,
`soak --recommendation` and `nightly --recommendation` read) and its unit name the setting the
unit runs, the mix's pick, with its CI and the mix it was chosen for; where all categories
pooled would answer otherwise, one line below the headline says so. A sweep of one category
answers with that category's own pick. Synthetic results, no server."""

from __future__ import annotations

from dataclasses import replace

from support.mixtables import steady, with_table
from support.sweepview import sweep_view

from watchkeeper.analysis.benchmark import ALL, BenchResult
from watchkeeper.analysis.recommend import MIX, Recommendation, per_round, recommend
from watchkeeper.analysis.workload_mix import Mix, mix_speedup, parse_mix
from watchkeeper.config import ProfileConfig
from watchkeeper.config.service import ServiceConfig
from watchkeeper.publish import markdown as md
from watchkeeper.publish.deliverable import RecommendationRecord, build_record
from watchkeeper.publish.report import render_bench_report
from watchkeeper.publish.sweep_report import preface, render_sweep_sections
from watchkeeper.publish.systemd import render_unit

CATS = ("code_edit", "prose", "tool_call")
CODE_HEAVY = parse_mix("code_edit=0.9,prose=0.1")
PROFILES = {
    "baseline": ProfileConfig(model="qwen-target"),
    "draft4": ProfileConfig(
        model="qwen-target", draft_model="qwen-draft", spec_type="draft-simple", draft_n_max=4
    ),
    "ngram": ProfileConfig(model="qwen-target", spec_type="ngram-simple"),
}


def wins_code(result: BenchResult, winner: str, other: str) -> BenchResult:
    """`winner` 1.6x on code_edit and 1.0 elsewhere, `other` 1.0 in every category."""
    return with_table(
        result,
        {
            winner: {
                "code_edit": steady(1.6),
                "prose": steady(1.0, shift=1),
                "tool_call": steady(1.0, shift=2),
            },
            other: {c: steady(1.0, shift=i + 3) for i, c in enumerate(CATS)},
        },
    )


def ngram_wins_code(result: BenchResult) -> BenchResult:
    """Pooled over all tasks (the fixture's arm stats) draft4 stays the pick at 1.38x (95% CI
    1.22-1.55)."""
    return wins_code(result, "ngram", "draft4")


def draft4_wins_code(result: BenchResult) -> BenchResult:
    return wins_code(result, "draft4", "ngram")


def sweep_outputs(
    bench: BenchResult, mix: Mix | None
) -> tuple[Recommendation, str, RecommendationRecord]:
    """The sweep's recommendation, its rendered report and its record, as `_report` makes them."""
    view = sweep_view(bench, None, mix)
    rec = view.recommendation
    record = build_record(
        bench,
        rec,
        chosen=view.chosen,
        profiles=PROFILES,
        report="speculative_benchmark.md",
        campaign_report="2025-03-14-sweep-c7/report.md",
    )
    view = replace(view, record=record)
    markdown = render_bench_report(
        bench,
        plots={},
        recommendation=rec,
        sections=render_sweep_sections(view),
        preface=preface(view),
    )
    return rec, markdown, record


def first_lines(markdown: str) -> list[str]:
    """The headline and the lines under it, blank lines dropped."""
    lines = [line for line in markdown.splitlines() if line.strip()]
    start = next(i for i, line in enumerate(lines) if line.startswith("**"))
    return lines[start : start + 3]


def test_where_the_mix_pick_differs_from_the_pooled_one_the_headline_names_the_mix_pick(
    result: BenchResult,
) -> None:
    bench = ngram_wins_code(result)
    rec, markdown, record = sweep_outputs(bench, CODE_HEAVY)
    assert rec.overall.profile == "draft4" and rec.setting == "ngram"
    best = rec.workload.best if rec.workload is not None else None
    assert best is not None and best.low is not None and best.high is not None
    assert best.low > 1.0
    said = (
        f"ngram: {best.estimate:.2f}x decode speed-up (95% CI {best.low:.2f}-{best.high:.2f}) "
        "over the baseline for the workload mix code_edit 90%, prose 10% (as given by --mix); "
        "faster on code_edit"
    )
    assert rec.headline.startswith(said)
    headline, note, _ = first_lines(markdown)
    assert headline == f"**{md.inline(rec.headline)}**"
    # One line below it: what all categories pooled would have said.
    assert note.startswith("All categories pooled")
    assert "draft4 at 1.38x (95% CI 1.22-1.55)" in note and "the unit runs" in note
    assert "ngram" in note
    # The recommendation section and the service file say the same.
    assert f"**{md.inline(rec.headline)}**" in markdown.split("## Recommendation", 1)[1]
    assert "For the workload mix code_edit 90%, prose 10% (as given by --mix): highest" in markdown
    assert "runs ngram (campaign 7)" in markdown
    # The record's top-level fields agree with the headline: what unit, soak and nightly read.
    assert record.headline == rec.headline
    assert record.chosen.name == "ngram" and record.speculates and record.closest is None
    assert record.subject is not None and record.subject.name == "ngram"
    assert record.chosen.speedup.startswith(best.text)
    assert "for the workload mix code_edit 90%" in record.chosen.speedup
    unit = render_unit(record, ServiceConfig())
    assert f"# Recommendation: {said}" in " ".join(unit.split())
    exec_start = next(line for line in unit.splitlines() if line.startswith("ExecStart="))
    assert "--spec-type ngram-simple" in exec_start


def test_where_the_mix_keeps_the_baseline_but_pooled_picks_one_the_baseline_is_the_answer(
    result: BenchResult,
) -> None:
    bench = draft4_wins_code(result)
    rec, markdown, record = sweep_outputs(bench, parse_mix("code_edit=0.02,prose=0.98"))
    assert rec.overall.profile == "draft4" and rec.setting is None
    assert rec.headline.startswith(
        "keep the baseline for the workload mix code_edit 2%, prose 98% (as given by --mix): "
        "no setting beats it with confidence for the mix (best: "
    )
    headline, note, _ = first_lines(markdown)
    assert headline == f"**{md.inline(rec.headline)}**"
    assert note.startswith("All categories pooled") and "draft4 at 1.38x" in note
    assert note.endswith("the unit runs the mix's answer, the baseline.")
    assert record.headline == rec.headline and not record.speculates
    best = rec.workload.best if rec.workload is not None else None
    assert best is not None and record.closest is not None
    # The closest setting is the mix's, quoted with what it measured for the mix.
    assert record.closest.name == best.arm
    assert record.closest.speedup == f"{best.text} for {rec.mix_words}"
    assert "runs baseline (campaign 7)" in markdown


def test_where_the_mix_and_the_pooled_pick_agree_there_is_no_second_answer(
    result: BenchResult,
) -> None:
    bench = draft4_wins_code(result)
    rec, markdown, record = sweep_outputs(bench, CODE_HEAVY)
    assert rec.overall.profile == rec.setting == "draft4"
    assert rec.pooled_note == ""
    assert "All categories pooled (every task weighted alike" not in markdown
    best = rec.workload.best if rec.workload is not None else None
    assert best is not None and best.low is not None and best.high is not None
    # The figure quoted is the mix's, not the pooled 1.38x.
    assert rec.headline.startswith(
        f"draft4: {best.estimate:.2f}x decode speed-up (95% CI {best.low:.2f}-"
        f"{best.high:.2f}) over the baseline for the workload mix code_edit 90%, prose 10%"
    )
    assert "1.38x" not in rec.headline
    headline, after, _ = first_lines(markdown)
    assert headline == f"**{md.inline(rec.headline)}**"
    assert after.startswith("Measured on")
    assert record.headline == rec.headline and record.chosen.name == "draft4"


def test_the_default_mix_is_the_task_sets_proportions_and_the_headline_says_so(
    result: BenchResult,
) -> None:
    rec, _, record = sweep_outputs(draft4_wins_code(result), None)
    best = rec.workload.best if rec.workload is not None else None
    assert best is not None and best.low is not None and best.high is not None
    assert rec.headline.startswith(
        f"draft4: {best.estimate:.2f}x decode speed-up (95% CI {best.low:.2f}-{best.high:.2f}) "
        "over the baseline for the workload mix code_edit 33%, prose 33%, tool_call 33% (the "
        "task set's own proportions)"
    )
    assert record.headline == rec.headline


def one_category(result: BenchResult, *, spread: bool) -> BenchResult:
    """A `sweep --category code_edit`: code_edit tasks only, draft4 1.3x in every round.
    `spread`: the tasks disagree, so the category's CI (tasks and rounds) is wide where the
    round-only mix interval is narrow. Pooled over all tasks is the category itself."""
    bench = with_table(
        result,
        {"draft4": {"code_edit": steady(1.3)}, "ngram": {"code_edit": steady(1.0, shift=1)}},
    )
    if spread:
        rows = tuple(
            replace(
                c,
                speedup=replace(c.speedup, low=0.9, high=1.8, verdict="inconclusive"),
            )
            if c.arm == "draft4" and c.speedup is not None
            else c
            for c in bench.categories
        )
        bench = replace(bench, categories=rows)
    own = {c.arm: c for c in bench.categories}
    arm_stats = tuple(
        replace(s, overall=replace(own[s.arm], category=ALL)) for s in bench.arm_stats
    )
    method = replace(bench.method, categories=("code_edit",))
    return replace(bench, arm_stats=arm_stats, method=method)


def test_a_sweep_of_one_category_answers_with_that_categorys_pick(result: BenchResult) -> None:
    bench = one_category(result, spread=False)
    rec, markdown, record = sweep_outputs(bench, None)
    assert rec.mix is not None and rec.mix.weights == (("code_edit", 1.0),)
    code = rec.choice("code_edit")
    assert code is not None and code.profile == "draft4"
    assert code.best_low is not None and code.best_high is not None
    assert rec.setting == "draft4" == rec.overall.profile
    assert rec.headline.startswith(
        f"draft4: {code.best_estimate:.2f}x decode speed-up (95% CI {code.best_low:.2f}-"
        f"{code.best_high:.2f}) over the baseline for code_edit tasks alone (that category's "
        "own pick)"
    )
    assert rec.pooled_note == ""
    assert record.headline == rec.headline and record.chosen.name == "draft4"
    assert first_lines(markdown)[0] == f"**{md.inline(rec.headline)}**"


def test_one_category_keeps_the_baseline_when_its_own_ci_does_not_clear_one(
    result: BenchResult,
) -> None:
    """The round-only mix interval would call draft4 faster; the category's CI, with its task
    term, does not: the answer is the category's, as `unit --category code_edit` renders."""
    bench = one_category(result, spread=True)
    rec = recommend(bench, answer=MIX)
    assert rec.mix is not None
    rounds_only = mix_speedup("draft4", per_round(bench, "draft4"), rec.mix, 0.03)
    assert rounds_only.verdict == "faster"
    code = rec.choice("code_edit")
    assert code is not None and code.profile is None and code.best == "draft4"
    assert rec.setting is None
    assert rec.headline == (
        f"keep the baseline for code_edit tasks alone (that category's own pick): {code.reason}"
    )
    assert rec.workload is not None and rec.workload.best is not None
    assert rec.workload.best.low == code.best_low == 0.9


def test_a_plain_bench_still_answers_with_the_pooled_pick(result: BenchResult) -> None:
    rec = recommend(ngram_wins_code(result), mix=CODE_HEAVY)
    assert rec.setting == "draft4" and rec.headline == rec.pooled_headline
    assert rec.headline.startswith("draft4: 1.38x decode speed-up (95% CI 1.22-1.55)")
    assert rec.pooled_note == ""
