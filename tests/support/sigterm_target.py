"""Run only by tests/test_pytest_sigterm.py, in a pytest of its own (not collected: the name
does not start with test_): starts a real llama-server, says its pid, and waits to be killed."""

from __future__ import annotations

import os
import time
from pathlib import Path

from watchkeeper.config import Config
from watchkeeper.server.install import ServerBinary
from watchkeeper.server.launch import prepare, serve
from watchkeeper.server.models import ModelFile


def test_wait_with_a_server_up(real_server: tuple[ServerBinary, ModelFile], tmp_path: Path) -> None:
    config = Config()
    with serve(config, prepare(config, "smollm2-baseline"), log_path=tmp_path / "s.log") as s:
        assert s.managed is not None
        pid = s.managed.info.pid
        Path(os.environ["WK_SIGTERM_PID_FILE"]).write_text(str(pid))
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            time.sleep(0.2)
