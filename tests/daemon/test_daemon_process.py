"""The daemon as a real subprocess on a test schedule (seconds): a bench against the real
llama-server with SmolLM2 and a digest, /metrics scraped, SIGTERM in the middle of a job, an
overrunning job, SIGHUP reloads, and a restart after kill -9 that resumes the soak."""

from __future__ import annotations

import itertools
import signal
import socket
from pathlib import Path

import psutil
from sqlalchemy import select
from support.daemon import (
    DaemonProcess,
    finished,
    http_get,
    job_runs,
    scrape,
    wait_for,
    write_config,
    write_job,
)

from watchkeeper.server.install import ServerBinary
from watchkeeper.server.models import ModelFile
from watchkeeper.store.db import Database
from watchkeeper.store.findings import FindingStore
from watchkeeper.store.jobs import JobRunView
from watchkeeper.store.runs import RunRows
from watchkeeper.store.schema import Campaign, RequestSampleRow

BENCH = '[args]\nprofiles = ["base", "self"]\n'


def campaign(url: str, campaign_id: int) -> Campaign:
    db = Database(url)
    try:
        with db.session() as s:
            return s.get_one(Campaign, campaign_id)
    finally:
        db.close()


def never_overlap(runs: list[JobRunView]) -> None:
    done = sorted((r for r in runs if r.finished_at), key=lambda r: r.started_at)
    for before, after in itertools.pairwise(done):
        assert before.finished_at is not None
        assert after.started_at >= before.finished_at, f"{before} overlaps {after}"


def test_a_scheduled_bench_and_digest_run_and_show_in_metrics_then_sigterm_exits_0(
    real_server: tuple[ServerBinary, ModelFile], sqlite_url: str, tmp_path: Path
) -> None:
    jobs = tmp_path / "jobs"
    write_job(jobs, "bench", f'kind = "bench"\ncron = "*/15 * * * * *"\n{BENCH}')
    write_job(jobs, "digest", 'kind = "digest"\ncron = "*/4 * * * * *"\n')
    config = write_config(tmp_path, sqlite_url, host_id="solo", jobs_dir=jobs)
    daemon = DaemonProcess(config, tmp_path / "daemon.log", "solo")
    try:
        base = daemon.metrics_url()
        bench = wait_for(
            "a bench that finished",
            lambda: finished(sqlite_url, "bench"),
            timeout_s=240,
        )[0]
        assert bench.outcome == "ok", daemon.log_text()[-3000:]
        campaign_id = bench.details["campaign_id"]
        digest = wait_for(
            "a digest that judged the bench",
            lambda: [
                r
                for r in finished(sqlite_url, "digest")
                if campaign_id in r.details.get("judged_now", [])
            ],
            timeout_s=90,
        )[0]
        assert digest.outcome == "ok" and digest.started_at >= bench.finished_at  # type: ignore[operator]
        assert Path(digest.details["path"]).is_file()
        db = Database(sqlite_url)
        try:
            stored = RunRows(db).samples_for_campaign(campaign_id)
            findings = FindingStore(db).open_by_label()
        finally:
            db.close()
        assert stored > 0 and bench.details["samples"] == stored

        metrics = wait_for(
            "the gauges refreshed",
            lambda: (
                (m := scrape(base)).get(("watchkeeper_job_last_success", (("job", "digest"),)))
                is not None
                and m
            ),
            timeout_s=20,
        )
        assert metrics[("watchkeeper_job_last_success", (("job", "bench"),))] == 1
        assert metrics[("watchkeeper_job_runs_total", (("job", "bench"), ("outcome", "ok")))] >= 1
        assert metrics[("watchkeeper_samples_written_total", (("job", "bench"),))] >= stored
        assert metrics[("watchkeeper_job_duration_seconds_count", (("job", "bench"),))] >= 1
        assert metrics[("watchkeeper_job_last_run_timestamp_seconds", (("job", "bench"),))] > 0
        assert metrics[("watchkeeper_job_next_run_timestamp_seconds", (("job", "digest"),))] > 0
        assert metrics[("watchkeeper_spool_depth", ())] == 0
        for label, count in findings.items():
            assert metrics[("watchkeeper_open_findings", (("label", label),))] == count
        status, body = http_get(f"{base}/healthz")
        assert status == 200 and '"ok": true' in body

        progress = [
            e
            for e in daemon.events()
            if e.get("event") == "progress" and e.get("job_run_id") == bench.id
        ]
        assert progress and all(e["job"] == "bench" and e["host_id"] == "solo" for e in progress)
        # After each job the daemon hands the freed heap back (glibc malloc_trim).
        released = [
            e
            for e in daemon.events()
            if e.get("event") == "memory_released" and e.get("job_run_id") == bench.id
        ]
        assert len(released) == 1 and released[0]["trimmed"] is True, released
        assert 30 < released[0]["rss_mb"] < 1000, released
        daemon.llama_servers()
        assert daemon.stop() == 0, daemon.log_text()[-3000:]
    finally:
        daemon.kill()
    lines = [line for line in daemon.log_text().splitlines() if line.strip()]
    assert len(lines) == len(daemon.events()), "every log line is one JSON object"
    assert daemon.event("daemon_stopped", clean=True)
    assert daemon.runtime() is None
    assert not [s for s in daemon.servers if s.is_running()]


