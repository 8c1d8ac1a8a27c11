"""A test run ended by SIGTERM (a CI timeout) leaves no llama-server behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

from watchkeeper.server.install import ServerBinary
from watchkeeper.server.models import ModelFile


def _wait_for(predicate: object, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(0.2)
    return False


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_a_sigterm_to_pytest_stops_the_servers_its_tests_started(
    real_server: tuple[ServerBinary, ModelFile], tmp_path: Path
) -> None:
    pid_file = tmp_path / "server.pid"
    env = {**os.environ, "WK_SIGTERM_PID_FILE": str(pid_file)}
    log = tmp_path / "pytest.log"
    server_pid = None
    with log.open("wb") as out:
        run = subprocess.Popen(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
             "tests/support/sigterm_target.py"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
        try:
            assert _wait_for(lambda: pid_file.exists() and pid_file.read_text(), 120), (
                "the target test never started its server:\n" + log.read_text()[-2000:]
            )
            server_pid = int(pid_file.read_text())
            assert psutil.pid_exists(server_pid)
            run.send_signal(signal.SIGTERM)
            run.wait(timeout=60)
            assert _wait_for(lambda: _gone(server_pid), 30), (
                "llama-server outlived its pytest:\n" + log.read_text()[-2000:]
            )
        finally:
            if run.poll() is None:
                run.kill()
                run.wait(timeout=30)
            if server_pid is not None and not _gone(server_pid):
                os.kill(server_pid, signal.SIGKILL)
