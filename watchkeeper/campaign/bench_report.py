"""The end of a bench: the report written, its path recorded, the campaign completed.

Separate from `campaign.bench` so a command that runs several campaigns (review-pr, sweep,
nightly) can finish each with its own recommendation and report sections.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from watchkeeper.analysis.benchmark import BenchResult
from watchkeeper.analysis.fit import fit_section
from watchkeeper.analysis.recommend import Recommendation, recommend
from watchkeeper.campaign.bench import execute_bench
from watchkeeper.campaign.bench_plan import BenchPlan, Progress
from watchkeeper.campaign.fit import fit_before_bench, with_fit
from watchkeeper.config import Config
from watchkeeper.publish.report import write_bench_report
from watchkeeper.store.db import Database, open_database
from watchkeeper.store.repository import Repository


def finish_with_report(
    config: Config,
    result: BenchResult,
    *,
    progress: Progress,
    recommendation: object | None = None,
    extra_copy: Path | None = None,
    sections: str = "",
    database: Database | None = None,
    preface: str = "",
) -> BenchResult:
    rec = recommendation if isinstance(recommendation, Recommendation) else None
    path = write_bench_report(
        result,
        config.bench.resolved_reports_dir(),
        recommendation=rec,
        extra_copy=extra_copy,
        sections=sections,
        preface=preface,
    )
    progress(f"report: {path}")
    result = replace(result, report_path=str(path))
    with open_database(config.database.resolved_url(), given=database) as db:
        repo = Repository(db)
        repo.add_report(result.campaign_id, kind=result.kind, path=str(path))
        repo.finish_campaign(
            result.campaign_id,
            status="completed",
            summary={"report": str(path), "findings": len(result.findings)},
        )
    return result


def bench_and_report(
    config: Config,
    plan: BenchPlan,
    *,
    fit_context: int | None,
    progress: Progress,
    database: Database | None = None,
) -> BenchResult:
    """A plain bench after its plan, as `bench` and `gpu-check` run it: the fit check at the
    user's context before any measured round, the paired bench, its recommendation and its
    report (the fit table among its sections)."""
    fit = fit_before_bench(config, plan.profiles, fit_context, progress=progress)
    with open_database(config.database.resolved_url(), given=database) as db:
        result = with_fit(execute_bench(config, plan, progress=progress, database=db), fit)
        return finish_with_report(
            config,
            result,
            progress=progress,
            recommendation=recommend(result),
            database=db,
            sections=fit_section(fit),
        )
