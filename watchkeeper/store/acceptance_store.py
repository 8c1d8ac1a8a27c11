"""Per-request acceptance as the acceptance alarms read it (`checks/acceptance_alarm.py`):
one campaign's measured requests per arm, and the same arm's earlier campaigns on the same
host as one value each (the run is the unit; the history needs no request of its own).

Only measured runs and requests without an error count; a request that did not draft (no
`draft_n` in its timings) counts for nothing. A row stored before migration 0013 has no
`repeat_share`: it is computed from the stored text for the judged campaign only.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from sqlalchemy import func, select

from watchkeeper.checks.acceptance_alarm import RequestAcceptance, RunAcceptance
from watchkeeper.load.records import RunPurpose
from watchkeeper.load.repetition import repeat_share
from watchkeeper.store.db import Database
from watchkeeper.store.schema import Campaign, RequestSampleRow, Run


class AcceptanceStore:
    def __init__(self, db: Database) -> None:
        self._db = db

    def campaign_requests(self, campaign_id: int) -> dict[str, list[RequestAcceptance]]:
        """Every drafting request of the campaign's measured runs, by arm."""
        out: dict[str, list[RequestAcceptance]] = defaultdict(list)
        with self._db.session() as s:
            rows = s.execute(
                select(
                    Run.arm,
                    RequestSampleRow.category,
                    RequestSampleRow.draft_n,
                    RequestSampleRow.draft_n_accepted,
                    RequestSampleRow.repeat_share,
                    RequestSampleRow.output_text,
                )
                .join(Run, RequestSampleRow.run_id == Run.id)
                .where(
                    Run.campaign_id == campaign_id,
                    Run.purpose == RunPurpose.MEASURED,
                    RequestSampleRow.error.is_(None),
                    RequestSampleRow.draft_n > 0,
                )
                .order_by(RequestSampleRow.id)
            ).all()
        for arm, category, drafted, accepted, share, text in rows:
            out[arm].append(
                RequestAcceptance(
                    int(drafted or 0),
                    int(accepted or 0),
                    share if share is not None else repeat_share(text or ""),
                    category,
                )
            )
        return dict(out)

    def history(
        self, campaign_id: int, arm: str, kinds: Sequence[str], window: int
    ) -> list[RunAcceptance]:
        """The arm's earlier campaigns of these kinds on the campaign's host, oldest first, at
        most `window` of them, each as one run: its drafted and accepted tokens summed."""
        with self._db.session() as s:
            host = s.scalar(select(Campaign.host_id).where(Campaign.id == campaign_id))
            rows = s.execute(
                select(
                    Campaign.id,
                    func.sum(RequestSampleRow.draft_n),
                    func.sum(RequestSampleRow.draft_n_accepted),
                    func.count(RequestSampleRow.id),
                )
                .join(Run, Run.campaign_id == Campaign.id)
                .join(RequestSampleRow, RequestSampleRow.run_id == Run.id)
                .where(
                    Campaign.id < campaign_id,
                    Campaign.host_id == host,
                    Campaign.kind.in_(list(kinds)),
                    Campaign.status == "completed",  # an interrupted night is no history
                    Run.arm == arm,
                    Run.purpose == RunPurpose.MEASURED,
                    RequestSampleRow.error.is_(None),
                    RequestSampleRow.draft_n > 0,
                )
                .group_by(Campaign.id)
                .order_by(Campaign.id.desc())
                .limit(window)
            ).all()
        return [
            RunAcceptance(f"campaign {cid}", int(d or 0), int(a or 0), int(n), 0.0, 0)
            for cid, d, a, n in reversed(rows)
        ]
