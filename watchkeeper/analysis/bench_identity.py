"""Identity verdicts of a bench's probe pass: each candidate's probe against the baseline's.

`compare_samples` gives the verdict from the outputs alone; where the bench replayed a probe on
the baseline server (`checks.classify`), that verdict overrides it, and the record keeps what
`compare_samples` said so a reader sees what the replay changed. Candidates that do not
speculate get no verdicts, only a drift summary: their outputs may differ by float rounding.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from watchkeeper.analysis.bench_types import ALL, CONTROL_ARM, ArmSpec, IdentityRecord
from watchkeeper.checks.identity import IdentityResult, Verdict, compare_samples
from watchkeeper.load.records import RequestSample


@dataclass(frozen=True, slots=True)
class ArmVerdicts:
    """One arm's probe verdicts: counts per category (and under ALL) and one record each."""

    counts: dict[str, Counter[str]] = field(default_factory=dict)
    records: list[IdentityRecord] = field(default_factory=list)
    compared: dict[str, int] = field(default_factory=dict)
    """`compare_samples`' own verdict counts, before any replay override."""


def judge_probes(
    arm: ArmSpec,
    probes: Mapping[str, RequestSample],
    base_probes: Mapping[str, RequestSample],
    overrides: Mapping[tuple[str, str], IdentityResult],
    *,
    probe_round: int,
    near_tie_threshold: float,
) -> ArmVerdicts:
    """Identity verdicts from the probe pass: the arm's probe against the baseline's."""
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    records: list[IdentityRecord] = []
    before: Counter[str] = Counter()
    for task_id, c in probes.items():
        b = base_probes.get(task_id)
        if b is None or not b.ok or not c.ok:
            continue
        compared = compare_samples(b, c, near_tie_threshold=near_tie_threshold)
        before[str(compared.verdict)] += 1
        result = overrides.get((arm.name, task_id), compared)
        counts[c.category][result.verdict] += 1
        counts[ALL][result.verdict] += 1
        records.append(
            IdentityRecord(
                arm.name,
                task_id,
                c.category,
                probe_round,
                str(result.verdict),
                result.first_divergence,
                result.margin,
                result.baseline_excerpt,
                result.candidate_excerpt,
                result.basis,
                result.replay,
                str(compared.verdict) if compared.verdict != result.verdict else None,
            )
        )
    return ArmVerdicts(counts, records, dict(before))


def control_records(
    base_rounds: Mapping[int, Mapping[str, RequestSample]],
    rounds: list[int],
    near_tie_threshold: float,
) -> tuple[list[IdentityRecord], Counter[str], list[RequestSample]]:
    """The baseline against its own previous pass (same server, same concurrency): records,
    verdict counts and the samples compared."""
    verdicts: Counter[str] = Counter()
    samples: list[RequestSample] = []
    records: list[IdentityRecord] = []
    for rnd in rounds:
        previous = base_rounds.get(rnd - 1, {})
        for task_id, c in base_rounds.get(rnd, {}).items():
            b = previous.get(task_id)
            if b is None or not b.ok or not c.ok:
                continue
            result = compare_samples(b, c, near_tie_threshold=near_tie_threshold)
            verdicts[result.verdict] += 1
            samples.append(c)
            records.append(
                IdentityRecord(
                    CONTROL_ARM,
                    task_id,
                    c.category,
                    rnd,
                    str(result.verdict),
                    result.first_divergence,
                    result.margin,
                    result.baseline_excerpt,
                    result.candidate_excerpt,
                )
            )
    return records, verdicts, samples


def drift(records: list[IdentityRecord]) -> dict[str, Any]:
    """How a non-speculating candidate's outputs differ from the baseline's: information."""
    differ = [r for r in records if r.verdict != Verdict.IDENTICAL]
    margins = sorted(r.margin for r in differ if r.margin is not None)
    return {
        "tasks": len(records),
        "differ": len(differ),
        "margins": [round(m, 4) for m in margins],
        "note": "no speculation configured: output differences between two configurations "
        "(thread count, build, flags) are float rounding, reported as drift, not as a "
        "correctness finding",
    }
