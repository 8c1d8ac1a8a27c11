"""Triage step 1: maintainers' decisions on our issues set their findings' status.

Labels (`watchkeeper/ack`, ...) and `/watchkeeper ack|dismiss|silence` comments from
collaborators (or `tracker.maintainers`) decide, the same way `watchkeeper findings ack` does;
a status changed locally is mirrored to the issue.
"""

from __future__ import annotations

from watchkeeper.nightly.findings import set_status
from watchkeeper.store.findings import LIVE_STATUSES, StoredFinding
from watchkeeper.store.tracker_store import TrackedIssue
from watchkeeper.tracker.forge import Comment, Issue
from watchkeeper.tracker.lifecycle import ACTIONS, Decision, comment_decision, label_decision
from watchkeeper.tracker.triage_run import TriageRun, log


def sync_decisions(run: TriageRun, item: TrackedIssue) -> None:
    assert item.number is not None and item.finding_id is not None
    finding = run.history.finding(item.finding_id)
    if finding is None:
        return
    issue = run.forge.get_issue(item.number)
    events = run.forge.events(item.number)
    decision = label_decision(issue.labels, run.t.status_label_prefix, events, run.me)
    if decision is not None and ACTIONS[decision.action] == item.status_synced:
        decision = None  # applied already; a later local change wins over the old label
    last_seen = item.last_comment_id or 0
    newest = last_seen
    comments = run.forge.comments(item.number)
    for comment in comments:
        newest = max(newest, comment.id)
        if comment.id <= last_seen:
            continue
        found = comment_decision(comment)
        if found is None:
            continue
        if run.is_trusted(comment.author):
            decision = found
        elif comment.author == run.me:
            log.warning(
                "issue #%d: `/watchkeeper %s` by %s, the tracker token's own user, ignored "
                "(list it in tracker.maintainers to accept it)",
                item.number,
                found.action,
                comment.author,
            )
            run.progress(
                f"issue #{item.number}: /watchkeeper {found.action} by the token's own user "
                f"{comment.author} ignored (not in tracker.maintainers)"
            )
    if newest != last_seen:
        run.store.update(item.id, last_comment_id=newest)
    if decision is not None and ACTIONS[decision.action] != finding.status:
        apply(run, item, finding, decision, issue, comments)
    elif issue.state == "closed" and finding.status in LIVE_STATUSES:
        set_status(run.history, finding.id, "fix", "issue closed on the tracker")
        run.store.update(item.id, state="closed", status_synced="fixed")
        run.outcome.decisions.append(f"#{item.number}: closed on the tracker -> fixed")
    elif finding.status != item.status_synced:
        run.finish(item, finding, issue, comments, "watchkeeper", "findings")


def apply(
    run: TriageRun,
    item: TrackedIssue,
    f: StoredFinding,
    d: Decision,
    issue: Issue,
    comments: list[Comment],
) -> None:
    assert item.number is not None
    note = f"{d.via} by {d.who}"[:500]
    updated = set_status(run.history, f.id, d.action, note)
    run.finish(item, updated, issue, comments, d.who, d.via)
    run.outcome.decisions.append(f"#{item.number}: {updated.status} ({d.via} by {d.who})")
    run.progress(f"issue #{item.number}: finding #{f.id} {updated.status} via {d.via}")
