"""The processes the offline bundle runs: pip as this interpreter's module, the one place the
bundle asks the package index for wheels (`pip download`, `pip wheel`), and `git archive` of
the checkout. Failures become one `InstallError` with the tail of the tool's own message, so a
bundle that cannot be built says which step failed.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from watchkeeper.errors import InstallError


@dataclass(frozen=True, slots=True)
class Target:
    """The interpreter and platform the wheels are for (None: this one's)."""

    python_version: str | None = None
    platforms: tuple[str, ...] = ()

    def args(self) -> list[str]:
        """pip's cross-download options; binary wheels only where a target is named (pip
        cannot build an sdist for another interpreter)."""
        if self.python_version is None and not self.platforms:
            return ["--prefer-binary"]
        out = ["--only-binary=:all:", "--implementation", "cp"]
        if self.python_version:
            out += ["--python-version", self.python_version]
        for platform in self.platforms:
            out += ["--platform", platform]
        return out


def pip(args: Sequence[str], *, what: str) -> None:
    """`python -m pip ARGS`; raises InstallError naming `what` when pip fails."""
    command = [sys.executable, "-m", "pip", "--disable-pip-version-check", *args]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        lines = [ln for ln in result.stderr.splitlines() if not ln.startswith("WARNING: Loc")]
        raise InstallError(
            f"pip could not {what}: {' '.join(lines[-3:])[-500:]}",
            hint="build the bundle where the package index answers (pip config list)",
        )


def archive_head(root: Path, target: Path) -> None:
    """`git archive HEAD` of the checkout at `root` as a .tar.gz (committed files only)."""
    result = subprocess.run(
        ["git", "-C", str(root), "archive", "--format=tar.gz", "-o", str(target), "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise InstallError(f"git archive failed: {result.stderr.strip()[-300:]}")
