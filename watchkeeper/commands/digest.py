"""`watchkeeper digest`: judge what ran, write the morning digest, optionally commit and push.

Judging first means the digest never reports a night the detector has not seen, and because
judging is idempotent, a digest rerun on the same night changes nothing it already wrote.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from watchkeeper.campaign.nightly_findings import tracking_params
from watchkeeper.campaign.rerun import rerun_candidates
from watchkeeper.config import Config
from watchkeeper.errors import ConfigError
from watchkeeper.nightly.digest import Digest, day_window, gather
from watchkeeper.nightly.findings import Judgement, judge_pending
from watchkeeper.publish.digest import digest_files
from watchkeeper.publish.gitrepo import PublishResult, publish_files
from watchkeeper.publish.plots import atomic_write
from watchkeeper.store.db import Database, open_database
from watchkeeper.store.history import History


@dataclass(frozen=True, slots=True)
class DigestOutcome:
    path: Path
    digest: Digest
    judgements: tuple[Judgement, ...]
    published: PublishResult | None

    def to_json(self) -> dict[str, Any]:
        d = self.digest
        return {
            "path": str(self.path),
            "headline": d.headline,
            "campaigns": [c["id"] for c in d.campaigns],
            "judged_now": [j.campaign_id for j in self.judgements],
            "regressions": [f.id for f in d.regressions],
            "improvements": [f.id for f in d.improvements],
            "change_points": [f.id for f in d.change_points],
            "environment_noise": [f.id for f in d.noise],
            "mismatches": len(d.mismatches),
            "open_findings": len(d.open_findings),
            "commit": self.published.commit_sha if self.published else None,
            "committed": self.published.committed if self.published else None,
            "pushed": self.published.pushed if self.published else None,
        }


def commit_message(digest: Digest) -> str:
    subject = f"digest {digest.day.isoformat()}: {digest.headline}"
    if len(subject) > 72:
        subject = subject[:71] + "…"
    campaigns = ", ".join(f"{c['id']} ({c['kind']})" for c in digest.campaigns) or "none"
    return f"{subject}\n\nCampaigns: {campaigns}\nWritten by watchkeeper digest.\n"


def digest_command(
    config: Config,
    *,
    day: date | None = None,
    since: datetime | None = None,
    commit: bool = False,
    push: bool = False,
    rerun: bool = False,
    progress: Callable[[str], None],
    now: datetime | None = None,
    database: Database | None = None,
) -> DigestOutcome:
    """``rerun`` lets the job spend time confirming tonight's candidates right away; ``now``
    (the clock, injectable for tests) dates the digest when ``day`` is not given and ages the
    open findings."""
    now = now or datetime.now(UTC)
    day = day or now.date()
    until = day_window(day)[1]
    if since is not None and since >= until:  # an empty window: refused before any write
        raise ConfigError(
            f"digest --since {since.date()} is not before the digest's window ends "
            f"({until:%Y-%m-%d %H:%M} UTC): the window would be empty",
            hint="--since names a day before --date",
        )
    params = tracking_params(config)
    with open_database(config.database.resolved_url(), given=database) as db:
        history = History(db)
        judgements = judge_pending(history, params)
        for j in judgements:
            progress(f"judged campaign {j.campaign_id}: {j.counts()}")
        candidates = [c for j in judgements for c in j.candidates]
        if rerun and candidates:
            judgements += rerun_candidates(config, db, candidates, params, progress=progress)
        digest = gather(
            history,
            day=day,
            since=since,
            params=params.detector,
            change_point_min_size=params.change_point_min_size,
            now=now,
            bisect_auto=config.bisect.auto,
        )
    files = digest_files(digest)
    name = f"{day.isoformat()}.md"
    if commit or push:
        repo = config.digest.resolved_repo()
        subdir = config.digest.subdir.strip("/")
        progress(f"committing {subdir}/{name} to {repo} ({config.digest.branch})")
        published = publish_files(
            repo,
            {f"{subdir}/{rel}": data for rel, data in files.items()},
            message=commit_message(digest),
            author_name=config.digest.author_name,
            author_email=config.digest.author_email,
            branch=config.digest.branch,
            push=push,
            remote=config.digest.remote,
            push_attempts=config.digest.push_attempts,
        )
        progress(published.message)
        return DigestOutcome(repo / subdir / name, digest, tuple(judgements), published)
    folder = config.bench.resolved_reports_dir() / "digests"
    for rel, data in files.items():
        target = folder / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(target, data)
    return DigestOutcome(folder / name, digest, tuple(judgements), None)
