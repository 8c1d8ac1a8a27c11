"""The soak's temperature-0 probes, judged as the bench judges a divergence.

A probe is the same task at temperature 0, sent alone before a block's load (soak/loop.py); the
question is whether the server still answers it the same way hours later. Plain text equality
cannot be the test: a speculating arm verifies drafted tokens in a batch, whose floats add in
another order than the baseline's one-token steps, so two healthy answers can part at a token
whose top-2 logprobs are within rounding of each other. (The soak of the 27 Nov recommendation,
whose probes also shared their batches with load requests, read "identical 51% of the time"
and called the night unstable for exactly that.)

So each probe is compared, by token ids and top-2 logprobs (`checks.identity`), with a reference
probe of the same task and concurrency:

- the arm's own first probe, when its token data covers the whole output;
- else the first complete probe of another arm at that task and concurrency: llama-server
  returns no logprobs for tokens it accepted from a draft, so a speculating arm's probes are
  never complete, and the non-speculating arm's probe is the reference that can weigh them
  (that is the sweep's identity claim as well: speculation must not change the greedy answer);
- else the arm's first probe as text, where a difference is `unverified`.

A `near_tie` (the reference's top-2 margin at the first differing token below
`bench.near_tie_threshold`, and the probe took the runner-up) or `length_only` is consistent; a
`mismatch` is a token the reference did not nearly tie with: what a corrupted cache, a broken
draft verification or a server that lost its state would produce. `unverified` is shown and
never judged.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

from watchkeeper.checks.identity import IdentityResult, Verdict, compare_samples, is_complete
from watchkeeper.load.records import RequestSample
from watchkeeper.soak.judgement import ProbeTally, ProbeTotals
from watchkeeper.soak.views import SoakSampleView

CONSISTENT = (Verdict.IDENTICAL, Verdict.NEAR_TIE, Verdict.LENGTH_ONLY)
"""Verdicts that say the server answers as it did."""


@dataclass(frozen=True, slots=True)
class FirstMismatch:
    """The first probe of a group that parted from its reference beyond a near tie: where,
    by how much, and both answers' excerpts there."""

    token: int | None
    margin: float | None
    reference: str
    probe: str

    def to_json(self) -> dict[str, Any]:
        return {
            "token": self.token,
            "margin": self.margin,
            "reference": self.reference,
            "probe": self.probe,
        }


@dataclass(frozen=True, slots=True)
class ProbeGroup:
    """One (arm, concurrency, probe task)'s probes weighed against their reference: where the
    reference came from (`own`, `other arm`, `text`), what each comparison found, the
    identical rate and the first mismatch (`judge_probes`)."""

    profile: str
    concurrency: int
    task_id: str
    reference: str
    reference_profile: str
    probes: int
    counts: ProbeTotals
    rate: float | None
    """Identical token for token, of the comparisons; None: none compared."""
    first_mismatch: FirstMismatch | None = None

    def tally(self) -> ProbeTally:
        """The report's identity row of this group."""
        return ProbeTally(self.profile, self.concurrency, self.reference_profile, self.counts)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "profile": self.profile,
            "concurrency": self.concurrency,
            "task_id": self.task_id,
            "reference": self.reference,
            "reference_profile": self.reference_profile,
            "probes": self.probes,
            **self.counts.to_json(),
            "rate": self.rate,
        }
        if self.first_mismatch is not None:
            out["first_mismatch"] = self.first_mismatch.to_json()
        return out


def as_request(s: SoakSampleView) -> RequestSample:
    """The fields `checks.identity` reads, from a stored probe."""
    return RequestSample(
        s.task_id,
        "",
        -1,
        s.started_at,
        completion_tokens=s.completion_tokens,
        finish_reason=s.finish_reason,
        output_text=s.output_text,
        tokens=s.tokens,
    )


def _references(
    groups: dict[tuple[str, int, str], list[SoakSampleView]],
) -> dict[tuple[str, int, str], tuple[SoakSampleView, str]]:
    """Per group, its reference probe and where it came from ('own', 'other arm', 'text')."""
    own = {
        key: next((r for r in rows if is_complete(as_request(r))), None)
        for key, rows in groups.items()
    }
    earliest: dict[tuple[int, str], SoakSampleView] = {}
    for (_profile, conc, task), row in own.items():
        if row is not None and (
            (conc, task) not in earliest or row.started_at < earliest[(conc, task)].started_at
        ):
            earliest[(conc, task)] = row
    out = {}
    for key, rows in groups.items():
        if (mine := own[key]) is not None:
            out[key] = (mine, "own")
        elif (other := earliest.get((key[1], key[2]))) is not None:
            out[key] = (other, "other arm")
        else:
            out[key] = (rows[0], "text")
    return out


def judge_probes(
    samples: Sequence[SoakSampleView], *, near_tie_threshold: float
) -> list[ProbeGroup]:
    """One entry per (arm, concurrency, probe task): how many probes were compared with the
    reference and what each comparison found, plus the first mismatch's excerpts."""
    groups: dict[tuple[str, int, str], list[SoakSampleView]] = defaultdict(list)
    for s in samples:
        if s.is_probe and s.error is None:
            groups[(s.profile, s.concurrency, s.task_id)].append(s)
    references = _references(groups)
    out = []
    for key, rows in sorted(groups.items()):
        reference, basis = references[key]
        baseline = as_request(reference)
        counts: Counter[str] = Counter()
        first_mismatch: IdentityResult | None = None
        for row in rows:
            if row is reference:
                continue
            result = compare_samples(
                baseline, as_request(row), near_tie_threshold=near_tie_threshold
            )
            counts[result.verdict] += 1
            if result.verdict == Verdict.MISMATCH and first_mismatch is None:
                first_mismatch = result
        compared = sum(counts.values())
        profile, conc, task = key
        tally = ProbeTotals(
            compared,
            counts[Verdict.IDENTICAL],
            counts[Verdict.NEAR_TIE],
            counts[Verdict.LENGTH_ONLY],
            counts[Verdict.UNVERIFIED],
            counts[Verdict.MISMATCH],
        )
        mismatch = (
            None
            if first_mismatch is None
            else FirstMismatch(
                first_mismatch.first_divergence,
                first_mismatch.margin,
                first_mismatch.baseline_excerpt,
                first_mismatch.candidate_excerpt,
            )
        )
        rate = counts[Verdict.IDENTICAL] / compared if compared else None
        out.append(
            ProbeGroup(
                profile, conc, task, basis, reference.profile, len(rows), tally, rate, mismatch
            )
        )
    return out


def totals(groups: Sequence[ProbeGroup]) -> ProbeTotals:
    """Every group's comparisons added up."""
    return ProbeTotals(
        *(sum(getattr(g.counts, f.name) for g in groups) for f in fields(ProbeTotals))
    )


def consistent_rate(groups: Sequence[ProbeGroup]) -> float | None:
    """Share of the judged comparisons (all but `unverified`) that are consistent."""
    t = totals(groups)
    judged = t.compared - t.unverified
    if not judged:
        return None
    consistent: int = sum(getattr(t, str(v)) for v in CONSISTENT)
    return consistent / judged


def identical_rate(groups: Sequence[ProbeGroup]) -> float | None:
    """Share of all comparisons whose outputs are the same token for token."""
    t = totals(groups)
    return t.identical / t.compared if t.compared else None
