"""`watchkeeper bisect --good V1 --bad V2 [--profile P]`: the first bad release between two.

The search and its decision rule are `upgrade.bisect`'s; this module gives them the real
build (the build cache) and the real paired measurement (`release_runs`), keeps the state file
and writes the report. Then the result goes to the tracker issue of each open regression
finding it explains (`tracker.bisect_link`): the finding named with `--finding`, else every
confirmed nightly regression of the profile whose reference and current releases bracket the
range. The report and the state file are written first, so a tracker error costs the comment
only; a rerun of the same command posts what is missing and nothing twice."""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from watchkeeper.analysis.stats import Pair
from watchkeeper.campaign.defaults import no_profiles
from watchkeeper.campaign.release_runs import (
    MeasureSettings,
    ReleaseBuilds,
    paired_pairs,
    refuse_pinned_server,
    settings_from,
)
from watchkeeper.config import Config
from watchkeeper.config.paths import data_dir
from watchkeeper.config.requests import BisectRequest
from watchkeeper.errors import ConfigError, WatchkeeperError
from watchkeeper.host import info as hostinfo
from watchkeeper.server.profiles import get_profile
from watchkeeper.store.db import Database, open_database
from watchkeeper.store.findings import OPEN_STATUSES, FindingStore, StoredFinding
from watchkeeper.store.references import ReferenceStore
from watchkeeper.store.tracker_store import TrackerStore
from watchkeeper.tracker.bisect_link import BisectComment, LinkOutcome, post_result
from watchkeeper.tracker.forge import Forge
from watchkeeper.tracker.tokens import forge_for
from watchkeeper.upgrade import releases
from watchkeeper.upgrade.bisect import Bisector
from watchkeeper.upgrade.bisect_result import BisectResult
from watchkeeper.upgrade.bisect_state import (
    BisectState,
    Built,
    recorded_findings,
    save_state,
    start_or_resume,
)
from watchkeeper.upgrade.report import bisect_markdown
from watchkeeper.upgrade.suggest import BisectSuggestion, open_suggestions, pick_auto, suggestion

Progress = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class BisectRun:
    result: BisectResult
    state_path: Path
    report_path: Path
    releases: int
    link: LinkOutcome = field(default_factory=LinkOutcome)
    """The result's comments on the findings' tracker issues."""

    def to_json(self) -> dict[str, Any]:
        """`bisect --json`: the result (every located step and every measurement with its
        ratio, CI, rounds and decision), where the files are, and what was posted."""
        return {
            **self.result.to_json(),
            "releases": self.releases,
            "report": str(self.report_path),
            "state": str(self.state_path),
            "tracker": self.link.to_json(),
        }


def state_dir() -> Path:
    return data_dir() / "bisect"


def default_state_path(profile: str, good: str, bad: str) -> Path:
    return state_dir() / f"{profile}-{good}-{bad}.json"


def linked_findings(
    db: Database, *, profile: str, good: str, bad: str, finding: int | None = None
) -> list[StoredFinding]:
    """The findings a bisect of `profile` from `good` to `bad` answers: the one named, else
    the open confirmed nightly regressions of the profile whose reference release is at or
    before `good` and whose current release is at or after `bad`."""
    store = FindingStore(db)
    if finding is not None:
        named = store.get(finding)
        if named is None:
            raise ConfigError(
                f"--finding {finding}: no such finding",
                hint="`watchkeeper findings` lists them",
            )
        return [named]
    references = ReferenceStore(db)
    return [
        f
        for f in store.find(statuses=OPEN_STATUSES, kinds=("regression",))
        if (s := suggestion(f, references.get)) is not None
        and s.brackets(profile=profile, good=good, bad=bad)
    ]


def next_auto_bisect(
    config: Config,
    db: Database,
    *,
    host_fingerprint: str,
    attempted: Collection[int],
    now: datetime,
) -> BisectSuggestion | None:
    """The bisect the daemon's job runs now (`upgrade.suggest.pick_auto` over the open
    findings), or None: always None while `bisect.auto` is off."""
    if not config.bisect.auto:
        return None
    findings = FindingStore(db).find(statuses=OPEN_STATUSES, kinds=("regression",))
    return pick_auto(
        open_suggestions(findings, ReferenceStore(db).get),
        host_fingerprint=host_fingerprint,
        attempted=attempted,
        now=now,
    )


