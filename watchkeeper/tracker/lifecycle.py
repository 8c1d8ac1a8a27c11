"""Rules that connect an issue's life to its finding's: dedupe keys, maintainer decisions from
labels and `/watchkeeper` comments, and when a regressed series counts as recovered.

Pure functions over dataclasses, except `SeriesNights`, which reads run history once per
triage run and answers "how many good nights since this finding's last bad run?".
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from watchkeeper.findings.evidence import ChangePointEvidence, SeriesEvidence, evidence_of
from watchkeeper.nightly.detector import Direction, MetricKind, SeriesKey
from watchkeeper.nightly.series import SeriesPoint, fingerprint, pool, series_history
from watchkeeper.store.findings import StoredFinding
from watchkeeper.store.history import History
from watchkeeper.tracker.forge import Comment, IssueEvent

ACTIONS = {"ack": "acknowledged", "dismiss": "dismissed", "silence": "silenced"}
_COMMAND = re.compile(r"^\s*/watchkeeper\s+(ack|dismiss|silence)\b", re.MULTILINE | re.IGNORECASE)


def issue_key(f: StoredFinding) -> str:
    """One issue per (series fingerprint, change point); detector findings per side."""
    if f.kind == "change_point":
        e = evidence_of(f.kind, f.evidence)
        assert isinstance(e, ChangePointEvidence)
        return f"{f.fingerprint}:cp:{e.change_point.first_bad_run}"
    if f.kind in ("regression", "improvement"):
        return f"{f.fingerprint}:{f.side or 'worse'}"
    return f"{f.fingerprint}:{f.kind}"


def fileable(f: StoredFinding, kinds: Sequence[str]) -> bool:
    """Confirmed, of a configured kind, and not an improvement."""
    return f.confirmed_at is not None and f.kind in kinds and f.side != "better"


@dataclass(frozen=True, slots=True)
class Decision:
    action: str
    """ack, dismiss or silence."""
    who: str
    via: str


def label_decision(
    labels: Sequence[str],
    prefix: str,
    events: Sequence[IssueEvent] | None = None,
    me: str = "",
) -> Decision | None:
    """A status label on the issue, as a decision about the finding it now tracks.

    With the issue's history (`events`), a label counts only when someone other than
    watchkeeper applied it *after* the occurrence it would decide began: after watchkeeper's
    last reopen of the issue. A label left over from an earlier finding (closed with
    `dismiss`, then reopened by a recurrence) is no decision about the new one. Without a
    history (a forge that has none), every status label counts.
    """
    added: dict[str, tuple[int, str]] = {}
    start = -1
    for index, event in enumerate(events or ()):
        if event.kind == "reopened" and event.actor == me:
            start = index
        elif event.kind == "labeled":
            added[event.label] = (index, event.actor)
    for action in ("dismiss", "silence", "ack"):
        name = f"{prefix}{action}"
        if name not in labels:
            continue
        if events is None:
            return Decision(action, "a maintainer", f"label {name}")
        index, actor = added.get(name, (-1, ""))
        if index > start and actor and actor != me:
            return Decision(action, actor, f"label {name}")
    return None


def comment_decision(comment: Comment) -> Decision | None:
    """The last `/watchkeeper ack|dismiss|silence` line of a comment, if any."""
    found = _COMMAND.findall(comment.body)
    if not found:
        return None
    return Decision(found[-1].lower(), comment.author, f"comment {comment.url or comment.id}")


def _bad(key: SeriesKey, value: float, baseline: float) -> bool:
    """Worse than the pre-regression baseline by more than the metric's floor."""
    spec = key.spec
    if spec.kind is MetricKind.CONTINUOUS:
        if baseline == 0:
            return False
        change = (value - baseline) / abs(baseline)
    else:
        change = value - baseline
    worse = -change if spec.direction is Direction.HIGHER else change
    return worse > spec.floor


class SeriesNights:
    """Per series fingerprint, each night's (campaign's) pooled value, oldest first."""

    def __init__(self, history: History) -> None:
        self._series: dict[str, tuple[SeriesKey, list[SeriesPoint]]] = {}
        for key, points in series_history(history.run_records()).items():
            self._series[fingerprint(key)] = (key, points)

    def good_nights(self, f: StoredFinding) -> int:
        """Consecutive most recent nights after the finding's last flagged run whose level is
        back within the floor of the baseline the finding was measured against."""
        e = evidence_of(f.kind, f.evidence)
        baseline = e.baseline if isinstance(e, SeriesEvidence) else None
        entry = self._series.get(f.fingerprint)
        if f.kind != "regression" or f.run_id is None or baseline is None or entry is None:
            return 0
        key, points = entry
        nights: dict[int, list[SeriesPoint]] = defaultdict(list)
        for p in points:
            if p.run.run_id > f.run_id:
                nights[p.run.campaign_id].append(p)
        streak = 0
        for campaign in sorted(nights, reverse=True):
            group = nights[campaign]
            pooled = pool(group[-1].point.label, [p.point for p in group])
            if not pooled.good or not pooled.size(key.spec.kind):
                break
            if _bad(key, pooled.center(key.spec.kind), float(baseline)):
                break
            streak += 1
        return streak
