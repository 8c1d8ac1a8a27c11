"""A sweep's stability line reads only a soak of its own pick (publish/soak_lineage.py).

On 7 Dec 2026 the code-edit set's sweep (campaign 3) rendered its line from the soak of the set
before, still in its folder ("Soak campaign 2", made for sweep campaign 1, of an arm with the
same name and the same unit): these replay that folder with the committed record and soak, and
the store's soak lookup the same way. No server."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from support.sweepview import sweep_view

from watchkeeper.analysis.benchmark import BenchResult
from watchkeeper.host.info import HostInfo
from watchkeeper.publish.deliverable import read_record
from watchkeeper.publish.soak_lineage import Pick, mismatch
from watchkeeper.publish.soak_report import SOAK_SUMMARY, read_summary, summary_for
from watchkeeper.publish.sweep_criteria import criteria_section
from watchkeeper.store.db import Database
from watchkeeper.store.racing_store import RacingStore
from watchkeeper.store.repository import Repository

SET = Path(__file__).resolve().parents[2] / "reports" / "code-edit"
RECORD = read_record(SET / "speculative_recommendation.json")  # sweep campaign 3
OWN: dict[str, Any] = json.loads((SET / SOAK_SUMMARY).read_text(encoding="utf-8"))
STALE = {**OWN, "campaign_id": 2, "sweep_campaign": 1}
"""The soak the folder held when sweep campaign 3 ended: the set before's, of an arm of the
same name and the same unit."""


def _folder(tmp_path: Path, soak: dict[str, Any]) -> Path:
    (tmp_path / SOAK_SUMMARY).write_text(json.dumps(soak), encoding="utf-8")
    return tmp_path


def _stability(result: BenchResult, folder: Path) -> str:
    """The criteria section's stability line as the sweep renders it beside `folder`'s soak."""
    view = replace(sweep_view(result, None), soak_report=summary_for(folder, RECORD))
    return next(line for line in criteria_section(view) if line.startswith("3. "))


def test_a_stale_soak_of_another_pick_in_the_folder_is_not_yet_measured(
    result: BenchResult,
    tmp_path: Path,
) -> None:
    assert RECORD.campaign_id == 3 and RECORD.subject is not None
    assert STALE["subject"] == RECORD.subject.name  # the arm's name alone cannot tell them
    folder = _folder(tmp_path, STALE)
    assert summary_for(folder, RECORD) is None
    line = _stability(result, folder)
    assert line.startswith("3. **Stable under sustained load: not yet measured**"), line
    assert "Soak campaign" not in line


def test_the_sets_own_soak_is_used(result: BenchResult, tmp_path: Path) -> None:
    folder = _folder(tmp_path, OWN)
    summary = summary_for(folder, RECORD)
    assert summary is not None and summary.sweep_campaign == RECORD.campaign_id
    line = _stability(result, folder)
    assert "Soak campaign 4: qwen-code-sweep-ngram-simple beside qwen-code-baseline" in line
    assert "not yet measured" not in line


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"sweep_campaign": 1}, "soaked sweep campaign 1, not 3"),
        ({"sweep_campaign": None}, "soaked sweep campaign None, not 3"),
        ({"subject": "qwen-code-sweep-ngram-mod"}, "soaked qwen-code-sweep-ngram-mod, not"),
        (
            {"unit": {**OWN["unit"], "path": "systemd/llama-server-speculative.service"}},
            "soaked the unit systemd/llama-server-speculative.service, not",
        ),
    ],
)
def test_each_key_of_the_pick_must_agree(tmp_path: Path, change: dict[str, Any], why: str) -> None:
    folder = _folder(tmp_path, {**OWN, **change})
    summary = read_summary(folder / SOAK_SUMMARY)
    pick = Pick.of(RECORD)
    assert summary is not None and pick is not None
    reason = mismatch(summary, pick)
    assert reason is not None and reason.startswith(why), reason
    assert summary_for(folder, RECORD) is None


def test_a_soak_from_before_units_were_recorded_is_read_by_campaign_and_subject(
    tmp_path: Path,
) -> None:
    folder = _folder(tmp_path, {**OWN, "unit": None})
    assert summary_for(folder, RECORD) is not None


HOST = HostInfo("a" * 64, "box", "cpu", 2, 1 << 30, None, "Linux")


def test_the_stores_soak_is_the_sweeps_own_or_none(sqlite_url: str) -> None:
    """The fallback from the store: the newest completed soak of the profile *for this
    sweep* (`soak --recommendation` keeps the record's campaign in its params); a soak of the
    sweep before, same profile name, is none of it."""
    db = Database(sqlite_url)
    try:
        repo = Repository(db)
        host = repo.ensure_host(HOST)
        store = RacingStore(db)

        def soak(params: dict[str, Any]) -> int:
            cid = repo.create_campaign(kind="soak", host_id=host, build_id=None, params=params)
            repo.finish_campaign(
                cid, status="completed", summary={"verdict": "stable", "headline": "ok"}
            )
            return cid

        before = soak({"profiles": ["ngram"], "sweep_campaign": 1})
        unlabelled = soak({"profiles": ["ngram"]})  # a soak by profile, no record
        assert store.latest_soak(HOST.fingerprint, "ngram", sweep_campaign=3) is None
        latest = store.latest_soak(HOST.fingerprint, "ngram")  # without a sweep: any
        assert latest is not None and latest["campaign_id"] == unlabelled
        own = soak({"profiles": ["ngram"], "sweep_campaign": 3})
        found = store.latest_soak(HOST.fingerprint, "ngram", sweep_campaign=3)
        assert found is not None and found["campaign_id"] == own != before
    finally:
        db.close()
