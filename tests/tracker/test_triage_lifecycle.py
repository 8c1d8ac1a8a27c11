"""Triage over real nights and real processes: two agents at once file one issue; a regression
recurs, recovers after N good nights (comment + close) and reopens its issue when it returns."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from support.fakeforge import FakeForge
from support.nights import Nights
from support.trackerkit import TOKEN_ENV, Sleeps, tracker_config
from support.triagekit import add_finding

from watchkeeper.commands.triage import triage_command
from watchkeeper.config import Config, DatabaseConfig
from watchkeeper.nightly.detector import DetectorParams
from watchkeeper.nightly.findings import TrackingParams, judge_pending
from watchkeeper.store.db import Database
from watchkeeper.store.history import History

PARAMS = TrackingParams(DetectorParams(resamples=200))


def _toml(config_path: Path, forge: FakeForge, db_url: str) -> None:
    config_path.write_text(
        f'[database]\nurl = "{db_url}"\n\n'
        f'[tracker]\nkind = "{forge.dialect}"\napi_url = "{forge.api_url}"\n'
        "allow_http = true\n"
        f'repository = "{forge.repository}"\ntoken_env = "{TOKEN_ENV}"\n'
        "backoff_s = 0.05\nrequest_timeout_s = 10\n",
        encoding="utf-8",
    )


def test_two_concurrent_triage_processes_open_each_issue_once(
    forge: FakeForge, db_url: str, tmp_path: Path
) -> None:
    db = Database(db_url)
    history = History(db)
    ids = [add_finding(history, n) for n in range(3)]
    db.close()
    forge.delay_s = 1.0  # each create takes a while, so the two runs really overlap
    config_path = tmp_path / "watchkeeper.toml"
    _toml(config_path, forge, db_url)
    env = {**os.environ, TOKEN_ENV: forge.token}
    argv = [sys.executable, "-m", "watchkeeper.cli", "triage", "--config", str(config_path)]
    procs = [
        subprocess.Popen([*argv, "--json"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for _ in range(2)
    ]
    outputs = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err.decode()
        assert forge.token not in out.decode() + err.decode()
        outputs.append(json.loads(out))
    filed = sorted(n for o in outputs for n in o["filed"])
    assert filed == sorted(i["number"] for i in forge.all_issues())
    assert len(forge.all_issues()) == len(ids) == 3
    assert forge.requests("POST", "/llm/issues") == 3  # no create was even attempted twice
    assert sum(len(o["skipped"]) for o in outputs) >= 1  # they did collide on a claim


def _slow_nights(nights: Nights, history: History, n: int) -> None:
    for _ in range(n):
        nights.add("b2", slow_category="code")
    judge_pending(history, PARAMS)


def _good_nights(nights: Nights, history: History, n: int) -> None:
    for _ in range(n):
        nights.add("b1")
    judge_pending(history, PARAMS)


def _run(config: Config, sleeps: Sleeps) -> Any:
    return triage_command(config, sleep=sleeps)


def test_a_regression_recurs_recovers_closes_and_reopens_when_it_returns(
    forge: FakeForge, sqlite_url: str, sleeps: Sleeps
) -> None:
    config = Config(
        database=DatabaseConfig(url=sqlite_url),
        tracker=tracker_config(forge, recovery_nights=3, page_size=50),
    )
    db = Database(sqlite_url)
    history, nights = History(db), Nights(db)
    try:
        _good_nights(nights, history, 10)
        _slow_nights(nights, history, 2)  # flagged twice: confirmed
        (number,) = _run(config, sleeps).filed
        assert "code" in forge.issues[number]["title"]

        _slow_nights(nights, history, 1)
        assert _run(config, sleeps).commented == [number]

        _good_nights(nights, history, 2)
        assert _run(config, sleeps).closed == []  # 2 of 3 good nights
        _good_nights(nights, history, 1)
        outcome = _run(config, sleeps)
        assert outcome.closed == [number]
        assert forge.issues[number]["state"] == "closed"
        assert "Recovered" in forge.comments_on(number)[-1]["body"]
        fixed = [f for f in history.findings(kinds=("regression",)) if f.status == "fixed"]
        assert len(fixed) == 1 and "recovered" in (fixed[0].status_note or "")

        _good_nights(nights, history, 7)  # a clean baseline window again
        assert _run(config, sleeps).closed == []
        _slow_nights(nights, history, 2)  # the same series regresses again, confirmed anew
        again = _run(config, sleeps)
        assert again.reopened == [number] and again.filed == []
        assert forge.issues[number]["state"] == "open"
        assert "Regressed again" in forge.comments_on(number)[-1]["body"]
        assert len(forge.all_issues()) == 1
    finally:
        db.close()


def test_a_local_reopen_after_a_label_ack_removes_the_stale_label(
    forge: FakeForge, sqlite_url: str, sleeps: Sleeps
) -> None:
    from watchkeeper.nightly.findings import set_status

    config = Config(database=DatabaseConfig(url=sqlite_url), tracker=tracker_config(forge))
    db = Database(sqlite_url)
    history = History(db)
    try:
        fid = add_finding(history)
        (number,) = _run(config, sleeps).filed
        forge.add_label_by_user(number, "watchkeeper/ack")
        _run(config, sleeps)
        set_status(history, fid, "reopen", "not accepted after all")
        _run(config, sleeps)
        assert "watchkeeper/ack" not in forge.issues[number]["labels"]
        deadline = time.monotonic() + 30
        for _ in range(3):  # and it stays active over later runs
            assert time.monotonic() < deadline
            _run(config, sleeps)
            assert history.finding(fid).status == "active"  # type: ignore[union-attr]
    finally:
        db.close()
