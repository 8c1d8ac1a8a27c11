"""The systemd units pass `systemd-analyze verify`, and say what the design asks of them.

The units name production paths (/opt/watchkeeper, /opt/llama.cpp) that do not exist on a test
machine, and verify refuses a unit whose ExecStart is not executable. So each unit is verified
as a copy in which only the ExecStart binary is swapped for an executable in tmp; every other
line is verified as shipped. A control with a misspelt key proves the check can fail.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from watchkeeper.config.paths import project_root

SYSTEMD = project_root() / "systemd"
BINARIES = ("/opt/watchkeeper/venv/bin/watchkeeper", "/opt/llama.cpp/bin/llama-server")


def analyze() -> str:
    path = shutil.which("systemd-analyze") or (
        "/usr/bin/systemd-analyze" if Path("/usr/bin/systemd-analyze").exists() else None
    )
    if path is None:
        pytest.fail(
            "systemd-analyze is required to check the unit files: install Debian's `systemd` "
            "package (apt-get install systemd)"
        )
    return path


def staged(tmp_path: Path, name: str, *, tweak: str = "") -> Path:
    exe = tmp_path / "bin" / "exe"
    exe.parent.mkdir(exist_ok=True)
    exe.write_text("#!/bin/sh\nexit 0\n")
    exe.chmod(0o755)
    text = (SYSTEMD / name).read_text()
    for binary in BINARIES:
        text = text.replace(binary, str(exe))
    target = tmp_path / name
    target.write_text(text + tweak)
    return target


def verify(*units: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [analyze(), "verify", *map(str, units)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=units[0].parent,
    )


def test_the_units_pass_systemd_analyze_verify_without_a_warning(tmp_path: Path) -> None:
    service = staged(tmp_path, "watchkeeper.service")
    staged(tmp_path, "llama-server@.service")
    done = verify(service, tmp_path / "llama-server@qwen.service")
    assert done.returncode == 0 and not (done.stdout + done.stderr).strip(), done.stderr


def test_a_misspelt_key_is_caught_by_the_same_check(tmp_path: Path) -> None:
    service = staged(tmp_path, "watchkeeper.service", tweak="NoNewPrivilege=yes\n")
    done = verify(service)
    assert "Unknown key" in done.stderr and "NoNewPrivilege" in done.stderr


def unit(name: str) -> dict[str, list[str]]:
    keys: dict[str, list[str]] = {}
    for raw in (SYSTEMD / name).read_text().splitlines():
        line = raw.strip()
        if line and not line.startswith(("#", "[")) and "=" in line:
            key, value = line.split("=", 1)
            keys.setdefault(key, []).append(value)
    return keys


def test_the_daemon_unit_is_hardened_and_keeps_secrets_off_the_command_line() -> None:
    keys = unit("watchkeeper.service")
    assert keys["Restart"] == ["on-failure"]
    assert keys["User"] == ["watchkeeper"]
    assert keys["NoNewPrivileges"] == ["yes"] and keys["ProtectSystem"] == ["strict"]
    assert "/var/lib/watchkeeper" in keys["ReadWritePaths"][0].split()
    assert keys["EnvironmentFile"] and keys["LoadCredential"]
    assert keys["ExecReload"] == ["/bin/kill -HUP $MAINPID"]
    assert keys["KillSignal"] == ["SIGTERM"]
    exec_start = " ".join(keys["ExecStart"])
    assert " daemon " in f"{exec_start} "
    assert not re.search(r"token|password|secret|://", exec_start, re.IGNORECASE)
    for value in keys["Environment"]:
        assert not re.search(r"TOKEN=|PASSWORD=|://", value), value
    assert "MALLOC_ARENA_MAX=2" in keys["Environment"]  # fewer arenas: slower RSS growth


def test_the_llama_server_template_takes_its_arguments_from_a_per_instance_file() -> None:
    keys = unit("llama-server@.service")
    assert keys["EnvironmentFile"] == ["/etc/llama-server/%i.env"]
    assert keys["ExecStart"][0].endswith("$LLAMA_SERVER_ARGS")
    assert keys["NoNewPrivileges"] == ["yes"] and keys["ProtectSystem"] == ["strict"]
