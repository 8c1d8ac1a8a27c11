"""Commit the morning digest into the reports repository and push it.

Why it is built this way:

- The reports repository is also a place people work in, so a dirty tree, a detached HEAD or
  the wrong branch is refused before anything is written. We never stash, reset or overwrite:
  a dirty tree is a clear error, never a lost change.
- Only the given paths are staged, and a commit is made only when the index differs from HEAD,
  so a re-run with identical content is a no-op instead of an empty commit.
- Author and committer come from the arguments (as environment for the git CLI), because the
  agent runs as a service account whose git config may have no identity at all.
- Pushing is "commit locally first, deliver eventually": a failed push keeps the commit, and
  every later run with `push=True` pushes whatever the branch has that the remote lacks.
- Another writer pushing first is normal, so a non-fast-forward rejection is answered with
  fetch + rebase + retry. Our commits only add digest files, so a rebase conflict means a
  person edited the same file; we abort the rebase and stop rather than guess.
- GitPython reports push failures two ways (PushInfo flags, or GitCommandError when git printed
  nothing parseable), so both are checked, and every GitPython exception becomes PublishError
  here, with credentials stripped from anything that may echo a remote URL.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Literal

import git
from git.remote import PushInfo

from watchkeeper import redaction
from watchkeeper.errors import PublishError

_CREDENTIALS = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)[^/@\s]+@")
_STDERR = re.compile(r"^stderr: '(?P<text>.*)'$", re.DOTALL)
_PUSH_FAILED = (
    PushInfo.ERROR | PushInfo.REMOTE_REJECTED | PushInfo.REMOTE_FAILURE | PushInfo.NO_MATCH
)
_MAX_LISTED = 10
_NO_PROMPT = {"GIT_TERMINAL_PROMPT": "0"}  # an unattended service must fail, not wait for input

PushOutcome = Literal["pushed", "rejected", "failed"]


@dataclass(frozen=True, slots=True)
class PublishResult:
    committed: bool  # False when the files were already identical to HEAD (no empty commit)
    commit_sha: str | None  # HEAD after publishing (new commit, or existing HEAD if unchanged)
    pushed: bool  # True when the remote branch now contains commit_sha
    push_attempts: int  # 0 when push was not requested
    message: str  # human-readable one-line summary


def redact(text: str) -> str:
    """Remove the credentials of any URL in the text: the one redactor (`redaction.py`) first,
    then any user name left before the host of a remote (`https://user@host` keeps no name)."""
    return _CREDENTIALS.sub(r"\g<scheme>", redaction.redact(text))


def _stderr(exc: git.GitCommandError) -> str:
    """git's own words from the exception, on one line, without credentials."""
    text = str(exc.stderr or exc).strip()
    match = _STDERR.match(text)
    lines = (match.group("text") if match else text).splitlines()
    return redact("; ".join(line.strip() for line in lines if line.strip()))


@contextmanager
def _git_errors(action: str, repo_path: Path) -> Iterator[None]:
    """Convert GitPython (and file system) exceptions into PublishError at this boundary."""
    try:
        yield
    except git.GitCommandError as exc:
        raise PublishError(f"git failed to {action} in {repo_path}: {_stderr(exc)}") from exc
    except (git.GitError, ValueError, OSError) as exc:
        raise PublishError(f"could not {action} in {repo_path}: {redact(str(exc))}") from exc


def publish_files(
    repo_path: Path,
    files: Mapping[str, bytes],
    *,
    message: str,
    author_name: str,
    author_email: str,
    branch: str = "main",
    push: bool = False,
    remote: str = "origin",
    push_attempts: int = 4,
    backoff_s: float = 1.0,
) -> PublishResult:
    """Write `files`, commit them to `branch` if they changed, and optionally push."""
    identity = {
        "GIT_AUTHOR_NAME": author_name,
        "GIT_AUTHOR_EMAIL": author_email,
        "GIT_COMMITTER_NAME": author_name,
        "GIT_COMMITTER_EMAIL": author_email,
    }
    relpaths = [_checked_relpath(name) for name in files]
    repo = _open(repo_path)
    with repo, _git_errors("publish", repo_path):
        _refuse_unsafe_state(repo, repo_path, branch, remote if push else None)
        root = Path(str(repo.working_tree_dir))
        for rel, content in zip(relpaths, files.values(), strict=True):
            target = root / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content)
        if relpaths:
            repo.git.add("--", *relpaths)
        status, _, _ = repo.git.diff(
            "--cached", "--quiet", with_exceptions=False, with_extended_output=True
        )
        committed = status != 0
        if committed:
            repo.git.commit("--quiet", "-m", message, env=identity)
        sha = repo.head.commit.hexsha if repo.head.is_valid() else None
        if not push or sha is None:
            note = "; nothing to push" if push else ""
            return PublishResult(committed, sha, False, 0, _describe(committed, sha) + note)
        sha, attempts, rebases = _push_with_retries(
            repo, repo_path, remote, branch, push_attempts, backoff_s, identity
        )
        after = f" after {attempts} attempts" if attempts > 1 else ""
        rebased = {0: "", 1: " (rebased once)"}.get(rebases, f" (rebased {rebases} times)")
        text = f"{_describe(committed, sha)} and pushed to {remote}/{branch}{after}{rebased}"
        return PublishResult(committed, sha, True, attempts, text)


def _describe(committed: bool, sha: str | None) -> str:
    if sha is None:
        return "no change (no commits yet)"
    return f"committed {sha[:7]}" if committed else f"no change (HEAD {sha[:7]})"


