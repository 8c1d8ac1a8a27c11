"""Adoption while the forge's search lags: the database that filed an issue is lost (or a
second host meets it) and the issue is found again, however late the search index is.

The fake forge's index runs 30 s behind every change here, in both dialects: a search misses
an issue filed moments ago, and GitHub answers with the issue as the index last saw it (the
labels and state from before a maintainer's latest change). In every label state, whether the
search sees nothing yet or a stale copy, adoption links the one issue, takes over what the
tracker decided, and posts nothing, in that run and the next. Time is the forge's injected
clock; the fresh database's finding is news to the issue (seen after what the issue reports),
which is what once drew a false `Seen again` on an adopted issue."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from support.fakeforge import FakeForge
from support.trackerkit import ForgeClock, Sleeps, tracker_config
from support.triagekit import NOW, add_finding, triage

from watchkeeper.config import Config, DatabaseConfig
from watchkeeper.store.db import Database
from watchkeeper.store.history import History

LAG_S = 30.0
FILED = NOW + timedelta(minutes=1)
"""The first database files the finding (2 occurrences, last seen NOW) a minute later."""


def _config(forge: FakeForge, url: str) -> Config:
    return Config(database=DatabaseConfig(url=url), tracker=tracker_config(forge))


def as_filed(forge: FakeForge, number: int) -> None:
    return None


def acked(forge: FakeForge, number: int) -> None:
    forge.add_label_by_user(number, "watchkeeper/ack")


def silenced(forge: FakeForge, number: int) -> None:
    forge.add_label_by_user(number, "watchkeeper/silence")


def unlabelled(forge: FakeForge, number: int) -> None:
    """A maintainer took the `watchkeeper` label off (the kind label stays)."""
    forge.remove_label_by_user(number, "watchkeeper")


def closed(forge: FakeForge, number: int) -> None:
    forge.set_state_by_user(number, "closed")


STATES: dict[str, tuple[Callable[[FakeForge, int], None], str]] = {
    "as filed": (as_filed, "active"),
    "acked": (acked, "acknowledged"),
    "silenced": (silenced, "silenced"),
    "watchkeeper label removed": (unlabelled, "active"),
    "closed": (closed, "fixed"),
}
TIMINGS = {
    # the issue itself is newer than the lag: the search finds nothing yet
    "search misses it": (timedelta(seconds=5), timedelta(seconds=20)),
    # the issue is indexed, the maintainer's change is not: the search answers a stale copy
    "search is stale": (timedelta(minutes=2), timedelta(minutes=2, seconds=10)),
}


def writes(forge: FakeForge) -> int:
    return sum(1 for method, _, _ in forge.log if method != "GET")


@pytest.mark.parametrize("timing", sorted(TIMINGS))
@pytest.mark.parametrize("state", sorted(STATES))
def test_adoption_under_a_lagging_search_links_the_issue_and_posts_nothing(
    forge: FakeForge, tmp_path: Path, sleeps: Sleeps, state: str, timing: str
) -> None:
    clock = ForgeClock(FILED)
    forge.clock, forge.search_lag_s = clock, LAG_S
    change, adopt = TIMINGS[timing]
    lost = Database(f"sqlite:///{tmp_path / 'lost.db'}")
    try:
        add_finding(History(lost), kind="correctness", run_id=None)
        (number,) = triage(_config(forge, f"sqlite:///{tmp_path / 'lost.db'}"), sleeps).filed
    finally:
        lost.close()
    clock.at(FILED + change)
    act, status = STATES[state]
    act(forge, number)
    if timing == "search is stale" and forge.github:  # what makes this case: a stale answer
        (hit,) = forge_search(forge, number)
        labels = [label["name"] for label in hit["labels"]]  # type: ignore[attr-defined]
        assert labels == ["watchkeeper", "correctness"] and hit["state"] == "open"

    url = f"sqlite:///{tmp_path / 'fresh.db'}"
    db = Database(url)
    history = History(db)
    try:
        seen = _moment(clock) - timedelta(seconds=2)  # news: after the issue's last word (NOW)
        fid = add_finding(
            history, kind="correctness", run_id=None, occurrences=1,
            created_at=seen, last_seen_at=seen, updated_at=seen,
        )  # fmt: skip
        clock.at(FILED + adopt)
        before = writes(forge)
        outcome = triage(_config(forge, url), sleeps)
        assert outcome.adopted == [number], outcome.to_json()
        assert (outcome.filed, outcome.commented, outcome.reopened, outcome.closed) == (
            [],
            [],
            [],
            [],
        )
        assert writes(forge) == before, forge.log[-5:]
        assert forge.comments_on(number) == [] and len(forge.all_issues()) == 1
        assert history.finding(fid).status == status  # type: ignore[union-attr]

        clock.at(FILED + adopt + timedelta(minutes=5))  # the index has caught up
        again = triage(_config(forge, url), sleeps)
        assert again.commented == [] and again.filed == [] and writes(forge) == before
    finally:
        db.close()


def forge_search(forge: FakeForge, number: int) -> list[dict[str, object]]:
    """What `/search/issues` would answer for the issue now (the index's copy)."""
    doc = forge.indexed(number)
    return [] if doc is None else [forge.issue_json(number, doc)]


def _moment(clock: ForgeClock) -> datetime:
    return datetime.fromtimestamp(clock(), tz=NOW.tzinfo)


def test_the_next_occurrence_after_a_silent_adoption_counts_what_the_issue_missed(
    forge: FakeForge, tmp_path: Path, sleeps: Sleeps
) -> None:
    """Adoption said nothing of the fresh database's occurrence; the next one is a recurrence
    comment whose count takes both in (the issue said 2, the new database saw 1, then 1)."""
    clock = ForgeClock(FILED)
    forge.clock, forge.search_lag_s = clock, LAG_S
    lost = Database(f"sqlite:///{tmp_path / 'lost.db'}")
    try:
        add_finding(History(lost), kind="correctness", run_id=None)
        (number,) = triage(_config(forge, f"sqlite:///{tmp_path / 'lost.db'}"), sleeps).filed
    finally:
        lost.close()
    url = f"sqlite:///{tmp_path / 'fresh.db'}"
    db = Database(url)
    history = History(db)
    try:
        seen = FILED + timedelta(minutes=1, seconds=10)  # a minute after the issue opened
        fid = add_finding(
            history, kind="correctness", run_id=None, occurrences=1,
            created_at=seen, last_seen_at=seen, updated_at=seen,
        )  # fmt: skip
        clock.at(seen + timedelta(seconds=5))
        assert triage(_config(forge, url), sleeps).commented == []
        later = FILED + timedelta(days=1)
        history.update_finding(fid, occurrences=2, last_seen_at=later, updated_at=later)
        clock.at(later + timedelta(hours=1))
        assert triage(_config(forge, url), sleeps).commented == [number]
        (said,) = [c["body"] for c in forge.comments_on(number)]
        assert said.startswith("Seen again (4 times now, last 2026-11-04 07:31 UTC)"), said
    finally:
        db.close()
