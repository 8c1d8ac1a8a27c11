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
from watchkeeper.config.tracker import TrackerConfig
from watchkeeper.errors import TrackerError, TrackerTransientError
from watchkeeper.nightly.findings import set_status
from watchkeeper.store.db import Database, open_database
from watchkeeper.store.findings import LIVE_STATUSES, StoredFinding
from watchkeeper.store.history import History
from watchkeeper.store.tracker_store import TrackedIssue, TrackerStore
from watchkeeper.tracker import bodies, escape
from watchkeeper.tracker.forge import Comment, Forge, Issue
from watchkeeper.tracker.lifecycle import (
    ACTIONS,
    Decision,
    SeriesNights,
    comment_decision,
    fileable,
    issue_key,
    label_decision,
)
from watchkeeper.tracker.tokens import forge_for

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


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _minute(moment: datetime) -> datetime:
    """Issues report occurrences to the minute: compare at that grain."""
    return _aware(moment).replace(second=0, microsecond=0)


def _continued(told: bodies.Reported, f: StoredFinding, *, new: int) -> int:
    """The issue's count plus `new` occurrences, never below the finding's own count."""
    if told.count is None:
        return f.occurrences
    return max(told.count + max(new, 1), f.occurrences)


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

    def status_labels(self) -> dict[str, str]:
        """Label name -> the finding status it decides."""
        return {f"{self.t.status_label_prefix}{a}": status for a, status in ACTIONS.items()}

    def sync_decisions(self, item: TrackedIssue) -> None:
        assert item.number is not None and item.finding_id is not None
        finding = self.history.finding(item.finding_id)
        if finding is None:
            return
        issue = self.forge.get_issue(item.number)
        events = self.forge.events(item.number)
        decision = label_decision(issue.labels, self.t.status_label_prefix, events, self.me)
        if decision is not None and ACTIONS[decision.action] == item.status_synced:
            decision = None  # applied already; a later local change wins over the old label
        last_seen = item.last_comment_id or 0
        newest = last_seen
        comments = self.forge.comments(item.number)
        for comment in comments:
            newest = max(newest, comment.id)
            if comment.id <= last_seen:
                continue
            found = comment_decision(comment)
            if found is None:
                continue
            if self.is_trusted(comment.author):
                decision = found
            elif comment.author == self.me:
                log.warning(
                    "issue #%d: `/watchkeeper %s` by %s, the tracker token's own user, ignored "
                    "(list it in tracker.maintainers to accept it)",
                    item.number,
                    found.action,
                    comment.author,
                )
                self.progress(
                    f"issue #{item.number}: /watchkeeper {found.action} by the token's own user "
                    f"{comment.author} ignored (not in tracker.maintainers)"
                )
        if newest != last_seen:
            self.store.update(item.id, last_comment_id=newest)
        if decision is not None and ACTIONS[decision.action] != finding.status:
            self.apply(item, finding, decision, issue, comments)
        elif issue.state == "closed" and finding.status in LIVE_STATUSES:
            set_status(self.history, finding.id, "fix", "issue closed on the tracker")
            self.store.update(item.id, state="closed", status_synced="fixed")
            self.outcome.decisions.append(f"#{item.number}: closed on the tracker -> fixed")
        elif finding.status != item.status_synced:
            self.finish(item, finding, issue, comments, "watchkeeper", "findings")

    def apply(
        self,
        item: TrackedIssue,
        f: StoredFinding,
        d: Decision,
        issue: Issue,
        comments: list[Comment],
    ) -> None:
        assert item.number is not None
        note = f"{d.via} by {d.who}"[:500]
        updated = set_status(self.history, f.id, d.action, note)
        self.finish(item, updated, issue, comments, d.who, d.via)
        self.outcome.decisions.append(f"#{item.number}: {updated.status} ({d.via} by {d.who})")
        self.progress(f"issue #{item.number}: finding #{f.id} {updated.status} via {d.via}")

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
                self.adopt(claimed, f, issue)
                return 0
            issue, adopted = self.create(f, ctx)
        except TrackerError as exc:
            self.store.release(claimed.id, str(exc))
            raise
        self.record(claimed, f, issue, adopted=adopted)
        return 1

    def create(self, f: StoredFinding, ctx: bodies.IssueContext) -> tuple[Issue, bool]:
        """The new issue, and whether it was found by its marker (the answer was lost)."""
        title, body = bodies.issue_title(f), bodies.issue_body(f, ctx)
        for attempt in range(1, self.t.max_attempts + 1):
            try:
                return self.forge.create_issue(title, body, self.labels_for(f)), False
            except TrackerTransientError as exc:
                # The answer may have been lost after the issue was created: look before retrying.
                log.warning("creating the issue for finding #%d: %s", f.id, exc)
                issue = self.find_by_marker(ctx.marker)
                if issue is not None:
                    return issue, True
                if attempt == self.t.max_attempts:
                    raise
                self.sleep(min(self.t.backoff_cap_s, self.t.backoff_s * 2.0 ** (attempt - 1)))
        raise AssertionError("unreachable")

    def adopt(self, claimed: TrackedIssue, f: StoredFinding, issue: Issue) -> None:
        """An issue with our marker that this database did not know (a new database, another
        host): link it silently. Only a finding seen since watchkeeper last wrote on the issue
        is news worth a comment (or a reopen), and never on a silenced issue."""
        comments = self.forge.comments(issue.number)
        mine = [c for c in comments if c.author == self.me]
        said = [c.created_at for c in mine if c.created_at is not None]
        last_said = max(said) if said else issue.created_at
        kept = self.kept_decision(issue)
        if kept is not None and f.status == "active":
            # Decided (and answered) before this database existed: taken over silently, or
            # the label would be re-applied with a second status comment, and a silence
            # given by `/watchkeeper silence` (label applied by us) would be forgotten.
            name = f"{self.t.status_label_prefix}{kept}"
            f = set_status(self.history, f.id, kept, f"adopted: {name} on issue #{issue.number}")
            self.outcome.decisions.append(f"#{issue.number}: {f.status} (adopted, {name})")
        self.record(
            claimed, f, issue, adopted=True, last_comment_id=max((c.id for c in mine), default=None)
        )
        seen = _aware(f.last_seen_at or f.created_at)
        told = bodies.reported(issue.body, comments, self.me)
        count: int | None = None
        if told is not None:
            # The issue's own account is the starting point: only an occurrence after the
            # newest one it reports is news, and the count goes on from the issue's.
            news = _minute(seen) > told.last
            count = _continued(
                told, f, new=f.occurrences if _minute(f.created_at) > told.last else 1
            )
        else:
            news = last_said is not None and seen > last_said
        silenced = f.status == "silenced" or f"{self.t.status_label_prefix}silence" in issue.labels
        if not news or silenced or f.status != "active":
            return
        item = self.store.by_marker(claimed.marker) or claimed
        if issue.state != "open":
            self.reopen_for(item, f, issue)
            return
        self.forge.comment(issue.number, bodies.recurrence_comment(f, count))
        self.outcome.commented.append(issue.number)
        self.progress(f"finding #{f.id}: recurrence noted on issue #{issue.number}")

    def kept_decision(self, issue: Issue) -> str | None:
        """On an open issue being adopted, the ack or silence its status label records,
        whoever applied it (a maintainer, or watchkeeper mirroring a `/watchkeeper` comment),
        if applied after watchkeeper last reopened the issue."""
        if issue.state != "open":
            return None
        events = self.forge.events(issue.number)  # None: a forge without label history
        start = max(
            (i for i, e in enumerate(events or ()) if e.kind == "reopened" and e.actor == self.me),
            default=-1,
        )
        applied = {e.label: i for i, e in enumerate(events or ()) if e.kind == "labeled"}
        for action in ("silence", "ack"):
            name = f"{self.t.status_label_prefix}{action}"
            if name in issue.labels and (events is None or applied.get(name, -1) > start):
                return action
        return None

    def record(
        self,
        item: TrackedIssue,
        f: StoredFinding,
        issue: Issue,
        *,
        adopted: bool,
        last_comment_id: int | None = None,
    ) -> None:
        self.store.filed(
            item.id,
            number=issue.number,
            url=issue.url,
            state=issue.state,
            finding_id=f.id,
            occurrences_synced=f.occurrences,
            status_synced=f.status,
            last_comment_id=last_comment_id,
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
            self.reopen_for(item, f, self.forge.get_issue(number))
            return
        if f.status != item.status_synced:
            self.mirror_status(item, f)
        elif f.occurrences > item.occurrences_synced and f.status != "silenced":
            if item.state == "open":
                count = self.issue_count(number, f, item)
                self.forge.comment(number, bodies.recurrence_comment(f, count))
                self.outcome.commented.append(number)
                self.progress(f"finding #{f.id}: recurrence noted on issue #{number}")
            self.store.update(item.id, occurrences_synced=f.occurrences)

    def issue_count(self, number: int, f: StoredFinding, item: TrackedIssue) -> int:
        """The count a recurrence comment shows: the issue's own last count plus the
        occurrences since it was last told. Equal to the finding's count for an issue this
        database filed; higher for one adopted after a lost database, which keeps counting."""
        told = bodies.reported(
            self.forge.get_issue(number).body, self.forge.comments(number), self.me
        )
        if told is None:
            return f.occurrences
        return _continued(told, f, new=f.occurrences - item.occurrences_synced)

    def reopen_for(self, item: TrackedIssue, f: StoredFinding, issue: Issue) -> None:
        """A new finding for a known issue: the old finding's status labels go first (they
        decided that one, not this), then the reopen, then one comment saying both."""
        number = issue.number
        stale = [label for label in issue.labels if label in self.status_labels()]
        for label in stale:
            self.forge.remove_label(number, label)
        if issue.state != "open":
            self.forge.reopen(number)
            self.outcome.reopened.append(number)
        posted = self.forge.comment(number, bodies.reopened_comment(f, stale))
        self.store.update(
            item.id,
            finding_id=f.id,
            state="open",
            occurrences_synced=f.occurrences,
            status_synced=f.status,
            last_comment_id=max(posted.id, item.last_comment_id or 0),
        )
        self.progress(f"finding #{f.id}: issue #{number} reopened")

    def mirror_status(self, item: TrackedIssue, f: StoredFinding) -> None:
        """A status set locally (`watchkeeper findings ...`) reaches the issue."""
        assert item.number is not None
        issue = self.forge.get_issue(item.number)
        self.finish(item, f, issue, self.forge.comments(item.number), "watchkeeper", "findings")

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
    database: Database | None = None,
) -> TriageOutcome:
    """Sync maintainers' decisions, file new confirmed findings, comment, reopen, close."""
    with (
        forge_for(config.tracker, client=client, sleep=sleep) as forge,
        open_database(config.database.resolved_url(), given=database) as db,
    ):
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
