"""Triage step 2: a confirmed finding becomes an issue, exactly once.

The database first (a claim row keyed by the issue's marker: of two agents only one files),
the tracker second (the hidden marker, looked up by search and by the issue listing, because
a forge's search lags behind its issues). A create whose answer was lost is never blindly
repeated; an issue with our marker that this database did not know is adopted, silently.
"""

from __future__ import annotations

from collections.abc import Sequence

from watchkeeper.errors import TrackerError, TrackerTransientError
from watchkeeper.nightly.findings import set_status
from watchkeeper.store.findings import StoredFinding
from watchkeeper.store.tracker_store import TrackedIssue
from watchkeeper.tracker import bodies, escape
from watchkeeper.tracker.forge import Issue
from watchkeeper.tracker.triage_run import TriageRun, log
from watchkeeper.tracker.triage_updates import update_existing


def find_by_marker(run: TriageRun, marker: str, labels: Sequence[str]) -> Issue | None:
    """The issue carrying `marker`, as the forge holds it *now*.

    A forge's search index runs behind its issues (GitHub's by seconds to minutes; Gitea's
    indexer is a queue): a search may miss an issue created moments ago, and GitHub answers
    with the issue as the index last saw it, labels and state from before the latest change
    (a black-box run with a 30 s lag once adopted an issue by its stale labels and commented
    on it). So a search hit is only a pointer, read again with `get_issue`; on a miss, the
    issue listing (current) is walked label by label: the finding's labels all went on at
    creation, so one a maintainer removed still leaves the others to find it by."""
    for hit in run.forge.search_issues(marker):
        if escape.has_marker(hit.body, marker):
            return run.forge.get_issue(hit.number)
    for label in labels:
        for issue in run.forge.list_issues(state="all", labels=[label]):
            if escape.has_marker(issue.body, marker):
                return issue
    return None


def file(run: TriageRun, f: StoredFinding, cap_left: int) -> int:
    """File or update the finding's issue; returns how many new issues it opened."""
    ctx = run.context(f)
    item = run.store.by_marker(ctx.marker)
    if item is not None and item.number is not None:
        update_existing(run, item, f)
        return 0
    if f.status != "active":
        return 0  # acknowledged or silenced before it was ever filed: nothing to say
    if cap_left <= 0:
        run.outcome.capped.append(f.id)
        return 0
    claimed = run.store.claim(
        ctx.marker, finding_id=f.id, kind=f.kind, owner=run.owner, lease_s=run.t.claim_lease_s
    )
    if claimed is None:
        run.outcome.skipped.append(f.id)
        run.progress(f"finding #{f.id}: another run is filing it")
        return 0
    try:
        issue = find_by_marker(run, ctx.marker, run.labels_for(f))
        if issue is not None:
            adopt(run, claimed, f, issue)
            return 0
        issue, adopted = create(run, f, ctx)
    except TrackerError as exc:
        run.store.release(claimed.id, str(exc))
        raise
    record(run, claimed, f, issue, adopted=adopted)
    return 1


def create(run: TriageRun, f: StoredFinding, ctx: bodies.IssueContext) -> tuple[Issue, bool]:
    """The new issue, and whether it was found by its marker (the answer was lost)."""
    title, body = bodies.issue_title(f), bodies.issue_body(f, ctx)
    for attempt in range(1, run.t.max_attempts + 1):
        try:
            return run.forge.create_issue(title, body, run.labels_for(f)), False
        except TrackerTransientError as exc:
            # The answer may have been lost after the issue was created: look before retrying.
            log.warning("creating the issue for finding #%d: %s", f.id, exc)
            issue = find_by_marker(run, ctx.marker, run.labels_for(f))
            if issue is not None:
                return issue, True
            if attempt == run.t.max_attempts:
                raise
            run.sleep(min(run.t.backoff_cap_s, run.t.backoff_s * 2.0 ** (attempt - 1)))
    raise AssertionError("unreachable")


def adopt(run: TriageRun, claimed: TrackedIssue, f: StoredFinding, issue: Issue) -> None:
    """An issue with our marker that this database did not know (a new database, another
    host): linked, and *nothing posted*, whatever its labels and state. What the tracker
    decided is taken over: an ack or silence its status label records, a close (as the
    decisions step reads a close: fixed). An occurrence this database saw that the issue does
    not tell yet is not news worth a comment of its own (judged from a search that may lag,
    it once produced a false `Seen again`): it is counted in the next recurrence comment, which
    only a new occurrence writes (`triage_updates.issue_count`)."""
    mine = [c for c in run.forge.comments(issue.number) if c.author == run.me]
    kept = kept_decision(run, issue)
    if f.status == "active" and kept is not None:
        # Decided (and answered) before this database existed: taken over silently, or
        # the label would be re-applied with a second status comment, and a silence
        # given by `/watchkeeper silence` (label applied by us) would be forgotten.
        name = f"{run.t.status_label_prefix}{kept}"
        f = set_status(run.history, f.id, kept, f"adopted: {name} on issue #{issue.number}")
        run.outcome.decisions.append(f"#{issue.number}: {f.status} (adopted, {name})")
    elif f.status == "active" and issue.state == "closed":
        # Closed on the tracker: fixed, as `sync_decisions` reads a close; a finding confirmed
        # again later is a new finding, which reopens the issue with one comment.
        f = set_status(run.history, f.id, "fix", f"adopted: issue #{issue.number} is closed")
        run.outcome.decisions.append(f"#{issue.number}: {f.status} (adopted, closed)")
    record(
        run,
        claimed,
        f,
        issue,
        adopted=True,
        last_comment_id=max((c.id for c in mine), default=None),
    )


def kept_decision(run: TriageRun, issue: Issue) -> str | None:
    """On an open issue being adopted, the ack or silence its status label records,
    whoever applied it (a maintainer, or watchkeeper mirroring a `/watchkeeper` comment),
    if applied after watchkeeper last reopened the issue."""
    if issue.state != "open":
        return None
    events = run.forge.events(issue.number)  # None: a forge without label history
    start = max(
        (i for i, e in enumerate(events or ()) if e.kind == "reopened" and e.actor == run.me),
        default=-1,
    )
    applied = {e.label: i for i, e in enumerate(events or ()) if e.kind == "labeled"}
    for action in ("silence", "ack"):
        name = f"{run.t.status_label_prefix}{action}"
        if name in issue.labels and (events is None or applied.get(name, -1) > start):
            return action
    return None


def record(
    run: TriageRun,
    item: TrackedIssue,
    f: StoredFinding,
    issue: Issue,
    *,
    adopted: bool,
    last_comment_id: int | None = None,
) -> None:
    run.store.filed(
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
    target = run.outcome.adopted if adopted else run.outcome.filed
    if issue.number not in target:
        target.append(issue.number)
    verb = "found existing" if adopted else "opened"
    run.progress(f"finding #{f.id}: {verb} issue #{issue.number} {issue.url}")
