"""Triage steps 3 and 4: recurrences, reopens, mirrored statuses, and recovery.

A recurrence adds one comment; a finding filed again after its issue was closed reopens
that issue; a regression back at its baseline for `tracker.recovery_nights` nights closes it.
"""

from __future__ import annotations

from watchkeeper.nightly.findings import set_status
from watchkeeper.store.findings import StoredFinding
from watchkeeper.store.tracker_store import TrackedIssue
from watchkeeper.tracker import bodies
from watchkeeper.tracker.forge import Issue
from watchkeeper.tracker.lifecycle import SeriesNights
from watchkeeper.tracker.triage_run import TriageRun, continued_count, minute


def update_existing(run: TriageRun, item: TrackedIssue, f: StoredFinding) -> None:
    number = item.number
    assert number is not None
    if item.finding_id != f.id:
        # Filed again after its issue was closed (recovered, fixed): same key, same issue.
        if f.status != "active":
            return
        reopen_for(run, item, f, run.forge.get_issue(number))
        return
    if f.status != item.status_synced:
        mirror_status(run, item, f)
    elif f.occurrences > item.occurrences_synced and f.status != "silenced":
        if item.state == "open":
            count = issue_count(run, number, f, item)
            run.forge.comment(number, bodies.recurrence_comment(f, count))
            run.outcome.commented.append(number)
            run.progress(f"finding #{f.id}: recurrence noted on issue #{number}")
        run.store.update(item.id, occurrences_synced=f.occurrences)


def issue_count(run: TriageRun, number: int, f: StoredFinding, item: TrackedIssue) -> int:
    """The count a recurrence comment shows: the issue's own last count plus the
    occurrences since it was last told. Equal to the finding's count for an issue this
    database filed; higher for one adopted after a lost database, which keeps counting. A
    finding first seen (to the minute) after its issue was opened and after the newest
    occurrence the issue reports (adopted, silently, by a new database) is news in all its
    occurrences, those before the adoption included."""
    issue = run.forge.get_issue(number)
    told = bodies.reported(issue.body, run.forge.comments(number), run.me)
    if told is None:
        return f.occurrences
    # To the minute, as the issue reports: a forge stamps whole seconds, and its clock and
    # this host's need not agree to the second.
    first = minute(f.created_at)
    opened = issue.created_at
    unseen = opened is not None and first > minute(opened) and first > told.last
    new = f.occurrences if unseen else f.occurrences - item.occurrences_synced
    return continued_count(told, f, new=new)


def reopen_for(run: TriageRun, item: TrackedIssue, f: StoredFinding, issue: Issue) -> None:
    """A new finding for a known issue: the old finding's status labels go first (they
    decided that one, not this), then the reopen, then one comment saying both."""
    number = issue.number
    stale = [label for label in issue.labels if label in run.status_labels()]
    for label in stale:
        run.forge.remove_label(number, label)
    if issue.state != "open":
        run.forge.reopen(number)
        run.outcome.reopened.append(number)
    posted = run.forge.comment(number, bodies.reopened_comment(f, stale))
    run.store.update(
        item.id,
        finding_id=f.id,
        state="open",
        occurrences_synced=f.occurrences,
        status_synced=f.status,
        last_comment_id=max(posted.id, item.last_comment_id or 0),
    )
    run.progress(f"finding #{f.id}: issue #{number} reopened")


def mirror_status(run: TriageRun, item: TrackedIssue, f: StoredFinding) -> None:
    """A status set locally (`watchkeeper findings ...`) reaches the issue."""
    assert item.number is not None
    issue = run.forge.get_issue(item.number)
    run.finish(item, f, issue, run.forge.comments(item.number), "watchkeeper", "findings")


# -- 4. recovery -----------------------------------------------------------------------


def recover(run: TriageRun, item: TrackedIssue, f: StoredFinding) -> None:
    if run.nights is None:
        run.nights = SeriesNights(run.history)
    streak = run.nights.good_nights(f)
    if streak < run.t.recovery_nights or item.number is None:
        return
    run.forge.comment(item.number, bodies.recovery_comment(f, streak))
    run.forge.close(item.number)
    set_status(run.history, f.id, "fix", f"recovered: {streak} good nights")
    run.store.update(item.id, state="closed", status_synced="fixed")
    run.outcome.closed.append(item.number)
    run.progress(f"finding #{f.id}: recovered, issue #{item.number} closed")
