"""Own one llama-server process: start, wait for health, watch memory, stop.

Everything here assumes the operator will read the evidence later: stdout/stderr go to a log
file per run, a death carries its exit code and the log's last lines, and memory is the RSS
of the whole process tree (llama-server may fork helpers), sampled in the background so the
peak is not missed between requests.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

import psutil

from watchkeeper.errors import ServerError
from watchkeeper.server.endpoints import health_client, health_status, healthy

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


_OFFLOADED = re.compile(r"(?:^|\s)(?:\w+: )?offloaded (\d+)/(\d+) layers to GPU")
_NO_GPU = re.compile(r"no usable GPU found|ggml_cuda_init: failed to initialize CUDA")
"""Lines that print at every verbosity (fprintf in arg parsing; an ERROR of the CUDA backend)."""


@dataclass(frozen=True, slots=True)
class Offload:
    """One model's 'offloaded N/M layers to GPU' line."""

    layers: int
    total: int

    @property
    def full(self) -> bool:
        return self.layers >= self.total


@dataclass(frozen=True, slots=True)
class OffloadReport:
    """What llama-server said about GPU offload at start-up.

    llama.cpp (src/llama-model.cpp, load_tensors) prints
    `load_tensors: offloaded 33/33 layers to GPU` per model it loads when the build supports
    GPU offload: the target first, then the draft. A CPU build prints nothing (None here) or,
    when -ngl was given, a 'no usable GPU found' warning."""

    target: Offload | None
    draft: Offload | None
    no_gpu_warning: bool = False


def parse_offload(log_text: str, *, has_draft: bool = False) -> OffloadReport:
    """The offload lines of the last start in a server log (the log is appended to on each
    restart; every start begins with the '$ argv' line the ManagedServer writes). When the
    draft is loaded, the last two lines are target then draft: anything earlier (a dry-run
    fit of the model) is not what was kept."""
    lines = log_text.splitlines()
    starts = [i for i, ln in enumerate(lines) if ln.startswith("$ ")]
    run = lines[starts[-1] :] if starts else lines
    found = [
        Offload(int(m.group(1)), int(m.group(2)))
        for m in (_OFFLOADED.search(ln) for ln in run)
        if m is not None
    ]
    no_gpu = any(_NO_GPU.search(ln) for ln in run)
    if has_draft and len(found) >= 2:
        return OffloadReport(found[-2], found[-1], no_gpu)
    return OffloadReport(found[-1] if found else None, None, no_gpu)


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

    def offload(self, *, has_draft: bool = False) -> OffloadReport:
        """GPU offload of this start, from its log."""
        try:
            text = self._log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            text = ""
        return parse_offload(text, has_draft=has_draft)

    def start(self) -> ServerInfo:
        if port_in_use(self._port):
            raise ServerError(
                f"port {self._port} on {LOCALHOST} is already in use",
                hint="set server.port = 0 to pick a free port, or stop whatever holds it",
                port_taken=True,
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
                    env=_library_env(self._argv[0]),
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
        url = f"http://{LOCALHOST}:{self._port}"
        with health_client(url, timeout_s=2.0) as probe:
            while time.monotonic() < deadline:
                code = self._proc.poll()
                if code is not None:
                    raise ServerError(
                        f"llama-server exited with code {code} during start-up "
                        f"(log: {self._log_path})\n{self.log_tail()}",
                        exit_code=code,
                        log_tail=self.log_tail(),
                    )
                if healthy(probe, timeout_s=2.0):
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
        that stopped answering will not shut down gracefully). Returns the exit code.

        The signals go to the whole process group (the server starts in a session of its
        own): `server.binary` may be a wrapper script (numactl, taskset, an env setup) that
        runs llama-server as its child and does not forward SIGTERM, or ignores it. Signalling
        only the wrapper's pid left llama-server running with the port held; the group
        reaches both, and whatever of the group outlives the wrapper is stopped too."""
        if self._sampler is not None:
            self._sampler.sample()
            self._sampler.stop()
        proc = self._proc
        if proc is None:
            return None
        if proc.poll() is None:
            _signal_group(proc.pid, signal.SIGKILL if kill else signal.SIGTERM)
            try:
                proc.wait(timeout=self._stop_timeout)
            except subprocess.TimeoutExpired:
                _signal_group(proc.pid, signal.SIGKILL)
                proc.wait(timeout=self._stop_timeout)
        _stop_group(proc.pid, self._stop_timeout)
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


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _group_members(pgid: int) -> list[psutil.Process]:
    """The live (not zombie) processes of process group `pgid`."""
    found = []
    for proc in psutil.process_iter():
        try:
            if os.getpgid(proc.pid) == pgid and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except (ProcessLookupError, psutil.Error):
            continue
    return found


def _stop_group(pgid: int, grace_s: float) -> None:
    """The group's leader is gone: SIGTERM what is left of its group (a wrapper's child),
    SIGKILL after `grace_s`, and wait until none is left (a killed process holds its port
    until it is gone)."""
    members = _group_members(pgid)
    if not members:
        return
    _signal_group(pgid, signal.SIGTERM)
    _, alive = psutil.wait_procs(members, timeout=grace_s)
    if alive:
        _signal_group(pgid, signal.SIGKILL)
        psutil.wait_procs(alive, timeout=grace_s)


def check_external(base_url: str, timeout_s: float = 5.0) -> None:
    """An external server must answer /health before we point load at it."""
    status = health_status(base_url, timeout_s)
    if status is None:
        raise ServerError(f"external server {base_url} is not reachable")
    if status != 200:
        raise ServerError(f"external server {base_url} is not healthy: /health answered {status}")


def _library_env(binary: str) -> dict[str, str]:
    """The binary's own folder first on the library path.

    A cmake build records its build folder as RUNPATH; a copy of the binary and its shared
    libraries (the nightly's pinned reference snapshot) must load the libraries beside it, not
    the build folder's, which the next rebuild replaces. LD_LIBRARY_PATH wins over RUNPATH.

    The daemon's own allocator setting (MALLOC_ARENA_MAX, set in its unit to slow its RSS
    growth) is not the server's: a measured llama-server runs with glibc's defaults, as its
    own unit starts it in production."""
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    folder = str(Path(binary).resolve().parent)
    env["LD_LIBRARY_PATH"] = ":".join(p for p in (folder, env.get("LD_LIBRARY_PATH", "")) if p)
    return env
