"""The daemon's pieces, tested directly: job files, claims, fleet locks, a job run recorded,
metrics parsed by prometheus-client, logs, recovery after a crash, reload."""

from __future__ import annotations

import io
import json
import urllib.error
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from watchkeeper.config import Config, DatabaseConfig
from watchkeeper.config.daemon import DaemonConfig
from watchkeeper.config.paths import project_root
from watchkeeper.daemon import logs
from watchkeeper.daemon.execute import JobRunner
from watchkeeper.daemon.fleet import FileLock, make_fleet_lock
from watchkeeper.daemon.jobdefs import cron_fields, load_jobs
from watchkeeper.daemon.jobs import JobContext, StepInterrupted
from watchkeeper.daemon.metrics import DaemonMetrics, MetricsServer
from watchkeeper.daemon.service import Daemon
from watchkeeper.daemon.status import gather_status, spool_depth
from watchkeeper.errors import ConfigError
from watchkeeper.server.process import free_port
from watchkeeper.store.db import Database
from watchkeeper.store.jobs import JobStore
from watchkeeper.store.locks import PostgresLock

ROOT_JOBS = project_root() / "jobs"


def write_job(directory: Path, name: str, text: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.toml"
    path.write_text(text)
    return path


def daemon_config(url: str, jobs_dir: Path, **daemon: object) -> Config:
    values: dict[str, object] = {
        "host_id": "unit-host",
        "jobs_dir": str(jobs_dir),
        "metrics_port": -1,
    }
    values.update(daemon)
    return Config(database=DatabaseConfig(url=url), daemon=DaemonConfig.model_validate(values))


def test_the_shipped_job_files_load_with_their_scopes() -> None:
    jobs = {j.name: j for j in load_jobs(ROOT_JOBS)}
    assert set(jobs) == {
        "nightly",
        "nightly-code-edit",
        "soak",
        "digest",
        "triage",
        "review-pr",
        "health",
        "upgrade",
        "bisect",
    }
    assert {n: j.scope for n, j in jobs.items()} == {
        "nightly": "host",
        "nightly-code-edit": "host",
        "soak": "host",
        "health": "host",
        "upgrade": "host",
        "bisect": "host",
        "digest": "fleet",
        "triage": "fleet",
        "review-pr": "fleet",
    }
    assert jobs["digest"].args.push and jobs["soak"].args.duration == "5h"
    assert jobs["soak"].args.concurrency == [1, 4] and jobs["soak"].args.block == "2m"
    # The code-edit setting's guard: its committed record, code edits only, an hour before
    # the default nightly so the two never share the CPU.
    code_edit = jobs["nightly-code-edit"].args
    assert code_edit.recommendation == Path("reports/code-edit/speculative_recommendation.json")
    assert code_edit.categories == ["code_edit"]
    assert jobs["nightly-code-edit"].cron_fields()["hour"] == "22"
    assert jobs["nightly"].cron_fields()["hour"] == "23"
    assert jobs["review-pr"].cron_fields()["day_of_week"] == "mon-fri"
    assert jobs["upgrade"].cron_fields()["day_of_week"] == "sat"  # weekly, off the nightly
    assert jobs["upgrade"].args.to == "latest"
    # After triage (07:45), so the finding's issue exists for the result's comment.
    assert jobs["bisect"].cron_fields()["hour"] == "9" and jobs["bisect"].args.max_rounds == 12


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('kind = "bench"\ncron = "* * * * *"\nbogus = 1\n', "bogus: unknown key"),
        ('kind = "bench"\n', "cron: required key is missing"),
        ('kind = "weekly"\ncron = "* * * * *"\n', "kind: Input should be"),
        ('kind = "bench"\ncron = "* * *"\n', "cron: Value error, a cron expression has 5"),
        ('kind = "bench"\ncron = "61 * * * *"\n', "cron: "),
        ('kind = "bench"\ncron = "* * * * *"\ntimezone = "Mars/Olympus"\n', "timezone: "),
        ('kind = "bench"\ncron = "* * * * *"\n[args]\nrounds = 0\n', "args.rounds: "),
        ('kind = "soak"\ncron = "* * * * *"\n[args]\nduration = "8 hours"\n', "args.duration"),
        ('kind = "digest"\ncron = "* * * * *"\n[args]\npsuh = true\n', "args.psuh: unknown key"),
        ('kind = "bench"\ncron = "* * * * *\n', "not valid TOML"),
    ],
)
def test_a_bad_job_file_is_an_error_naming_the_file_and_the_key(
    tmp_path: Path, text: str, problem: str
) -> None:
    path = write_job(tmp_path, "nightly", text)
    with pytest.raises(ConfigError) as info:
        load_jobs(tmp_path)
    assert info.value.message.startswith(f"{path}: ")
    assert problem in info.value.message


