"""The state of one `watchkeeper triage` run, shared by its steps.

The steps (decisions, filing, updates, recovery) live in their own modules and take this
state as their first argument; what more than one step needs (the issue context, the status
labels, bringing an issue to its finding's status) lives here.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from datetime import time as dtime
from typing import Any

from watchkeeper.config import Config
from watchkeeper.config.tracker import TrackerConfig
from watchkeeper.store.findings import StoredFinding
from watchkeeper.store.history import History
from watchkeeper.store.tracker_store import TrackedIssue, TrackerStore
from watchkeeper.tracker import bodies, escape
from watchkeeper.tracker.forge import Comment, Forge, Issue
from watchkeeper.tracker.lifecycle import ACTIONS, SeriesNights, issue_key

Progress = Callable[[str], None]
log = logging.getLogger("watchkeeper.tracker")


@dataclass(slots=True)
class TriageOutcome:
    filed: list[int] = field(default_factory=list)
    """Issue numbers opened tonight."""
    adopted: list[int] = field(default_factory=list)
    """Issues found on the tracker by their marker (filed by a run that lost its answer)."""
    commented: list[int] = field(default_factory=list)
    reopened: list[int] = field(default_factory=list)
    closed: list[int] = field(default_factory=list)
    decisions: list[str] = field(default_factory=list)
    skipped: list[int] = field(default_factory=list)
    """Finding ids another run is filing right now."""
    capped: list[int] = field(default_factory=list)
    """Finding ids left for tomorrow by the per-night cap."""
    errors: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "filed": self.filed,
            "adopted": self.adopted,
            "commented": self.commented,
            "reopened": self.reopened,
            "closed": self.closed,
            "decisions": self.decisions,
            "skipped": self.skipped,
            "capped": self.capped,
            "errors": self.errors,
        }


def aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def minute(moment: datetime) -> datetime:
    """Issues report occurrences to the minute: compare at that grain."""
    return aware(moment).replace(second=0, microsecond=0)


def continued_count(told: bodies.Reported, f: StoredFinding, *, new: int) -> int:
    """The issue's count plus `new` occurrences, never below the finding's own count."""
    if told.count is None:
        return f.occurrences
    return max(told.count + max(new, 1), f.occurrences)


def night_start(now: datetime) -> datetime:
    """Nights run noon to noon UTC, like the digest's."""
    noon = datetime.combine(now.date(), dtime(12, 0), tzinfo=UTC)
    return noon if now >= noon else noon - timedelta(days=1)


@dataclass
class TriageRun:
    """One run's forge, stores and outcome; the steps' functions take it first."""

    config: Config
    forge: Forge
    history: History
    store: TrackerStore
    progress: Progress
    outcome: TriageOutcome
    owner: str
    sleep: Callable[[float], None] = time.sleep
    me: str = ""
    nights: SeriesNights | None = None
    trusted: dict[str, bool] = field(default_factory=dict)

    @property
    def t(self) -> TrackerConfig:
        return self.config.tracker

    def labels_for(self, f: StoredFinding) -> list[str]:
        return [*self.t.labels, *([f.kind] if self.t.kind_labels else [])]

    def context(self, f: StoredFinding) -> bodies.IssueContext:
        key = issue_key(f)
        return bodies.IssueContext(
            marker=escape.marker_token(key),
            key=key,
            digest_url=self.t.digest_url,
            label_prefix=self.t.status_label_prefix,
            recovery_nights=self.t.recovery_nights,
            quote_chars=self.t.quote_chars,
        )

    def is_trusted(self, login: str) -> bool:
        if login in self.t.maintainers:
            return True
        if login == self.me or not login:
            return False
        if login not in self.trusted:
            self.trusted[login] = self.forge.is_collaborator(login)
        return self.trusted[login]

    def status_labels(self) -> dict[str, str]:
        """Label name -> the finding status it decides."""
        return {f"{self.t.status_label_prefix}{a}": status for a, status in ACTIONS.items()}

    def finish(
        self,
        item: TrackedIssue,
        f: StoredFinding,
        issue: Issue,
        comments: list[Comment],
        who: str,
        via: str,
    ) -> None:
        """Bring the issue to the finding's status, each step once: the status comment (found
        again by its hidden decision id when a retry finishes a half-applied decision), the
        status label (others removed, so they are not read as a decision again), the close."""
        number = item.number
        assert number is not None
        decision = bodies.decision_id(f.id, f.status)
        if bodies.last_decision(comments, self.me) != decision:
            self.forge.comment(number, bodies.status_comment(f.status, who, via, decision))
        for label, status in self.status_labels().items():
            if label in issue.labels and status != f.status:
                self.forge.remove_label(number, label)
            elif status == f.status and label not in issue.labels:
                self.forge.add_labels(number, [label])
        state = issue.state
        if f.status in ("dismissed", "fixed") and state == "open":
            self.forge.close(number, not_planned=f.status == "dismissed")
            self.outcome.closed.append(number)
            state = "closed"
        self.store.update(
            item.id, status_synced=f.status, state=state, occurrences_synced=f.occurrences
        )
