"""Typed evidence: rows written before the dataclasses load as the right kind and write back
the same JSON, and the digest and an issue print one finding's change the same way."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from support.triagekit import evidence as detector_evidence

from watchkeeper.findings.evidence import (
    ChangePointEvidence,
    NightlyEvidence,
    PlainEvidence,
    SeriesEvidence,
    SoakRatioEvidence,
    evidence_of,
)
from watchkeeper.publish.digest import _series_row
from watchkeeper.store.findings import StoredFinding
from watchkeeper.tracker import bodies

NOW = datetime(2026, 11, 3, 7, 30, tzinfo=UTC)

SHIFT = {
    "first_bad_build": "b4242 #1a2b3c4d",
    "first_bad_run": 345,
    "first_bad_campaign": 12,
    "before_median": 100.1,
    "after_median": 81.9,
    "relative_change": -0.182,
    "points": 40,
    "min_segment": 3,
    "method": "PELT (ruptures), l1 cost, penalty 2 log n on a robust noise scale",
}
NIGHTLY = {
    "series_name": "h1 · prod-draft · all · decode_tps",
    "metric": "decode_tps",
    "ratio": 0.89,
    "ci95": [0.86, 0.92],
    "delta": -0.11,
    "delta_ci": [-0.14, -0.08],
    "n_pairs": 96,
    "n_tasks": 32,
    "n_rounds": 3,
    "threshold": 0.05,
    "method": "paired current/reference ratio inside one run; two-way bootstrap CI",
    "reference": {"id": 4, "pinned_at": "2026-11-01T02:00:00+00:00", "pinned_by": "ops"},
    "campaign_id": 12,
    "rerun_campaign_id": 13,
    "report": None,
    "also_confirmed": [{"category": "code", "ratio": 0.87, "ci95": [0.84, 0.9]}],
}
SOAK = {
    "profile": "prod-draft",
    "concurrency": 2,
    "reference_arm": "prod-draft@ref",
    "reference_id": 4,
    "aa": False,
    "host_fingerprint": "h" * 16,
    "threshold": 0.05,
    "cycles": [{"cycle": 0, "current_tps": 80.0, "reference_tps": 100.0, "ratio": 0.8}],
    "warmup_cycles": [0],
    "n_cycles": 6,
    "estimate": 0.9,
    "ci95": [0.85, 0.95],
    "half_width": 0.03,
    "verdict": "regression",
    "halves": [0.9, 0.9],
    "confirmed": True,
    "reference": {"id": 4},
}
ROWS: list[tuple[str, dict[str, Any], type]] = [
    ("regression", detector_evidence(), SeriesEvidence),
    (
        "regression",  # seen again (keeps its first evidence) and annotated by a change point
        {**detector_evidence(), "first": detector_evidence(), "change_point": SHIFT},
        SeriesEvidence,
    ),
    ("improvement", detector_evidence(delta=0.05, delta_unit="absolute"), SeriesEvidence),
    ("change_point", {"series": {"metric": "decode_tps"}, "change_point": SHIFT}, ChangePointEvidence),
    ("regression", NIGHTLY, NightlyEvidence),
    ("regression", SOAK, SoakRatioEvidence),
    ("correctness", {"mismatches": 1, "examples": [{"task_id": "t", "output": "x"}]}, PlainEvidence),
    ("soak_memory_leak", {"profile": "prod-draft", "slope": 40.0}, PlainEvidence),
    ("environment_noise", {"reason": "9 of 12 series moved", "series": ["a"]}, PlainEvidence),
]  # fmt: skip


@pytest.mark.parametrize(("kind", "data", "cls"), ROWS)
def test_a_stored_row_loads_as_its_kind_and_writes_back_the_same_json(
    kind: str, data: dict[str, Any], cls: type
) -> None:
    stored = json.loads(json.dumps(data))  # what the JSON column hands back
    e = evidence_of(kind, stored)
    assert type(e) is cls
    assert json.dumps(e.to_json()) == json.dumps(stored)  # same keys, values and order


def test_each_kind_prints_its_change_in_its_own_unit() -> None:
    relative = evidence_of("regression", detector_evidence())
    assert (relative.delta_text(), relative.ci_text()) == ("-18.2%", "-21.4% to -15.1%")
    absolute = evidence_of("improvement", detector_evidence(delta=0.05, delta_ci=[0.01, 0.09],
                                                            delta_unit="absolute"))  # fmt: skip
    assert absolute.change_text() == "+5.0 pt (95% CI +1.0 pt to +9.0 pt)"
    assert evidence_of("regression", NIGHTLY).change_text() == "-11.0% (95% CI -14.0% to -8.0%)"
    assert evidence_of("regression", SOAK).change_text() == "-10.0% (95% CI -15.0% to -5.0%)"
    shift = evidence_of("change_point", {"change_point": SHIFT})
    assert (shift.delta_text(), shift.ci_text()) == ("-18.2%", "—")
    plain = evidence_of("correctness", {"mismatches": 1})
    assert (plain.change_text(), plain.reference_id) == ("—", None)
    assert evidence_of("regression", NIGHTLY).reference_id == 4
    assert evidence_of("regression", SOAK).reference_id == 4


def test_a_typed_writer_gives_the_json_the_readers_expect() -> None:
    e = SeriesEvidence(series_name="decode_tps · code", delta=-0.1, delta_ci=[-0.2, None])
    data = e.to_json()
    assert data["delta_unit"] == "relative" and "change_point" not in data
    assert evidence_of("regression", data) == e and e.ci_text() == "—"


@pytest.mark.parametrize("data", [detector_evidence(), NIGHTLY], ids=["detector", "nightly"])
def test_the_digest_and_the_issue_print_one_findings_change_alike(data: dict[str, Any]) -> None:
    f = StoredFinding(
        id=7, campaign_id=12, run_id=345, fingerprint="3f2a9c1e00aa55bb", kind="regression",
        label="regression", status="active", severity="medium", title="t", evidence=data,
        series_key=None, side="worse", confirmed_at=NOW, last_seen_at=NOW, occurrences=2,
        status_note=None, created_at=NOW, updated_at=NOW,
    )  # fmt: skip
    e = evidence_of(f.kind, f.evidence)
    row = _series_row(f, {})
    assert (row[3], row[4]) == (e.delta_text(), e.ci_text())
    ctx = bodies.IssueContext("wk0", "k", "", "watchkeeper/", 3, 1500)
    body = bodies.issue_body(f, ctx)
    assert f"| change | {e.delta_text()} (95% CI {e.ci_text()}) |" in body


def test_the_detector_writes_the_keys_it_wrote_before_the_dataclass() -> None:
    written_before = [
        "series",
        "series_name",
        "label",
        "note",
        "run",
        "side",
        "delta",
        "delta_ci",
        "delta_unit",
        "test",
        "p_value",
        "p_adjusted",
        "current",
        "baseline",
        "baseline_runs",
        "baseline_trials",
        "baseline_cv",
        "fence",
        "floor",
        "params",
    ]
    assert list(SeriesEvidence().to_json()) == written_before
    nightly_before = [*NIGHTLY]
    assert list(NightlyEvidence().to_json()) == nightly_before
