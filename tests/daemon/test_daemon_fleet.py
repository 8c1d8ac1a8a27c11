"""Two daemon processes against the same Postgres: the fleet job (digest) runs on exactly one
host at a time, once per scheduled start; the host job (health) runs on both."""

from __future__ import annotations

import itertools
from pathlib import Path

from support.daemon import DaemonProcess, scrape, wait_for, write_config, write_job

from watchkeeper.store.db import Database, upgrade
from watchkeeper.store.jobs import JobRunView, JobStore


def runs(url: str) -> list[JobRunView]:
    db = Database(url)
    try:
        return JobStore(db).runs(limit=1000)
    finally:
        db.close()


def test_two_daemons_run_a_fleet_job_on_one_host_at_a_time_and_host_jobs_on_both(
    pg_url: str, tmp_path: Path
) -> None:
    upgrade(pg_url)  # both start at once: the schema is there before either looks
    jobs = tmp_path / "jobs"
    write_job(jobs, "digest", 'kind = "digest"\ncron = "*/2 * * * * *"\n')
    write_job(jobs, "health", 'kind = "health"\ncron = "*/2 * * * * *"\n')
    daemons = [
        DaemonProcess(
            write_config(tmp_path, pg_url, host_id=h, jobs_dir=jobs, name=f"{h}.toml"),
            tmp_path / f"{h}.log",
            h,
        )
        for h in ("host-a", "host-b")
    ]
    try:
        bases = [d.metrics_url() for d in daemons]

        def enough() -> bool:
            done = [r for r in runs(pg_url) if r.outcome != "running"]
            digests = [r for r in done if r.job == "digest"]
            health_hosts = {r.host_id for r in done if r.job == "health"}
            return len(digests) >= 5 and health_hosts == {"host-a", "host-b"}

        wait_for("five digests and health checks on both hosts", enough, timeout_s=120)
        skipped = sum(
            value
            for base in bases
            for (name, labels), value in scrape(base).items()
            if name == "watchkeeper_job_skipped_total" and ("job", "digest") in labels
        )
        assert [d.stop() for d in daemons] == [0, 0]
    finally:
        for d in daemons:
            d.kill()
    everything = runs(pg_url)
    digests = sorted((r for r in everything if r.job == "digest"), key=lambda r: r.started_at)
    assert {r.outcome for r in digests} == {"ok"}, [r.error for r in digests]
    scheduled = [r.scheduled_for for r in digests]
    assert len(scheduled) == len(set(scheduled)), "a scheduled start ran on two hosts"
    for before, after in itertools.pairwise(digests):
        assert before.finished_at is not None
        assert after.started_at >= before.finished_at, "two hosts ran the digest at once"
    assert skipped >= 3, "the other host tried and stood back"
    health = [r for r in everything if r.job == "health"]
    per_start = {r.scheduled_for: set() for r in health}
    for r in health:
        per_start[r.scheduled_for].add(r.host_id)
    assert any(hosts == {"host-a", "host-b"} for hosts in per_start.values())
    reasons = {e["reason"] for d in daemons for e in d.events() if e.get("event") == "job_skipped"}
    assert reasons <= {
        "another host holds the fleet lock",
        "this start was already claimed by another host",
    }
    assert reasons
