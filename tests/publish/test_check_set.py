"""`watchkeeper check-set` over every committed deliverable set (they must agree), and on
copies with a disagreement seeded in each kind of file, which it must name by file and field."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from watchkeeper.cli.app import main
from watchkeeper.commands.check_set import check_set_command
from watchkeeper.errors import ConfigError
from watchkeeper.publish.soak_report import read_summary, splice, stability_line, write_summary
from watchkeeper.publish.soak_summary import SoakSummary

ROOT = Path(__file__).resolve().parents[2]


def test_every_committed_set_agrees() -> None:
    result = check_set_command(ROOT)
    assert {"reports", "reports/code-edit"} <= set(result.sets)
    assert result.disagreements == (), "\n".join(result.lines())


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    """The files a set's check reads, copied (plots left out: nothing reads them)."""
    for name in ("systemd", "jobs", "docs"):
        shutil.copytree(ROOT / name, tmp_path / name)
    shutil.copytree(ROOT / "reports", tmp_path / "reports", ignore=shutil.ignore_patterns("*.png"))
    shutil.copy(ROOT / "README.md", tmp_path / "README.md")
    assert check_set_command(tmp_path).ok
    return tmp_path


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def _found(root: Path) -> set[tuple[str, str]]:
    return {(d.file, d.field) for d in check_set_command(root).disagreements}


def test_a_unit_serving_other_slots_than_its_json_is_named(copy: Path) -> None:
    _edit(copy / "systemd/llama-server-code-edit.service", "--parallel 4", "--parallel 2")
    assert _found(copy) == {("systemd/llama-server-code-edit.service", "slots")}


def test_two_units_on_one_port_are_named(copy: Path) -> None:
    unit = copy / "systemd/llama-server-code-edit.service"
    _edit(unit, "--port 8081", "--port 8080")
    found = _found(copy)
    assert ("systemd/llama-server-code-edit.service", "port") in found  # against its JSON
    assert ("systemd/llama-server-speculative.service", "port") in found  # side by side


def test_a_json_whose_cache_changed_disagrees_with_its_unit_and_its_soak(copy: Path) -> None:
    path = copy / "reports/speculative_recommendation.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    data["extra"]["served"]["cache_ram_mib"] = 512
    path.write_text(json.dumps(data), encoding="utf-8")
    found = _found(copy)
    assert ("systemd/llama-server-speculative.service", "cache") in found
    assert ("reports/speculative_soak.json", "cache") in found


def test_a_readme_figure_no_file_holds_is_named(copy: Path) -> None:
    _edit(copy / "README.md", "1.63x\n  (95% CI 1.40-1.91)", "2.10x\n  (95% CI 1.80-2.40)")
    found = check_set_command(copy).disagreements
    assert [(d.field, d.found) for d in found] == [("figure", "2.10x (1.80-2.40)")]
    assert found[0].file.startswith("README.md:")


def test_a_readme_figure_of_a_middle_rung_is_the_ladders_and_a_wrong_one_is_named(
    copy: Path,
) -> None:
    """README may quote a rung the header leaves out (c2), from the record's ladder; a rung's
    figure the ladder does not hold is still named."""
    readme = copy / "README.md"
    assert "1.85x (1.45-2.38) at 2" in readme.read_text(encoding="utf-8")
    _edit(readme, "1.85x (1.45-2.38) at 2", "1.95x (1.45-2.38) at 2")
    found = check_set_command(copy).disagreements
    assert [(d.field, d.found) for d in found] == [("figure", "1.95x (1.45-2.38)")]


def test_latest_md_of_a_set_is_its_sweep(copy: Path) -> None:
    nightly = copy / "reports/code-edit/2026-11-28-nightly-c4/report.md"
    shutil.copy(nightly, copy / "reports/code-edit/latest.md")
    found = check_set_command(copy).disagreements
    assert [(d.file, d.field, d.found) for d in found] == [
        ("reports/code-edit/latest.md", "campaign", "nightly campaign 4")
    ]


def test_a_report_telling_the_reader_to_render_another_sets_unit_is_named(copy: Path) -> None:
    _edit(
        copy / "reports/code-edit/speculative_benchmark.md",
        "--output /etc/systemd/system/llama-server-code-edit.service",
        "--output /etc/systemd/system/llama-server-speculative.service",
    )
    assert _found(copy) == {("reports/code-edit/speculative_benchmark.md", "path (--output)")}


