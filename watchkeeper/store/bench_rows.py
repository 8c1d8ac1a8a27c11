"""A bench's rows: every run the moment it ends, then the output checks and findings.

Runs are stored as they finish so a crash loses at most the run in progress; the run ids are
kept here because the output checks, written after the analysis, point at the two runs each
verdict compared. The bench orchestration hands rows over and never sees the ids.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from watchkeeper.analysis.benchmark import CONTROL_ARM, BenchResult
from watchkeeper.errors import ServerError
from watchkeeper.load.records import RunPurpose, RunResult
from watchkeeper.store.findings import FindingStore, NewFinding
from watchkeeper.store.repository import Repository

RunRef = tuple[str, str, int]
"""(arm, purpose, round): how the output checks find the runs a verdict compared."""


class BenchRows:
    """The store side of one bench campaign: `save` each run, `store_checks` at the end."""

    def __init__(self, repo: Repository, campaign_id: int, profile_ids: Mapping[str, int]) -> None:
        self._repo = repo
        self.campaign_id = campaign_id
        self._profile_ids = dict(profile_ids)
        self.runs: list[RunResult] = []
        """Every run saved so far, in order: what `analyze` reads."""
        self._run_ids: dict[RunRef, int] = {}

    def save(self, run: RunResult, profile: str) -> RunResult:
        """Store `run` under `profile`'s row; a run whose server died raises after it is kept,
        so the failure is on record before the bench stops."""
        self._run_ids[(run.arm, str(run.purpose), run.round)] = self._repo.save_run(
            self.campaign_id, self._profile_ids[profile], run
        )
        self.runs.append(run)
        if run.error:
            raise ServerError(f"{profile}: {run.error}")
        return run

    def measured(self) -> list[RunResult]:
        """The measured rounds' runs so far: what `more_rounds` and the all-failed check read."""
        return [r for r in self.runs if r.purpose == RunPurpose.MEASURED]

    def store_checks(self, result: BenchResult, baseline: str) -> None:
        """One output-check row per identity verdict (pointing at the two runs compared) and
        one finding per guard finding; a correctness finding recurs instead of duplicating."""
        store_checks(self._repo, self.campaign_id, result, self._run_ids, baseline)


def store_checks(
    repo: Repository,
    campaign_id: int,
    result: BenchResult,
    run_ids: Mapping[RunRef, int],
    baseline: str,
) -> None:
    rows: list[dict[str, Any]] = []
    for rec in result.identity:
        if rec.arm == CONTROL_ARM:
            cand = _pass_of(run_ids, baseline, rec.round)
            base = _pass_of(run_ids, baseline, rec.round - 1)
        else:
            cand = run_ids.get((rec.arm, RunPurpose.IDENTITY, rec.round))
            base = run_ids.get((baseline, RunPurpose.IDENTITY, rec.round))
        if cand is None or base is None:
            continue
        rows.append(
            {
                "campaign_id": campaign_id,
                "baseline_run_id": base,
                "candidate_run_id": cand,
                "arm": rec.arm,
                "task_id": rec.task_id,
                "category": rec.category,
                "verdict": rec.verdict,
                "first_divergence": rec.first_divergence,
                "margin": rec.margin,
                "baseline_excerpt": rec.baseline_excerpt[:500],
                "candidate_excerpt": rec.candidate_excerpt[:500],
            }
        )
    repo.add_output_checks(rows)
    findings = FindingStore(repo.db)
    for f in result.findings:
        fingerprint = f"{f.kind}:{f.profile}:{f.category or '*'}"[:64]
        recurring = f.kind == "correctness"  # a fact, not a statistic: one finding, recurring
        new = NewFinding(
            campaign_id=campaign_id,
            fingerprint=fingerprint,
            kind=f.kind,
            label=f.kind if recurring else "candidate",
            severity=f.severity,
            title=f.title,
            evidence=f.evidence,
        )
        if recurring:
            findings.record_recurring(new)
        else:
            findings.add(new)


def _pass_of(run_ids: Mapping[RunRef, int], arm: str, round_: int) -> int | None:
    """The arm's pass of the task set in `round_`: a measured round, or (round 0 and below)
    a warm-up round; the control compares round 1 with the last warm-up."""
    measured = run_ids.get((arm, RunPurpose.MEASURED, round_))
    return measured if measured is not None else run_ids.get((arm, RunPurpose.WARMUP, round_))
