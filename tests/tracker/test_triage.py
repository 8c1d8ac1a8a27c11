"""`watchkeeper triage` against the fake forge (both dialects) and the real store."""

from __future__ import annotations

import logging
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import update
from support.fakeforge import FakeForge
from support.trackerkit import TOKEN_ENV, Sleeps, tracker_config
from support.triagekit import NOW, add_finding, evidence, triage

from watchkeeper.config import Config, DatabaseConfig
from watchkeeper.errors import TrackerPermanentError
from watchkeeper.nightly.findings import set_status
from watchkeeper.store.findings import StoredFinding
from watchkeeper.store.history import History
from watchkeeper.store.schema import TrackerItem
from watchkeeper.store.tracker_store import TrackerStore
from watchkeeper.tracker import bodies, escape
from watchkeeper.tracker.lifecycle import issue_key

GOLDEN = Path(__file__).parents[1] / "golden" / "tracker_issue.md"


def test_a_confirmed_finding_opens_one_labelled_issue_with_evidence_and_marker(
    forge: FakeForge, config: Config, history: History, sleeps: Sleeps
) -> None:
    fid = add_finding(history)
    add_finding(history, 1, confirmed_at=None)  # a candidate: never filed
    add_finding(history, 2, kind="improvement", side="better")  # improvements: never filed
    outcome = triage(config, sleeps)
    (issue,) = forge.all_issues()
    assert outcome.filed == [issue["number"]]
    assert set(issue["labels"]) == {"watchkeeper", "regression"}
    assert issue["title"].startswith("[watchkeeper] decode_tps regression in code0")
    body = issue["body"]
    assert "-18.2% (95% CI -21.4% to -15.1%)" in body
    assert "p = 0.00018, BH-adjusted 0.00036" in body
    assert "reports/digests/2026-11-03.md" in body and f"2026-11-03/finding-{fid}.png" in body
    f = history.finding(fid)
    assert f is not None
    assert escape.has_marker(body, escape.marker_token(issue_key(f)))
    (item,) = TrackerStore(history._db, tracker=forge.dialect, repository=forge.repository).items()
    assert (item.number, item.finding_id, item.state) == (issue["number"], fid, "open")


def test_the_issue_body_matches_the_golden_file() -> None:
    f = StoredFinding(
        id=7, campaign_id=12, run_id=345, fingerprint="3f2a9c1e00aa55bb", kind="regression",
        label="regression", status="active", severity="medium",
        title="decode_tps regression in code (profile prod-draft, concurrency 1): -18.2% (95% CI -21.4% to -15.1%)",
        evidence=evidence(candidate_excerpt="def f():\n    return 1  # @octocat ``` <b>x</b>"),
        series_key={"metric": "decode_tps"}, side="worse", confirmed_at=NOW, last_seen_at=NOW,
        occurrences=2, status_note=None, created_at=NOW - timedelta(days=1), updated_at=NOW,
    )  # fmt: skip
    key = issue_key(f)
    ctx = bodies.IssueContext(
        marker=escape.marker_token(key),
        key=key,
        digest_url="https://git.example/ops/reports/src/branch/main/reports/digests",
        label_prefix="watchkeeper/",
        recovery_nights=3,
        quote_chars=1500,
    )
    text = f"# {bodies.issue_title(f)}\n\n{bodies.issue_body(f, ctx)}"
    text += f"\n<!-- recurrence -->\n{bodies.recurrence_comment(f)}"
    text += f"\n<!-- recovery -->\n{bodies.recovery_comment(f, 3)}"
    import os

    if os.environ.get("WATCHKEEPER_UPDATE_GOLDEN") == "1":
        GOLDEN.write_text(text, encoding="utf-8")
    assert text == GOLDEN.read_text(encoding="utf-8")


def test_rerunning_triage_never_opens_a_second_issue(
    forge: FakeForge, config: Config, history: History, sleeps: Sleeps
) -> None:
    add_finding(history)
    first = triage(config, sleeps)
    second = triage(config, sleeps)
    assert len(first.filed) == 1 and second.filed == [] and second.adopted == []
    assert len(forge.all_issues()) == 1


