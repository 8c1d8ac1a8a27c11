"""Where watchkeeper keeps things on disk.

Builds and model files are large and slow to make, so they live in a per-user cache that
survives reinstalls; the SQLite database and run logs are data, so they follow XDG's data dir.
Both can be moved with environment variables, which the test suite uses to stay hermetic.
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """`$WATCHKEEPER_CACHE_DIR`, else `$XDG_CACHE_HOME/watchkeeper`, else `~/.cache/watchkeeper`."""
    explicit = os.environ.get("WATCHKEEPER_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "watchkeeper"


def data_dir() -> Path:
    """`$WATCHKEEPER_DATA_DIR`, else `$XDG_DATA_HOME/watchkeeper`, else ~/.local/share/..."""
    explicit = os.environ.get("WATCHKEEPER_DATA_DIR")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base).expanduser() / "watchkeeper"


def default_database_url() -> str:
    return f"sqlite:///{data_dir() / 'watchkeeper.db'}"


def runs_log_dir() -> Path:
    return data_dir() / "logs"


def project_root() -> Path:
    """The source checkout (for jobs/ and reports/ defaults when run from a clone)."""
    return Path(__file__).resolve().parents[2]


def under_working_dir(path: Path) -> str | None:
    """`path` relative to the working directory (posix), or None when it lies outside: how a
    committed file names another without this machine's absolute paths."""
    try:
        return path.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return None
