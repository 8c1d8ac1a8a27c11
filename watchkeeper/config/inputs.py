"""Reading a file the user named: a regular file of bounded size, parsed without a traceback.

Every file a command reads on the user's word (a task set, a trace, a ShareGPT dump, a
recommendation record, a token file) goes through here, because each used to fail its own
way on the same hostile inputs: a FIFO hung the read forever, `/dev/zero` grew the process
until MemoryError, and a 5001-digit integer made Python's JSON and TOML parsers raise a bare
`ValueError` (the int-to-string digit limit) that no handler expected. Here a special file is
refused before it is opened, a file over its size bound before it is read, and every parser
failure (syntax, nesting, digits) becomes the caller's one-line error.
"""

from __future__ import annotations

import json
import os
import stat
import tomllib
from pathlib import Path
from typing import Any

from watchkeeper.errors import WatchkeeperError

MAX_INPUT_BYTES = 1 << 30
"""1 GiB: far above any task set or trace this project reads (the largest shipped is < 1 MiB),
far below what would exhaust the host's memory once decoded and parsed."""


def regular_file(path: Path, what: str, error: type[WatchkeeperError]) -> os.stat_result:
    """`path`'s stat, when it is a regular file (links followed); else `error`. A FIFO, a
    socket or a device is refused unopened: reading one blocks forever or never ends."""
    try:
        info = path.stat()
    except FileNotFoundError:
        raise error(f"{path}: cannot read the {what}: file not found") from None
    except OSError as exc:
        raise error(f"{path}: cannot read the {what}: {exc.strerror}") from None
    if stat.S_ISDIR(info.st_mode):
        raise error(f"{path}: is a folder, not a {what}", hint=f"name the {what} file")
    if not stat.S_ISREG(info.st_mode):
        raise error(
            f"{path}: not a regular file (a FIFO, socket or device), so not a {what}",
            hint=f"name the {what} file itself",
        )
    return info


def read_text(
    path: Path, what: str, error: type[WatchkeeperError], *, limit: int = MAX_INPUT_BYTES
) -> str:
    """The UTF-8 text of the regular file `path`, at most `limit` bytes; else `error`."""
    info = regular_file(path, what, error)
    if info.st_size > limit:
        raise error(
            f"{path}: {info.st_size} bytes, more than a {what} can be ({limit} bytes)",
            hint=f"is this the {what}?",
        )
    try:
        with path.open("rb") as handle:
            data = handle.read(limit + 1)
    except OSError as exc:
        raise error(f"{path}: cannot read the {what}: {exc.strerror}") from None
    if len(data) > limit:  # it grew while we looked
        raise error(f"{path}: more than a {what} can be ({limit} bytes)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(
            f"{path}: cannot read the {what}: not UTF-8 text (byte {exc.start}: {exc.reason})"
        ) from None


def parse_json(text: str, where: str, error: type[WatchkeeperError]) -> Any:
    """`text` as JSON; a syntax error, a nesting too deep for the parser and a number too
    long to convert are each one `error` naming `where`."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise error(f"{where}: invalid JSON: {exc.msg} at column {exc.colno}") from None
    except RecursionError:
        raise error(f"{where}: invalid JSON: nested too deeply") from None
    except ValueError as exc:  # Python's int digit limit: "Exceeds the limit (4300 digits)"
        raise error(f"{where}: invalid JSON: {_digits(exc)}") from None


def parse_toml_text(text: str) -> dict[str, Any]:
    """`tomllib.loads`, a number too long to convert raised as `tomllib.TOMLDecodeError`."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        raise
    except ValueError as exc:
        raise tomllib.TOMLDecodeError(_digits(exc)) from None


def _digits(exc: ValueError) -> str:
    text = str(exc)
    if "digits" in text:
        return "a number with thousands of digits (more than any setting or field can hold)"
    return text.split(";", maxsplit=1)[0]
