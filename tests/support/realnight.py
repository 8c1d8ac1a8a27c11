"""Pieces of the real-night tests (shipped jobs run as the daemon runs them): a prose task
set, wrapper binaries, the config, a GitHub fake and a reports repository with a bare remote."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.fakeforge import FakeForge, serve
from support.trackerkit import TOKEN_ENV, tracker_config
from watchkeeper.config import Config, parse_config

PROMPTS = [
    "Write two sentences about the sea.",
    "List three colours and one fruit.",
    "Explain what a database index is, briefly.",
    "Describe a cat in two sentences.",
    "Give one tip for writing clear emails.",
    "Say something kind about Mondays.",
]


def taskset(tmp_path: Path) -> Path:
    path = tmp_path / "tasks.jsonl"
    lines = [
        json.dumps(
            {
                "id": f"prose-{i}",
                "category": "prose",
                "messages": [{"role": "user", "content": prompt}],
                "max_tokens": 32,
            }
        )
        for i, prompt in enumerate(PROMPTS)
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def wrapper(tmp_path: Path, name: str, real: Path, prefix: str = "", suffix: str = "") -> Path:
    script = tmp_path / name / "llama-server"
    script.parent.mkdir(parents=True)
    script.write_text(f'#!/bin/sh\nexec {prefix}"{real}" "$@"{suffix}\n', encoding="utf-8")
    script.chmod(0o755)
    return script


THROTTLE = """#!/bin/sh
# llama-server stopped for {off_ms} ms in every {period_ms} (a slower build, whatever the host runs).
"{real}" "$@" &
pid=$!
case " $* " in *" --help "*|*" --version "*) wait $pid; exit $?;; esac
"{python}" -c '{duty}' $pid $$ &
loop=$!
trap 'kill $loop 2>/dev/null; kill -CONT $pid 2>/dev/null; kill -TERM $pid 2>/dev/null' TERM INT
wait $pid
wait $pid
"""

DUTY = (
    "import os, signal, sys, time\n"
    "pid, shell = int(sys.argv[1]), int(sys.argv[2])\n"
    "def done(*_):\n"
    "    os.kill(pid, signal.SIGCONT)\n"
    "    sys.exit(0)\n"
    "signal.signal(signal.SIGTERM, done)\n"
    "try:\n"
    "    while os.getppid() == shell:\n"
    "        os.kill(pid, signal.SIGSTOP)\n"
    "        time.sleep({off_s})\n"
    "        os.kill(pid, signal.SIGCONT)\n"
    "        time.sleep({on_s})\n"
    "    os.kill(pid, signal.SIGCONT)\n"
    "    os.kill(pid, signal.SIGKILL)\n"  # the wrapper was killed: take its server with it
    "except ProcessLookupError:\n"
    "    pass\n"
)


def throttled(tmp_path: Path, name: str, real: Path, off_ms: int = 20, on_ms: int = 20) -> Path:
    """The slower build: the real server, stopped (SIGSTOP) for `off_ms` in every
    `off_ms + on_ms`, so it gets at most that share of the wall clock whatever else the host
    runs: 20 of 40 ms is about 0.5x on a quiet host and beside a neighbour alike.

    Why not a build that is slow on its own (fewer or pinned threads): its slowness is the
    scheduler's, and a neighbour moves it. Two decode threads pinned to one core against one
    thread read 0.66x one quiet run and 0.87x (CI up to 1.01, inconclusive) the next
    (2026-11-27), so the nightly's positive control failed for the control's sake."""
    duty = DUTY.format(off_s=off_ms / 1000, on_s=on_ms / 1000)
    script = tmp_path / name / "llama-server"
    script.parent.mkdir(parents=True)
    script.write_text(
        THROTTLE.format(
            real=real, python=sys.executable, duty=duty, off_ms=off_ms, period_ms=off_ms + on_ms
        ),
        encoding="utf-8",
    )
    script.chmod(0o755)
    return script


def config_data(
    binary: Path, db_url: str, tasks: Path, root: Path, forge: FakeForge, reports: Path
) -> dict[str, Any]:
    return {
        "database": {"url": db_url},
        "server": {"binary": str(binary)},
        "bench": {"reports_dir": str(root / "reports")},
        "nightly": {"profiles": ["s"], "taskset": str(tasks), "per_category": 6, "rounds": 5},
        # One decode thread: two threads on two cores collapse beside a neighbour (tests/
        # conftest.py). The slower build is `throttled`.
        "profiles": {"s": {"model": "smollm2-135m-instruct-q4_1", "threads": 1}},
        # The shipped jobs/ (nightly, digest, triage), run exactly as the daemon runs them.
        "daemon": {"host_id": "nightly-test", "metrics_port": -1},
        "digest": {"repo": str(reports), "author_name": "wk", "author_email": "wk@localhost"},
        "tracker": tracker_config(forge).model_dump(),
    }


def config_for(
    binary: Path, db_url: str, tasks: Path, root: Path, forge: FakeForge, reports: Path
) -> Config:
    return parse_config(config_data(binary, db_url, tasks, root, forge, reports), source="test")


@pytest.fixture
def gh(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeForge]:
    fake = FakeForge("github")
    monkeypatch.setenv(TOKEN_ENV, fake.token)
    with serve(fake) as served:
        yield served


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout.strip()


def reports_repo(tmp_path: Path) -> tuple[Path, Path]:
    """A bare remote and the clone the digest commits to (and pushes from)."""
    remote, reports = tmp_path / "reports.git", tmp_path / "reports-clone"
    git(tmp_path, "init", "--bare", "-b", "main", str(remote))
    git(tmp_path, "clone", str(remote), str(reports))
    git(reports, "config", "user.name", "someone")
    git(reports, "config", "user.email", "someone@example.org")
    git(reports, "checkout", "-B", "main")
    return remote, reports


def assert_quiet_aa_night(night: dict[str, Any]) -> None:
    """An A/A night files nothing. Its 95% CIs may exclude 1 now and then (about 2.5% of
    series-nights per direction when they are honest): such a flag is a candidate, and the
    immediate rerun must have been made and must not have confirmed it."""
    assert not night["findings"] and not night["confirmed"], night
    # The p90-TTFT series is watched every night (nightly/ratios.py `tail_records`), never
    # filed; goodput may have no ratio on a starved host (no round with a good request).
    assert any(t["metric"] == "ttft_p90" for t in night["tails"]), night
    flagged = [r for r in night["ratios"] if r["verdict"] in ("regression", "improvement")]
    if any(r["verdict"] == "regression" for r in flagged):
        assert night["rerun_campaign_id"] is not None, night
