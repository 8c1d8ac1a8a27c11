"""Prometheus metrics of the daemon and its `/metrics` + `/healthz` endpoint on loopback.

The registry is the daemon's own (not prometheus-client's global one), so tests and the
`job run` command can build as many as they like. The HTTP server is a small threaded WSGI
server bound to 127.0.0.1: put a local Prometheus agent or a reverse proxy in front of it.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, make_wsgi_app

from watchkeeper import __version__
from watchkeeper.errors import ConfigError

DURATION_BUCKETS = (1, 5, 15, 60, 300, 900, 1800, 3600, 7200, 14400, 28800, 43200)
Health = Callable[[], tuple[bool, dict[str, Any]]]
StartResponse = Callable[..., Any]


class DaemonMetrics:
    def __init__(self, host_id: str) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        info = Gauge(
            "watchkeeper_daemon_info", "Constant 1, labelled", ["host_id", "version"], registry=r
        )
        info.labels(host_id=host_id, version=__version__).set(1)
        self.started = Gauge(
            "watchkeeper_daemon_start_time_seconds", "When the daemon started", registry=r
        )
        self.last_run = Gauge(
            "watchkeeper_job_last_run_timestamp_seconds",
            "When the job last finished (unix time)",
            ["job"],
            registry=r,
        )
        self.last_success = Gauge(
            "watchkeeper_job_last_success",
            "1 when the job's last run ended ok, 0 when it failed or was interrupted",
            ["job"],
            registry=r,
        )
        self.next_run = Gauge(
            "watchkeeper_job_next_run_timestamp_seconds",
            "When the job fires next (unix time)",
            ["job"],
            registry=r,
        )
        self.running = Gauge(
            "watchkeeper_job_running", "1 while the job runs on this host", ["job"], registry=r
        )
        self.runs = Counter(
            "watchkeeper_job_runs", "Job runs by outcome", ["job", "outcome"], registry=r
        )
        self.skipped = Counter(
            "watchkeeper_job_skipped",
            "Starts this host did not run: fleet lock held elsewhere, already claimed, or "
            "the previous run still going",
            ["job", "reason"],
            registry=r,
        )
        self.duration = Histogram(
            "watchkeeper_job_duration_seconds",
            "Job run time",
            ["job"],
            buckets=DURATION_BUCKETS,
            registry=r,
        )
        self.samples = Counter(
            "watchkeeper_samples_written",
            "Request samples the jobs stored",
            ["job"],
            registry=r,
        )
        self.spool_depth = Gauge(
            "watchkeeper_spool_depth",
            "Soak samples waiting in the spool for the database",
            registry=r,
        )
        self.open_findings = Gauge(
            "watchkeeper_open_findings",
            "Open (active or acknowledged) findings by label",
            ["label"],
            registry=r,
        )
        self._labels_seen: set[str] = set()

    def record(self, job: str, outcome: str, duration_s: float, finished_at: float) -> None:
        self.runs.labels(job=job, outcome=outcome).inc()
        self.duration.labels(job=job).observe(duration_s)
        self.last_run.labels(job=job).set(finished_at)
        self.last_success.labels(job=job).set(1 if outcome == "ok" else 0)

    def set_open_findings(self, counts: dict[str, int]) -> None:
        for label in self._labels_seen - set(counts):
            self.open_findings.labels(label=label).set(0)
        for label, n in counts.items():
            self.open_findings.labels(label=label).set(n)
        self._labels_seen |= set(counts)


class _ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _ThreadingServer6(_ThreadingServer):
    address_family = socket.AF_INET6


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Scrapes every 15 s would flood the journal; the daemon logs what matters."""


@dataclass
class _App:
    metrics_app: Callable[..., Iterable[bytes]]
    health: Health

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path == "/healthz":
            ok, detail = self.health()
            body = json.dumps({"ok": ok, **detail}).encode()
            status = "200 OK" if ok else "503 Service Unavailable"
            start_response(status, [("Content-Type", "application/json")])
            return [body]
        if path in ("/metrics", "/"):
            return self.metrics_app(environ, start_response)
        start_response("404 Not Found", [("Content-Type", "text/plain")])
        return [b"not found: /metrics and /healthz live here\n"]


class MetricsServer:
    """Serves `/metrics` and `/healthz` from a background thread; `port` is the bound one."""

    def __init__(self, metrics: DaemonMetrics, health: Health, *, host: str, port: int) -> None:
        app = _App(make_wsgi_app(metrics.registry), health)
        try:
            self._server = make_server(
                host,
                port,
                app,
                server_class=_ThreadingServer6 if ":" in host else _ThreadingServer,
                handler_class=_QuietHandler,
            )
        except OSError as exc:
            raise ConfigError(
                f"metrics endpoint {host}:{port}: cannot listen ({exc.strerror or exc})",
                hint="another daemon (or program) holds the port: stop it, or set [daemon] "
                "metrics_port (0: any free port, -1: no endpoint)",
            ) from None
        self.host = host
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="metrics-http", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop serving and free the port (bound but never started: only the port, since
        `shutdown` waits for a serving loop that never ran)."""
        if self._thread.is_alive():
            self._server.shutdown()
        self._server.server_close()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
