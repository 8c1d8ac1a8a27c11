"""`watchkeeper report --campaign N`: a stored campaign's report, re-rendered with today's code.

A renderer fix (the soak headline that read "**stable**: stable:") used to mean re-rendering
the committed report by hand. The soak's report is a pure function of what the store keeps
(every block, sample, resource point and incident, the plan in the campaign's params, the unit
it ran) and of the recommendation it soaked, so it is judged and rendered again exactly as
`soak --recommendation` does at its end, to the same place or to `--out DIR`.

A bench's or sweep's report is not: it reads the identity replay on the live baseline server
and the host as measured, which the store does not keep in full. Such a campaign is refused
with what it is and where its report was written, rather than re-rendered from half its
evidence.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from watchkeeper.campaign.soak_deliverable import write_soak_deliverable
from watchkeeper.config import Config
from watchkeeper.config.paths import under_working_dir
from watchkeeper.errors import PublishError
from watchkeeper.publish.deliverable import RECORD_NAME, read_record
from watchkeeper.publish.soak_report import SOAK_SUMMARY, read_summary
from watchkeeper.soak.verdicts import judge
from watchkeeper.store.campaigns import CampaignRows, StoredCampaign
from watchkeeper.store.db import Database, open_database
from watchkeeper.store.soak_store import SoakStore

REBUILDABLE = ("soak",)


@dataclass(frozen=True, slots=True)
class ReportResult:
    campaign_id: int
    kind: str
    path: Path
    verdict: str

    def to_json(self) -> dict[str, Any]:
        return {
            "campaign_id": self.campaign_id,
            "kind": self.kind,
            "path": str(self.path),
            "verdict": self.verdict,
        }


def _campaign(db: Database, campaign_id: int) -> StoredCampaign:
    found = CampaignRows(db).read(campaign_id)
    if found is None:
        raise PublishError(
            f"report --campaign {campaign_id}: no such campaign in this database",
            hint="`watchkeeper findings` and the reports' folders name the campaigns",
        )
    if found.kind not in REBUILDABLE:
        raise PublishError(
            f"report --campaign {campaign_id}: a {found.kind} campaign's report cannot be "
            "rebuilt from the store (it reads the identity replay on the live baseline server "
            "and the host as measured)",
            hint=f"re-renderable kinds: {', '.join(REBUILDABLE)}; rerun the {found.kind} to "
            "get its report from today's code",
        )
    if found.status != "completed":
        raise PublishError(
            f"report --campaign {campaign_id}: the soak is {found.status}, not completed",
            hint=f"finish it first: `watchkeeper soak --resume {campaign_id}`",
        )
    return found


def _same_sweep(campaign: StoredCampaign, sweep: int, source: Path) -> None:
    """The soak re-rendered against the record it soaked: its summary takes the record's
    campaign as the sweep it soaked and its line goes into that sweep's report, so a soak of
    another sweep's pick (`soak --recommendation` keeps it in the params since 7 Dec 2026)
    would be quoted as this pick's, as a sweep once quoted the set before's soak."""
    soaked = campaign.params.get("sweep_campaign")
    if soaked is not None and soaked != sweep:
        raise PublishError(
            f"report --campaign {campaign.id}: the soak soaked sweep campaign {soaked}'s pick, "
            f"and {_shown(source)} is sweep campaign {sweep}'s",
            hint="pass the record it soaked as --recommendation (and --out DIR to keep the "
            "committed set as it is)",
        )


def _command(config: Config, campaign: StoredCampaign, reports: Path, recommendation: Path) -> str:
    """The command the report names: the one its summary kept, else one rebuilt from the
    campaign's plan (the store does not keep the command line)."""
    kept = read_summary(reports / SOAK_SUMMARY)
    if kept and kept.campaign_id == campaign.id and kept.command:
        return kept.command
    p = campaign.params
    levels = ",".join(str(c) for c in p.get("concurrency", []))
    return (
        f"watchkeeper soak --recommendation {_shown(recommendation)} --concurrency {levels} "
        f"--duration {p.get('duration', config.soak.duration)} --block {p.get('block_s', 0):g}s"
    )


def _shown(path: Path) -> str:
    """The path as a reader can reuse it: relative to the working directory when under it, so
    a committed report does not carry this machine's absolute paths."""
    return under_working_dir(path) or str(path)


def report_command(
    config: Config,
    *,
    campaign_id: int,
    out: Path | None = None,
    recommendation: Path | None = None,
    database: Database | None = None,
    progress: Callable[[str], None] = lambda _m: None,
) -> ReportResult:
    """Re-render campaign `campaign_id`'s report into the reports directory (or `out`).
    `recommendation`: the record the soak soaked (default: the committed one)."""
    reports = config.bench.resolved_reports_dir()
    source = recommendation or reports / RECORD_NAME
    record = read_record(source)
    target = config
    if out is not None:
        bench = config.bench.model_copy(update={"reports_dir": str(out)})
        target = config.model_copy(update={"bench": bench})
    with open_database(config.database.resolved_url(), given=database) as db:
        campaign = _campaign(db, campaign_id)
        _same_sweep(campaign, record.campaign_id, source)
        verdict = judge(
            SoakStore(db).load(campaign_id),
            config.soak,
            near_tie_threshold=config.bench.near_tie_threshold,
        )
        names = [str(n) for n in campaign.params.get("profiles", [])]
        path = write_soak_deliverable(
            target,
            campaign_id,
            verdict,
            record,
            names=names,
            duration=str(campaign.params.get("duration", "")),
            command=_command(config, campaign, reports, source),
            progress=progress,
            database=db,
        )
    return ReportResult(campaign_id, campaign.kind, path, verdict.verdict)
