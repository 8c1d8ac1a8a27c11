"""The daemon's lifecycle, built from single steps that return a bool.

`start` loads the job definitions (a bad file stops it before anything runs), recovers from a
predecessor that died (its `running` rows and soak campaigns become `interrupted`; a soak whose
night is not over is resumed), then starts the metrics endpoint and the scheduler. `step` is
one tick of the main loop: it reads the flags the signal handlers set (SIGTERM/SIGINT: stop,
SIGHUP: reload) and refreshes the gauges. `shutdown` tells the running job to stop at its next
step boundary, waits for it, and releases everything. Signal handlers only set a flag.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from types import FrameType
from typing import Any

from watchkeeper.config import Config, load_config
from watchkeeper.config.durations import parse_duration
from watchkeeper.config.paths import data_dir
from watchkeeper.daemon.execute import JobOutcome, JobRunner
from watchkeeper.daemon.fleet import FleetLock, make_fleet_lock
from watchkeeper.daemon.jobdefs import JobDef, load_jobs
from watchkeeper.daemon.logs import get_logger
from watchkeeper.daemon.metrics import DaemonMetrics, MetricsServer
from watchkeeper.daemon.scheduler import Schedule
from watchkeeper.daemon.status import spool_depth
from watchkeeper.errors import ConfigError, WatchkeeperError
from watchkeeper.host import info as hostinfo
from watchkeeper.store.db import Database, masked
from watchkeeper.store.findings import FindingStore
from watchkeeper.store.jobs import JobStore
from watchkeeper.store.soak_store import SoakStore

log = get_logger("watchkeeper.daemon")
RESTART_KEYS = ("database", "daemon.host_id", "daemon.metrics_host", "daemon.metrics_port")


class Daemon:
    def __init__(self, config: Config, *, config_path: str | None = None) -> None:
        self.config = config
        self.config_path = config_path
        self.host_id = config.daemon.resolved_host_id()
        self.jobs: dict[str, JobDef] = {}
        self.metrics = DaemonMetrics(self.host_id)
        self.job_stop = threading.Event()
        self.stop_flag = False
        self.reload_flag = False
        self.metrics_port: int | None = None
        self._db: Database | None = None
        self._store: JobStore | None = None
        self._lock: FleetLock | None = None
        self._runner: JobRunner | None = None
        self._schedule: Schedule | None = None
        self._server: MetricsServer | None = None
        self._refreshed = 0.0
        self._healthy = True
        self._started = False
        """Set once start() got through: a start that failed leaves no runtime file to remove
        (the one there is another daemon's) and logs nothing more than its error."""

    # -- signal side: flags only -------------------------------------------------------
    def request_stop(self) -> None:
        self.stop_flag = True

    def request_reload(self) -> None:
        self.reload_flag = True

    # -- steps -------------------------------------------------------------------------
    def start(self) -> None:
        url = self.config.database.resolved_url()
        jobs = load_jobs(self.config.daemon.resolved_jobs_dir())
        self.jobs = {j.name: j for j in jobs}
        d = self.config.daemon
        if d.metrics_port >= 0:
            # First: a port in use is usually this host's running daemon, whose job runs
            # `recover` would mark interrupted and whose runtime file `shutdown` would remove.
            self._server = MetricsServer(
                self.metrics, self.health, host=d.metrics_host, port=d.metrics_port
            )
        self._db = Database(url)
        self._store = JobStore(self._db)
        self._lock = make_fleet_lock(
            url,
            namespace=self.config.daemon.fleet_lock_namespace,
            lock_dir=self.config.daemon.lock_dir,
        )
        self._runner = JobRunner(
            config=self.config,
            host_id=self.host_id,
            db=self._db,
            lock=self._lock,
            metrics=self.metrics,
            stop=self.job_stop,
        )
        resume = self.recover()
        if self._server is not None:
            self._server.start()
            self.metrics_port = self._server.port
        self._schedule = Schedule(url, self.host_id, target=self.fire, on_skip=self._skipped)
        self._schedule.start()
        report = self._schedule.sync(jobs)
        for name in resume:
            self._schedule.run_now(name, reason="resume")
        self._schedule.resume()
        self.metrics.started.set(time.time())
        self._write_runtime_file(url)
        self._started = True
        self.refresh_gauges()
        log.info(
            "daemon_started",
            host_id=self.host_id,
            pid=os.getpid(),
            database=masked(url),
            jobs=sorted(self.jobs),
            added=report.added,
            rescheduled=report.rescheduled,
            kept=report.kept,
            removed=report.removed,
            resumed=resume,
            metrics_port=self.metrics_port,
        )

    def recover(self, *, now: datetime | None = None) -> list[str]:
        """Mark what a dead predecessor left running; return the soak jobs to resume now
        (``now``: the clock, injectable for tests)."""
        assert self._store is not None and self._db is not None
        store, soaks = self._store, SoakStore(self._db)
        fingerprint = hostinfo.collect().fingerprint
        for run in store.mark_stale(self.host_id):
            campaigns = (
                soaks.interrupt_running(fingerprint, run.started_at) if run.kind == "soak" else []
            )
            log.warning(
                "job_interrupted_by_restart",
                job=run.job,
                job_run_id=run.id,
                started_at=run.started_at.isoformat(),
                campaigns=campaigns,
            )
        resume = []
        now = now or datetime.now(UTC)
        for job in self.jobs.values():
            if job.kind != "soak" or not job.enabled or not job.resume:
                continue
            last = store.last_run(job.name, self.host_id)
            if last is None or last.outcome != "interrupted":
                continue
            night = parse_duration(job.args.duration or self.config.soak.duration)
            if last.started_at + timedelta(seconds=night) > now:
                resume.append(job.name)
            else:
                log.info("soak_not_resumed", job=job.name, reason="its night is over")
        return resume

    def step(self) -> bool:
        """One tick: False once a stop was requested."""
        if self.stop_flag:
            self.job_stop.set()
            return False
        if self.reload_flag:
            self.reload_flag = False
            self.reload()
        if time.monotonic() - self._refreshed >= self.config.daemon.gauge_refresh_s:
            self.refresh_gauges()
        return True

    def reload(self) -> bool:
        """Re-read the config and the job files; a bad one keeps everything as it was."""
        try:
            config = load_config(self.config_path)
            jobs = load_jobs(config.daemon.resolved_jobs_dir())
        except WatchkeeperError as exc:
            log.error("reload_failed", error=exc.message, hint=exc.hint, kept="previous config")
            return False
        needs_restart = [key for key in RESTART_KEYS if _get(config, key) != _get(self.config, key)]
        if needs_restart:
            log.warning("reload_needs_restart", keys=needs_restart)
        assert self._schedule is not None and self._runner is not None
        self.config = config
        self._runner.config = config
        self.jobs = {j.name: j for j in jobs}
        report = self._schedule.sync(jobs)
        log.info(
            "config_reloaded",
            jobs=sorted(self.jobs),
            added=report.added,
            rescheduled=report.rescheduled,
            kept=report.kept,
            removed=report.removed,
        )
        self.refresh_gauges()
        return True

    def refresh_gauges(self) -> bool:
        self._refreshed = time.monotonic()
        assert self._db is not None and self._schedule is not None
        for name, when in self._schedule.next_runs().items():
            if when is not None:
                self.metrics.next_run.labels(job=name).set(when.timestamp())
        self.metrics.spool_depth.set(spool_depth(data_dir() / "spool"))
        try:
            self.metrics.set_open_findings(FindingStore(self._db).open_by_label())
        except WatchkeeperError as exc:
            self._healthy = False
            log.warning("gauges_not_refreshed", error=exc.message)
            return False
        self._healthy = True
        return True

    def fire(self, name: str, scheduled_for: datetime | None) -> None:
        """Called from the scheduler's thread pool for every start."""
        job = self.jobs.get(name)
        if job is None or self._runner is None:
            log.warning("unknown_job_fired", job=name)
            return
        self._runner.run(job, scheduled_for)

    def health(self) -> tuple[bool, dict[str, Any]]:
        running = self._runner.running() if self._runner else {}
        ok = self._healthy and not self.stop_flag
        return ok, {
            "host_id": self.host_id,
            "database": "ok" if self._healthy else "unreachable",
            "stopping": self.stop_flag,
            "running": sorted(running),
        }

    def shutdown(self) -> int:
        """Stop firing, let the running job reach its step boundary, release everything."""
        self.job_stop.set()
        running = sorted(self._runner.running()) if self._runner else []
        if self._started:
            log.info("daemon_stopping", running=running)
        if self._schedule:
            self._schedule.shutdown()
        idle = self._runner.wait_idle(self.config.daemon.stop_timeout_s) if self._runner else True
        if not idle:
            log.error("daemon_stop_timed_out", timeout_s=self.config.daemon.stop_timeout_s)
        if self._server:
            self._server.stop()
        if self._lock:
            self._lock.close()
        if self._db:
            self._db.close()
        if not self._started:
            return 0 if idle else 1
        with contextlib.suppress(OSError):
            self.config.daemon.runtime_file(self.host_id).unlink()
        log.info("daemon_stopped", clean=idle)
        return 0 if idle else 1

    def run(self) -> int:
        """Start, tick until a stop is requested, shut down. The exit code."""
        with signals(self):
            try:
                self.start()
                while self.step():
                    time.sleep(self.config.daemon.tick_s)
            finally:
                code = self.shutdown()
        return code

    # -- helpers -----------------------------------------------------------------------
    def _skipped(self, job: str, reason: str) -> None:
        log.warning("job_start_skipped", job=job, reason=reason)
        self.metrics.skipped.labels(job=job, reason=reason).inc()

    def _write_runtime_file(self, url: str) -> None:
        path = self.config.daemon.runtime_file(self.host_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        data = {
            "pid": os.getpid(),
            "host_id": self.host_id,
            "database": masked(url),
            "metrics_url": (
                f"http://{self.config.daemon.metrics_host}:{self.metrics_port}"
                if self.metrics_port
                else None
            ),
            "started_at": datetime.now(UTC).isoformat(),
        }
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, path)


def _get(config: Config, dotted: str) -> object:
    value: object = config
    for part in dotted.split("."):
        value = getattr(value, part)
    return value


@contextlib.contextmanager
def signals(daemon: Daemon) -> Iterator[None]:
    """SIGTERM/SIGINT request a stop, SIGHUP a reload; the handlers only set a flag."""

    def stop(_signum: int, _frame: FrameType | None) -> None:
        daemon.request_stop()

    def reload(_signum: int, _frame: FrameType | None) -> None:
        daemon.request_reload()

    handlers = {signal.SIGTERM: stop, signal.SIGINT: stop, signal.SIGHUP: reload}
    previous = {sig: signal.signal(sig, handler) for sig, handler in handlers.items()}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def run_once(config: Config, name: str, *, stop: threading.Event | None = None) -> JobOutcome:
    """`watchkeeper job run NAME`: the same execution path as a scheduled start, now."""
    jobs = {j.name: j for j in load_jobs(config.daemon.resolved_jobs_dir())}
    if name not in jobs:
        raise ConfigError(
            f"no job named {name!r} in {config.daemon.resolved_jobs_dir()}",
            hint=f"jobs: {', '.join(sorted(jobs)) or 'none'}",
        )
    url = config.database.resolved_url()
    db = Database(url)
    d = config.daemon
    lock = make_fleet_lock(url, namespace=d.fleet_lock_namespace, lock_dir=d.lock_dir)
    try:
        runner = JobRunner(
            config=config,
            host_id=d.resolved_host_id(),
            db=db,
            lock=lock,
            stop=stop,
        )
        return runner.run(jobs[name])
    finally:
        lock.close()
        db.close()
