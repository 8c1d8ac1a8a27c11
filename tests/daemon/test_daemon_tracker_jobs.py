"""The daemon's triage and review-pr jobs: the tracker stage's commands behind the job runner."""

from __future__ import annotations

from pathlib import Path

from support.fakeforge import FakeForge
from support.trackerkit import tracker_config
from support.triagekit import add_finding

from watchkeeper.config import Config, DatabaseConfig
from watchkeeper.config.daemon import DaemonConfig
from watchkeeper.daemon.execute import JobRunner
from watchkeeper.daemon.fleet import make_fleet_lock
from watchkeeper.daemon.jobdefs import load_jobs
from watchkeeper.daemon.metrics import DaemonMetrics
from watchkeeper.store.db import Database
from watchkeeper.store.history import History
from watchkeeper.store.jobs import JobStore


def run_job(config: Config, jobs: Path, name: str) -> tuple[str, str, str | None]:
    url = config.database.url
    (job,) = [j for j in load_jobs(jobs) if j.name == name]
    db = Database(url)
    runner = JobRunner(
        config=config,
        host_id="unit-host",
        db=db,
        lock=make_fleet_lock(url, namespace=1),
        metrics=DaemonMetrics("unit-host"),
    )
    try:
        outcome = runner.run(job)
        stored = [r for r in JobStore(db).runs() if r.job == name][-1]
        return outcome.outcome, str(outcome.details), stored.error
    finally:
        db.close()


def daemon(tmp_path: Path) -> DaemonConfig:
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    (jobs / "triage.toml").write_text('kind = "triage"\ncron = "45 7 * * *"\n', encoding="utf-8")
    return DaemonConfig.model_validate(
        {"host_id": "unit-host", "jobs_dir": str(jobs), "metrics_port": -1}
    )


def test_the_triage_job_without_a_tracker_is_a_quiet_no_op_not_a_nightly_failure(
    sqlite_url: str, tmp_path: Path
) -> None:
    d = daemon(tmp_path)
    config = Config(database=DatabaseConfig(url=sqlite_url), daemon=d)
    outcome, _details, error = run_job(config, Path(d.jobs_dir), "triage")
    assert (outcome, error) == ("ok", None)


def test_the_triage_job_files_a_confirmed_finding_on_the_forge_and_records_the_run(
    forge: FakeForge, sqlite_url: str, tmp_path: Path
) -> None:
    d = daemon(tmp_path)
    config = Config(
        database=DatabaseConfig(url=sqlite_url), tracker=tracker_config(forge), daemon=d
    )
    db = Database(sqlite_url)
    try:
        add_finding(History(db))
    finally:
        db.close()
    outcome, details, error = run_job(config, Path(d.jobs_dir), "triage")
    (issue,) = forge.all_issues()
    assert (outcome, error) == ("ok", None)
    assert str(issue["number"]) in details
    # A second scheduled run files nothing new.
    run_job(config, Path(d.jobs_dir), "triage")
    assert len(forge.all_issues()) == 1
