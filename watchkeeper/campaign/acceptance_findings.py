"""The acceptance alarms of a judged soak or night, filed as findings: each drafting arm's
acceptance against its own earlier campaigns of the same kind on this host (a collapse: the
drafter no longer fits), and its requests that accept nearly every draft on output that
repeats itself (a loop). Rules and their simulated rates: `checks/acceptance_alarm.py`.

Called by `commands/soak.py` after the soak's own findings and by `campaign/night.py` after
the night's regressions; an arm that did not draft (a baseline) is never judged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from watchkeeper.checks.acceptance_alarm import (
    AlarmParams,
    CollapseVerdict,
    LoopVerdict,
    judge_collapse,
    judge_loop,
    run_acceptance,
)
from watchkeeper.store.acceptance_store import AcceptanceStore
from watchkeeper.store.db import Database
from watchkeeper.store.findings import FindingStore, NewFinding


@dataclass(frozen=True, slots=True)
class ArmAlarms:
    """One arm's two verdicts in one campaign."""

    arm: str
    drafted: int
    accepted: int
    requests: int
    collapse: CollapseVerdict
    loop: LoopVerdict

    def to_json(self) -> dict[str, Any]:
        return {
            "arm": self.arm,
            "drafted": self.drafted,
            "accepted": self.accepted,
            "requests": self.requests,
            "collapse": self.collapse.to_json(),
            "loop": self.loop.to_json(),
        }


def judge_campaign(
    db: Database, campaign_id: int, *, kinds: Sequence[str], params: AlarmParams | None = None
) -> list[ArmAlarms]:
    """Both alarms for every arm of the campaign that drafted."""
    p = params or AlarmParams()
    store = AcceptanceStore(db)
    out = []
    for arm, requests in sorted(store.campaign_requests(campaign_id).items()):
        current = run_acceptance(f"campaign {campaign_id}", requests, p)
        history = store.history(campaign_id, arm, kinds, p.window)
        out.append(
            ArmAlarms(
                arm,
                current.drafted,
                current.accepted,
                current.requests,
                judge_collapse(history, current, p),
                judge_loop(current, p),
            )
        )
    return out


def record_acceptance_alarms(
    db: Database,
    campaign_id: int,
    *,
    kinds: Sequence[str],
    source: str,
    params: AlarmParams | None = None,
    now: datetime | None = None,
) -> list[int]:
    """One finding per arm and alarm that fired; a fact seen again while open recurs on the
    same finding (`record_recurring`). `source`: "soak" or "nightly", in the fingerprint."""
    store = FindingStore(db)
    ids = []
    for a in judge_campaign(db, campaign_id, kinds=kinds, params=params):
        pct = f"{a.accepted} of {a.drafted} drafted tokens accepted ({a.collapse.current:.1%})"
        fired: list[tuple[str, str, str]] = []  # (kind, label, title)
        if a.collapse.fired:
            fired.append((
                "acceptance_collapse",
                "regression",
                f"{a.arm}: acceptance collapsed to {a.collapse.current:.1%} from "
                f"a median of {a.collapse.history_median:.1%} ({pct})",
            ))  # fmt: skip
        if a.loop.fired:
            fired.append((
                "acceptance_loop",
                "stability",
                f"{a.arm}: {a.loop.looped} of {a.loop.requests} requests loop "
                f"(acceptance near 1 on output that repeats itself; {pct})",
            ))  # fmt: skip
        for kind, label, title in fired:
            finding = NewFinding(
                campaign_id=campaign_id,
                fingerprint=f"{source}-{kind.replace('_', '-')}:{a.arm}"[:64],
                kind=kind,
                label=label,
                severity="high",
                title=title,
                evidence=a.to_json(),
            )
            ids.append(store.record_recurring(finding, now=now))
    return ids