def test_crontab_weekday_numbers_mean_what_cron_means() -> None:
    # APScheduler counts 0 as Monday; a crontab line means Sunday.
    assert cron_fields("0 7 * * 0")["day_of_week"] == "sun"
    assert cron_fields("0 7 * * 1-5")["day_of_week"] == "mon-fri"
    assert cron_fields("0 7 * * 6,7")["day_of_week"] == "sat,sun"
    assert cron_fields("*/3 * * * * *") == {
        "second": "*/3",
        "minute": "*",
        "hour": "*",
        "day": "*",
        "month": "*",
        "day_of_week": "*",
    }


def test_a_fleet_start_is_claimed_once_and_a_host_start_once_per_host(db_url: str) -> None:
    db = Database(db_url)
    store = JobStore(db)
    when = datetime(2026, 11, 23, 7, 15, tzinfo=UTC)
    try:
        fleet = {"job": "digest", "kind": "digest", "scope": "fleet", "scheduled_for": when}
        first = store.claim(host_id="a", **fleet)
        assert first is not None
        assert store.claim(host_id="b", **fleet) is None
        host = {"job": "soak", "kind": "soak", "scope": "host", "scheduled_for": when}
        assert store.claim(host_id="a", **host) is not None
        assert store.claim(host_id="b", **host) is not None
        assert store.claim(host_id="a", **host) is None
        manual = {"job": "digest", "kind": "digest", "scope": "fleet", "scheduled_for": None}
        assert store.claim(host_id="a", **manual) != store.claim(host_id="a", **manual)
        view = store.finish(first, outcome="ok", details={"samples": 0})
        assert view.outcome == "ok" and view.duration_s is not None and view.finished_at
    finally:
        db.close()


def test_a_file_lock_has_one_holder_and_is_free_again_after_release(tmp_path: Path) -> None:
    one, two = FileLock(tmp_path), FileLock(tmp_path)
    with one.hold("digest") as got:
        assert got
        with two.hold("digest") as second:
            assert not second
        with two.hold("triage") as other_job:
            assert other_job
    with two.hold("digest") as again:
        assert again
    assert isinstance(make_fleet_lock(f"sqlite:///{tmp_path}/x.db", namespace=1), FileLock)


def test_a_postgres_advisory_lock_has_one_holder_across_sessions(pg_url: str) -> None:
    one, two = PostgresLock(pg_url, 77), PostgresLock(pg_url, 77)
    try:
        with one.hold("digest") as got:
            assert got
            with two.hold("digest") as second:
                assert not second
            with two.hold("triage") as other_job:
                assert other_job
        with two.hold("digest") as again:
            assert again
    finally:
        one.close()
        two.close()


