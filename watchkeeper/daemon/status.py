"""`watchkeeper status`: next runs, last runs with their outcome, open findings, spool depth.

Everything comes from the job files, the database and the data directory, so it answers the
same whether the daemon runs or not (and says which).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from apscheduler.triggers.cron import CronTrigger

from watchkeeper.config import Config
from watchkeeper.config.paths import data_dir
from watchkeeper.daemon.jobdefs import load_jobs
from watchkeeper.store.db import open_database
from watchkeeper.store.findings import FindingStore
from watchkeeper.store.jobs import JobRunView, JobStore


def spool_depth(root: Path) -> int:
    """Soak items in every spool directory (journal plus pending files) not yet in the db."""
    total = 0
    if not root.is_dir():
        return 0
    for path in root.glob("*/*.jsonl"):
        try:
            with path.open("rb") as f:
                total += sum(1 for line in f if line.strip())
        except OSError:
            continue
    return total


@dataclass(frozen=True, slots=True)
class JobLine:
    name: str
    kind: str
    scope: str
    cron: str
    timezone: str
    enabled: bool
    next_run: datetime | None
    last: JobRunView | None


@dataclass(frozen=True, slots=True)
class DaemonStatus:
    host_id: str
    daemon: dict[str, Any] | None
    """The running daemon's runtime file (pid, metrics URL), or None when none runs here."""
    jobs: tuple[JobLine, ...]
    open_findings: dict[str, int]
    spool_depth: int

    def to_json(self) -> dict[str, Any]:
        return {
            "host_id": self.host_id,
            "daemon": self.daemon,
            "jobs": [
                {
                    "name": j.name,
                    "kind": j.kind,
                    "scope": j.scope,
                    "cron": j.cron,
                    "timezone": j.timezone,
                    "enabled": j.enabled,
                    "next_run": j.next_run.isoformat() if j.next_run else None,
                    "last_run": j.last.to_json() if j.last else None,
                }
                for j in self.jobs
            ],
            "open_findings": self.open_findings,
            "spool_depth": self.spool_depth,
        }


def runtime_info(config: Config, host_id: str) -> dict[str, Any] | None:
    """The running daemon's runtime file, when its pid is alive."""
    path = config.daemon.runtime_file(host_id)
    try:
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        os.kill(int(data["pid"]), 0)
    except (OSError, ValueError, KeyError):
        return None
    return data


def next_fire(cron_fields: dict[str, str], timezone: str, now: datetime) -> datetime | None:
    trigger = CronTrigger(**cron_fields, timezone=ZoneInfo(timezone))
    when = trigger.get_next_fire_time(None, now)
    return when if isinstance(when, datetime) else None


def gather_status(config: Config, *, now: datetime | None = None) -> DaemonStatus:
    host_id = config.daemon.resolved_host_id()
    jobs = load_jobs(config.daemon.resolved_jobs_dir())
    now = now or datetime.now(UTC)
    with open_database(config.database.resolved_url()) as db:
        latest = {r.job: r for r in JobStore(db).latest_per_job()}
        findings = FindingStore(db).open_by_label()
    lines = tuple(
        JobLine(
            name=j.name,
            kind=j.kind,
            scope=j.scope,
            cron=j.cron,
            timezone=j.timezone,
            enabled=j.enabled,
            next_run=next_fire(j.cron_fields(), j.timezone, now) if j.enabled else None,
            last=latest.get(j.name),
        )
        for j in jobs
    )
    return DaemonStatus(
        host_id=host_id,
        daemon=runtime_info(config, host_id),
        jobs=lines,
        open_findings=findings,
        spool_depth=spool_depth(data_dir() / "spool"),
    )
