"""The answer per workload reaches the record, the report and the unit: per-category picks
with CIs and rounds to settle, the mix and its pick, the tool-calls-vs-prose sentence; a
record written before them still reads; `unit --category` renders one category's pick."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.mixtables import steady, with_table

import watchkeeper.commands.sweep as sweep_module
from watchkeeper.analysis.benchmark import BenchResult
from watchkeeper.analysis.racing_types import RaceSettings
from watchkeeper.analysis.recommend import Recommendation, recommend
from watchkeeper.analysis.workload_mix import parse_mix
from watchkeeper.cli.app import main
from watchkeeper.config import ProfileConfig
from watchkeeper.publish.deliverable import (
    RecommendationRecord,
    build_record,
    read_record,
    write_record,
)
from watchkeeper.publish.sweep_view import SweepView
from watchkeeper.publish.sweep_workload import workload_section
from watchkeeper.publish.workload_record import tool_vs_prose

COMMITTED = Path(__file__).parents[2] / "tests" / "golden" / "record_2026-11-27.json"
"""The default sweep's record as committed on 27 Nov, before the per-category picks were kept."""
PROFILES = {
    "baseline": ProfileConfig(model="qwen-target"),
    "draft4": ProfileConfig(
        model="qwen-target", draft_model="qwen-draft", spec_type="draft-simple", draft_n_max=4
    ),
    "ngram": ProfileConfig(model="qwen-target", spec_type="ngram-simple"),
}


def bench(result: BenchResult, *, prose: float = 1.0) -> BenchResult:
    """draft4 1.6x on code_edit and tool_call, `prose` on prose; ngram 1.0 everywhere."""
    return with_table(
        result,
        {
            "draft4": {
                "code_edit": steady(1.6),
                "prose": steady(prose, shift=1),
                "tool_call": steady(1.6, shift=2),
            },
            "ngram": {c: steady(1.0, shift=3) for c in ("code_edit", "prose", "tool_call")},
        },
    )


def record_of(result: BenchResult, rec: Recommendation) -> RecommendationRecord:
    return build_record(
        result,
        rec,
        chosen=rec.setting or result.baseline.name,
        profiles=PROFILES,
        report="speculative_benchmark.md",
        campaign_report="2025-03-14-sweep-c7/report.md",
    )


def test_the_record_carries_each_category_the_mix_and_its_pick_and_reads_back(
    result: BenchResult, tmp_path: Path
) -> None:
    measured = bench(result)
    rec = recommend(measured, mix=parse_mix("code_edit=0.7,prose=0.3"))
    record = record_of(measured, rec)
    back = read_record(write_record(tmp_path / "rec.json", record))
    assert back == record
    w = back.workload
    assert w is not None
    assert w.mix == pytest.approx({"code_edit": 0.7, "prose": 0.3})
    assert w.mix_source == "--mix" and w.mix_pick == "draft4"
    assert w.mix_low is not None and w.mix_low > 1.0 and "95% CI" in w.mix_speedup
    code, prose = w.pick("code_edit"), w.pick("prose")
    assert code is not None and code.profile == "draft4" and code.recipe is not None
    assert code.low is not None and code.low > 1.0
    assert prose is not None and prose.profile is None and prose.best is not None
    assert "tool_call runs faster with draft4" in w.tool_vs_prose
    assert back.chosen.name == "draft4"


def test_a_record_written_before_the_per_category_picks_still_reads() -> None:
    old = read_record(COMMITTED)
    assert old.workload is None
    assert old.chosen.name  # the rest of it is as it was


def test_tool_calls_vs_prose_is_answered_from_the_data(result: BenchResult) -> None:
    apart = bench(result)
    said = tool_vs_prose(apart, recommend(apart))
    assert said.startswith("Tool calls vs prose: tool_call runs faster with draft4, 1.60x")
    assert "prose keeps the baseline (closest:" in said
    assert "no one setting is the pick for both (draft4 on prose measured 1.00x" in said
    together = bench(result, prose=1.6)
    both = tool_vs_prose(together, recommend(together))
    assert both.endswith("one setting serves both: draft4.")
    neither = tool_vs_prose(result, recommend(result))
    assert neither == "Tool calls vs prose: this sweep measured no tool_call or prose tasks."


def view(result: BenchResult, rec: Recommendation) -> SweepView:
    return SweepView(
        result=result,
        recommendation=rec,
        arms=(),
        settings=RaceSettings(),
        race=None,
        stop_reason="",
        budget_min=None,
        wall_s=0.0,
        chosen=rec.setting or result.baseline.name,
        chosen_profile=None,
        soak=None,
        soak_command="",
        service_path=Path("unit.service"),
    )


def test_the_reports_workload_section_states_the_mix_its_pick_and_the_seed_answer(
    result: BenchResult,
) -> None:
    measured = bench(result)
    given = "\n".join(
        workload_section(view(measured, recommend(measured, mix=parse_mix("code_edit=1"))))
    )
    assert "The workload mix, as shares of decoded tokens: code_edit 100%, as given by" in given
    assert "For it: **draft4** at 1.60x (95% CI" in given
    assert "Tool calls vs prose: tool_call runs faster with draft4" in given
    own = "\n".join(workload_section(view(measured, recommend(measured))))
    assert "code_edit 33%, prose 33%, tool_call 33%, the task set's own proportions" in own


def write_new_record(result: BenchResult, tmp_path: Path) -> Path:
    measured = bench(result)
    return write_record(tmp_path / "rec.json", record_of(measured, recommend(measured)))


def test_unit_category_renders_that_categorys_pick(
    result: BenchResult, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_new_record(result, tmp_path)
    args = ["unit", "--recommendation", str(path), "--gpu", "no"]
    assert main([*args, "--category", "code_edit"]) == 0
    text, err = capsys.readouterr()
    assert "--spec-type draft-simple" in text and "code_edit: draft4" in text
    assert "keeps the baseline" not in err
    assert main([*args, "--category", "prose"]) == 0
    text, err = capsys.readouterr()
    assert "--spec-type" not in text.split("ExecStart=", 1)[1].splitlines()[0]
    assert "prose keeps the baseline" in err
    # The closest setting is quoted with what prose measured, not its all-category 1.6x mix.
    assert "Closest speculative setting: draft4, 1.00x (95% CI" in text


def test_unit_category_refuses_an_unknown_category_and_an_old_record(
    result: BenchResult, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_new_record(result, tmp_path)
    assert main(["unit", "--recommendation", str(path), "--category", "poetry"]) == 2
    err = capsys.readouterr().err
    assert "poetry" in err and "code_edit, prose, tool_call" in err and "Traceback" not in err
    assert main(["unit", "--recommendation", str(COMMITTED), "--category", "prose"]) == 2
    err = capsys.readouterr().err
    assert "rerun `watchkeeper sweep`" in err and "Traceback" not in err


def test_sweep_mix_is_refused_at_the_edge_before_anything_starts(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def never(*_a: object, **_k: object) -> None:
        raise AssertionError("the sweep started")

    monkeypatch.setattr(sweep_module, "sweep_candidates", never)
    with pytest.raises(SystemExit) as malformed:
        main(["sweep", "--mix", "code_edit=0"])
    assert malformed.value.code == 2
    assert "above 0" in capsys.readouterr().err
    assert main(["sweep", "--mix", "code_edit=0.7,poetry=0.3"]) == 2
    err = capsys.readouterr().err
    assert "poetry" in err and "code_edit" in err and "tool_call" in err
