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
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from datetime import time as dtime
from functools import partial
from typing import Any

from watchkeeper.config import Config
from watchkeeper.config_tracker import TrackerConfig
from watchkeeper.errors import TrackerError, TrackerTransientError
from watchkeeper.store.db import Database
from watchkeeper.store.history import LIVE_STATUSES, History, StoredFinding
from watchkeeper.store.tracker_store import TrackedIssue, TrackerStore
from watchkeeper.tracker import bodies, escape
from watchkeeper.tracker.forge import Forge, Issue
from watchkeeper.tracker.lifecycle import (
    ACTIONS,
    Decision,
    SeriesNights,
    comment_decision,
    fileable,
    issue_key,
    label_decision,
)
from watchkeeper.tracker.tokens import open_forge
from watchkeeper.tracking import set_status

Progress = Callable[[str], None]
log = logging.getLogger("watchkeeper.tracker")
MAX_TRANSIENT = 3


def _quiet(_: str) -> None:
    return None


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


def night_start(now: datetime) -> datetime:
    """Nights run noon to noon UTC, like the digest's."""
    noon = datetime.combine(now.date(), dtime(12, 0), tzinfo=UTC)
    return noon if now >= noon else noon - timedelta(days=1)


@dataclass
class _Run:
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

    # -- 1. decisions ----------------------------------------------------------------------

    def sync_decisions(self, item: TrackedIssue) -> None:
        assert item.number is not None and item.finding_id is not None
        finding = self.history.finding(item.finding_id)
        if finding is None:
            return
        issue = self.forge.get_issue(item.number)
        decision = label_decision(issue.labels, self.t.status_label_prefix)
        if decision is not None and ACTIONS[decision.action] == item.status_synced:
            decision = None  # applied already; a later local change wins over the old label
        last_seen = item.last_comment_id or 0
        newest = last_seen
        for comment in self.forge.comments(item.number):
            newest = max(newest, comment.id)
            if comment.id <= last_seen:
                continue
            found = comment_decision(comment)
            if found is not None and self.is_trusted(comment.author):
                decision = found
        if newest != last_seen:
            self.store.update(item.id, last_comment_id=newest)
        if decision is not None and ACTIONS[decision.action] != finding.status:
            self.apply(item, finding, decision, issue)
        elif issue.state == "closed" and finding.status in LIVE_STATUSES:
            set_status(self.history, finding.id, "fix", "issue closed on the tracker")
            self.store.update(item.id, state="closed", status_synced="fixed")
            self.outcome.decisions.append(f"#{item.number}: closed on the tracker -> fixed")
        elif finding.status != item.status_synced:
            self.mirror_status(item, finding, issue.labels)

    def apply(self, item: TrackedIssue, f: StoredFinding, d: Decision, issue: Issue) -> None:
        assert item.number is not None
        note = f"{d.via} by {d.who}"[:500]
        updated = set_status(self.history, f.id, d.action, note)
        self.forge.comment(item.number, bodies.status_comment(updated.status, d.who, d.via))
        label = f"{self.t.status_label_prefix}{d.action}"
        if label not in issue.labels:
            self.forge.add_labels(item.number, [label])
        state = issue.state
        if updated.status == "dismissed" and issue.state == "open":
            self.forge.close(item.number, not_planned=True)
            state = "closed"
            self.outcome.closed.append(item.number)
        self.store.update(item.id, status_synced=updated.status, state=state)
        self.outcome.decisions.append(f"#{item.number}: {updated.status} ({d.via} by {d.who})")
        self.progress(f"issue #{item.number}: finding #{f.id} {updated.status} via {d.via}")

    # -- 2. filing -------------------------------------------------------------------------

    def find_by_marker(self, marker: str) -> Issue | None:
        """Search first (cheap); on a miss, list the label (consistent where search lags)."""
        for issue in self.forge.search_issues(marker):
            if escape.has_marker(issue.body, marker):
                return issue
        scope = self.t.labels[:1]
        for issue in self.forge.list_issues(state="all", labels=scope):
            if escape.has_marker(issue.body, marker):
                return issue
        return None

    def file(self, f: StoredFinding, cap_left: int) -> int:
        """File or update the finding's issue; returns how many new issues it opened."""
        ctx = self.context(f)
        item = self.store.by_marker(ctx.marker)
        if item is not None and item.number is not None:
            self.update_existing(item, f)
            return 0
        if f.status != "active":
            return 0  # acknowledged or silenced before it was ever filed: nothing to say
        if cap_left <= 0:
            self.outcome.capped.append(f.id)
            return 0
        claimed = self.store.claim(
            ctx.marker, finding_id=f.id, kind=f.kind, owner=self.owner, lease_s=self.t.claim_lease_s
        )
        if claimed is None:
            self.outcome.skipped.append(f.id)
            self.progress(f"finding #{f.id}: another run is filing it")
            return 0
        try:
            issue = self.find_by_marker(ctx.marker)
            if issue is not None:
                self.record(claimed, f, issue, adopted=True)
                self.update_existing(self.store.by_marker(ctx.marker) or claimed, f)
                return 0
            issue = self.create(f, ctx)
        except TrackerError as exc:
            self.store.release(claimed.id, str(exc))
            raise
        self.record(claimed, f, issue, adopted=False)
        return 1

    def create(self, f: StoredFinding, ctx: bodies.IssueContext) -> Issue:
        title, body = bodies.issue_title(f), bodies.issue_body(f, ctx)
        for attempt in range(1, self.t.max_attempts + 1):
            try:
                return self.forge.create_issue(title, body, self.labels_for(f))
            except TrackerTransientError as exc:
                # The answer may have been lost after the issue was created: look before retrying.
                log.warning("creating the issue for finding #%d: %s", f.id, exc)
                issue = self.find_by_marker(ctx.marker)
                if issue is not None:
                    self.outcome.adopted.append(issue.number)
                    return issue
                if attempt == self.t.max_attempts:
                    raise
                self.sleep(min(self.t.backoff_cap_s, self.t.backoff_s * 2.0 ** (attempt - 1)))
        raise AssertionError("unreachable")

    def record(self, item: TrackedIssue, f: StoredFinding, issue: Issue, *, adopted: bool) -> None:
        self.store.filed(
            item.id,
            number=issue.number,
            url=issue.url,
            state=issue.state,
            finding_id=f.id,
            occurrences_synced=f.occurrences if not adopted else item.occurrences_synced,
            status_synced=f.status,
            last_error=None,
        )
        target = self.outcome.adopted if adopted else self.outcome.filed
        if issue.number not in target:
            target.append(issue.number)
        verb = "found existing" if adopted else "opened"
        self.progress(f"finding #{f.id}: {verb} issue #{issue.number} {issue.url}")

    # -- 3. updates ------------------------------------------------------------------------

    def update_existing(self, item: TrackedIssue, f: StoredFinding) -> None:
        number = item.number
        assert number is not None
        if item.finding_id != f.id:
            # Filed again after its issue was closed (recovered, fixed): same key, same issue.
            if f.status != "active":
                return
            if item.state != "open":
                self.forge.reopen(number)
                self.outcome.reopened.append(number)
            self.forge.comment(number, bodies.reopened_comment(f))
            self.store.update(
                item.id,
                finding_id=f.id,
                state="open",
                occurrences_synced=f.occurrences,
                status_synced=f.status,
            )
            self.progress(f"finding #{f.id}: issue #{number} reopened")
            return
        if f.status != item.status_synced:
            self.mirror_status(item, f)
        elif f.occurrences > item.occurrences_synced and f.status != "silenced":
            if item.state == "open":
                self.forge.comment(number, bodies.recurrence_comment(f))
                self.outcome.commented.append(number)
                self.progress(f"finding #{f.id}: recurrence noted on issue #{number}")
            self.store.update(item.id, occurrences_synced=f.occurrences)

    def mirror_status(
        self, item: TrackedIssue, f: StoredFinding, labels: tuple[str, ...] = ()
    ) -> None:
        """A status set locally (`watchkeeper findings ...`) reaches the issue; status labels
        that no longer hold are removed, so they are not read as a decision again."""
        number = item.number
        assert number is not None
        for action, status in ACTIONS.items():
            label = f"{self.t.status_label_prefix}{action}"
            if label in labels and status != f.status:
                self.forge.remove_label(number, label)
        self.forge.comment(number, bodies.status_comment(f.status, "watchkeeper", "findings"))
        state = item.state
        if f.status in ("dismissed", "fixed") and item.state == "open":
            self.forge.close(number, not_planned=f.status == "dismissed")
            self.outcome.closed.append(number)
            state = "closed"
        self.store.update(
            item.id, status_synced=f.status, state=state, occurrences_synced=f.occurrences
        )

    # -- 4. recovery -----------------------------------------------------------------------

    def recover(self, item: TrackedIssue, f: StoredFinding) -> None:
        if self.nights is None:
            self.nights = SeriesNights(self.history)
        streak = self.nights.good_nights(f)
        if streak < self.t.recovery_nights or item.number is None:
            return
        self.forge.comment(item.number, bodies.recovery_comment(f, streak))
        self.forge.close(item.number)
        set_status(self.history, f.id, "fix", f"recovered: {streak} good nights")
        self.store.update(item.id, state="closed", status_synced="fixed")
        self.outcome.closed.append(item.number)
        self.progress(f"finding #{f.id}: recovered, issue #{item.number} closed")


def _guard(run: _Run, what: str, step: Callable[[], Any]) -> Any:
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
) -> TriageOutcome:
    """Sync maintainers' decisions, file new confirmed findings, comment, reopen, close."""
    forge = client or open_forge(config.tracker, sleep=sleep)
    db = Database(config.database.resolved_url())
    try:
        run = _Run(
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
                _guard(run, f"issue #{item.number}", partial(run.sync_decisions, item))
        kinds = config.tracker.kinds
        findings = [f for f in run.history.findings(statuses=LIVE_STATUSES) if fileable(f, kinds)]
        since = night_start(now or datetime.now(UTC))
        for f in findings:
            left = config.tracker.max_new_issues_per_night - run.store.claimed_since(since)
            _guard(run, f"finding #{f.id}", partial(run.file, f, left))
        for item in run.store.items():
            if item.state != "open" or item.finding_id is None:
                continue
            found = run.history.finding(item.finding_id)
            if found is not None and found.status in LIVE_STATUSES:
                _guard(run, f"issue #{item.number}", partial(run.recover, item, found))
        return run.outcome
    finally:
        db.close()
        if client is None:
            forge.close_client()