def test_sigterm_in_the_middle_of_a_bench_stops_after_the_step_and_exits_0(
    real_server: tuple[ServerBinary, ModelFile], sqlite_url: str, tmp_path: Path
) -> None:
    jobs = tmp_path / "jobs"
    write_job(jobs, "bench", f'kind = "bench"\ncron = "*/3 * * * * *"\n{BENCH}rounds = 4\n')
    config = write_config(tmp_path, sqlite_url, host_id="solo", jobs_dir=jobs)
    daemon = DaemonProcess(config, tmp_path / "daemon.log", "solo")
    try:
        wait_for(
            "the bench's first measured round",
            lambda: any(
                "round 1/4" in str(e.get("message")) for e in daemon.events() if daemon.alive()
            ),
            timeout_s=180,
        )
        servers = daemon.llama_servers()
        assert len(servers) >= 2, "the bench should have both arms' servers up"
        daemon.proc.send_signal(signal.SIGTERM)
        assert daemon.proc.wait(timeout=120) == 0, daemon.log_text()[-3000:]
    finally:
        daemon.kill()
    runs = job_runs(sqlite_url, "bench")
    assert [r.outcome for r in runs] == ["interrupted"]
    assert "stop requested" in (runs[0].error or "")
    stopped = daemon.event("daemon_stopping")
    assert stopped and stopped["running"] == ["bench"]
    assert daemon.event("daemon_stopped", clean=True)
    for server in servers:
        assert not server.is_running()
    db = Database(sqlite_url)
    with db.session() as s:
        bench_campaigns = s.scalars(select(Campaign).filter_by(kind="bench")).all()
        measured = s.scalars(select(RequestSampleRow.id)).all()
    db.close()
    assert [c.status for c in bench_campaigns] == ["interrupted"]
    assert measured, "what ran before the stop is kept"


