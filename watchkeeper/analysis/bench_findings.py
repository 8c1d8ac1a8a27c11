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
    """A high finding for `mismatches` > 0, with up to three of the arm's mismatches. Its
    title says only what was done to each (`mismatch_title`)."""
    if not mismatches:
        return None
    examples = [r for r in records if r.arm == arm.name and r.verdict == Verdict.MISMATCH]
    return GuardFinding(
        kind="correctness",
        profile=arm.name,
        severity="high",
        title=mismatch_title(arm.name, mismatches, examples),
        evidence={"mismatches": mismatches, "examples": [asdict(e) for e in examples[:3]]},
    )


def mismatch_title(arm: str, mismatches: int, examples: Sequence[IdentityRecord]) -> str:
    """What was done to the mismatches, and nothing that was not: a replay is named only for
    those replayed, a floor only where one was measured, the exact mode only where it judged.
    (A title once said "batched replay does not pick them" of a divergence never replayed.)"""
    title = f"{arm}: {mismatches} output(s) differ from the baseline at temperature 0"
    evidence = [r.replay or {} for r in examples]
    exact = [e for e in evidence if e.get("mode") == "exact"]
    replayed = [e for e in evidence if e.get("target_token") is not None]
    floors = [e["floor"] for e in evidence if isinstance(e.get("floor"), int | float)]
    parts: list[str] = []
    if exact:
        parts.append(
            f"{len(exact)} of them in the exact mode (baseline and candidate evaluate every "
            "token alone, with the same kernels; any divergence is a mismatch)"
        )
    rest = len(examples) - len(exact)
    if rest:
        parts.append("beyond the near-tie threshold")
        if replayed:
            parts.append(
                f"the baseline server's batched replay picked another token at "
                f"{len(replayed)} of {len(examples)}"
            )
        if floors and len(floors) == len(evidence) - len(exact):
            parts.append(f"each gap exceeds the measured noise floor ({max(floors):.3f} nats)")
    return title + ("; " + "; ".join(parts) if parts else "")


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
