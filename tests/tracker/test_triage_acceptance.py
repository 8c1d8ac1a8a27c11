"""The acceptance alarms' findings (campaign/acceptance_findings.py) reach the tracker with the
default `[tracker] kinds`: a drafter that stopped fitting and a server stuck in a loop are
facts confirmed when seen, each one issue labelled with its kind."""

from __future__ import annotations

from support.fakeforge import FakeForge
from support.nights import Nights
from support.trackerkit import Sleeps, tracker_config

from watchkeeper.commands.triage import triage_command
from watchkeeper.config import Config, DatabaseConfig
from watchkeeper.config.tracker import TrackerConfig
from watchkeeper.store.db import Database
from watchkeeper.store.findings import FindingStore, NewFinding

ALARMS = {
    "acceptance_collapse": (
        "regression",
        "sd: acceptance collapsed to 3.0% from a median of 97.0%",
    ),
    "acceptance_loop": ("stability", "sd: 3 of 6 requests loop (acceptance near 1 ...)"),
}


def test_both_acceptance_alarms_are_filed_by_default(
    forge: FakeForge, db_url: str, sleeps: Sleeps
) -> None:
    assert {"acceptance_collapse", "acceptance_loop"} <= set(TrackerConfig().kinds)
    config = Config(database=DatabaseConfig(url=db_url), tracker=tracker_config(forge))
    db = Database(db_url)
    try:
        campaign = Nights(db).add()
        for kind, (label, title) in ALARMS.items():
            FindingStore(db).record_recurring(
                NewFinding(
                    campaign_id=campaign,
                    fingerprint=f"soak-{kind.replace('_', '-')}:sd",
                    kind=kind,
                    label=label,
                    severity="high",
                    title=title,
                    evidence={"arm": "sd", "drafted": 200, "accepted": 6, "requests": 6},
                )
            )
        outcome = triage_command(config, sleep=sleeps)
    finally:
        db.close()
    issues = forge.all_issues()
    assert len(outcome.filed) == 2 and len(issues) == 2
    labels = {name for issue in issues for name in issue["labels"]}
    assert {"acceptance_collapse", "acceptance_loop"} <= labels, labels
