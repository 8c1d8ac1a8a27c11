"""`watchkeeper findings`: list the findings, or record a maintainer's decision on one.

The decision's rules (what acknowledging resets, what dismissing counts) are
`nightly/findings.py:set_status`'s; this module opens the database and shapes the rows the CLI
prints, so a job or another front end gets the same rows.
"""

from __future__ import annotations

from typing import Any

from watchkeeper.config import Config
from watchkeeper.errors import ConfigError
from watchkeeper.nightly.findings import set_status
from watchkeeper.store.db import Database, open_database
from watchkeeper.store.findings import OPEN_STATUSES, STATUSES, StoredFinding
from watchkeeper.store.history import History


def findings_list(
    config: Config, *, statuses: list[str] | None, database: Database | None = None
) -> list[dict[str, Any]]:
    """The findings in `statuses` (None: the open ones; ["all"]: every one), newest first, as
    plain rows."""
    wanted = statuses or list(OPEN_STATUSES)
    unknown = sorted(set(wanted) - {*STATUSES, "all"})
    if unknown or ("all" in wanted and len(wanted) > 1):
        raise ConfigError(
            f"findings --status {','.join(wanted)}: "
            + (f"unknown status {unknown[0]!r}" if unknown else "'all' stands alone"),
            hint=f"one or more of {', '.join(STATUSES)}, or all",
        )
    with open_database(config.database.resolved_url(), given=database) as db:
        found = History(db).findings(statuses=None if wanted == ["all"] else wanted)
        return [
            {
                "id": f.id,
                "kind": f.kind,
                "label": f.label,
                "status": f.status,
                "confirmed": f.confirmed_at is not None,
                "occurrences": f.occurrences,
                "created_at": f.created_at.isoformat(),
                "title": f.title,
            }
            for f in found
        ]


def findings_decide(
    config: Config,
    *,
    action: str,
    finding_id: int,
    note: str = "",
    database: Database | None = None,
) -> StoredFinding:
    """A maintainer's decision on one finding (ack, dismiss, silence, fix, reopen)."""
    with open_database(config.database.resolved_url(), given=database) as db:
        return set_status(History(db), finding_id, action, note)
