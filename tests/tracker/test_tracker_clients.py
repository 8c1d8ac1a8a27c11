"""The GitHub and Gitea clients against the fake forge over real HTTP, in both dialects."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from support.fakeforge import FakeForge
from support.trackerkit import TOKEN_ENV, Sleeps, tracker_config

from watchkeeper.errors import ConfigError, TrackerPermanentError, TrackerTransientError
from watchkeeper.tracker.forge import Forge
from watchkeeper.tracker.tokens import load_token, open_forge


def test_issues_are_listed_across_pages(forge: FakeForge, client: Forge) -> None:
    for n in range(7):
        client.create_issue(f"issue {n}", "body", ["watchkeeper"])
    client.create_issue("unlabelled", "body", [])
    listed = client.list_issues(labels=["watchkeeper"])
    assert sorted(i.title for i in listed) == sorted(f"issue {n}" for n in range(7))
    assert forge.requests("GET", "/issues") == 3  # page size 3: 3 + 3 + 1


def test_labels_go_by_name_on_github_and_by_id_on_gitea(forge: FakeForge, client: Forge) -> None:
    issue = client.create_issue("t", "b", ["watchkeeper", "regression"])
    assert set(issue.labels) == {"watchkeeper", "regression"}
    client.add_labels(issue.number, ["watchkeeper/ack"])
    client.remove_label(issue.number, "regression")
    client.remove_label(issue.number, "never-there")
    assert set(client.get_issue(issue.number).labels) == {"watchkeeper", "watchkeeper/ack"}
    # Gitea needed the ids of labels it did not have yet: looked up once, then created.
    assert forge.requests("POST", "/llm/labels") == (0 if forge.github else 3)


def test_close_and_reopen_accept_each_dialects_status_code(forge: FakeForge, client: Forge) -> None:
    issue = client.create_issue("t", "b", [])
    assert client.close(issue.number, not_planned=True).state == "closed"
    assert forge.issues[issue.number]["state_reason"] == ("not_planned" if forge.github else None)
    assert client.reopen(issue.number).state == "open"
    assert (forge.github, forge.log[-1][2]) in ((True, 200), (False, 201))


def test_comments_are_created_listed_and_edited(forge: FakeForge, client: Forge) -> None:
    issue = client.create_issue("t", "b", [])
    made = [client.comment(issue.number, f"c{n}") for n in range(4)]
    client.edit_comment(made[1].id, "edited")
    bodies = [c.body for c in client.comments(issue.number)]
    assert bodies == ["c0", "edited", "c2", "c3"]
    assert all(c.author == forge.bot for c in client.comments(issue.number))


def test_github_search_lags_behind_creation_and_gitea_does_not(
    forge: FakeForge, client: Forge
) -> None:
    client.create_issue("t", "marker wk-0123", [])
    found = client.search_issues("wk-0123")
    assert len(found) == (0 if forge.github else 1)
    forge.search_lag_s = 0
    assert [i.title for i in client.search_issues("wk-0123")] == ["t"]


def test_a_429_waits_for_retry_after_then_succeeds(
    forge: FakeForge, client: Forge, sleeps: Sleeps
) -> None:
    forge.fail("GET", r"/issues$", "rate429", wait_s=7)
    assert client.list_issues() == []
    assert sleeps.calls == [7.0]


def test_github_403_rate_limit_waits_until_the_reset(
    forge: FakeForge, client: Forge, sleeps: Sleeps
) -> None:
    forge.fail("POST", r"/issues$", "rate403", wait_s=20)
    issue = client.create_issue("t", "b", [])
    assert issue.number in forge.issues
    assert len(sleeps.calls) == 1 and 15 <= sleeps.calls[0] <= 22
    assert len(forge.all_issues()) == 1


def test_a_rate_limit_beyond_the_wait_cap_is_a_transient_error(
    forge: FakeForge, sleeps: Sleeps
) -> None:
    c = open_forge(tracker_config(forge, max_rate_limit_wait_s=30), sleep=sleeps)
    forge.fail("GET", r"/issues$", "rate429", wait_s=3600)
    with pytest.raises(TrackerTransientError, match="rate limited for 3600 s"):
        c.list_issues()
    assert sleeps.calls == []
    c.close_client()


def test_5xx_on_a_read_is_retried_with_backoff(
    forge: FakeForge, client: Forge, sleeps: Sleeps
) -> None:
    forge.fail("GET", r"/issues$", "status", status=503, count=2)
    assert client.list_issues() == []
    assert len(sleeps.calls) == 2 and sleeps.calls[1] > sleeps.calls[0]


def test_5xx_on_every_attempt_gives_up_as_transient(
    forge: FakeForge, client: Forge, sleeps: Sleeps
) -> None:
    forge.fail("GET", r"/issues$", "status", status=500, count=10)
    with pytest.raises(TrackerTransientError, match="after 4 attempts"):
        client.list_issues()
    assert len(sleeps.calls) == 3


def test_a_create_whose_answer_is_lost_is_not_repeated(forge: FakeForge, client: Forge) -> None:
    forge.fail("POST", r"/issues$", "after", status=502)
    with pytest.raises(TrackerTransientError, match="not repeated"):
        client.create_issue("t", "b", [])
    assert len(forge.all_issues()) == 1
    assert forge.requests("POST", "/issues") == 1


def test_bad_credentials_are_permanent_with_the_apis_message_and_no_token(
    forge: FakeForge, sleeps: Sleeps, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TOKEN_ENV, "wrong-token-SECRET")
    c = open_forge(tracker_config(forge), sleep=sleeps)
    with pytest.raises(TrackerPermanentError) as info:
        c.list_issues()
    assert info.value.status == 401
    assert ("Bad credentials" if forge.github else "user does not exist") in str(info.value)
    assert "SECRET" not in str(info.value) and "token" in (info.value.hint or "")
    assert sleeps.calls == []
    c.close_client()


def test_403_without_rate_limit_and_404_and_422_are_permanent(
    forge: FakeForge, client: Forge, sleeps: Sleeps
) -> None:
    forge.fail("POST", r"/issues$", "forbidden")
    with pytest.raises(TrackerPermanentError, match="Resource not accessible") as info:
        client.create_issue("t", "b", [])
    assert info.value.status == 403
    with pytest.raises(TrackerPermanentError, match="HTTP 404") as info:
        client.get_issue(999)
    assert "tracker.repository" in (info.value.hint or "")
    with pytest.raises(TrackerPermanentError, match="HTTP 422") as info:
        client.create_issue("", "b", [])
    if forge.github:
        assert "Validation Failed (Issue title missing_field)" in str(info.value)
    else:
        assert "[Title]: Required" in str(info.value)
    assert sleeps.calls == []


def test_open_pulls_and_their_changed_files(forge: FakeForge, client: Forge) -> None:
    files = [f"src/file{n}.py" for n in range(5)] + ["watchkeeper.toml"]
    number = forge.add_pull("bump", "feature", "a" * 40, "b" * 40, files)
    (pr,) = client.open_pulls()
    assert (pr.number, pr.head_sha, pr.head_ref, pr.base_ref) == (
        number,
        "a" * 40,
        "feature",
        "main",
    )
    assert client.pull_files(number) == files
    assert client.list_issues() == []  # pull requests are not issues here


def test_the_token_never_reaches_the_logs(
    forge: FakeForge, client: Forge, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    forge.fail("GET", r"/issues$", "status", status=500)
    issue = client.create_issue("t", "b", ["x"])
    client.list_issues()
    client.comment(issue.number, "hello")
    assert caplog.records, "the client logs its requests"
    assert forge.token not in caplog.text
    assert all(forge.token not in str(r.args) for r in caplog.records)


def test_tokens_come_from_the_env_a_file_env_or_the_config_file(tmp_path: Path) -> None:
    cfg = tracker_config(FakeForge("github"), token_file=str(tmp_path / "token"))
    assert load_token(cfg, {TOKEN_ENV: " abc \n"}) == "abc"
    (tmp_path / "alt").write_text("from-env-file\n")
    assert load_token(cfg, {f"{TOKEN_ENV}_FILE": str(tmp_path / "alt")}) == "from-env-file"
    (tmp_path / "token").write_text("from-config-file\n")
    assert load_token(cfg, {}) == "from-config-file"
    (tmp_path / "token").unlink()
    with pytest.raises(ConfigError, match="cannot read"):
        load_token(cfg, {})
    with pytest.raises(ConfigError, match="no tracker token"):
        load_token(tracker_config(FakeForge("github")), {})
