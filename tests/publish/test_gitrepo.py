"""Publishing the digest into a real git repository with a real (local, bare) remote."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from watchkeeper.errors import PublishError
from watchkeeper.publish import gitrepo
from watchkeeper.publish.gitrepo import publish_files, redact

AUTHOR = {"author_name": "Watchkeeper Bot", "author_email": "bot@example.org"}
DIGEST = "digests/2024-05-01.md"


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True)
    return done.stdout.strip()


@pytest.fixture(autouse=True)
def _hermetic_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No user or system git config leaks in (identity, default branch, signing, hooks)."""
    empty = tmp_path / "empty.gitconfig"
    empty.write_text("")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(empty))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for name in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_AUTHOR_NAME"):
        monkeypatch.delenv(name, raising=False)


def configure(repo: Path) -> Path:
    git(repo, "config", "user.name", "Test Person")
    git(repo, "config", "user.email", "person@example.org")
    return repo


@pytest.fixture
def remote(tmp_path: Path) -> Path:
    bare = tmp_path / "remote.git"
    git(tmp_path, "init", "--quiet", "--bare", "--initial-branch=main", str(bare))
    return bare


@pytest.fixture
def work(tmp_path: Path, remote: Path) -> Path:
    """A fresh working tree on unborn `main`, with `origin` pointing at the bare remote."""
    repo = tmp_path / "work"
    git(tmp_path, "init", "--quiet", "--initial-branch=main", str(repo))
    git(repo, "remote", "add", "origin", str(remote))
    return configure(repo)


def other_clone(tmp_path: Path, remote: Path) -> Path:
    """A second writer's clone of the remote (after the first push created `main`)."""
    other = tmp_path / "other"
    git(tmp_path, "clone", "--quiet", str(remote), str(other))
    return configure(other)


def publish(work: Path, files: dict[str, bytes], **kwargs: object) -> gitrepo.PublishResult:
    options: dict[str, object] = {"message": "Digest 2024-05-01", "backoff_s": 0.0, **AUTHOR}
    options.update(kwargs)
    return publish_files(work, files, **options)  # type: ignore[arg-type]


def commit_count(repo: Path, ref: str = "HEAD") -> int:
    return int(git(repo, "rev-list", "--count", ref))


def test_the_first_publish_into_an_empty_repository_creates_the_root_commit_and_remote_branch(
    work: Path, remote: Path
) -> None:
    result = publish(work, {DIGEST: b"# May 1\n"}, push=True)

    assert result.committed and result.pushed and result.push_attempts == 1
    assert result.commit_sha == git(work, "rev-parse", "HEAD")
    assert git(remote, "rev-parse", "refs/heads/main") == result.commit_sha
    assert commit_count(work) == 1
    assert git(work, "rev-parse", "--abbrev-ref", "main@{upstream}") == "origin/main"
    assert (work / DIGEST).read_bytes() == b"# May 1\n"
    assert result.message == f"committed {result.commit_sha[:7]} and pushed to origin/main"


def test_publishing_identical_content_again_makes_no_commit_and_no_empty_commit(
    work: Path, remote: Path
) -> None:
    first = publish(work, {DIGEST: b"same\n"}, push=True)
    second = publish(work, {DIGEST: b"same\n"}, push=True)

    assert not second.committed and second.pushed
    assert second.commit_sha == first.commit_sha
    assert commit_count(work) == 1 and commit_count(remote, "main") == 1
    assert "no change" in second.message


def test_changed_content_makes_one_new_commit_with_the_given_author_and_committer(
    work: Path,
) -> None:
    publish(work, {DIGEST: b"v1\n", "index.md": b"index\n"})
    result = publish(work, {DIGEST: b"v2\n"}, message="Digest v2\n\nBody line.")

    assert result.committed and not result.pushed and result.push_attempts == 0
    assert commit_count(work) == 2
    assert git(work, "show", f"HEAD:{DIGEST}") == "v2"
    assert git(work, "diff", "--name-only", "HEAD~1", "HEAD") == DIGEST
    assert git(work, "log", "-1", "--format=%an|%ae|%cn|%ce") == (
        "Watchkeeper Bot|bot@example.org|Watchkeeper Bot|bot@example.org"
    )
    assert git(work, "log", "-1", "--format=%s|%b") == "Digest v2|Body line."


