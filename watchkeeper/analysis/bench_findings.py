"""Findings of a paired benchmark: the guards on each speculating candidate, a correctness
finding where its outputs differ beyond a near-tie (and the noise floor, when replayed), and
degenerate output on the baseline.

Only speculating candidates are judged: a config change that does not speculate (an A/A twin,
another thread count) reports drift, never a finding.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict

from watchkeeper.analysis.bench_types import ArmSpec, IdentityRecord
from watchkeeper.checks import guards
from watchkeeper.checks.guards import GuardFinding
from watchkeeper.checks.identity import Verdict
from watchkeeper.load.records import RequestSample, RunResult


def correctness_finding(
    arm: ArmSpec, mismatches: int, records: Sequence[IdentityRecord], *, replayed: bool
) -> GuardFinding | None:
    """A high finding for `mismatches` > 0, with up to three of the arm's mismatches."""
    if not mismatches:
        return None
    examples = [r for r in records if r.arm == arm.name and r.verdict == Verdict.MISMATCH]
    return GuardFinding(
        kind="correctness",
        profile=arm.name,
        severity="high",
        title=f"{arm.name}: {mismatches} output(s) differ from the baseline at "
        "temperature 0 beyond a near-tie"
        + (" and the measured noise floor; batched replay does not pick them" if replayed else ""),
        evidence={"mismatches": mismatches, "examples": [asdict(e) for e in examples[:3]]},
    )


def baseline_findings(
    baseline: str, samples: list[RequestSample], *, degenerate_threshold: float
) -> list[GuardFinding]:
    found = guards.degenerate_output(baseline, samples, threshold=degenerate_threshold)
    return [found] if found else []


def candidate_guards(
    arm: ArmSpec,
    arm_runs: list[RunResult],
    samples: list[RequestSample],
    by_cat: Mapping[str, list[RequestSample]],
    base_rounds: Mapping[int, Mapping[str, RequestSample]],
    rounds: list[int],
    drafted_metric: float | None,
    degenerate_threshold: float,
    length_tolerance: float,
) -> list[GuardFinding]:
    """Speculation inactive, degenerate output, acceptance counters that disagree, output
    length off the baseline's: at most one finding per (kind, category)."""
    found: list[GuardFinding | None] = [
        guards.speculation_inactive(arm.name, samples, drafted_metric),
        guards.degenerate_output(arm.name, samples, threshold=degenerate_threshold),
    ]
    found.extend(
        guards.acceptance_cross_check(arm.name, list(r.samples), r.metrics_before, r.metrics_after)
        for r in arm_runs
    )
    base_by_cat: dict[str, list[RequestSample]] = defaultdict(list)
    for rnd in rounds:
        for s in base_rounds.get(rnd, {}).values():
            base_by_cat[s.category].append(s)
    for category, cand in sorted(by_cat.items()):
        found.append(
            guards.length_parity(
                arm.name, category, base_by_cat.get(category, []), cand, tolerance=length_tolerance
            )
        )
    unique: dict[tuple[str, str | None], GuardFinding] = {}
    for f in found:
        if f is not None:
            unique.setdefault((f.kind, f.category), f)
    return list(unique.values())
