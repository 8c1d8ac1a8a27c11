"""Helpers for the daemon's real-process tests: a config, job files, the daemon as a subprocess
with its JSON log, bounded waits, /metrics scraped with prometheus-client's parser."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import psutil
from prometheus_client.parser import text_string_to_metric_families

from support import taskfiles
from watchkeeper.server.profiles import SMOLLM2
from watchkeeper.store.db import Database
from watchkeeper.store.jobs import JobRunView, JobStore

T = TypeVar("T")
TASKS = [
    ("count", "Count from one to five in words."),
    ("colors", "Name three colors."),
]


def write_taskset(directory: Path, max_tokens: int = 12) -> Path:
    return taskfiles.write_taskset(directory, TASKS, max_tokens)


def write_config(
    tmp_path: Path, db_url: str, *, host_id: str, jobs_dir: Path, name: str = "wk.toml"
) -> Path:
    """Two SmolLM2 profiles on one thread each, tiny benches, a JSON log, ephemeral metrics."""
    taskset = write_taskset(tmp_path)
    path = tmp_path / name
    path.write_text(
        f'[database]\nurl = "{db_url}"\n'
        "[server]\nstartup_timeout_s = 120\n"
        f'[profiles.base]\nmodel = "{SMOLLM2}"\nctx_size = 1024\nthreads = 1\n'
        f'[profiles.self]\nmodel = "{SMOLLM2}"\ndraft_model = "{SMOLLM2}"\n'
        'spec_type = "draft-simple"\ndraft_n_max = 4\nctx_size = 1024\nthreads = 1\n'
        f'[bench]\ntaskset = "{taskset}"\nrounds = 1\n'
        f'reports_dir = "{tmp_path / ("reports-" + host_id)}"\n' + daemon_section(host_id, jobs_dir)
    )
    return path


def daemon_section(host_id: str, jobs_dir: Path) -> str:
    """The [daemon] table of these tests: a JSON log, an ephemeral metrics port, quick ticks."""
    return (
        f'[daemon]\nhost_id = "{host_id}"\njobs_dir = "{jobs_dir}"\nmetrics_port = 0\n'
        'log_format = "json"\ngauge_refresh_s = 1.0\ntick_s = 0.2\nstop_timeout_s = 120\n'
    )


def toml_text(data: Mapping[str, Any], table: str = "") -> str:
    """A config given as a dict (strings, numbers, booleans, lists of them; tables nested),
    as TOML: JSON literals are valid TOML values for these."""
    lines = [f"[{table}]"] if table else []
    lines += [f"{k} = {json.dumps(v)}" for k, v in data.items() if not isinstance(v, Mapping)]
    text = "".join(line + "\n" for line in lines)
    for key, value in data.items():
        if isinstance(value, Mapping):
            text += toml_text(value, f"{table}.{key}" if table else key)
    return text


def write_job(directory: Path, name: str, text: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.toml"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.rename(path)
    return path


def wait_for(
    what: str, probe: Callable[[], T | None], *, timeout_s: float, step_s: float = 0.3
) -> T:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(step_s)
    raise AssertionError(f"timed out after {timeout_s:.0f}s waiting for {what}")


class DaemonProcess:
    """`python -m watchkeeper.cli daemon --config F` with its stderr (JSON lines) in a file."""

    def __init__(self, config: Path, log: Path, host_id: str) -> None:
        self.config, self.log_path, self.host_id = config, log, host_id
        with log.open("wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "watchkeeper.cli", "daemon", "--config", str(config)],
                stdout=subprocess.DEVNULL,
                stderr=err,
            )
        self.servers: list[psutil.Process] = []

    def events(self) -> list[dict[str, Any]]:
        out = []
        for line in self.log_path.read_text(errors="replace").splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
        return out

    def event(self, name: str, **match: object) -> dict[str, Any] | None:
        for e in self.events():
            if e.get("event") == name and all(e.get(k) == v for k, v in match.items()):
                return e
        return None

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def runtime(self) -> dict[str, Any] | None:
        path = Path(os.environ["WATCHKEEPER_DATA_DIR"]) / "daemon" / f"{self.host_id}.json"
        try:
            data: dict[str, Any] = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        return data

    def metrics_url(self) -> str:
        info = wait_for(
            "the daemon's runtime file", lambda: self.runtime() if self.alive() else None,
            timeout_s=60,
        )  # fmt: skip
        return str(info["metrics_url"])

    def alive(self) -> bool:
        return self.proc.poll() is None

    def llama_servers(self) -> list[psutil.Process]:
        try:
            children = psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return []
        found = [c for c in children if "llama-server" in c.name()]
        self.servers.extend(s for s in found if s not in self.servers)
        return found

    def stop(self, timeout_s: float = 90) -> int:
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=timeout_s)

    def kill(self) -> None:
        """Last resort in `finally`: the daemon and any llama-server it left."""
        self.llama_servers()
        if self.alive():
            self.proc.kill()
            self.proc.wait(timeout=30)
        for server in self.servers:
            if server.is_running():
                server.kill()


def http_get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return int(response.status), response.read().decode()
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read().decode()


def scrape(base_url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """/metrics parsed by prometheus-client's own parser: (name, sorted labels) -> value."""
    status, body = http_get(f"{base_url}/metrics")
    assert status == 200, body
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(body)
        for s in family.samples
    }


def job_runs(url: str, job: str | None = None) -> list[JobRunView]:
    db = Database(url)
    try:
        return sorted(JobStore(db).runs(job=job), key=lambda r: r.id)
    finally:
        db.close()


def finished(url: str, job: str) -> list[JobRunView]:
    return [r for r in job_runs(url, job) if r.outcome != "running"]