def test_a_push_rejected_because_another_writer_pushed_first_is_rebased_and_retried(
    tmp_path: Path, work: Path, remote: Path
) -> None:
    publish(work, {DIGEST: b"day 1\n"}, push=True)
    other = other_clone(tmp_path, remote)
    (other / "notes.md").write_text("a person's note\n")
    git(other, "add", "notes.md")
    git(other, "commit", "--quiet", "-m", "Add notes")
    git(other, "push", "--quiet", "origin", "main")
    # Like the service account: no identity of its own, and git must not guess one.
    git(work, "config", "--unset", "user.name")
    git(work, "config", "--unset", "user.email")
    git(work, "config", "user.useConfigOnly", "true")

    result = publish(
        work, {"digests/2024-05-02.md": b"day 2\n"}, message="Digest 2024-05-02", push=True
    )

    assert result.committed and result.pushed and result.push_attempts == 2
    assert "after 2 attempts (rebased once)" in result.message
    assert git(remote, "rev-parse", "main") == result.commit_sha == git(work, "rev-parse", "HEAD")
    assert git(remote, "log", "--format=%s", "main").splitlines() == [
        "Digest 2024-05-02",
        "Add notes",
        "Digest 2024-05-01",
    ]
    assert git(remote, "rev-list", "--merges", "--count", "main") == "0"
    assert git(work, "log", "-1", "--format=%an|%cn") == "Watchkeeper Bot|Watchkeeper Bot"
    assert (work / "notes.md").read_text() == "a person's note\n"


def test_a_rebase_conflict_aborts_the_rebase_and_keeps_the_local_commit_and_tree(
    tmp_path: Path, work: Path, remote: Path
) -> None:
    publish(work, {DIGEST: b"original\n"}, push=True)
    other = other_clone(tmp_path, remote)
    (other / DIGEST).write_text("edited by a person\n")
    git(other, "commit", "--quiet", "-am", "Hand edit")
    git(other, "push", "--quiet", "origin", "main")

    with pytest.raises(PublishError, match="conflict") as caught:
        publish(work, {DIGEST: b"regenerated\n"}, push=True)

    local = git(work, "rev-parse", "HEAD")
    assert f"local commit {local[:12]} is kept" in caught.value.message
    assert caught.value.hint is not None
    assert git(work, "rev-parse", "--abbrev-ref", "HEAD") == "main"
    assert git(work, "show", f"HEAD:{DIGEST}") == "regenerated"
    assert (work / DIGEST).read_bytes() == b"regenerated\n"
    assert git(work, "status", "--porcelain") == ""
    assert not (work / ".git" / "rebase-merge").exists()
    assert not (work / ".git" / "rebase-apply").exists()
    assert git(remote, "log", "-1", "--format=%s", "main") == "Hand edit"