def test_a_failing_job_is_recorded_and_the_next_one_still_runs(
    sqlite_url: str, tmp_path: Path
) -> None:
    jobs = tmp_path / "jobs"
    write_job(
        jobs,
        "watched",
        f'kind = "health"\ncron = "* * * * *"\n[args]\nurl = "http://127.0.0.1:{free_port()}"\ntimeout_s = 2\n',
    )
    write_job(jobs, "db", 'kind = "health"\ncron = "* * * * *"\n')
    config = daemon_config(sqlite_url, jobs)
    defs = {j.name: j for j in load_jobs(jobs)}
    db = Database(sqlite_url)
    metrics = DaemonMetrics("unit-host")
    runner = JobRunner(
        config=config,
        host_id="unit-host",
        db=db,
        lock=make_fleet_lock(sqlite_url, namespace=1),
        metrics=metrics,
    )
    try:
        failed = runner.run(defs["watched"])
        ok = runner.run(defs["db"])
        runs = {r.job: r for r in JobStore(db).runs()}
    finally:
        db.close()
    assert failed.outcome == "failed" and "not reachable" in (failed.error or "")
    assert ok.outcome == "ok"
    assert runs["watched"].outcome == "failed" and runs["watched"].error == failed.error
    assert runs["db"].outcome == "ok" and runs["db"].finished_at is not None
    assert metrics.last_success.labels(job="watched")._value.get() == 0
    assert metrics.last_success.labels(job="db")._value.get() == 1


def test_a_checkpoint_after_a_stop_request_raises_step_interrupted() -> None:
    seen: list[str] = []
    ctx = JobContext(progress=seen.append)
    ctx.checkpoint("round 1")
    ctx.stop.set()
    with pytest.raises(StepInterrupted):
        ctx.checkpoint("round 2")
    assert seen == ["round 1"]
    assert issubclass(StepInterrupted, KeyboardInterrupt)  # the commands' interrupted path


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_metrics_and_healthz_are_served_on_loopback_and_parse() -> None:
    metrics = DaemonMetrics("unit-host")
    metrics.record("bench", "ok", 12.5, 1_800_000_000.0)
    metrics.samples.labels(job="bench").inc(8)
    metrics.spool_depth.set(3)
    metrics.set_open_findings({"regression": 2, "suspicious": 1})
    metrics.set_open_findings({"regression": 1})
    healthy = {"ok": True}
    server = MetricsServer(
        metrics, lambda: (healthy["ok"], {"host_id": "unit-host"}), host="127.0.0.1", port=0
    )
    server.start()
    try:
        status, body = _get(f"http://127.0.0.1:{server.port}/metrics")
        assert status == 200
        samples = {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(body.decode())
            for s in family.samples
        }
        assert samples[("watchkeeper_job_last_success", (("job", "bench"),))] == 1
        assert samples[("watchkeeper_job_runs_total", (("job", "bench"), ("outcome", "ok")))] == 1
        assert samples[("watchkeeper_samples_written_total", (("job", "bench"),))] == 8
        assert samples[("watchkeeper_job_duration_seconds_count", (("job", "bench"),))] == 1
        assert samples[("watchkeeper_spool_depth", ())] == 3
        assert samples[("watchkeeper_open_findings", (("label", "regression"),))] == 1
        assert samples[("watchkeeper_open_findings", (("label", "suspicious"),))] == 0
        status, body = _get(f"http://127.0.0.1:{server.port}/healthz")
        assert status == 200 and json.loads(body) == {"ok": True, "host_id": "unit-host"}
        healthy["ok"] = False
        status, _ = _get(f"http://127.0.0.1:{server.port}/healthz")
        assert status == 503
    finally:
        server.stop()


def test_the_metrics_endpoint_refuses_anything_but_loopback() -> None:
    with pytest.raises(ValueError, match="loopback only"):
        DaemonConfig(metrics_host="0.0.0.0")


def test_json_logs_carry_the_bound_ids() -> None:
    import logging

    import structlog

    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    stream = io.StringIO()
    logs.configure("json", "info", stream=stream)
    try:
        with structlog.contextvars.bound_contextvars(job="bench", job_run_id=7):
            logs.get_logger("t").info("job_started", scope="host")
        logging.getLogger("apscheduler.scheduler").warning("from the stdlib")
        logging.getLogger("alembic.runtime.migration").info("schema chatter is dropped")
        # httpx logs every request at info: a line per soak request and per metrics scrape.
        with httpx.Client(transport=httpx.MockTransport(lambda _r: httpx.Response(200))) as c:
            assert c.get("http://127.0.0.1:1/metrics").status_code == 200
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
        structlog.reset_defaults()
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert len(lines) == 2
    assert lines[0]["event"] == "job_started" and lines[0]["job"] == "bench"
    assert lines[0]["job_run_id"] == 7 and lines[0]["level"] == "info" and "timestamp" in lines[0]
    assert lines[1]["event"] == "from the stdlib" and lines[1]["level"] == "warning"


