"""Maintainers' decisions are events with identity: a status label decides only the finding it
was applied for, an adopted issue is linked without a false "seen again", and a decision that
was half applied (comment posted, close failed) is finished on the next run, not repeated."""

from __future__ import annotations

import logging
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from support.fakeforge import FakeForge
from support.trackerkit import TOKEN_ENV, ForgeClock, Sleeps, tracker_config
from support.triagekit import NOW, add_finding, triage

from watchkeeper.config import Config, DatabaseConfig
from watchkeeper.store.db import Database
from watchkeeper.store.history import History


def _config(forge: FakeForge, url: str, **overrides: Any) -> Config:
    return Config(database=DatabaseConfig(url=url), tracker=tracker_config(forge, **overrides))


def _mine(forge: FakeForge, number: int) -> list[str]:
    return [c["body"] for c in forge.comments_on(number) if c["user"] == forge.bot]


@pytest.mark.parametrize("action", ["dismiss", "ack"])
def test_a_stale_status_label_does_not_decide_the_recurrence(
    forge: FakeForge, sqlite_url: str, sleeps: Sleeps, action: str
) -> None:
    config = _config(forge, sqlite_url)
    db = Database(sqlite_url)
    history = History(db)
    try:
        first = add_finding(history)
        (number,) = triage(config, sleeps).filed
        forge.add_label_by_user(number, f"watchkeeper/{action}")
        triage(config, sleeps)
        if action == "ack":  # acked, then fixed by a maintainer closing the issue
            forge.set_state_by_user(number, "closed")
            triage(config, sleeps)
        assert forge.issues[number]["state"] == "closed"
        assert history.finding(first).status in ("dismissed", "fixed")  # type: ignore[union-attr]

        again = add_finding(history)  # the same series regresses again: a new finding
        assert triage(config, sleeps).reopened == [number]
        reopened = _mine(forge, number)[-1]
        assert "Reopening" in reopened and f"`watchkeeper/{action}`" in reopened
        assert f"watchkeeper/{action}" not in forge.issues[number]["labels"]
        for _ in range(2):  # the old decision is not read as one about the new finding
            outcome = triage(config, sleeps)
            assert outcome.decisions == [] and outcome.closed == []
            assert history.finding(again).status == "active"  # type: ignore[union-attr]
        assert forge.issues[number]["state"] == "open"

        forge.add_label_by_user(number, f"watchkeeper/{action}")  # a new decision counts
        assert len(triage(config, sleeps).decisions) == 1
        expected = "dismissed" if action == "dismiss" else "acknowledged"
        assert history.finding(again).status == expected  # type: ignore[union-attr]
    finally:
        db.close()


def test_a_label_applied_before_the_reopen_is_no_decision_even_if_it_stays(
    forge: FakeForge, sqlite_url: str, sleeps: Sleeps
) -> None:
    """Label history, not label presence: a dismiss label re-added with an earlier timestamp
    (applied before watchkeeper reopened the issue for the new finding) decides nothing."""
    config = _config(forge, sqlite_url)
    db = Database(sqlite_url)
    history = History(db)
    try:
        add_finding(history)
        (number,) = triage(config, sleeps).filed
        forge.set_state_by_user(number, "closed")
        triage(config, sleeps)  # fixed
        again = add_finding(history)
        triage(config, sleeps)  # reopened for the new finding
        forge.add_label_by_user(number, "watchkeeper/dismiss", at=forge.now() - 3600)
        assert triage(config, sleeps).decisions == []
        assert history.finding(again).status == "active"  # type: ignore[union-attr]
    finally:
        db.close()


def _wipe_and_refile(
    forge: FakeForge, tmp_path: Path, sleeps: Sleeps, **finding: Any
) -> tuple[int, Any]:
    """File with one database, then meet the issue again from a fresh one."""
    first = tmp_path / "first.db"
    db = Database(f"sqlite:///{first}")
    add_finding(History(db))
    (number,) = triage(_config(forge, f"sqlite:///{first}"), sleeps).filed
    db.close()
    second = f"sqlite:///{tmp_path / 'second.db'}"
    db = Database(second)
    add_finding(History(db), **finding)
    db.close()
    return number, _config(forge, second)


def test_adoption_links_silently_and_lists_the_issue_once(
    forge: FakeForge, tmp_path: Path, sleeps: Sleeps
) -> None:
    long_ago = NOW - timedelta(days=2)  # before the last occurrence the issue reports
    number, config = _wipe_and_refile(forge, tmp_path, sleeps, last_seen_at=long_ago)
    outcome = triage(config, sleeps)
    assert outcome.to_json()["adopted"] == [number] and outcome.to_json()["filed"] == []
    assert outcome.commented == [] and forge.comments_on(number) == []
    assert triage(config, sleeps).commented == []  # and later runs have nothing to add
    assert forge.comments_on(number) == [] and len(forge.all_issues()) == 1


