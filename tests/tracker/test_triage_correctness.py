"""Correctness findings (temperature-0 mismatches beyond a near-tie) reach the tracker once."""

from __future__ import annotations

from typing import Any

from support.fakeforge import FakeForge
from support.nights import Nights
from support.trackerkit import Sleeps, tracker_config

from watchkeeper.commands.triage import triage_command
from watchkeeper.config import Config, DatabaseConfig
from watchkeeper.store.db import Database
from watchkeeper.store.findings import FindingStore, NewFinding
from watchkeeper.store.history import History
from watchkeeper.store.repository import Repository

EVIDENCE: dict[str, Any] = {
    "mismatches": 1,
    "examples": [
        {
            "task_id": "code_gen-3",
            "verdict": "mismatch",
            "first_divergence": 17,
            "margin": 2.4,
            "baseline_excerpt": "def add(a, b):\n    return a + b",
            "candidate_excerpt": "def add(a, b):\n    return a - b  @oncall <b>x</b>",
        }
    ],
}


def record(repo: Repository, campaign: int) -> int:
    return FindingStore(repo.db).record_recurring(
        NewFinding(
            campaign_id=campaign,
            fingerprint="correctness:smollm2-selfdraft:*",
            kind="correctness",
            label="correctness",
            severity="high",
            title="smollm2-selfdraft: 1 output(s) differ from the baseline at temperature 0",
            evidence=EVIDENCE,
        )
    )


def test_a_mismatch_seen_on_two_benches_is_one_confirmed_finding_one_issue_and_one_comment(
    forge: FakeForge, db_url: str, sleeps: Sleeps
) -> None:
    config = Config(database=DatabaseConfig(url=db_url), tracker=tracker_config(forge))
    db = Database(db_url)
    try:
        nights, repo, history = Nights(db), Repository(db), History(db)
        first = record(repo, nights.add())
        outcome = triage_command(config, sleep=sleeps)
        (issue,) = forge.all_issues()
        assert outcome.filed == [issue["number"]]
        body = issue["body"]
        assert "return a + b" in body and "return a - b" in body
        assert "@oncall" not in body  # a quoted mention pings nobody
        assert "```text\ndef add(a, b):\n    return a - b" in body  # in a fence, not rendered
        assert "not a statistic" in body

        second = record(repo, nights.add())
        assert second == first
        (finding,) = history.findings(kinds=("correctness",))
        assert finding.occurrences == 2 and finding.confirmed_at is not None
        outcome = triage_command(config, sleep=sleeps)
        assert outcome.filed == [] and outcome.commented == [issue["number"]]
        assert len(forge.all_issues()) == 1
    finally:
        db.close()


def test_a_mismatch_after_its_finding_was_fixed_is_a_new_finding() -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        db = Database(f"sqlite:///{tmp}/wk.db")
        try:
            nights, repo, history = Nights(db), Repository(db), History(db)
            first = record(repo, nights.add())
            history.update_finding(first, status="fixed")
            second = record(repo, nights.add())
            assert second != first
            assert [f.status for f in history.findings(kinds=("correctness",))] == [
                "fixed",
                "active",
            ]
        finally:
            db.close()
