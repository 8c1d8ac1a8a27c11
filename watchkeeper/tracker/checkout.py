"""Base and head of a pull request as scratch worktrees (GitPython): the only git user here.

One bare mirror per watched repository lives under `review.checkout_dir`; each review fetches
branches and the forges' `refs/pull/N/head` into it and adds two detached worktrees, removed
afterwards whatever happens. Nothing in the operator's own clones is touched. Credentials for
the fetch come from git's own configuration (credential helper, SSH agent), never from us, and
every git error is stripped of URL credentials before it is shown.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import git

from watchkeeper.errors import ReviewError
from watchkeeper.host.private import private_dir, restrict
from watchkeeper.publish.gitrepo import redact

REFSPECS = ("+refs/heads/*:refs/heads/*", "+refs/pull/*/head:refs/pull/*/head")
_NO_PROMPT = {"GIT_TERMINAL_PROMPT": "0"}


def _error(action: str, exc: Exception) -> ReviewError:
    text = getattr(exc, "stderr", None) or str(exc)
    detail = redact(" ".join(str(text).split()))[:500]
    return ReviewError(f"git could not {action}: {detail}")


class Mirror:
    def __init__(self, root: Path, clone_url: str) -> None:
        if not clone_url:
            raise ReviewError(
                "review.clone_url is not set",
                hint="the git URL (or path) of the watched repository",
            )
        self.path = root / "mirror.git"
        self.clone_url = clone_url
        try:
            if (self.path / "HEAD").is_file():
                self.repo = git.Repo(self.path)
            else:
                private_dir(self.path)  # its config holds the clone URL, credentials and all
                self.repo = git.Repo.init(self.path, bare=True)
                self.repo.create_remote("origin", clone_url)
            self.repo.remote("origin").set_url(clone_url)
            restrict(self.path / "config")
        except (git.GitError, OSError, ValueError) as exc:
            raise _error(f"prepare the mirror in {self.path}", exc) from exc

    def fetch(self) -> None:
        try:
            with self.repo.git.custom_environment(**_NO_PROMPT):
                self.repo.git.fetch("--prune", "origin", *REFSPECS)
        except git.GitCommandError as exc:
            raise _error("fetch the watched repository", exc) from exc

    def has(self, sha: str) -> bool:
        try:
            self.repo.git.cat_file("-e", f"{sha}^{{commit}}")
            return True
        except git.GitCommandError:
            return False

    def fetch_ref(self, ref: str) -> None:
        """A branch head that the refspecs did not bring (e.g. a fork's branch name)."""
        try:
            with self.repo.git.custom_environment(**_NO_PROMPT):
                self.repo.git.fetch("origin", ref)
        except git.GitCommandError as exc:
            raise _error(f"fetch {ref}", exc) from exc

    @contextmanager
    def worktree(self, sha: str, path: Path) -> Iterator[Path]:
        if path.exists():
            shutil.rmtree(path)
            self.repo.git.worktree("prune")
        try:
            self.repo.git.worktree("add", "--detach", str(path), sha)
        except git.GitCommandError as exc:
            raise _error(f"check out {sha[:12]}", exc) from exc
        try:
            yield path
        finally:
            try:
                self.repo.git.worktree("remove", "--force", str(path))
            except git.GitCommandError:
                shutil.rmtree(path, ignore_errors=True)
                self.repo.git.worktree("prune")
