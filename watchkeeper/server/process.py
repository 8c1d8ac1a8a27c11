"""Own one llama-server process: start, wait for health, watch memory, stop.

Everything here assumes the operator will read the evidence later: stdout/stderr go to a log
file per run, a death carries its exit code and the log's last lines, and memory is the RSS
of the whole process tree (llama-server may fork helpers), sampled in the background so the
peak is not missed between requests.
"""

from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

import httpx
import psutil

from watchkeeper.errors import ServerError

LOCALHOST = "127.0.0.1"


def free_port(host: str = LOCALHOST) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def port_in_use(port: int, host: str = LOCALHOST) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return True
        return False


def tail(path: Path, lines: int = 25) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return "".join(text.splitlines(True)[-lines:])


def tree_rss_bytes(pid: int) -> int:
    """RSS of a process and all its descendants; 0 once it is gone."""
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0
    total = 0
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            total += proc.memory_info().rss
    return total


class RssSampler:
    """Background thread that tracks the peak RSS of a process tree."""

    def __init__(self, pid: int, interval_s: float = 0.5) -> None:
        self._pid = pid
        self._interval = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="rss-sampler", daemon=True)
        self.peak_bytes = 0
        self.last_bytes = 0

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self._interval)

    def sample(self) -> int:
        self.last_bytes = tree_rss_bytes(self._pid)
        self.peak_bytes = max(self.peak_bytes, self.last_bytes)
        return self.last_bytes

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


@dataclass(frozen=True, slots=True)
class ServerInfo:
    """How to reach a running server, and whether we own it."""

    base_url: str
    pid: int | None
    argv: tuple[str, ...]
    log_path: Path | None


class ManagedServer:
    """A llama-server we start and stop. Use as a context manager."""

    def __init__(
        self,
        argv: tuple[str, ...],
        *,
        port: int,
        log_path: Path,
        startup_timeout_s: float = 180.0,
        stop_timeout_s: float = 10.0,
    ) -> None:
        self._argv = argv
        self._port = port
        self._log_path = log_path
        self._startup_timeout = startup_timeout_s
        self._stop_timeout = stop_timeout_s
        self._proc: subprocess.Popen[bytes] | None = None
        self._sampler: RssSampler | None = None

    @property
    def info(self) -> ServerInfo:
        pid = self._proc.pid if self._proc else None
        return ServerInfo(f"http://{LOCALHOST}:{self._port}", pid, self._argv, self._log_path)

    @property
    def peak_rss_bytes(self) -> int:
        return self._sampler.peak_bytes if self._sampler else 0

    def rss_bytes(self) -> int:
        return self._sampler.sample() if self._sampler else 0

    def exit_code(self, wait_s: float = 0.0) -> int | None:
        """None while running. `wait_s` gives a dying process time to be reaped: a killed
        server closes its socket (failing requests) a moment before it can be waited for."""
        if self._proc is None:
            return None
        if wait_s > 0:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=wait_s)
        return self._proc.poll()

    def log_tail(self, lines: int = 25) -> str:
        return tail(self._log_path, lines)

    def start(self) -> ServerInfo:
        if port_in_use(self._port):
            raise ServerError(
                f"port {self._port} on {LOCALHOST} is already in use",
                hint="set server.port = 0 to pick a free port, or stop whatever holds it",
            )
        self._log_path.parent.mkdir(parents=True, exist_ok=True)
        with self._log_path.open("ab") as log:
            log.write(f"$ {' '.join(self._argv)}\n".encode())
            log.flush()
            try:
                self._proc = subprocess.Popen(
                    self._argv,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                )
            except OSError as exc:
                raise ServerError(f"cannot start {self._argv[0]}: {exc}") from exc
        self._sampler = RssSampler(self._proc.pid)
        self._sampler.start()
        try:
            self._wait_healthy()
        except BaseException:
            self.stop()
            raise
        return self.info

    def _wait_healthy(self) -> None:
        assert self._proc is not None
        deadline = time.monotonic() + self._startup_timeout
        url = f"http://{LOCALHOST}:{self._port}/health"
        with httpx.Client(timeout=httpx.Timeout(2.0)) as client:
            while time.monotonic() < deadline:
                code = self._proc.poll()
                if code is not None:
                    raise ServerError(
                        f"llama-server exited with code {code} during start-up "
                        f"(log: {self._log_path})\n{self.log_tail()}",
                        exit_code=code,
                        log_tail=self.log_tail(),
                    )
                with contextlib.suppress(httpx.HTTPError):
                    if client.get(url).status_code == 200:
                        return
                time.sleep(0.1)
        raise ServerError(
            f"llama-server did not become healthy within {self._startup_timeout:.0f}s "
            f"(log: {self._log_path})\n{self.log_tail()}",
            hint="raise server.startup_timeout_s for large models",
            log_tail=self.log_tail(),
        )

    def stop(self, *, kill: bool = False) -> int | None:
        """SIGTERM, then SIGKILL after the grace period (at once with ``kill``: a server
        that stopped answering will not shut down gracefully). Returns the exit code."""
        if self._sampler is not None:
            self._sampler.sample()
            self._sampler.stop()
        proc = self._proc
        if proc is None:
            return None
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
            try:
                proc.wait(timeout=self._stop_timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                proc.wait(timeout=self._stop_timeout)
        return proc.returncode

    def __enter__(self) -> ManagedServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def check_external(base_url: str, timeout_s: float = 5.0) -> None:
    """An external server must answer /health before we point load at it."""
    try:
        response = httpx.get(f"{base_url.rstrip('/')}/health", timeout=timeout_s)
    except httpx.HTTPError as exc:
        raise ServerError(f"external server {base_url} is not reachable: {exc}") from exc
    if response.status_code != 200:
        raise ServerError(
            f"external server {base_url} is not healthy: /health answered {response.status_code}"
        )