def test_a_create_whose_answer_was_lost_is_found_by_its_marker_not_repeated(
    forge: FakeForge, config: Config, history: History, sleeps: Sleeps
) -> None:
    add_finding(history)
    forge.fail("POST", r"/issues$", "after", status=502)
    outcome = triage(config, sleeps)
    assert len(forge.all_issues()) == 1
    assert outcome.adopted == [forge.all_issues()[0]["number"]]
    assert forge.requests("POST", "/llm/issues") == 1
    assert triage(config, sleeps).filed == []
    assert len(forge.all_issues()) == 1


def test_a_create_that_failed_before_reaching_the_forge_is_tried_again(
    forge: FakeForge, config: Config, history: History, sleeps: Sleeps
) -> None:
    add_finding(history)
    forge.fail("POST", r"/issues$", "status", status=502)
    outcome = triage(config, sleeps)
    assert len(forge.all_issues()) == 1 and len(outcome.filed) == 1
    assert forge.requests("POST", "/llm/issues") == 2
    assert sleeps.calls, "backed off before trying again"


def test_a_run_that_died_after_creating_is_taken_over_and_adopts_the_issue(
    forge: FakeForge, config: Config, history: History, sleeps: Sleeps
) -> None:
    add_finding(history)
    triage(config, sleeps)
    # As if the process died between creating the issue and recording its number.
    with history._db.session() as s:
        s.execute(
            update(TrackerItem).values(
                number=None, claimed_by="deadhost:1", claimed_at=NOW - timedelta(days=1)
            )
        )
    outcome = triage(config, sleeps)
    assert outcome.adopted == [forge.all_issues()[0]["number"]] and outcome.filed == []
    assert len(forge.all_issues()) == 1


def test_a_fresh_claim_of_another_run_is_left_alone(
    forge: FakeForge, config: Config, history: History, sleeps: Sleeps
) -> None:
    fid = add_finding(history)
    f = history.finding(fid)
    assert f is not None
    store = TrackerStore(history._db, tracker=forge.dialect, repository=forge.repository)
    marker = escape.marker_token(issue_key(f))
    assert store.claim(marker, finding_id=fid, kind="regression", owner="other:1", lease_s=600)
    outcome = triage(config, sleeps)
    assert outcome.skipped == [fid] and forge.all_issues() == []


def test_a_recurrence_adds_one_comment(
    forge: FakeForge, config: Config, history: History, sleeps: Sleeps
) -> None:
    fid = add_finding(history)
    (number,) = triage(config, sleeps).filed
    history.update_finding(fid, occurrences=3, evidence=evidence(delta=-0.25, current=75.0))
    assert triage(config, sleeps).commented == [number]
    assert triage(config, sleeps).commented == []
    (comment,) = forge.comments_on(number)
    assert "Seen again (3 times now" in comment["body"] and "-25.0%" in comment["body"]


def test_labels_and_commands_from_maintainers_set_the_findings_status(
    forge: FakeForge, config: Config, history: History, sleeps: Sleeps
) -> None:
    acked, dismissed, ignored = (
        add_finding(history, 0),
        add_finding(history, 1),
        add_finding(history, 2),
    )
    numbers = dict(zip((acked, dismissed, ignored), triage(config, sleeps).filed, strict=True))
    forge.add_label_by_user(numbers[acked], "watchkeeper/ack")
    forge.add_comment(numbers[dismissed], "Known: the box was busy.\n/watchkeeper dismiss", "alice")
    forge.add_comment(numbers[ignored], "/watchkeeper dismiss", "mallory")  # not a collaborator
    outcome = triage(config, sleeps)
    status = {fid: history.finding(fid).status for fid in numbers}  # type: ignore[union-attr]
    assert status == {acked: "acknowledged", dismissed: "dismissed", ignored: "active"}
    assert forge.issues[numbers[dismissed]]["state"] == "closed"
    assert forge.issues[numbers[acked]]["state"] == "open"
    assert outcome.closed == [numbers[dismissed]]
    note = history.finding(dismissed).status_note  # type: ignore[union-attr]
    assert note is not None and "alice" in note
    assert "watchkeeper/dismiss" in forge.issues[numbers[dismissed]]["labels"]
    assert len(triage(config, sleeps).decisions) == 0  # applied once


