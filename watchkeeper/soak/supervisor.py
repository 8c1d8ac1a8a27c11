"""Keep one profile's llama-server alive for a whole soak, and say what happened to it.

A crash (the process exited) is recorded with its exit code and log tail, then the server is
restarted after a backoff that doubles up to a cap. Too many crashes within a window stop the
profile: restarting a server that dies every minute measures nothing and hides the problem.
A server whose process lives but whose /health stops answering is "unresponsive": it is
killed and restarted the same way. An external server cannot be restarted; an outage is
recorded and the soak waits for it to come back.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import deque
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from watchkeeper.config import Config, SoakConfig
from watchkeeper.errors import ServerError
from watchkeeper.server.endpoints import ServerClient, health_client, healthy
from watchkeeper.server.launch import PreparedProfile, start
from watchkeeper.server.process import ManagedServer
from watchkeeper.soak.records import IncidentRecord, Item

Emit = Callable[[Item], None]


def backoff_s(failures: int, *, base_s: float, cap_s: float) -> float:
    """1, 2, 4, ... times `base_s`, never above `cap_s` (failures counts from 1)."""
    return float(min(cap_s, base_s * 2 ** max(0, failures - 1)))


class ServerSupervisor:
    """One profile's server: `current()` gives the URL to use, `recover()` after a failure."""

    def __init__(
        self,
        config: Config,
        prepared: PreparedProfile,
        *,
        log_path: Path,
        emit: Emit,
        stop: threading.Event,
    ) -> None:
        self._config = config
        self._soak: SoakConfig = config.soak
        self.prepared = prepared
        self.profile = prepared.name
        self._log_path = log_path
        self._emit = emit
        self._stop = stop
        self._lock = threading.RLock()
        self._server: ManagedServer | None = None
        self._started_at = datetime.now(UTC)
        self._crashes: deque[float] = deque()
        self._unhealthy_checks = 0
        self._external_down_since: datetime | None = None
        self.generation = 0
        self.base_url = prepared.external_url.rstrip("/")
        self.argv: tuple[str, ...] = ()
        self.restarts = 0
        self.stopped_reason: str | None = None
        self.peak_rss_bytes = 0
        self._health: ServerClient | None = None
        self._health_url = ""

    @property
    def managed(self) -> bool:
        return not self.prepared.external_url

    @property
    def stopped(self) -> bool:
        return self.stopped_reason is not None

    @property
    def answering(self) -> bool:
        """False while /health checks are failing (a hang being confirmed)."""
        return self._unhealthy_checks == 0

    @property
    def pid(self) -> int | None:
        return self._server.info.pid if self._server is not None else None

    def current(self) -> tuple[int, str]:
        with self._lock:
            return self.generation, self.base_url

    def _healthy(self) -> bool:
        """GET /health through one client per server URL: it is checked every few seconds for
        the whole soak, and a client is not free to build (see `endpoints.health_client`)."""
        with self._lock:
            if self._health is None or self._health_url != self.base_url:
                if self._health is not None:
                    self._health.close()
                self._health = health_client(self.base_url)
                self._health_url = self.base_url
            return healthy(self._health)

    def start(self) -> None:
        """First start; a failure here is the operator's problem (bad model, bad flags)."""
        if not self.managed:
            if not self._healthy():
                raise ServerError(f"external server {self.base_url} is not reachable")
            return
        self._launch()

    def _launch(self) -> None:
        """Start (or restart) through `launch.start`, the bench's and nightly's own start:
        port retries and the offload check included."""
        running = start(self._config, self.prepared, log_path=self._log_path)
        assert running.managed is not None
        self._server, self.argv = running.managed, running.argv
        self.base_url = running.base_url
        self._started_at = datetime.now(UTC)
        self.generation += 1
        self._unhealthy_checks = 0

    def renew(self) -> bool:
        """A planned restart between blocks (soak.restart_every): a fresh process, not a
        crash. A start that fails goes the crash path's way (backoff, crash count). True
        when the profile can take load again."""
        with self._lock:
            if not self.managed or self.stopped or self._server is None:
                return not self.stopped
            self.peak_rss_bytes = max(self.peak_rss_bytes, self._server.peak_rss_bytes)
            with contextlib.suppress(ServerError):
                self._server.stop()
            try:
                self._launch()
            except ServerError:
                return self._restart(datetime.now(UTC))
            return True

    def recover(self, seen_generation: int) -> bool:
        """After a failed request: restart a dead server (once, whoever asks first).
        True when the profile can take load again; False when it was stopped."""
        with self._lock:
            if self.stopped:
                return False
            if seen_generation != self.generation:
                return True  # somebody else already restarted it
            if not self.managed:
                return self._wait_external()
            assert self._server is not None
            code = self._server.exit_code(wait_s=1.0)
            if code is None:
                return True  # alive: the request failed for its own reasons
            return self._crashed(code, "exited")

    def watch(self) -> None:
        """Periodic check from the monitor thread: a crash between requests, or a hang."""
        with self._lock:
            if self.stopped:
                return
            if not self.managed:
                if not self._healthy():
                    self._wait_external(block=False)
                elif self._external_down_since is not None:
                    self._external_back()
                return
            assert self._server is not None
            self.peak_rss_bytes = max(self.peak_rss_bytes, self._server.peak_rss_bytes)
            code = self._server.exit_code()
            if code is not None:
                self._crashed(code, "exited")
                return
            if self._healthy():
                self._unhealthy_checks = 0
                return
            self._unhealthy_checks += 1
            if self._unhealthy_checks >= self._soak.unresponsive_after:
                self._crashed(None, "unresponsive")

    def _crashed(self, code: int | None, how: str) -> bool:
        assert self._server is not None
        now = datetime.now(UTC)
        pid = self.pid
        tail = self._server.log_tail(40)
        if how == "unresponsive":
            # A hung (or SIGSTOPped) process never acts on SIGTERM: kill it outright.
            code = self._server.stop(kill=True)
        self.peak_rss_bytes = max(self.peak_rss_bytes, self._server.peak_rss_bytes)
        evidence = {
            "exit_code": code,
            "pid": pid,
            "uptime_s": round((now - self._started_at).total_seconds(), 1),
            "log_path": str(self._log_path),
            "log_tail": tail,
            "argv": list(self.argv),
        }
        kind = "server_crash" if how == "exited" else "server_unresponsive"
        detail = (
            f"llama-server ({self.profile}, pid {pid}) exited with code {code}"
            if how == "exited"
            else f"llama-server ({self.profile}, pid {pid}) stopped answering /health; killed"
        )
        self._emit(
            IncidentRecord(
                f"{kind}:{self.profile}:{pid}:{self._started_at.isoformat()}",
                kind,
                now,
                self.profile,
                detail=detail,
                evidence=evidence,
            )
        )
        return self._restart(now)

    def _restart(self, failed_at: datetime) -> bool:
        window = self._soak.crash_window_s
        while True:
            mono = time.monotonic()
            self._crashes.append(mono)
            while self._crashes and mono - self._crashes[0] > window:
                self._crashes.popleft()
            if len(self._crashes) >= self._soak.max_crashes:
                self._give_up(len(self._crashes))
                return False
            delay = backoff_s(
                len(self._crashes),
                base_s=self._soak.restart_backoff_s,
                cap_s=self._soak.restart_backoff_cap_s,
            )
            if self._stop.wait(delay):
                return False
            try:
                self._launch()
            except ServerError as exc:
                self._emit(
                    IncidentRecord(
                        f"restart_failed:{self.profile}:{time.time_ns()}",
                        "restart_failed",
                        datetime.now(UTC),
                        self.profile,
                        detail=exc.message.splitlines()[0],
                        evidence={"exit_code": exc.exit_code, "log_tail": exc.log_tail},
                    )
                )
                continue
            self.restarts += 1
            now = datetime.now(UTC)
            self._emit(
                IncidentRecord(
                    f"server_restart:{self.profile}:{self.pid}:{self._started_at.isoformat()}",
                    "server_restart",
                    now,
                    self.profile,
                    detail=f"{self.profile} restarted after {delay:.1f}s backoff (pid {self.pid})",
                    evidence={
                        "backoff_s": delay,
                        "downtime_s": round((now - failed_at).total_seconds(), 2),
                        "crashes_in_window": len(self._crashes),
                        "pid": self.pid,
                        "base_url": self.base_url,
                    },
                )
            )
            return True

    def _give_up(self, crashes: int) -> None:
        self.stopped_reason = (
            f"{crashes} crashes within {self._soak.crash_window_s:.0f}s: profile stopped"
        )
        self._emit(
            IncidentRecord(
                f"profile_stopped:{self.profile}",
                "profile_stopped",
                datetime.now(UTC),
                self.profile,
                detail=f"{self.profile}: {self.stopped_reason}",
                evidence={"crashes": crashes, "window_s": self._soak.crash_window_s},
            )
        )

    def _wait_external(self, *, block: bool = True) -> bool:
        if self._healthy():
            if self._external_down_since is not None:
                self._external_back()
            return True
        if self._external_down_since is None:
            self._external_down_since = datetime.now(UTC)
        failures = 0
        while block and not self._stop.is_set():
            failures += 1
            delay = backoff_s(
                failures,
                base_s=self._soak.restart_backoff_s or 1.0,
                cap_s=self._soak.restart_backoff_cap_s or 1.0,
            )
            if self._stop.wait(delay):
                return False
            if self._healthy():
                self._external_back()
                return True
        return False

    def _external_back(self) -> None:
        assert self._external_down_since is not None
        since, self._external_down_since = self._external_down_since, None
        now = datetime.now(UTC)
        self.generation += 1
        self._emit(
            IncidentRecord(
                f"server_unreachable:{self.profile}:{since.isoformat()}",
                "server_unreachable",
                since,
                self.profile,
                detail=f"external server {self.base_url} unreachable for "
                f"{(now - since).total_seconds():.1f}s (cannot be restarted by watchkeeper)",
                evidence={"down_s": round((now - since).total_seconds(), 2)},
            )
        )

    def close(self) -> None:
        with self._lock:
            if self._health is not None:
                self._health.close()
                self._health = None
            if self._server is not None:
                self.peak_rss_bytes = max(self.peak_rss_bytes, self._server.peak_rss_bytes)
                with contextlib.suppress(ServerError):
                    self._server.stop()
