"""Every committed soak and sweep report, re-rendered from the committed JSON by today's code,
byte for byte: a refactor of the soak's judgement (its types, its names) must leave what was
published unchanged, and this is the check that says so.

The soak's page is a function of its summary (`speculative_soak.json`), read and rendered
as `watchkeeper report --campaign` does. The summary itself is read and written back
(`read_summary`, `write_summary`): the committed keys stay readable and are kept. A sweep
report's part that re-renders from committed JSON is its stability criterion (between the
soak markers), which `soak --recommendation` splices in from the summary beside it; the rest
of a sweep report reads the identity replay and the host as measured, which no committed file
keeps in full (commands/report.py refuses it for that reason). The dated sweep folders keep
their "not yet measured" line: no soak JSON sits beside them. Each set's own campaign folder
keeps the line its sweep rendered, byte for byte: a sweep reads only a soak of its own pick
(publish/soak_lineage.py), none exists before the sweep ends, and `soak --recommendation`
rewrites the set's report and `latest.md`, not the campaign folder.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from watchkeeper.publish.deliverable import RECORD_NAME, read_record
from watchkeeper.publish.soak_report import (
    BEGIN,
    END,
    SOAK_REPORT,
    SOAK_SUMMARY,
    read_summary,
    render,
    splice,
    stability_line,
    write_summary,
)
from watchkeeper.publish.sweep_criteria import not_yet_measured

REPORTS = Path(__file__).resolve().parents[2] / "reports"
SOAKS = sorted(REPORTS.rglob(SOAK_SUMMARY))
SWEEPS = sorted(p for p in REPORTS.rglob("*.md") if BEGIN in p.read_text(encoding="utf-8"))
RECORDS = sorted(REPORTS.rglob(RECORD_NAME))


def test_the_committed_reports_are_found() -> None:
    """The globs below see what is committed (six soaks, eight sweep reports with the soak
    markers), so an empty glob cannot pass the checks vacuously."""
    assert len(SOAKS) >= 6, SOAKS
    assert len(SWEEPS) >= 8, SWEEPS


@pytest.mark.parametrize("path", SOAKS, ids=lambda p: str(p.relative_to(REPORTS)))
def test_each_committed_soak_page_rerenders_byte_identical(path: Path) -> None:
    summary = read_summary(path)
    assert summary is not None, path
    page = (path.parent / SOAK_REPORT).read_bytes()
    assert render(summary).encode("utf-8") == page


@pytest.mark.parametrize("path", SOAKS, ids=lambda p: str(p.relative_to(REPORTS)))
def test_each_committed_soak_summary_reads_and_writes_back_byte_identical(
    path: Path, tmp_path: Path
) -> None:
    """A summary of the current layout is written back byte for byte. One of the layout
    before 28 Nov 2026 (`identical_output_rate` holding the consistent rate beside
    `strictly_identical_rate`; no block rows or unit) is written in today's layout, which
    reads back to the same summary and the same page."""
    summary = read_summary(path)
    assert summary is not None, path
    out = write_summary(tmp_path / SOAK_SUMMARY, summary)
    if "consistent_output_rate" in json.loads(path.read_text(encoding="utf-8")):
        assert out.read_bytes() == path.read_bytes()
        return
    again = read_summary(out)
    assert again == summary
    assert render(again).encode("utf-8") == (path.parent / SOAK_REPORT).read_bytes()


@pytest.mark.parametrize("path", SWEEPS, ids=lambda p: str(p.relative_to(REPORTS)))
def test_each_sweep_reports_stability_line_rerenders_byte_identical(path: Path) -> None:
    report = path.read_text(encoding="utf-8")
    beside = read_summary(path.parent / SOAK_SUMMARY)
    line = report.split(BEGIN, 1)[1].split(END, 1)[0].strip("\n")
    if beside is None:
        assert "not yet measured" in line, path
        return
    assert stability_line(beside, fallback="") == line
    assert splice(report, stability_line(beside, fallback="")).encode("utf-8") == (
        path.read_bytes()
    )


@pytest.mark.parametrize("path", RECORDS, ids=lambda p: str(p.parent.relative_to(REPORTS)))
def test_each_sets_campaign_report_keeps_the_line_its_sweep_renders(path: Path) -> None:
    """The line a sweep renders with no soak of its pick: on 7 Dec the code-edit set's
    (campaign 3) quoted the soak of the set before and was mended by hand, in other words
    than the sweep's; now it is the sweep's line, the mend a note below the markers."""
    record = read_record(path)
    assert record.subject is not None, path
    report = (path.parent / record.campaign_report).read_text(encoding="utf-8")
    line = report.split(BEGIN, 1)[1].split(END, 1)[0].strip("\n")
    own = path.relative_to(REPORTS.parent).as_posix()  # the set's record, as check-set wants
    assert line == not_yet_measured(record.subject.name, own)
