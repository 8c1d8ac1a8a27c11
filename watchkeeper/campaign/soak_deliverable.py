"""The soak of a recommendation, written beside the sweep's report and read by it.

After `watchkeeper soak --recommendation ...` finishes, its figures per arm and concurrency
(requests, errors, median decode tok/s, throughput drift), the RSS slope per arm, restarts and
the verdict go to `reports/speculative_soak.md` and `.json`, and the stability criterion of
`reports/speculative_benchmark.md` is rewritten from them (between its soak markers), so the
committed acceptance section reads the committed soak.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from watchkeeper.campaign.defaults import detected_gpu
from watchkeeper.config import Config
from watchkeeper.publish.deliverable import RecommendationRecord
from watchkeeper.publish.served import as_rendered, served_arm, wants_gpu
from watchkeeper.publish.soak_report import (
    SOAK_REPORT,
    SOAK_SUMMARY,
    render,
    series_rows,
    splice,
    stability_line,
    summary,
    write_summary,
    write_text,
)
from watchkeeper.soak.judgement import SoakUnit
from watchkeeper.soak.verdicts import SoakVerdict
from watchkeeper.store.db import Database, open_database
from watchkeeper.store.soak_store import SoakStore

UNIT_PATH = "systemd/llama-server-speculative.service"


def unit_path(record: RecommendationRecord) -> str:
    """The unit the sweep rendered from this record (`--service-file`, kept in the record's
    extras since 2026-11-28); the default sweep's for an older record."""
    return str(record.extra.get("unit") or UNIT_PATH)


def _named(unit: Mapping[str, Any] | None, record: RecommendationRecord) -> SoakUnit | None:
    """The soak's stored unit (the flags that ran then, from the campaign's params) named as
    the record names it: a soak stored before the record kept its unit's path said the
    default sweep's."""
    return SoakUnit.from_json({**unit, "path": unit_path(record)}) if unit else None


def soaked_unit(
    config: Config, record: RecommendationRecord, names: Sequence[str]
) -> dict[str, Any]:
    """The unit the soak runs: its path in the repository and the ExecStart flags of each arm
    (the subject's is the unit's; the baseline's is what the unit would run keeping it).
    Kept in the campaign's params, so a report re-rendered later states what ran then, and
    a soak from before it ran the unit's flags says so."""
    arms = {a.name: a for a in (record.baseline, record.chosen, record.closest) if a}
    service = as_rendered(record, config.service)
    gpu = wants_gpu(record.gpu, service, detected=detected_gpu(config))
    return {
        "path": unit_path(record),
        "flags": {n: list(served_arm(arms[n], service, gpu=gpu).flags) for n in names if n in arms},
    }


def write_soak_deliverable(
    config: Config,
    campaign_id: int,
    verdict: SoakVerdict,
    record: RecommendationRecord,
    *,
    names: Sequence[str],
    duration: str,
    command: str,
    progress: Callable[[str], None],
    database: Database | None = None,
) -> Path:
    reports = config.bench.resolved_reports_dir()
    with open_database(config.database.resolved_url(), given=database) as db:
        data = SoakStore(db).load(campaign_id)
    subject = names[0]
    baseline = record.baseline.name
    data_summary = summary(
        verdict,
        series_rows(data.samples),
        subject=subject,
        baseline=baseline,
        duration=duration,
        sweep_campaign=record.campaign_id,
        command=command,
        cache_ram_mib=data.params.get("cache_ram_mib"),
        drift_threshold=config.soak.drift_threshold,
        unit=_named(data.params.get("unit"), record),
    )
    write_summary(reports / SOAK_SUMMARY, data_summary)
    path = write_text(reports / SOAK_REPORT, render(data_summary))
    progress(f"soak report: {path}")
    sweep = reports / record.report
    if sweep.is_file():
        text = sweep.read_text(encoding="utf-8")
        line = stability_line(data_summary, fallback="")
        # latest.md is a copy of the last campaign's report: when that is this sweep's, it
        # reads the same line (it said "not yet measured" beside a measured soak).
        latest = reports / "latest.md"
        copies = [sweep]
        if latest.is_file():
            old = latest.read_text(encoding="utf-8")
            if splice(old, "") == splice(text, ""):
                copies.append(latest)
        for copy in copies:
            before = copy.read_text(encoding="utf-8")
            spliced = splice(before, line)
            if spliced != before:
                write_text(copy, spliced)
                progress(f"{copy}: the stability criterion now reads this soak")
    return path