def _checked_relpath(name: str) -> str:
    path = PurePosixPath(name)
    if not name or path.is_absolute() or ".." in path.parts or ".git" in path.parts:
        raise PublishError(
            f"refusing to publish {name!r}: not a relative path inside the repository",
            hint="pass repo-relative POSIX paths like 'digests/2024-05-01.md'",
        )
    return path.as_posix()


def _open(repo_path: Path) -> git.Repo:
    try:
        repo = git.Repo(repo_path)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError) as exc:
        raise PublishError(
            f"{repo_path} is not a git working tree",
            hint=f"clone the reports repository there first (git clone URL {repo_path})",
        ) from exc
    if repo.bare:
        repo.close()
        raise PublishError(
            f"{repo_path} is a bare repository, not a working tree",
            hint="point the reports path at a clone with a checked-out branch",
        )
    return repo


def _refuse_unsafe_state(repo: git.Repo, repo_path: Path, branch: str, remote: str | None) -> None:
    if remote is not None and remote not in {r.name for r in repo.remotes}:
        raise PublishError(
            f"reports repository {repo_path} has no remote {remote!r} to push to",
            hint=f"git -C {repo_path} remote add {remote} URL, or publish without push",
        )
    if repo.head.is_detached:
        sha = repo.head.commit.hexsha[:12]
        raise PublishError(
            f"reports repository {repo_path}: HEAD is detached at {sha}; check out {branch} first",
            hint=f"git -C {repo_path} checkout {branch}",
        )
    current = repo.active_branch.name
    if current != branch:
        raise PublishError(
            f"reports repository {repo_path} is on branch {current!r}, expected {branch!r}",
            hint=f"git -C {repo_path} checkout {branch}, or configure the branch to publish to",
        )
    lines = repo.git.status("--porcelain", "--untracked-files=all").splitlines()
    if lines:
        listed = ", ".join(line[3:] for line in lines[:_MAX_LISTED])
        more = f" and {len(lines) - _MAX_LISTED} more" if len(lines) > _MAX_LISTED else ""
        raise PublishError(
            f"reports repository {repo_path} has uncommitted changes: {listed}{more}",
            hint="commit, stash or remove them yourself; watchkeeper never touches your changes",
        )


def _push_with_retries(
    repo: git.Repo,
    repo_path: Path,
    remote_name: str,
    branch: str,
    attempts: int,
    backoff_s: float,
    identity: Mapping[str, str],
) -> tuple[str, int, int]:
    """Push until the remote has our branch; return (pushed sha, attempts used, rebases)."""
    remote = repo.remote(remote_name)
    refspec = f"refs/heads/{branch}:refs/heads/{branch}"
    tracking = f"refs/remotes/{remote_name}/{branch}"
    rebases, last_error = 0, "no attempt made"
    for attempt in range(1, max(attempts, 1) + 1):
        if attempt > 1 and backoff_s > 0:
            time.sleep(backoff_s * 2 ** (attempt - 2))
        outcome, detail = _push_once(remote, refspec)
        if outcome == "pushed":
            return repo.head.commit.hexsha, attempt, rebases
        last_error = detail
        if outcome == "rejected":
            try:
                repo.git.fetch(remote_name, f"+refs/heads/{branch}:{tracking}", env=_NO_PROMPT)
            except git.GitCommandError as exc:
                last_error = _stderr(exc)
                continue
            _rebase_or_abort(repo, repo_path, tracking, identity)
            rebases += 1
    sha = repo.head.commit.hexsha
    raise PublishError(
        f"push of {branch} to {remote_name} failed after {attempts} attempts ({last_error}); "
        f"commit {sha[:12]} is kept locally and will be pushed next time",
        hint=f"check that {remote_name} is reachable; the next publish with push retries it",
    )


def _push_once(remote: git.Remote, refspec: str) -> tuple[PushOutcome, str]:
    # GitPython logs git's stderr (which can echo the remote URL) as a warning when some refs
    # failed; the outcome is reported through PublishError instead, so silence it here.
    logging.getLogger("git.remote").addFilter(_drop)
    try:
        with remote.repo.git.custom_environment(**_NO_PROMPT):
            infos = remote.push(refspec, set_upstream=True)
    except git.GitCommandError as exc:
        return "failed", _stderr(exc)
    finally:
        logging.getLogger("git.remote").removeFilter(_drop)
    if not infos:
        error = infos.error
        return "failed", redact(str(error)) if error else "git push reported nothing"
    for info in infos:
        if info.flags & PushInfo.REJECTED:
            return "rejected", f"rejected: {info.summary.strip()}"
        if info.flags & _PUSH_FAILED:
            return "failed", redact(info.summary.strip())
    return "pushed", ""


def _drop(record: logging.LogRecord) -> bool:
    return False


def _rebase_or_abort(
    repo: git.Repo, repo_path: Path, onto: str, identity: Mapping[str, str]
) -> None:
    before = repo.head.commit.hexsha
    try:
        # Only the committer: replayed commits keep whoever authored them.
        committer = {k: v for k, v in identity.items() if k.startswith("GIT_COMMITTER_")}
        repo.git.rebase(onto, env=committer)
    except git.GitCommandError as exc:
        repo.git.rebase("--abort", with_exceptions=False)
        conflict = "CONFLICT" in f"{exc.stdout}{exc.stderr}"
        why = "conflicted: someone else changed the same file" if conflict else _stderr(exc)
        raise PublishError(
            f"rebasing the local commit onto {onto} in {repo_path} failed ({why}); the rebase "
            f"was aborted and local commit {before[:12]} is kept",
            hint=f"resolve by hand: cd {repo_path} && git pull --rebase, fix, git push",
        ) from exc