def _stability_from(report: Path, soak: SoakSummary) -> None:
    """`report`'s stability line rendered from `soak`, as a sweep or a soak splices it."""
    report.write_text(
        splice(report.read_text(encoding="utf-8"), stability_line(soak, fallback="")),
        encoding="utf-8",
    )


def test_a_campaign_report_citing_the_soak_of_the_set_before_is_named(copy: Path) -> None:
    """7 Dec 2026: sweep campaign 3's folder said "Soak campaign 2", the set before's soak of an
    arm of the same name (made for sweep campaign 1): the report cites a soak that is not its
    pick's. First with the stale soak gone (only the set's own is committed), then with it
    still in the folder, as it was."""
    own = read_summary(copy / "reports/code-edit/speculative_soak.json")
    assert own is not None and own.sweep_campaign == 3
    stale = replace(own, campaign_id=2, sweep_campaign=1)
    report = "reports/code-edit/2026-12-07-sweep-c3/report.md"
    _stability_from(copy / report, stale)
    found = check_set_command(copy).disagreements
    assert [(d.file, d.field, d.found) for d in found] == [
        (report, "stability (soak)", "soak campaign 2 of qwen-code-sweep-ngram-simple")
    ]
    dated = copy / "reports/code-edit/2026-12-06-soak-c2"
    dated.mkdir()
    write_summary(dated / "speculative_soak.json", stale)
    found = check_set_command(copy).disagreements
    assert [(d.file, d.field, d.found, d.source) for d in found] == [
        (
            report,
            "stability (soak)",
            "soak campaign 2 of qwen-code-sweep-ngram-simple (soaked sweep campaign 1, not 3)",
            "reports/code-edit/2026-12-06-soak-c2/speculative_soak.json",
        )
    ]


def test_an_older_sweeps_report_citing_the_sets_soak_is_named(copy: Path) -> None:
    """The set's soak (made for sweep campaign 3) spliced into the report of sweep campaign 1
    in the same folder: a soak of another pick."""
    own = read_summary(copy / "reports/code-edit/speculative_soak.json")
    assert own is not None
    report = "reports/code-edit/2026-11-28-sweep-c1/report.md"
    _stability_from(copy / report, own)
    found = check_set_command(copy).disagreements
    assert [(d.file, d.field, d.found) for d in found] == [
        (
            report,
            "stability (soak)",
            "soak campaign 4 of qwen-code-sweep-ngram-simple (soaked sweep campaign 3, not 1)",
        )
    ]


def test_a_soak_job_deeper_than_the_unit_and_a_false_slots_claim(copy: Path) -> None:
    _edit(copy / "jobs/soak.toml", "concurrency = [1, 4]", "concurrency = [1, 8]")
    _edit(copy / "jobs/soak.toml", "its sweep measured 1 slot;", "its sweep ran with slots = 4;")
    assert _found(copy) == {
        ("jobs/soak.toml", "depth"),
        ("jobs/soak.toml", "depths"),
        ("jobs/soak.toml:1", "slots (measured)"),
    }


def test_the_readme_selling_an_unresolved_soak_or_a_baseline_unit_is_named(copy: Path) -> None:
    _edit(copy / "README.md", "is unresolved: 37 minutes, drift and memory not judged; ", "")
    _edit(copy / "README.md", "**it does not speculate**", "**the one to install**")
    fields = sorted(d.field for d in check_set_command(copy).disagreements)
    assert fields == ["claim", "claim"]


def test_the_command_prints_each_disagreement_and_exits_1(
    copy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["check-set", "--root", str(copy)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "3 set(s): all agree"
    _edit(copy / "systemd/llama-server-speculative.service", "--ctx-size 16384", "--ctx-size 8192")
    assert main(["check-set", "--root", str(copy), "reports"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        "set reports",
        "systemd/llama-server-speculative.service: context: 8192, but "
        "reports/speculative_recommendation.json says 16384",
        "1 set(s): 1 disagreement(s)",
    ]


def test_a_folder_without_a_record_is_refused(tmp_path: Path) -> None:
    (tmp_path / "reports").mkdir()
    with pytest.raises(ConfigError, match="no deliverable set"):
        check_set_command(tmp_path, [Path("reports")])
