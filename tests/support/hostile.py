"""What the hostile-input modules share: running the real CLI, and the before/after checks.

A hostile case goes through `watchkeeper.cli.app.main` as it would from a shell and must end
with exit 2 and one `error:` line (plus at most a `hint:` line), no traceback, nothing written
or changed under the case's folder, and no llama-server started.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from watchkeeper.cli.app import main


@dataclass(frozen=True)
class Case:
    """One hostile input: the argv (built in the test's folder) and text the error must say."""

    argv: Callable[[Path], list[str]]
    says: str


def write(path: Path, data: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data, encoding="utf-8")
    return path


def fifo(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)
    return path


def tree(root: Path) -> dict[str, tuple[int, str]]:
    """Every file and folder under `root`: mode and content hash (a link by its target, a
    FIFO unread)."""
    found: dict[str, tuple[int, str]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [*dirnames, *filenames]:
            path = Path(dirpath) / name
            info = path.lstat()
            if stat.S_ISLNK(info.st_mode):
                digest = os.readlink(path)
            elif stat.S_ISREG(info.st_mode):
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
            else:
                digest = "special"
            found[str(path.relative_to(root))] = (info.st_mode, digest)
    return found


def llama_servers() -> set[int]:
    return {c.pid for c in psutil.Process().children(recursive=True) if "llama-server" in c.name()}


def run_cli(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exc:  # argparse's own exit, in the house format
        return int(exc.code or 0)


def assert_one_line(code: int, err: str, says: str) -> None:
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2, err
    assert "Traceback" not in err, err
    assert lines and lines[0].startswith("error:"), err
    assert len(lines) == 1 or (len(lines) == 2 and lines[1].startswith("hint:")), err
    assert says in lines[0], err


@pytest.fixture
def hostile_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A folder for the case's files, the process working there (so nothing defaults into
    the checkout), no config or database from the environment, and a careless umask."""
    monkeypatch.chdir(tmp_path)
    for name in ("WATCHKEEPER_CONFIG", "WATCHKEEPER_DATABASE_URL", "WK_HOSTILE_UNSET"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("WATCHKEEPER_CACHE_DIR", str(tmp_path / "cache"))
    old = os.umask(0o022)
    try:
        yield tmp_path
    finally:
        os.umask(old)
