"""The morning digest: golden Markdown from a known history, files and plots, and the
`digest --commit --push` path against a real local bare remote."""

from __future__ import annotations

import os
import subprocess
from datetime import UTC, date, datetime
from pathlib import Path

import pytest
from support.nights import Nights

from watchkeeper.commands.digest import digest_command
from watchkeeper.config import parse_config
from watchkeeper.errors import PublishError
from watchkeeper.nightly.detector import DetectorParams
from watchkeeper.nightly.digest import gather
from watchkeeper.nightly.findings import TrackingParams, judge_campaign, judge_pending
from watchkeeper.publish.digest import digest_files, render_digest
from watchkeeper.store.db import Database
from watchkeeper.store.history import History

GOLDEN = Path(__file__).parents[1] / "golden" / "digest.md"
PARAMS = TrackingParams(DetectorParams(resamples=200))
SINCE = datetime(2000, 1, 1, tzinfo=UTC)
UNTIL = datetime(2100, 1, 1, tzinfo=UTC)
# The digest's day and clock: fixed, so no test reads the wall clock.
DAY = date(2026, 11, 22)
NOW = datetime(2026, 11, 22, 7, 15, tzinfo=UTC)


def history_with_a_regression(db: Database) -> History:
    nights, history = Nights(db), History(db)
    for _ in range(12):
        nights.add("b1")
    judge_pending(history, PARAMS)
    for _ in range(3):
        judge_campaign(history, nights.add("b7-slow", slow_category="code"), PARAMS)
    return history


def created(history: History) -> datetime:
    """The digest's clock for a history just written: when its newest finding was created (the
    store stamps findings with the real time), so every finding's age is the same on every run."""
    return max(f.created_at for f in history.findings())


def test_the_digest_matches_the_golden_file(tmp_path: Path) -> None:
    db = Database(f"sqlite:///{tmp_path / 'wk.db'}")
    history = history_with_a_regression(db)
    digest = gather(
        history, day=DAY, since=SINCE, until=UNTIL, params=PARAMS.detector, now=created(history)
    )
    plots = {p.finding_id: f"2026-11-22/finding-{p.finding_id}.png" for p in digest.plots}
    markdown = render_digest(digest, plots=plots)
    db.close()
    if os.environ.get("WATCHKEEPER_UPDATE_GOLDEN"):
        GOLDEN.write_text(markdown, encoding="utf-8")
    assert markdown == GOLDEN.read_text(encoding="utf-8")
    assert "**1 confirmed regression(s)" in markdown
    assert "first bad build" in markdown


def test_the_digest_files_hold_the_markdown_and_one_history_plot_per_finding(
    tmp_path: Path,
) -> None:
    db = Database(f"sqlite:///{tmp_path / 'wk.db'}")
    history = history_with_a_regression(db)
    digest = gather(history, day=DAY, since=SINCE, until=UNTIL, now=created(history))
    db.close()
    files = digest_files(digest)
    (finding,) = digest.regressions
    png = files[f"2026-11-22/finding-{finding.id}.png"]
    assert png.startswith(b"\x89PNG")
    text = files["2026-11-22.md"].decode()
    assert f"[plot](2026-11-22/finding-{finding.id}.png)" in text
    # A quiet window says so plainly.
    quiet = gather(
        History(Database(f"sqlite:///{tmp_path / 'wk.db'}")), day=date(1999, 1, 1), now=NOW
    )
    assert quiet.headline == "No campaign ran in this window"


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout.strip()


@pytest.fixture
def reports_repo(tmp_path: Path) -> tuple[Path, Path]:
    remote = tmp_path / "reports.git"
    git(tmp_path, "init", "--bare", "-b", "main", str(remote))
    clone = tmp_path / "reports"
    git(tmp_path, "clone", str(remote), str(clone))
    git(clone, "config", "user.name", "someone")
    git(clone, "config", "user.email", "someone@example.org")
    git(clone, "checkout", "-B", "main")
    return clone, remote


def test_digest_commit_and_push_twice_on_one_night_makes_one_commit(
    tmp_path: Path, reports_repo: tuple[Path, Path]
) -> None:
    clone, remote = reports_repo
    url = f"sqlite:///{tmp_path / 'wk.db'}"
    db = Database(url)
    history_with_a_regression(db)
    db.close()
    config = parse_config(
        {
            "database": {"url": url},
            "digest": {
                "repo": str(clone),
                "author_name": "Night Watch",
                "author_email": "night@example.org",
            },
        },
        source="test",
    )
    first = digest_command(config, day=DAY, now=NOW, commit=True, push=True, progress=print)
    assert first.published is not None and first.published.committed
    assert first.published.pushed
    day = DAY.isoformat()
    assert (clone / "reports" / "digests" / f"{day}.md").is_file()
    assert git(remote, "log", "-1", "--format=%an <%ae>|%s", "main").startswith(
        f"Night Watch <night@example.org>|digest {day}: "
    )
    second = digest_command(config, day=DAY, now=NOW, commit=True, push=True, progress=print)
    assert second.published is not None and not second.published.committed
    assert second.published.commit_sha == first.published.commit_sha
    assert git(remote, "rev-list", "--count", "main") == "1"


def test_a_dirty_reports_repo_is_refused_and_the_change_is_kept(
    tmp_path: Path, reports_repo: tuple[Path, Path]
) -> None:
    clone, _ = reports_repo
    notes = clone / "notes.md"
    notes.write_text("half-written thoughts\n")
    config = parse_config(
        {"database": {"url": f"sqlite:///{tmp_path / 'wk.db'}"}, "digest": {"repo": str(clone)}},
        source="test",
    )
    with pytest.raises(PublishError, match="notes.md"):
        digest_command(config, day=DAY, now=NOW, commit=True, progress=print)
    assert notes.read_text() == "half-written thoughts\n"
    assert not (clone / "reports").exists()


def test_a_night_with_an_a_a_check_beside_it_digests_without_counting_the_check(
    tmp_path: Path,
) -> None:
    db = Database(f"sqlite:///{tmp_path / 'wk.db'}")
    try:
        history = history_with_a_regression(db)
        before = gather(history, day=date(2026, 11, 22), since=SINCE, until=UNTIL)
        aa = Nights(db, seed=9).add()  # what `watchkeeper aa` stores: analysed, not a night
        history.mark_analysed(aa, {"aa": {"role": "history"}})
        after = gather(history, day=date(2026, 11, 22), since=SINCE, until=UNTIL)
    finally:
        db.close()
    assert after.series_judged == before.series_judged > 0
    assert after.labels == before.labels