def test_an_overrunning_job_is_never_started_twice_and_sighup_reloads_the_jobs(
    sqlite_url: str, tmp_path: Path
) -> None:
    silent = socket.socket()  # accepts connections, never answers: /health times out
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    jobs = tmp_path / "jobs"
    url = f"http://127.0.0.1:{silent.getsockname()[1]}"
    write_job(
        jobs,
        "slow",
        f'kind = "health"\ncron = "* * * * * *"\n[args]\nurl = "{url}"\ntimeout_s = 2.5\n',
    )
    config = write_config(tmp_path, sqlite_url, host_id="solo", jobs_dir=jobs)
    daemon = DaemonProcess(config, tmp_path / "daemon.log", "solo")
    try:
        base = daemon.metrics_url()
        wait_for("three slow runs", lambda: len(finished(sqlite_url, "slow")) >= 3, timeout_s=60)
        skipped = scrape(base)[
            (
                "watchkeeper_job_skipped_total",
                (("job", "slow"), ("reason", "the previous run is still going")),
            )
        ]
        assert skipped >= 2
        slow = job_runs(sqlite_url, "slow")
        never_overlap(slow)
        assert {r.outcome for r in slow} <= {"failed", "running"}
        assert all("not reachable" in (r.error or "") for r in slow if r.outcome == "failed")

        (jobs / "slow.toml").unlink()
        write_job(jobs, "db", 'kind = "health"\ncron = "* * * * * *"\n')
        daemon.proc.send_signal(signal.SIGHUP)
        reloaded = wait_for("the reload", lambda: daemon.event("config_reloaded"), timeout_s=30)
        assert reloaded["added"] == ["db"] and reloaded["removed"] == ["slow"]
        first_db = wait_for("a db run", lambda: finished(sqlite_url, "db"), timeout_s=30)
        assert first_db[0].outcome == "ok"

        write_job(jobs, "broken", 'kind = "health"\ncron = "every minute"\n')
        daemon.proc.send_signal(signal.SIGHUP)
        failed = wait_for("the refused reload", lambda: daemon.event("reload_failed"), timeout_s=30)
        assert "broken.toml: cron:" in failed["error"]
        count = len(finished(sqlite_url, "db"))
        wait_for(
            "db runs after the refused reload",
            lambda: len(finished(sqlite_url, "db")) >= count + 2,
            timeout_s=30,
        )
        assert daemon.alive()
        assert daemon.stop() == 0
    finally:
        daemon.kill()
        silent.close()
    slow_after = [r for r in job_runs(sqlite_url, "slow") if r.started_at > first_db[0].started_at]
    assert not slow_after, "a removed job must not fire after the reload"


def test_a_daemon_killed_mid_soak_is_marked_and_the_restarted_daemon_resumes_the_soak(
    real_server: tuple[ServerBinary, ModelFile], sqlite_url: str, tmp_path: Path
) -> None:
    jobs = tmp_path / "jobs"
    soak = '[args]\nduration = "20s"\nblock = "10s"\nprofiles = ["base"]\n'
    write_job(jobs, "soak", f'kind = "soak"\ncron = "*/5 * * * * *"\n{soak}')
    config = write_config(tmp_path, sqlite_url, host_id="solo", jobs_dir=jobs)
    with config.open("a") as f:
        f.write(
            '[soak]\nslice = "5s"\nsample_interval_s = 1.0\nprobe_interval_s = 4.0\n'
            "flush_interval_s = 1.0\nramp_s = 0.5\n"
        )

    def samples() -> int:
        db = Database(sqlite_url)
        try:
            with db.session() as s:
                return len(s.scalars(select(RequestSampleRow.id)).all())
        finally:
            db.close()

    first = DaemonProcess(config, tmp_path / "first.log", "solo")
    try:
        wait_for("soak samples", lambda: samples() >= 3, timeout_s=180)
        servers = first.llama_servers()
        assert servers
        first.proc.kill()  # no chance to record anything
        first.proc.wait(timeout=30)
    finally:
        first.kill()
    psutil.wait_procs(servers, timeout=30)
    (dead,) = job_runs(sqlite_url, "soak")
    assert dead.outcome == "running"

    # The night's schedule no longer fires during the test: only the resume can start it.
    write_job(jobs, "soak", f'kind = "soak"\ncron = "0 0 1 1 *"\n{soak}')
    second = DaemonProcess(config, tmp_path / "second.log", "solo")
    try:
        resumed = wait_for(
            "the resumed soak", lambda: finished(sqlite_url, "soak")[1:], timeout_s=180
        )[0]
        assert second.stop() == 0
    finally:
        second.kill()
    marked = second.event("job_interrupted_by_restart")
    assert marked and marked["job_run_id"] == dead.id and len(marked["campaigns"]) == 1
    started = second.event("daemon_started")
    assert started and started["resumed"] == ["soak"]
    runs = job_runs(sqlite_url, "soak")
    assert runs[0].outcome == "interrupted" and "stopped before" in (runs[0].error or "")
    assert resumed.outcome == "ok", second.log_text()[-3000:]
    assert resumed.details["resumed"] is True
    assert resumed.details["campaign_id"] == marked["campaigns"][0]
    assert campaign(sqlite_url, resumed.details["campaign_id"]).status == "completed"
