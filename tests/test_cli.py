"""The CLI is thin wiring: help explains, profiles list, db migrates, errors are one line."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from sqlalchemy import inspect

from watchkeeper.cli.app import build_parser, main
from watchkeeper.server.install import ServerBinary
from watchkeeper.server.models import ModelFile
from watchkeeper.store.db import head_revision, make_engine


def test_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(["--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    for command in ("setup", "run", "bench", "sweep", "profiles", "db"):
        assert command in text


def test_profiles_lists_builtins_and_marks_overrides(
    tmp_path: object, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "wk.toml"  # type: ignore[operator]
    path.write_text('[profiles.smollm2-baseline]\nmodel = "x"\n[profiles.mine]\nmodel = "y"\n')
    assert main(["profiles", "--config", str(path), "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["smollm2-baseline"]["source"] == "config (overrides built-in)"
    assert rows["mine"]["source"] == "config"
    assert rows["qwen-draft8"]["draft_n_max"] == 8


def test_db_upgrade_and_downgrade_from_the_cli(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("WATCHKEEPER_DATABASE_URL", sqlite_url)
    assert main(["db", "upgrade"]) == 0
    engine = make_engine(sqlite_url)
    assert "request_sample" in inspect(engine).get_table_names()
    assert main(["db", "downgrade", "base"]) == 0
    assert "request_sample" not in inspect(engine).get_table_names()
    engine.dispose()
    assert f"downgraded from {head_revision(sqlite_url)} to base" in capsys.readouterr().out


def test_database_down_is_one_line_without_the_password(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("WATCHKEEPER_DATABASE_URL", "postgresql://wk:hunter2@127.0.0.1:1/wk")
    assert main(["db", "upgrade"]) == 2
    err = capsys.readouterr().err
    assert "is unreachable" in err and "hunter2" not in err and "Traceback" not in err


def test_bench_needs_two_distinct_profiles(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--profiles", "smollm2-baseline"]) == 2
    assert "at least two profiles" in capsys.readouterr().err
    assert main(["bench", "--profiles", "smollm2-baseline,smollm2-baseline"]) == 2
    assert "must be distinct" in capsys.readouterr().err


def test_sigterm_stops_the_llama_server_the_command_started(
    server_binary: ServerBinary, smollm2: ModelFile, tmp_path: Path
) -> None:
    with (tmp_path / "stderr.txt").open("wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "watchkeeper.cli", "run", "--profile", "smollm2-baseline"],
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    try:
        parent = psutil.Process(proc.pid)
        server = None
        deadline = time.monotonic() + 120
        while server is None and time.monotonic() < deadline and proc.poll() is None:
            found = [c for c in parent.children(recursive=True) if "llama-server" in c.name()]
            server = found[0] if found else None
            time.sleep(0.2)
        assert server is not None, "the run never started llama-server"
        time.sleep(1.0)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 130
        server.wait(timeout=30)
        assert not server.is_running()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
