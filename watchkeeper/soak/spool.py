"""Write-ahead spool in front of the database: nothing measured is lost to an outage.

Every item is appended to a JSONL journal on local disk (and flushed to the OS) *before* the
database sees it. A drain moves the journal aside and writes it in one idempotent batch per
chunk; only a committed chunk's file is deleted. While the database is unreachable the
journal just grows, and the first drain that succeeds replays it all. Because every row has a
natural key, a replay of something that did reach the database (a commit whose answer was
lost with the connection) changes nothing. A watchkeeper killed outright leaves its journal
behind; resuming the campaign drains it first.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from watchkeeper.errors import StoreError
from watchkeeper.host.private import private_dir, private_file
from watchkeeper.soak.records import IncidentRecord, Item, item_from_json, item_to_json

WriteBatch = Callable[[Sequence[Item]], None]
CHUNK = 500


class Journal:
    """Append-only JSONL files in one directory: `journal.jsonl` plus pending ones."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        # Prompts and outputs wait here for the database: 0600 files in a 0700 folder.
        private_dir(directory)
        self._path = directory / "journal.jsonl"
        self._lock = threading.Lock()
        self._file = private_file(self._path).open("a", encoding="utf-8")

    def append(self, items: Iterable[Item]) -> None:
        lines = "".join(json.dumps(item_to_json(i), separators=(",", ":")) + "\n" for i in items)
        with self._lock:
            self._file.write(lines)
            self._file.flush()

    def rotate(self) -> None:
        """Move the live journal aside as a pending file (when it holds anything)."""
        with self._lock:
            if self._file.tell() == 0:
                return
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()
            self._path.rename(self.directory / f"pending-{time.time_ns():020d}.jsonl")
            self._file = private_file(self._path).open("a", encoding="utf-8")

    def pending(self) -> list[Path]:
        return sorted(self.directory.glob("pending-*.jsonl"))

    def backlog(self) -> int:
        """Items not yet known to be in the database (pending files plus the live journal)."""
        with self._lock:
            self._file.flush()
            return sum(len(read_items(p)) for p in [*self.pending(), self._path])

    def close(self) -> None:
        with self._lock:
            self._file.close()
        with contextlib.suppress(OSError):
            if self._path.stat().st_size == 0:
                self._path.unlink()
        with contextlib.suppress(OSError):
            self.directory.rmdir()  # only when nothing is left to replay


def iter_items(path: Path) -> Iterator[Item]:
    """Items of one journal file, read line by line; a torn last line (a kill mid-write) is
    skipped. A journal that grew through a long database outage is never held whole."""
    try:
        with path.open(encoding="utf-8") as lines:
            for line in lines:
                with contextlib.suppress(json.JSONDecodeError, KeyError, ValueError):
                    yield item_from_json(json.loads(line))
    except FileNotFoundError:
        return


def read_items(path: Path) -> list[Item]:
    """All items of one journal file (see `iter_items`)."""
    return list(iter_items(path))


@dataclass(slots=True)
class SpoolStats:
    drained: int = 0
    failed_drains: int = 0
    outages: int = 0
    spooled_peak: int = 0


class SpoolingWriter:
    """Journal first, database in batches; a background thread drains every interval."""

    def __init__(self, journal: Journal, write: WriteBatch, *, interval_s: float = 5.0) -> None:
        self.journal = journal
        self._write = write
        self._interval = interval_s
        self._drain_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._outage_since: datetime | None = None
        self._outage_error = ""
        self.stats = SpoolStats()

    def add(self, *items: Item) -> None:
        self.journal.append(items)

    @property
    def database_down(self) -> bool:
        return self._outage_since is not None

    def drain(self) -> bool:
        """Write everything journaled so far; False (nothing lost) when the database is down."""
        with self._drain_lock:
            # Older pending files first; the live journal is moved aside only once they are
            # in, so an outage grows one journal instead of leaving a file per attempt.
            for rotate in (False, True):
                if rotate:
                    self.journal.rotate()
                for path in self.journal.pending():
                    # One chunk in memory at a time; the file goes only once all are in.
                    items, written = iter_items(path), 0
                    try:
                        while chunk := list(itertools.islice(items, CHUNK)):
                            self._write(chunk)
                            written += len(chunk)
                    except StoreError as exc:
                        self._outage(exc, written + len(chunk) + sum(1 for _ in items))
                        return False
                    path.unlink()
                    self.stats.drained += written
            if self._outage_since is not None:
                self._restored()
            return True

    def _outage(self, exc: StoreError, pending: int) -> None:
        self.stats.failed_drains += 1
        self.stats.spooled_peak = max(self.stats.spooled_peak, pending)
        if self._outage_since is None:
            self._outage_since = datetime.now(UTC)
            self._outage_error = exc.message
            self.stats.outages += 1

    def _restored(self) -> None:
        assert self._outage_since is not None
        now = datetime.now(UTC)
        since, self._outage_since = self._outage_since, None
        evidence = {
            "down_since": since.isoformat(),
            "restored_at": now.isoformat(),
            "outage_s": round((now - since).total_seconds(), 1),
            "error": self._outage_error,
            "spooled_items_peak": self.stats.spooled_peak,
        }
        self.add(
            IncidentRecord(
                f"db_outage:{since.isoformat()}",
                "db_outage",
                since,
                detail=f"database unreachable for {evidence['outage_s']}s; spool replayed",
                evidence=evidence,
            )
        )

    def drain_until(self, timeout_s: float, *, step_s: float = 2.0) -> bool:
        """Final flush: keep trying for a while before giving up (the spool stays on disk)."""
        deadline = time.monotonic() + timeout_s
        while True:
            if self.drain() and self.drain():  # the second writes the outage incident
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(step_s)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="soak-spool", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            self.drain()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=60)