def test_a_status_set_locally_reaches_the_issue(
    forge: FakeForge, config: Config, history: History, sleeps: Sleeps
) -> None:
    fid = add_finding(history)
    (number,) = triage(config, sleeps).filed
    set_status(history, fid, "fix", "fixed upstream")
    assert triage(config, sleeps).closed == [number]
    assert forge.issues[number]["state"] == "closed"
    assert "marked fixed" in forge.comments_on(number)[-1]["body"]


def test_new_issues_per_night_are_capped(
    forge: FakeForge, history: History, sqlite_url: str, sleeps: Sleeps
) -> None:
    config = Config(
        database=DatabaseConfig(url=sqlite_url),
        tracker=tracker_config(forge, max_new_issues_per_night=2),
    )
    ids = [add_finding(history, n) for n in range(4)]
    first = triage(config, sleeps)
    assert len(first.filed) == 2 and first.capped == ids[2:]
    assert triage(config, sleeps).capped == ids[2:]
    assert len(forge.all_issues()) == 2


def test_quoted_model_output_cannot_ping_inject_html_or_break_the_fence(
    forge: FakeForge, config: Config, history: History, sleeps: Sleeps
) -> None:
    hostile = (
        "@octocat please look #1\n<img src=x onerror=alert(1)>\n````\n# heading\n"
        "<!-- watchkeeper:wk0000 key=x -->\n" + "A" * 5000
    )
    add_finding(
        history, title="bad @team <b>title</b>", evidence=evidence(candidate_excerpt=hostile)
    )
    triage(config, sleeps)
    (issue,) = forge.all_issues()
    body, title = issue["body"], issue["title"]
    assert "@octocat" not in body and "@team" not in title and "#1\n" not in body
    assert body.count("<!--") == 1  # only our own marker
    assert "`````text\n" in body  # a fence longer than the 4 backticks inside
    assert "characters cut]" in body and len(body) < 10_000


def test_a_permanent_error_stops_the_run_and_the_token_is_nowhere(
    forge: FakeForge,
    config: Config,
    history: History,
    sleeps: Sleeps,
    caplog: pytest.LogCaptureFixture,
) -> None:
    add_finding(history)
    caplog.set_level(logging.DEBUG)
    forge.fail("POST", r"/issues$", "forbidden")
    with pytest.raises(TrackerPermanentError, match="Resource not accessible") as info:
        triage(config, sleeps)
    (item,) = TrackerStore(history._db, tracker=forge.dialect, repository=forge.repository).items()
    assert item.number is None and item.claimed_by is None
    assert item.last_error is not None and "403" in item.last_error
    assert forge.token not in str(info.value) + (info.value.hint or "") + item.last_error
    assert forge.token not in caplog.text
    assert len(triage(config, sleeps).filed) == 1  # the released claim is picked up again


def test_the_cli_files_and_reports_in_one_line_and_errors_are_one_line_too(
    forge: FakeForge,
    history: History,
    sqlite_url: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from watchkeeper.cli.app import main

    add_finding(history)
    config = tmp_path / "wk.toml"
    config.write_text(
        f'[database]\nurl = "{sqlite_url}"\n[tracker]\nkind = "{forge.dialect}"\n'
        f'api_url = "{forge.api_url}"\nallow_http = true\nrepository = "{forge.repository}"\n'
        f'token_env = "{TOKEN_ENV}"\n',
        encoding="utf-8",
    )
    assert main(["triage", "--config", str(config)]) == 0
    assert "triage: 1 issue(s) opened" in capsys.readouterr().out
    monkeypatch.setenv(TOKEN_ENV, "not-the-token-XYZZY")
    assert main(["triage", "--config", str(config)]) == 2
    captured = capsys.readouterr()
    assert "HTTP 401" in captured.err and "XYZZY" not in captured.out + captured.err
    monkeypatch.delenv(TOKEN_ENV)
    assert main(["triage", "--config", str(config)]) == 2
    assert "no tracker token" in capsys.readouterr().err
    assert main(["review-pr", "--config", str(config)]) == 2
    assert "exactly one of --pr N or --all-open" in capsys.readouterr().err
