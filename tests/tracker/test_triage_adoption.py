"""Adoption after a lost database: the issue on the forge is the starting point. Its body's
`seen` row and watchkeeper's own `Seen again` comments say how often and how lately the
finding was seen. Adoption itself posts nothing (tests/tracker/test_triage_adoption_lag.py);
the next recurrence comment's count goes on from the issue's, with what the fresh database
saw before adopting, never restarting at 1 or naming `run None`. The forge runs on an
injected clock at NOW."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from support.fakeforge import FakeForge
from support.trackerkit import ForgeClock, Sleeps, tracker_config
from support.triagekit import NOW, add_finding, triage

from watchkeeper.config import Config, DatabaseConfig
from watchkeeper.store.db import Database
from watchkeeper.store.history import History


@pytest.fixture(autouse=True)
def _forge_clock(forge: FakeForge) -> ForgeClock:
    forge.clock = clock = ForgeClock(NOW)
    return clock


def _config(forge: FakeForge, url: str) -> Config:
    return Config(database=DatabaseConfig(url=url), tracker=tracker_config(forge))


def _mine(forge: FakeForge, number: int) -> list[str]:
    return [c["body"] for c in forge.comments_on(number) if c["user"] == forge.bot]


def _filed(forge: FakeForge, tmp_path: Path, sleeps: Sleeps, **finding: Any) -> int:
    """The first database files the finding (2 occurrences, last seen NOW), then is lost."""
    url = f"sqlite:///{tmp_path / 'lost.db'}"
    db = Database(url)
    try:
        add_finding(History(db), kind="correctness", run_id=None, **finding)
        (number,) = triage(_config(forge, url), sleeps).filed
    finally:
        db.close()
    return number


def _fresh(tmp_path: Path, name: str = "fresh.db") -> tuple[str, Database, History]:
    url = f"sqlite:///{tmp_path / name}"
    db = Database(url)
    return url, db, History(db)


def test_a_bench_that_sees_the_mismatch_again_continues_the_issues_count(
    forge: FakeForge, tmp_path: Path, sleeps: Sleeps
) -> None:
    number = _filed(forge, tmp_path, sleeps)
    url, db, history = _fresh(tmp_path)
    try:
        later = NOW + timedelta(days=1)
        fid = add_finding(
            history, kind="correctness", run_id=None, occurrences=1,
            created_at=later, last_seen_at=later, updated_at=later,
        )  # fmt: skip
        outcome = triage(_config(forge, url), sleeps)
        assert outcome.adopted == [number] and outcome.filed == []
        assert outcome.commented == [] and _mine(forge, number) == []  # adoption is silent
        assert triage(_config(forge, url), sleeps).commented == []  # and so is the next run

        again = NOW + timedelta(days=2)  # the next bench, on the adopted row
        history.update_finding(fid, occurrences=2, last_seen_at=again, updated_at=again)
        assert triage(_config(forge, url), sleeps).commented == [number]
        (said,) = _mine(forge, number)  # 2 on the issue, 1 before the adoption, 1 after
        assert said.startswith("Seen again (4 times now, last 2026-11-05 07:30 UTC):"), said
        assert "None" not in said and "1 times" not in said
        assert len(forge.all_issues()) == 1
    finally:
        db.close()


def test_an_occurrence_the_issue_already_reports_is_adopted_silently(
    forge: FakeForge, tmp_path: Path, sleeps: Sleeps
) -> None:
    """A database restored from a backup, or a second host that saw the same bench: its
    finding's newest occurrence is one the issue (body or a later comment) already has."""
    number = _filed(forge, tmp_path, sleeps)
    url, db, history = _fresh(tmp_path)
    try:
        add_finding(
            history, kind="correctness", run_id=None, occurrences=1,
            created_at=NOW + timedelta(seconds=20), last_seen_at=NOW + timedelta(seconds=20),
        )  # fmt: skip
        outcome = triage(_config(forge, url), sleeps)
        assert outcome.adopted == [number] and outcome.commented == []
        assert forge.comments_on(number) == []
    finally:
        db.close()


def test_the_newest_seen_again_comment_is_the_issues_last_word(
    forge: FakeForge, tmp_path: Path, sleeps: Sleeps
) -> None:
    number = _filed(forge, tmp_path, sleeps)
    day = NOW + timedelta(days=3)
    forge.add_comment(number, "Seen again (5 times now, last 2026-11-06 07:30 UTC): ...", forge.bot)
    # a maintainer quoting the words counts for nothing
    forge.add_comment(number, "Seen again (50 times now, last 2026-12-06 07:30 UTC)", "alice")
    url, db, history = _fresh(tmp_path)
    try:
        fid = add_finding(
            history, kind="correctness", run_id=None, occurrences=1,
            created_at=day, last_seen_at=day, updated_at=day,
        )  # fmt: skip
        outcome = triage(_config(forge, url), sleeps)
        assert outcome.adopted == [number] and outcome.commented == []
        later = day + timedelta(hours=1)
        history.update_finding(fid, occurrences=2, last_seen_at=later, updated_at=later)
        assert triage(_config(forge, url), sleeps).commented == [number]
        assert _mine(forge, number)[-1].startswith("Seen again (6 times now, last 2026-11-06 08:30")
    finally:
        db.close()


def test_a_regression_adopted_with_news_continues_the_count_in_the_next_comment(
    forge: FakeForge, tmp_path: Path, sleeps: Sleeps
) -> None:
    """Two occurrences on the lost database, two on the fresh one before adopting, one after:
    the first comment after the adoption says 5."""
    url = f"sqlite:///{tmp_path / 'lost.db'}"
    db = Database(url)
    try:
        add_finding(History(db))
        (number,) = triage(_config(forge, url), sleeps).filed
    finally:
        db.close()
    url, db, history = _fresh(tmp_path)
    try:
        later = NOW + timedelta(days=1)
        add_finding(
            history, occurrences=2, created_at=later, last_seen_at=later, updated_at=later,
            run_id=None,
        )  # fmt: skip
        fid = history.findings()[0].id
        assert triage(_config(forge, url), sleeps).commented == []
        again = later + timedelta(days=1)
        history.update_finding(fid, occurrences=3, last_seen_at=again, updated_at=again)
        triage(_config(forge, url), sleeps)
        (said,) = _mine(forge, number)
        assert said.startswith("Seen again (5 times now, last 2026-11-05 07:30 UTC):"), said
    finally:
        db.close()