TRIM_PROBE = """
import psutil
from watchkeeper.daemon.memory import release_free_memory
blocks = [bytearray(64 * 1024) for _ in range(2000)]  # 128 MiB of small heap blocks
pinned = blocks[-1]  # the heap's top stays in use: free() alone cannot shrink it
del blocks
held = psutil.Process().memory_info().rss
released = release_free_memory()
print(held, released.rss_before, released.rss_after, released.trimmed)
"""


def test_freed_heap_pages_go_back_to_the_os_after_a_job() -> None:
    """glibc keeps freed heap pages below an in-use top chunk resident: without the trim the
    daemon's resting RSS would keep the night's peak. In a fresh interpreter so that the
    figures are this probe's alone."""
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-c", TRIM_PROBE], capture_output=True, text=True, timeout=60, check=True
    ).stdout.split()
    held, before, after = (int(v) / 2**20 for v in out[:3])
    assert out[3] == "True"
    assert held > 100, f"the freed blocks should still be resident before the trim: {out}"
    assert before - after > 100, f"the trim should return the ~125 MiB freed: {out}"


def test_console_logs_on_a_tty_and_json_off_it() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert logs.use_json("auto", io.StringIO())
    assert not logs.use_json("auto", Tty())
    assert logs.use_json("json", Tty()) and not logs.use_json("console", io.StringIO())


def test_a_restart_marks_a_dead_run_interrupted_and_resumes_a_soak_whose_night_is_on(
    sqlite_url: str, tmp_path: Path
) -> None:
    jobs = tmp_path / "jobs"
    write_job(jobs, "soak", 'kind = "soak"\ncron = "30 0 * * *"\n[args]\nduration = "6h"\n')
    write_job(jobs, "old-soak", 'kind = "soak"\ncron = "30 0 * * *"\n[args]\nduration = "1s"\n')
    db = Database(sqlite_url)
    store = JobStore(db)
    for name in ("soak", "old-soak"):
        store.claim(job=name, kind="soak", scope="host", host_id="unit-host", scheduled_for=None)
    store.claim(job="soak", kind="soak", scope="host", host_id="other", scheduled_for=None)
    started = max(r.started_at for r in store.runs())
    db.close()
    daemon = Daemon(daemon_config(sqlite_url, jobs))
    daemon.jobs = {j.name: j for j in load_jobs(jobs)}
    daemon._db = Database(sqlite_url)
    daemon._store = JobStore(daemon._db)
    try:
        # An hour after the starts: the 6 h night is still on, the 1 s one is over.
        assert daemon.recover(now=started + timedelta(hours=1)) == ["soak"]
        runs = daemon._store.runs()
    finally:
        daemon._db.close()
    mine = [r for r in runs if r.host_id == "unit-host"]
    assert {r.outcome for r in mine} == {"interrupted"}
    assert [r.outcome for r in runs if r.host_id == "other"] == ["running"]


