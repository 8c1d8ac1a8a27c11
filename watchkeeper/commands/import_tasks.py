"""`watchkeeper import-tasks`: a ShareGPT file or a request trace written out as a task set.

The output never overwrites what is read: `--out` naming the source (the same path, a
symlink to it or a hard link of it) is refused before anything is read, and the task set is
written to a temporary file beside the target and renamed over it, so a failure (a bad line, a
full disk) leaves the old file, or none, never half of one.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from watchkeeper.errors import ConfigError
from watchkeeper.load.traffic import category_counts, import_sharegpt, load_trace, taskset_lines


@dataclass(frozen=True, slots=True)
class Imported:
    out: Path
    tasks: int
    categories: dict[str, int]


def same_file(a: Path, b: Path) -> bool:
    """`a` and `b` are one file: the same path once links are resolved, or one inode."""
    if a.resolve() == b.resolve():
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def write_atomically(path: Path, text: str) -> Path:
    """`text` in `path`, all or nothing (a temporary file beside it, renamed over it)."""
    folder = path.parent
    if not folder.is_dir():
        raise ConfigError(
            f"--out {path}: the folder {folder} does not exist",
            hint="create it first, or name a file in an existing folder",
        )
    if path.is_dir():
        raise ConfigError(f"--out {path}: is a folder", hint="name the task-set file to write")
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.", suffix=".partial")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        if path.exists():  # a replaced file keeps its mode; a new one holds prompts: 0600
            os.chmod(temporary, path.stat().st_mode & 0o777)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    return path


def import_tasks_command(source: Path, out: Path, *, fmt: Literal["sharegpt", "trace"]) -> Imported:
    if same_file(source, out):
        raise ConfigError(
            f"--out {out} is the file being imported ({source}): it would be overwritten",
            hint="write the task set to another file",
        )
    tasks = import_sharegpt(source) if fmt == "sharegpt" else load_trace(source)[0]
    write_atomically(out, taskset_lines(tasks))
    return Imported(out, len(tasks), category_counts(tasks))
