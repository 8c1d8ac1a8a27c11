"""Configuration of the daemon ([daemon]): scheduling, fleet identity, observability.

Owned by the daemon stage; `watchkeeper.config.Config` embeds it.

```toml
[daemon]
host_id = ""              # default: hostname + hardware fingerprint, e.g. "gpu-01-3f9a2c1d"
jobs_dir = ""             # default: <project>/jobs
metrics_host = "127.0.0.1"  # loopback only: scrape it through a local Prometheus agent
metrics_port = 9638       # 0 = an ephemeral port (written to the runtime file); -1 = off
fleet_lock_namespace = 1466452803  # first key of pg_advisory_lock(ns, job); share it fleet-wide
lock_dir = ""             # SQLite: where the fleet lock files live (default: next to the db)
log_format = "auto"       # auto (JSON lines unless stderr is a TTY) | json | console
log_level = "info"
gauge_refresh_s = 15      # how often open findings and spool depth are re-read
stop_timeout_s = 600      # SIGTERM: wait this long for the current job step, then exit 1
```
"""

from __future__ import annotations

import re
import socket
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, field_validator

from watchkeeper.config.base import Strict as _Strict
from watchkeeper.config.paths import data_dir, project_root
from watchkeeper.host import info as hostinfo

LOOPBACK = ("127.0.0.1", "::1", "localhost")
DEFAULT_METRICS_PORT = 9638
DEFAULT_LOCK_NAMESPACE = 0x5768_4B43  # "WhKC"


def _sanitise(text: str) -> str:
    return re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")[:48] or "host"


class DaemonConfig(_Strict):
    """Daemon settings: who this host is, where its jobs are, what it exposes."""

    host_id: str = ""
    """Unique per host in a fleet; default: hostname plus the hardware fingerprint."""
    jobs_dir: str = ""
    """Directory of job definitions (`*.toml`); default: <project>/jobs."""
    metrics_host: str = "127.0.0.1"
    metrics_port: Annotated[int, Field(ge=-1, le=65535)] = DEFAULT_METRICS_PORT
    """0: an ephemeral port (see the runtime file); -1: no HTTP endpoint at all."""
    fleet_lock_namespace: Annotated[int, Field(ge=0, le=2**31 - 1)] = DEFAULT_LOCK_NAMESPACE
    lock_dir: str = ""
    """SQLite only: fleet lock files; default: next to the database file."""
    log_format: Literal["auto", "json", "console"] = "auto"
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    gauge_refresh_s: Annotated[float, Field(gt=0)] = 15.0
    stop_timeout_s: Annotated[float, Field(gt=0)] = 600.0
    """After SIGTERM, how long the current job may take to reach the end of its step."""
    tick_s: Annotated[float, Field(gt=0, le=60)] = 0.5
    """How often the main loop checks its flags (stop, reload) and refreshes gauges."""

    @field_validator("metrics_host")
    @classmethod
    def _loopback_only(cls, value: str) -> str:
        if value not in LOOPBACK:
            raise ValueError(
                "the metrics endpoint binds to loopback only (127.0.0.1, ::1 or localhost)"
            )
        return value

    @field_validator("host_id")
    @classmethod
    def _host_id_is_a_name(cls, value: str) -> str:
        if value and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}", value):
            raise ValueError("host_id: letters, digits, '.', '_' and '-', at most 63 characters")
        return value

    def resolved_host_id(self) -> str:
        if self.host_id:
            return self.host_id
        info = hostinfo.collect()
        return f"{_sanitise(socket.gethostname())}-{info.fingerprint[:8]}"

    def resolved_jobs_dir(self) -> Path:
        return Path(self.jobs_dir).expanduser() if self.jobs_dir else project_root() / "jobs"

    def runtime_file(self, host_id: str) -> Path:
        """Where a running daemon writes its pid and the bound metrics address."""
        return data_dir() / "daemon" / f"{host_id}.json"