def link_result(
    config: Config,
    db: Database,
    state: BisectState,
    state_path: Path,
    comment: BisectComment,
    *,
    finding: int | None,
    progress: Progress,
    client: Forge | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> LinkOutcome:
    """Post the result on the linked findings' issues; every comment is recorded in the
    state file as soon as it exists."""
    found = linked_findings(
        db, profile=comment.profile, good=comment.good, bad=comment.bad, finding=finding
    )
    ids = tuple(f.id for f in found)
    if ids:
        state.findings = sorted({*state.findings, *ids})
        save_state(state, state_path)
    if not ids:
        return LinkOutcome(notes=("no open regression finding brackets this range",))
    t = config.tracker
    if not t.kind:
        return LinkOutcome(ids, notes=("no [tracker] configured: the result is in the report",))
    items = [
        i
        for i in TrackerStore(db, tracker=t.kind, repository=t.repository).items()
        if i.finding_id in ids and i.number is not None
    ]
    filed = {i.finding_id for i in items}
    notes = tuple(
        f"finding #{i} has no tracker issue yet (triage files it): nothing posted"
        for i in ids
        if i not in filed
    )
    if not items:
        return LinkOutcome(ids, notes=notes)

    def record(key: str, value: dict[str, Any]) -> None:
        state.comments[key] = value
        save_state(state, state_path)

    with forge_for(t, client=client, sleep=sleep) as forge:
        issues = post_result(
            forge, items, comment, recorded=state.comments, record=record, progress=progress
        )
    return LinkOutcome(ids, tuple(issues), notes)


def bisect_command(
    config: Config,
    request: BisectRequest,
    *,
    progress: Progress,
    database: Database | None = None,
    record_findings: Sequence[int] = (),
    versions: list[str] | None = None,
    client: Forge | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> BisectRun:
    """Bisect `request.good`..`request.bad` (the CLI's options or a bisect job's `[args]`,
    config/requests.py), each choice left out the config's: the profile the first of
    `[nightly] profiles`, the measuring the nightly's with `per_category` and `max_tokens`
    where given. `request.finding`: the regression finding whose issue gets the result
    (default: every open one whose releases bracket the range). ``record_findings``: findings
    written into the state file before anything is built (the daemon's once-per-finding
    record); ``versions``, ``client`` and ``sleep`` stand in for the package index, the forge
    and the clock in tests."""
    refuse_pinned_server("bisect")  # before anything is listed, built or measured
    good, bad = request.ends()
    profile = request.profile
    if profile is None:
        if not config.nightly.profiles:
            raise no_profiles("[nightly] profiles", config, flag="--profile P")
        profile = config.nightly.profiles[0]
    settings = settings_from(
        config, per_category=request.per_category, max_tokens=request.max_tokens
    )
    get_profile(config, profile)  # an unknown profile fails before any build
    finding = request.finding
    if finding is not None:  # so does an unknown --finding
        with open_database(config.database.resolved_url(), given=database) as db:
            linked_findings(db, profile=profile, good=good, bad=bad, finding=finding)
    every = versions or releases.available(config.server.package_index, request.sdists)
    window = releases.between(every, good, bad)
    path = request.state or default_state_path(profile, good, bad)
    state = _open_state(config, path, good, bad, profile, window, record_findings)
    builds = ReleaseBuilds(config, sdists=request.sdists, jobs=request.jobs, progress=progress)
    progress(f"bisect {good}..{bad}: {len(window)} releases; state {path}")
    result = Bisector(
        state,
        state_path=path,
        build=builds,
        measure=_measure(config, profile, builds, settings, progress, database),
        rounds=request.rounds,
        max_rounds=request.max_rounds,
        max_ranges=request.max_ranges,
        progress=progress,
    ).run()
    if result.status == "no difference":  # the change is not in this range: where else
        result = replace(result, nearest=tuple(releases.nearest_outside(every, good, bad)))
    report = _write_report(result, path, state, len(window))
    comment = BisectComment(
        result, profile, good, bad, state.threshold, len(window), report=str(report)
    )
    link = _post(
        config,
        state,
        path,
        comment,
        finding=finding,
        progress=progress,
        database=database,
        client=client,
        sleep=sleep,
    )
    return BisectRun(result, path, report, len(window), link)


def _open_state(
    config: Config,
    path: Path,
    good: str,
    bad: str,
    profile: str,
    window: list[str],
    record_findings: Sequence[int],
) -> BisectState:
    """The state file's bisect (or a fresh one), the daemon's findings recorded in it before
    anything is built."""
    state = start_or_resume(
        path,
        good=good,
        bad=bad,
        profile=profile,
        threshold=config.nightly.min_effect,
        versions=window,
    )
    if record_findings:
        state.findings = sorted({*state.findings, *record_findings})
        save_state(state, path)
    return state


def _measure(
    config: Config,
    profile: str,
    builds: ReleaseBuilds,
    settings: MeasureSettings,
    progress: Progress,
    database: Database | None,
) -> Callable[[Built, Built, int, int], list[Pair]]:
    """The bisector's measure function: the real paired runs of two built releases."""

    def measure(base: Built, cand: Built, n: int, first: int) -> list[Pair]:
        progress(f"measuring {cand.version} against {base.version}: {n} rounds")
        return paired_pairs(
            config,
            profile,
            builds.binaries[base.version],
            builds.binaries[cand.version],
            rounds=n,
            first_round=first,
            settings=settings,
            progress=progress,
            database=database,
        )

    return measure


def _write_report(result: BisectResult, path: Path, state: BisectState, releases: int) -> Path:
    """The Markdown report beside the state file (written before anything is posted)."""
    report = path.with_suffix(".md")
    report.write_text(
        bisect_markdown(
            result,
            profile=state.profile,
            good=state.good,
            bad=state.bad,
            threshold=state.threshold,
            releases=releases,
        ),
        encoding="utf-8",
    )
    return report


def _post(
    config: Config,
    state: BisectState,
    path: Path,
    comment: BisectComment,
    *,
    finding: int | None,
    progress: Progress,
    database: Database | None,
    client: Forge | None,
    sleep: Callable[[float], None],
) -> LinkOutcome:
    """The result on the findings' issues; a tracker or database error costs the comment
    only (the result is written), and says how to post it later."""
    try:
        with open_database(config.database.resolved_url(), given=database) as db:
            link = link_result(
                config,
                db,
                state,
                path,
                comment,
                finding=finding,
                progress=progress,
                client=client,
                sleep=sleep,
            )
    except WatchkeeperError as exc:  # the result is written: only the comment is lost
        link = LinkOutcome(error=exc.message + (f" (hint: {exc.hint})" if exc.hint else ""))
    if link.failed:
        progress(
            f"the bisect result is in {comment.report} and {path}; rerun the same command to "
            "post what is missing (nothing is measured or posted twice)"
        )
    return link


@dataclass(frozen=True, slots=True)
class AutoBisect:
    """One bisect the daemon ran for a finding (`bisect.auto`)."""

    suggestion: BisectSuggestion
    run: BisectRun

    def summary(self) -> str:
        s, r = self.suggestion, self.run.result
        if r.status == "found":
            what = f"first bad release {r.first_bad} ({r.tag})"
        elif r.status == "no difference":
            what = "no release differs beyond the threshold"
        else:
            what = f"inconclusive between {' and '.join(r.unresolved or ())}"
        posted = "; result not posted (see details)" if self.run.link.failed else ""
        return f"bisect of finding #{s.finding_id} ({s.profile} {s.good}..{s.bad}): {what}{posted}"

    def to_json(self) -> dict[str, Any]:
        s, r = self.suggestion, self.run.result
        return {
            "finding": s.finding_id,
            "profile": s.profile,
            "good": s.good,
            "bad": s.bad,
            "status": r.status,
            "first_bad": r.first_bad,
            "tag": r.tag,
            "report": str(self.run.report_path),
            "state": str(self.run.state_path),
            "tracker": self.run.link.to_json(),
        }


def auto_bisect_command(
    config: Config,
    request: BisectRequest,
    *,
    now: datetime,
    progress: Progress,
    database: Database | None = None,
    host_fingerprint: str | None = None,
) -> AutoBisect | None:
    """The daemon's bisect: the one `next_auto_bisect` picks, run like the CLI's (same state
    file, so the digest's command resumes it) with the job's measuring (`request`: no ends,
    no profile, state or finding: the pick's), the finding recorded in the state file before
    anything is built. None when there is nothing to bisect."""
    chosen = [k for k in ("good", "profile", "sdists", "state", "finding") if getattr(request, k)]
    if chosen:
        raise ConfigError(f"an automatic bisect picks its own {', '.join(chosen)}")
    host = host_fingerprint or hostinfo.collect().fingerprint
    with open_database(config.database.resolved_url(), given=database) as db:
        picked = next_auto_bisect(
            config, db, host_fingerprint=host, attempted=recorded_findings(state_dir()), now=now
        )
    if picked is None:
        return None
    progress(f"finding #{picked.finding_id}: {picked.command}")
    ends = {"good": picked.good, "bad": picked.bad, "profile": picked.profile}
    run = bisect_command(
        config,
        BisectRequest.model_validate(request.model_dump() | ends),
        progress=progress,
        database=database,
        record_findings=[picked.finding_id],
    )
    return AutoBisect(picked, run)
