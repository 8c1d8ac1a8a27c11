"""`watchkeeper triage`: confirmed findings become tracker issues, exactly once.

Order of one run:

1. **Decisions first.** For every open issue we filed, labels (`watchkeeper/ack`, ...) and
   `/watchkeeper ack|dismiss|silence` comments from collaborators (or `tracker.maintainers`)
   set the finding's status, the same way `watchkeeper findings ack` does; a dismissed finding's
   issue is closed as not planned. A status changed locally is mirrored to the issue.
2. **Filing.** For each confirmed, open finding of a configured kind: the database first (a
   claim row keyed by the issue's marker: of two agents only one files), the tracker second
   (the hidden marker, looked up by search and by a label listing, because GitHub's search lags
   behind creation). A create whose answer was lost is never blindly repeated: the marker is
   looked up again first. At most `tracker.max_new_issues_per_night` new issues per night.
3. **Updates.** A recurrence (more occurrences than the issue was told about) adds one comment;
   a finding filed again after its issue was closed reopens that issue.
4. **Recovery.** A regression whose series has been back at its baseline for
   `tracker.recovery_nights` nights in a row gets a comment, its issue is closed and the finding
   becomes `fixed`.

This module is the order; each step lives in `tracker/`: `triage_decisions` (1),
`triage_filing` (2, adoption included), `triage_updates` (3 and 4), on the shared state of
`triage_run`.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from typing import Any

from watchkeeper.config import Config
from watchkeeper.errors import TrackerTransientError
from watchkeeper.store.db import Database, open_database
from watchkeeper.store.findings import LIVE_STATUSES
from watchkeeper.store.history import History
from watchkeeper.store.tracker_store import TrackerStore
from watchkeeper.tracker.forge import Forge
from watchkeeper.tracker.lifecycle import fileable
from watchkeeper.tracker.tokens import forge_for
from watchkeeper.tracker.triage_decisions import sync_decisions
from watchkeeper.tracker.triage_filing import file
from watchkeeper.tracker.triage_run import Progress, TriageOutcome, TriageRun, night_start
from watchkeeper.tracker.triage_updates import recover

MAX_TRANSIENT = 3


def _quiet(_: str) -> None:
    return None


def _guard(run: TriageRun, what: str, step: Callable[[], Any]) -> Any:
    """A transient failure costs one item, not the night; permanent ones stop the run."""
    try:
        return step()
    except TrackerTransientError as exc:
        run.outcome.errors.append(f"{what}: {exc}")
        run.progress(f"{what}: {exc} (will retry next run)")
        if len(run.outcome.errors) >= MAX_TRANSIENT:
            raise
        return None


def triage_command(
    config: Config,
    *,
    progress: Progress = _quiet,
    client: Forge | None = None,
    sleep: Callable[[float], None] = time.sleep,
    now: datetime | None = None,
    database: Database | None = None,
) -> TriageOutcome:
    """Sync maintainers' decisions, file new confirmed findings, comment, reopen, close."""
    with (
        forge_for(config.tracker, client=client, sleep=sleep) as forge,
        open_database(config.database.resolved_url(), given=database) as db,
    ):
        run = TriageRun(
            config=config,
            forge=forge,
            history=History(db),
            store=TrackerStore(db, tracker=forge.kind, repository=forge.repository),
            progress=progress,
            outcome=TriageOutcome(),
            owner=f"{socket.gethostname()[:40]}:{os.getpid()}",
            sleep=sleep,
        )
        run.me = forge.whoami()
        for item in run.store.items():
            if item.number is not None and item.state == "open" and item.finding_id is not None:
                _guard(run, f"issue #{item.number}", partial(sync_decisions, run, item))
        kinds = config.tracker.kinds
        findings = [f for f in run.history.findings(statuses=LIVE_STATUSES) if fileable(f, kinds)]
        since = night_start(now or datetime.now(UTC))
        for f in findings:
            left = config.tracker.max_new_issues_per_night - run.store.claimed_since(since)
            _guard(run, f"finding #{f.id}", partial(file, run, f, left))
        for item in run.store.items():
            if item.state != "open" or item.finding_id is None:
                continue
            found = run.history.finding(item.finding_id)
            if found is not None and found.status in LIVE_STATUSES:
                _guard(run, f"issue #{item.number}", partial(recover, run, item, found))
        return run.outcome