def test_an_unreachable_remote_fails_after_exactly_push_attempts_and_names_the_kept_sha(
    work: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    git(work, "remote", "set-url", "origin", str(tmp_path / "no-such-remote.git"))
    calls: list[str] = []
    sleeps: list[float] = []
    real_push_once = gitrepo._push_once

    def counting_push_once(*args: object) -> tuple[str, str]:
        calls.append("push")
        return real_push_once(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(gitrepo, "_push_once", counting_push_once)
    monkeypatch.setattr(time, "sleep", sleeps.append)  # the module gitrepo sleeps with

    with pytest.raises(PublishError) as caught:
        publish(work, {DIGEST: b"x\n"}, push=True, push_attempts=3, backoff_s=0.25)

    sha = git(work, "rev-parse", "HEAD")
    assert len(calls) == 3
    assert sleeps == [0.25, 0.5]
    assert "after 3 attempts" in caught.value.message
    assert f"commit {sha[:12]} is kept locally and will be pushed next time" in str(caught.value)
    assert commit_count(work) == 1


def test_a_later_publish_with_push_delivers_a_commit_whose_push_failed_earlier(
    work: Path, remote: Path, tmp_path: Path
) -> None:
    git(work, "remote", "set-url", "origin", str(tmp_path / "offline.git"))
    with pytest.raises(PublishError, match="kept locally"):
        publish(work, {DIGEST: b"yesterday\n"}, push=True, push_attempts=2)
    kept = git(work, "rev-parse", "HEAD")
    git(work, "remote", "set-url", "origin", str(remote))

    result = publish(work, {DIGEST: b"yesterday\n"}, push=True)

    assert not result.committed and result.pushed
    assert result.commit_sha == kept == git(remote, "rev-parse", "main")


def test_a_modified_tracked_file_is_refused_and_left_untouched(work: Path) -> None:
    first = publish(work, {DIGEST: b"committed\n"})
    (work / DIGEST).write_bytes(b"a person's unsaved edit\n")

    with pytest.raises(PublishError, match="uncommitted changes: digests/2024-05-01.md") as caught:
        publish(work, {DIGEST: b"regenerated\n"})

    assert caught.value.hint is not None
    assert (work / DIGEST).read_bytes() == b"a person's unsaved edit\n"
    assert git(work, "rev-parse", "HEAD") == first.commit_sha


def test_an_untracked_file_is_refused_and_nothing_is_written_or_committed(work: Path) -> None:
    first = publish(work, {DIGEST: b"committed\n"})
    (work / "scratch").mkdir()
    (work / "scratch" / "draft.txt").write_text("mine\n")

    with pytest.raises(PublishError, match=r"scratch/draft\.txt"):
        publish(work, {"digests/new.md": b"new\n"})

    assert (work / "scratch" / "draft.txt").read_text() == "mine\n"
    assert not (work / "digests" / "new.md").exists()
    assert git(work, "rev-parse", "HEAD") == first.commit_sha


def test_a_detached_head_is_refused(work: Path) -> None:
    publish(work, {DIGEST: b"x\n"})
    head = git(work, "rev-parse", "HEAD")
    git(work, "checkout", "--quiet", "--detach")

    with pytest.raises(PublishError, match="HEAD is detached at") as caught:
        publish(work, {DIGEST: b"y\n"})

    assert f"detached at {head[:12]}; check out main first" in caught.value.message
    assert (work / DIGEST).read_bytes() == b"x\n"


def test_a_different_checked_out_branch_is_refused_naming_both(work: Path) -> None:
    publish(work, {DIGEST: b"x\n"})
    git(work, "checkout", "--quiet", "-b", "experiment")

    with pytest.raises(PublishError, match="'experiment', expected 'main'"):
        publish(work, {DIGEST: b"y\n"})

    assert commit_count(work) == 1


def test_a_missing_remote_is_refused_before_anything_is_written(work: Path) -> None:
    with pytest.raises(PublishError, match="has no remote 'upstream'"):
        publish(work, {DIGEST: b"x\n"}, push=True, remote="upstream")

    assert not (work / DIGEST).exists()


def test_a_directory_that_is_not_a_working_tree_is_refused(tmp_path: Path, remote: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(PublishError, match=f"{plain} is not a git working tree"):
        publish(plain, {DIGEST: b"x\n"})
    with pytest.raises(PublishError, match="bare repository"):
        publish(remote, {DIGEST: b"x\n"})
    assert not (plain / "digests").exists()


def test_paths_that_escape_the_repository_are_refused(work: Path) -> None:
    for bad in ("../outside.md", "/etc/passwd", ".git/config", ""):
        with pytest.raises(PublishError, match="not a relative path"):
            publish(work, {bad: b"x\n"})
    assert not (work.parent / "outside.md").exists()


def test_publishing_nothing_into_an_empty_repository_neither_commits_nor_pushes(
    work: Path,
) -> None:
    result = publish(work, {}, push=True)

    assert result == gitrepo.PublishResult(
        False, None, False, 0, "no change (no commits yet); nothing to push"
    )


def test_credentials_in_urls_are_stripped_from_messages() -> None:
    text = "fatal: unable to access 'https://bot:s3cret@git.example.org/r.git/' and ssh://u@h/x"
    assert redact(text) == "fatal: unable to access 'https://git.example.org/r.git/' and ssh://h/x"