def test_reload_keeps_the_old_jobs_when_a_job_file_is_broken(
    sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    jobs = tmp_path / "jobs"
    write_job(jobs, "db", 'kind = "health"\ncron = "0 * * * *"\n')
    toml = tmp_path / "wk.toml"
    toml.write_text(
        f'[database]\nurl = "{sqlite_url}"\n[daemon]\nhost_id = "unit-host"\n'
        f'jobs_dir = "{jobs}"\nmetrics_port = -1\n'
    )
    from watchkeeper.config import load_config

    daemon = Daemon(load_config(toml), config_path=str(toml))
    daemon.start()
    try:
        assert daemon._schedule is not None
        before = daemon._schedule.next_runs()
        assert set(before) == {"db"}
        assert minutes(daemon, "db") == "0"
        # Compared by trigger, not by next start: two crons' next starts can coincide at some
        # minutes of the hour (0 and */5 do between xx:55 and xx:59).
        write_job(jobs, "db", 'kind = "health"\ncron = "*/5 * * * *"\n')
        write_job(jobs, "bench", 'kind = "bench"\ncron = "0 3 * * *"\n')
        daemon.request_reload()
        assert daemon.step()
        assert set(daemon._schedule.next_runs()) == {"db", "bench"}
        assert minutes(daemon, "db") == "*/5"
        write_job(jobs, "broken", 'kind = "bench"\ncron = "nope"\n')
        assert not daemon.reload()
        assert set(daemon.jobs) == {"db", "bench"}
        daemon.request_stop()
        assert not daemon.step()
    finally:
        assert daemon.shutdown() == 0


def minutes(daemon: Daemon, name: str) -> str:
    """The minute field of the cron trigger the scheduler holds for job `name`."""
    assert daemon._schedule is not None
    job = daemon._schedule.scheduler.get_job(name, jobstore="default")
    assert job is not None
    return str({f.name: f for f in job.trigger.fields}["minute"])


def test_status_lists_next_and_last_runs_findings_and_spool_depth(
    sqlite_url: str, tmp_path: Path
) -> None:
    jobs = tmp_path / "jobs"
    write_job(jobs, "db", 'kind = "health"\ncron = "0 * * * *"\n')
    write_job(jobs, "digest", 'kind = "digest"\ncron = "15 7 * * *"\nenabled = false\n')
    config = daemon_config(sqlite_url, jobs)
    db = Database(sqlite_url)
    store = JobStore(db)
    run_id = store.claim(
        job="db", kind="health", scope="host", host_id="unit-host", scheduled_for=None
    )
    assert run_id is not None
    store.finish(run_id, outcome="failed", error="database down")
    db.close()
    spool = tmp_path / "data" / "spool" / "soak-c9"
    spool.mkdir(parents=True)
    (spool / "journal.jsonl").write_text('{"a": 1}\n{"a": 2}\n')
    (spool / "pending-1.jsonl").write_text('{"a": 3}\n')
    now = datetime(2026, 11, 30, 23, 58, 30, tzinfo=UTC)
    status = gather_status(config, now=now)
    data = status.to_json()
    by_name = {j["name"]: j for j in data["jobs"]}
    assert by_name["db"]["last_run"]["outcome"] == "failed"
    assert by_name["db"]["last_run"]["error"] == "database down"
    assert datetime.fromisoformat(by_name["db"]["next_run"]) == datetime(2026, 12, 1, tzinfo=UTC)
    assert by_name["digest"]["next_run"] is None and by_name["digest"]["last_run"] is None
    assert data["spool_depth"] == 3 == spool_depth(tmp_path / "data" / "spool")
    assert data["daemon"] is None and data["open_findings"] == {}


def test_a_soak_job_soaks_a_recommendation_as_the_cli_does(tmp_path: Path) -> None:
    """`[args] recommendation` reaches the soak command: the job reads the record first (a
    missing one is the command's one-line error naming the file), as `soak --recommendation`
    does, instead of refusing for want of profiles."""
    from watchkeeper.daemon.jobs import soak_job

    record = tmp_path / "nowhere" / "speculative_recommendation.json"
    write_job(
        tmp_path,
        "soak",
        f'kind = "soak"\ncron = "0 1 * * *"\n[args]\nrecommendation = "{record}"\n',
    )
    (job,) = load_jobs(tmp_path)
    assert job.args.recommendation == record
    config = Config(database=DatabaseConfig(url=f"sqlite:///{tmp_path / 'wk.db'}"))
    with pytest.raises(ConfigError) as info:
        soak_job(config, job.args, JobContext())
    assert info.value.message == f"no recommendation at {record}"
