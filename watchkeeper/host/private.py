"""Files only their owner may read: the database, the spool, the review mirror's git config.

They hold prompts and model outputs (the database, the soak's spool) or clone credentials (a
mirror's `config` may carry a remote URL with a token), and the process umask of a cron job or
a service is usually 022: every file world-readable. So these are created 0600 in folders
created 0700, whatever the umask. A folder or file that already exists is left as it is: it
may be the user's (`/tmp`, a shared data disk), and changing its mode is theirs to decide.
"""

from __future__ import annotations

import os
from pathlib import Path

FILE_MODE = 0o600
DIR_MODE = 0o700


def private_dir(path: Path) -> Path:
    """`path` and any missing parents, each created 0700 (existing ones untouched)."""
    missing = []
    here = path
    while not here.exists():
        missing.append(here)
        if here.parent == here:
            break
        here = here.parent
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=DIR_MODE)
        except FileExistsError:
            continue  # another process made it between the check and here
        os.chmod(folder, DIR_MODE)  # mkdir's mode is filtered by the umask
    return path


def private_file(path: Path) -> Path:
    """Create `path` empty and 0600 when it does not exist yet (its folder via `private_dir`)."""
    private_dir(path.parent)
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, FILE_MODE)
    except FileExistsError:
        return path
    os.close(fd)
    os.chmod(path, FILE_MODE)
    return path


def restrict(path: Path) -> None:
    """Make a file that a library created (git's `config`) 0600."""
    if path.is_file():
        os.chmod(path, FILE_MODE)
