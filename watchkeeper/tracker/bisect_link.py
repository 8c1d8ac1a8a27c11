"""A bisect's result as one comment on the tracker issue of the regression it explains.

A nightly regression whose reference and current system run different llama.cpp releases is
answered by `watchkeeper bisect` (the digest prints the command, `bisect.auto` runs it). When
the bisect ends, found or not, its result goes to that finding's issue: the first bad release,
its upstream tag, the ratio against its predecessor with the CI, and the step table, rendered
by `upgrade.report` exactly as in the report file.

Once per issue and outcome: the comment is recorded in the bisect's state file (`record`),
and before posting, the issue's comments are searched for the comment's hidden marker, so a
post whose answer was lost (a 502 after the comment was made), or a rerun with another state
file, adopts the comment instead of writing it twice. A tracker error costs the comment, never
the result: the caller has already written the report and the state file, and a rerun of the
same command posts what is missing.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from watchkeeper.errors import TrackerError
from watchkeeper.store.tracker_store import TrackedIssue
from watchkeeper.tracker import escape
from watchkeeper.tracker.forge import Forge
from watchkeeper.upgrade.bisect_result import BisectResult
from watchkeeper.upgrade.releases import tag
from watchkeeper.upgrade.report import bisect_markdown

Progress = Callable[[str], None]
Record = Callable[[str, dict[str, Any]], None]


@dataclass(frozen=True, slots=True)
class BisectComment:
    """What one bisect posts: the same text on every issue it belongs to."""

    result: BisectResult
    profile: str
    good: str
    bad: str
    threshold: float
    releases: int
    report: str
    """Where the full report lies (a path on the host that ran the bisect)."""

    @property
    def outcome(self) -> str:
        """The result in one token: a rerun that reaches another result posts again."""
        r = self.result
        if r.status == "found":
            return f"found:{r.first_bad}"
        if r.status == "inconclusive":
            lo, hi = r.unresolved or (self.good, self.bad)
            return f"inconclusive:{lo}..{hi}"
        return "no-difference"

    @property
    def key(self) -> str:
        profile = re.sub(r"[^A-Za-z0-9_.-]", "_", self.profile)
        return f"bisect:{profile}:{self.good}..{self.bad}:{self.outcome}"

    @property
    def marker(self) -> str:
        return escape.marker_token(self.key)

    def headline(self) -> str:
        r = self.result
        if r.status == "found":
            return f"first bad release {r.first_bad} ({r.tag})"
        if r.status == "no difference":
            return "no release differs beyond the threshold"
        lo, hi = r.unresolved or (self.good, self.bad)
        return f"inconclusive between {lo} and {hi}"

    def body(self, finding_id: int) -> str:
        report = bisect_markdown(
            self.result,
            profile=self.profile,
            good=self.good,
            bad=self.bad,
            threshold=self.threshold,
            releases=self.releases,
        )
        # The report's title becomes a heading inside the comment.
        report = re.sub(r"^# ", "### ", report, count=1)
        return escape.body(
            f"**watchkeeper bisect** for finding #{finding_id}: {self.headline()} "
            f"(releases {self.good} ({tag(self.good)}) to {self.bad} ({tag(self.bad)})).\n\n"
            f"{report}\n"
            f"Full report: `{self.report}`. Rerun or resume: `watchkeeper bisect --good "
            f"{self.good} --bad {self.bad} --profile {escape.inline(self.profile, 80)}`.\n\n"
            f"{escape.marker_line(self.marker, self.key)}\n"
        )


@dataclass(frozen=True, slots=True)
class LinkedIssue:
    finding_id: int
    number: int
    state: str
    """'posted', 'already posted' (recorded or found by its marker) or 'failed'."""
    url: str = ""
    error: str | None = None


@dataclass(frozen=True, slots=True)
class LinkOutcome:
    findings: tuple[int, ...] = ()
    """The regression findings the result belongs to."""
    issues: tuple[LinkedIssue, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)
    """Why a finding got no comment (no tracker configured, no issue filed yet)."""
    error: str | None = None
    """Why nothing could be posted at all (token, database): the result is unharmed."""

    @property
    def failed(self) -> bool:
        return self.error is not None or any(i.state == "failed" for i in self.issues)

    def lines(self) -> list[str]:
        out = list(self.notes)
        if self.error is not None:
            out.append(f"not posted: {self.error}")
        for i in self.issues:
            where = f"issue #{i.number} (finding #{i.finding_id})"
            if i.state == "failed":
                out.append(f"{where}: not posted: {i.error}")
            else:
                out.append(f"{where}: {i.state}" + (f" {i.url}" if i.url else ""))
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "findings": list(self.findings),
            "issues": [
                {
                    "finding": i.finding_id,
                    "number": i.number,
                    "state": i.state,
                    "url": i.url,
                    "error": i.error,
                }
                for i in self.issues
            ],
            "notes": list(self.notes),
            "error": self.error,
        }


def comment_key(forge: Forge, number: int, comment: BisectComment) -> str:
    """The state file's key of one posted comment."""
    return f"{forge.kind}:{forge.repository}#{number}|{comment.outcome}"


def post_result(
    forge: Forge,
    items: Sequence[TrackedIssue],
    comment: BisectComment,
    *,
    recorded: Mapping[str, Any],
    record: Record,
    progress: Progress,
) -> list[LinkedIssue]:
    """One comment per issue in `items` (their findings' issues), unless recorded or already
    on the issue; a tracker error is reported for that issue and the next one is tried."""
    out: list[LinkedIssue] = []
    seen: set[int] = set()
    for item in items:
        number, finding_id = item.number, item.finding_id
        if number is None or finding_id is None or number in seen:
            continue
        seen.add(number)
        key = comment_key(forge, number, comment)
        if key in recorded:
            url = str(recorded[key].get("url") or "")
            out.append(LinkedIssue(finding_id, number, "already posted", url))
            continue
        try:
            found = next(
                (c for c in forge.comments(number) if escape.has_marker(c.body, comment.marker)),
                None,
            )
            if found is None:
                found = forge.comment(number, comment.body(finding_id))
                state = "posted"
            else:
                state = "already posted"
        except TrackerError as exc:
            progress(f"issue #{number}: the bisect result was not posted ({exc})")
            out.append(LinkedIssue(finding_id, number, "failed", error=str(exc)))
            continue
        record(
            key,
            {"finding": finding_id, "number": number, "comment_id": found.id, "url": found.url},
        )
        progress(f"issue #{number} (finding #{finding_id}): bisect result {state}")
        out.append(LinkedIssue(finding_id, number, state, found.url))
    return out