def test_adoption_of_a_silenced_issue_posts_nothing_even_for_a_new_occurrence(
    forge: FakeForge, tmp_path: Path, sleeps: Sleeps
) -> None:
    soon = NOW + timedelta(minutes=5)  # after the occurrence the issue reports (NOW)
    number, config = _wipe_and_refile(forge, tmp_path, sleeps, last_seen_at=soon)
    forge.add_label_by_user(number, "watchkeeper/silence")
    outcome = triage(config, sleeps)
    assert outcome.adopted == [number] and outcome.commented == []
    assert _mine(forge, number) == []


def test_adoption_posts_nothing_even_when_the_finding_is_news_to_the_issue(
    forge: FakeForge, tmp_path: Path, sleeps: Sleeps
) -> None:
    """The news goes into the count of the next recurrence comment instead."""
    forge.clock = ForgeClock(NOW)
    soon = NOW + timedelta(minutes=5)  # after the occurrence the issue reports (NOW)
    number, config = _wipe_and_refile(
        forge, tmp_path, sleeps, last_seen_at=soon, created_at=soon, occurrences=3
    )
    outcome = triage(config, sleeps)
    assert outcome.adopted == [number] and outcome.commented == []
    assert triage(config, sleeps).commented == [] and _mine(forge, number) == []
    db = Database(config.database.url)
    try:
        history = History(db)
        (f,) = history.findings()
        later = soon + timedelta(hours=1)
        history.update_finding(f.id, occurrences=4, last_seen_at=later, updated_at=later)
    finally:
        db.close()
    assert triage(config, sleeps).commented == [number]
    (said,) = _mine(forge, number)
    assert "Seen again (6 times now" in said  # the issue said 2, the new database saw 3 + 1


def test_a_half_applied_decision_is_finished_without_a_second_comment(
    forge: FakeForge, sqlite_url: str, sleeps: Sleeps
) -> None:
    config = _config(forge, sqlite_url)
    db = Database(sqlite_url)
    history = History(db)
    try:
        fid = add_finding(history)
        (number,) = triage(config, sleeps).filed
        forge.add_comment(number, "/watchkeeper dismiss", "alice")
        forge.fail("PATCH", rf"/issues/{number}$", "status", status=502, count=4)
        first = triage(config, sleeps)
        assert first.errors and forge.issues[number]["state"] == "open"
        assert history.finding(fid).status == "dismissed"  # type: ignore[union-attr]
        assert len(_mine(forge, number)) == 1
        second = triage(config, sleeps)
        assert second.closed == [number] and forge.issues[number]["state"] == "closed"
        (said,) = _mine(forge, number)  # the retry found its comment by the decision id
        assert "dismissed" in said and "alice" in said
        assert "watchkeeper/dismiss" in forge.issues[number]["labels"]
        assert triage(config, sleeps).closed == [] and len(_mine(forge, number)) == 1
    finally:
        db.close()


def test_a_command_by_the_tokens_own_user_is_logged_as_ignored(
    forge: FakeForge, sqlite_url: str, sleeps: Sleeps, caplog: pytest.LogCaptureFixture
) -> None:
    config = _config(forge, sqlite_url)
    db = Database(sqlite_url)
    history = History(db)
    try:
        fid = add_finding(history)
        (number,) = triage(config, sleeps).filed
        forge.add_comment(number, "/watchkeeper dismiss", forge.bot)
        caplog.set_level(logging.WARNING, logger="watchkeeper.tracker")
        notes: list[str] = []
        triage_outcome = triage(config, sleeps, progress=notes.append)
        assert triage_outcome.decisions == []
        assert history.finding(fid).status == "active"  # type: ignore[union-attr]
        assert any("token's own user" in n and forge.bot in n for n in notes)
        assert "tracker.maintainers" in caplog.text
    finally:
        db.close()


def test_a_command_by_the_tokens_own_user_counts_when_it_is_a_maintainer(
    forge: FakeForge, sqlite_url: str, sleeps: Sleeps
) -> None:
    config = _config(forge, sqlite_url, maintainers=[forge.bot])
    db = Database(sqlite_url)
    history = History(db)
    try:
        fid = add_finding(history)
        (number,) = triage(config, sleeps).filed
        forge.add_comment(number, "/watchkeeper silence", forge.bot)
        assert len(triage(config, sleeps).decisions) == 1
        assert history.finding(fid).status == "silenced"  # type: ignore[union-attr]
    finally:
        db.close()


_ = TOKEN_ENV
