"""Does speculation keep the target's output distribution? The probe against real servers.

At temperature > 0 the correctness question is statistical (checks/distribution_stats.py has the
tests). This module collects the evidence:

1. At fixed prefixes (the chat prompts of the first tasks, as the target's own token ids),
   continuations are sampled from the speculative arm, each with its own seed:
   POST /completion with the prompt as ids, the request's sampler, `return_tokens`, and
   `ignore_eos` so every continuation has the same length (a stop token would end a
   continuation at a data-dependent place and drop that position's observation).
2. For every position j >= 1 of a continuation (position 0 comes from prompt processing; from
   position 1 on the arm drafts and verifies), the target's post-sampler distribution at
   prompt + continuation[:j] is asked of the baseline server: `n_predict: 1` (never drafts),
   `n_probs`, `post_sampling_probs: true` and the same sampler, so `prob` is the distribution
   the target would sample from. `cache_prompt` lets each ask cost one token of prompt.
3. The same seeds on the baseline give its own continuations, for two more checks:
   `sampling ignored` (every seed wrote the same text, which the target makes improbable) and,
   for sample-and-match arms (greedy drafting, every n-gram type), seeded identity: the arm
   must write the baseline's tokens. A divergence to a token the target gives probability is
   what batch numerics can do at a sampling boundary (`batch_variance`); to a token outside
   the target's support it is a `mismatch`.

All HTTP goes through `watchkeeper.server.endpoints`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from watchkeeper.checks.distribution_stats import (
    DistributionCheck,
    DistributionVerdict,
    Position,
    judge,
    ranked_bins,
    sampling_ignored,
)
from watchkeeper.checks.guards import GuardFinding
from watchkeeper.checks.identity import Verdict
from watchkeeper.checks.replay import chat_prompt_tokens
from watchkeeper.load.records import Task
from watchkeeper.load.sampling import SamplingSettings
from watchkeeper.server.endpoints import ServerClient, TransportError, complete
from watchkeeper.server.spec_knobs import model_drafter

N_PROBS = 20
"""Target tokens reported per position; the rest is the PIT's tail bin."""
SEEDS_PER_PREFIX = 2
"""Continuations per prefix, each with its own seed: two are enough to see sampling at all."""
UTF8_RETRIES = 8
"""Tries of a target position whose sampled token is a partial UTF-8 sequence (see below)."""

Progress = Callable[[str], None]
Top = tuple[tuple[int, float], ...]


@dataclass(frozen=True, slots=True)
class ProbeSettings:
    sampling: SamplingSettings
    prefixes: int = 12
    seeds: int = SEEDS_PER_PREFIX
    tokens: int = 32
    n_probs: int = N_PROBS


def continuation(
    client: ServerClient,
    prompt: Sequence[int],
    *,
    sampling: SamplingSettings,
    seed: int,
    n_predict: int,
) -> list[int]:
    """`n_predict` token ids the server samples after `prompt` with this sampler and seed."""
    body = complete(
        client,
        {
            "prompt": list(prompt),
            "n_predict": n_predict,
            **sampling.request_fields(),
            "seed": seed,
            "ignore_eos": True,
            "return_tokens": True,
            "cache_prompt": False,
        },
    )
    tokens = body.get("tokens")
    if not isinstance(tokens, list) or not all(isinstance(t, int) for t in tokens):
        raise TransportError(f"/completion: no token ids (return_tokens): {str(body)[:200]}")
    return list(tokens)


def target_distribution(
    client: ServerClient, prompt: Sequence[int], *, sampling: SamplingSettings, n_probs: int
) -> Top | None:
    """The target's post-sampler top-`n_probs` (id, prob) after `prompt`, one decode step.

    The server withholds the probabilities when the token it sampled is an incomplete UTF-8
    sequence (a byte token); the distribution does not depend on which token was sampled, so
    it is asked again with other seeds. None when every try sampled such a token (the
    position is then skipped: the skip depends on the target's draws, not on the arm's
    token, so it biases nothing)."""
    for attempt in range(UTF8_RETRIES):
        body = complete(
            client,
            {
                "prompt": list(prompt),
                "n_predict": 1,
                **sampling.request_fields(),
                "seed": sampling.seed + 7919 * attempt,
                "ignore_eos": True,
                "n_probs": n_probs,
                "post_sampling_probs": True,
                "cache_prompt": True,
            },
        )
        probs = body.get("completion_probabilities")
        if isinstance(probs, list) and probs and isinstance(probs[0], dict):
            top = probs[0].get("top_probs") or []
            return tuple(
                (int(a["id"]), float(a.get("prob", 0.0)))
                for a in top
                if isinstance(a, dict) and a.get("id") is not None
            )
        if "completion_probabilities" in body:
            raise TransportError(
                f"/completion: malformed completion_probabilities: {str(body)[:200]}"
            )
    return None


def _prob(top: Top, token: int) -> float:
    """The target's probability of `token`: its own where listed, else the tail's mass as an
    upper bound (0 when the listed tokens already hold all the mass)."""
    ids, masses = ranked_bins(top)
    return masses[ids.index(token)] if token in ids else masses[-1]


def _top_at(tops: Sequence[Top | None]) -> Callable[[int], Top]:
    """Position -> the target's top list there (empty where it could not be read)."""
    return lambda k: tops[k] or ()


@dataclass(frozen=True, slots=True)
class SeededIdentity:
    """A sample-and-match arm against the baseline, same prompt and seed."""

    sequence: int
    task_id: str
    seed: int
    verdict: Verdict
    first_divergence: int | None = None
    baseline_token: int | None = None
    candidate_token: int | None = None
    target_prob_baseline: float | None = None
    target_prob_candidate: float | None = None


def seeded_identity(
    base: Sequence[int],
    cand: Sequence[int],
    top_at: Callable[[int], Top],
    *,
    sequence: int,
    task_id: str,
    seed: int,
) -> SeededIdentity:
    """Same seed, same prompt: a sample-and-match arm writes the baseline's tokens. At the
    first difference the target's distribution there decides: the arm's token has mass
    (batch numerics moved a sampling boundary) or it has none (`mismatch`)."""
    k = next((i for i, (a, b) in enumerate(zip(base, cand, strict=False)) if a != b), None)
    if k is None:
        return SeededIdentity(sequence, task_id, seed, Verdict.IDENTICAL)
    top = top_at(k)
    p_base, p_cand = _prob(top, base[k]), _prob(top, cand[k])
    verdict = Verdict.BATCH_VARIANCE if p_cand > 0.0 else Verdict.MISMATCH
    return SeededIdentity(sequence, task_id, seed, verdict, k, base[k], cand[k], p_base, p_cand)


@dataclass(frozen=True, slots=True)
class ArmDistribution:
    """Everything the probe found for one speculative arm."""

    arm: str
    sampling: SamplingSettings
    check: DistributionCheck
    sampling_ignored: bool
    ignored_logprob: float | None
    """Log-probability under the target that the seeds' identical outputs were chance."""
    sample_and_match: bool
    identity: tuple[SeededIdentity, ...] = ()
    requests: int = 0
    seconds: float = 0.0
    positions: tuple[Position, ...] = field(default=(), repr=False)

    @property
    def verdict(self) -> str:
        return "sampling ignored" if self.sampling_ignored else str(self.check.verdict)

    def to_json(self) -> dict[str, Any]:
        return {
            "arm": self.arm,
            "sampling": self.sampling.to_json(),
            "verdict": self.verdict,
            "check": self.check.to_json(),
            "sampling_ignored": self.sampling_ignored,
            "ignored_logprob": self.ignored_logprob,
            "sample_and_match": self.sample_and_match,
            "seeded_identity": {
                str(v): sum(1 for i in self.identity if i.verdict == v)
                for v in sorted({i.verdict for i in self.identity})
            },
            "identity_examples": [
                {
                    "task_id": i.task_id,
                    "seed": i.seed,
                    "verdict": str(i.verdict),
                    "first_divergence": i.first_divergence,
                    "baseline_token": i.baseline_token,
                    "candidate_token": i.candidate_token,
                    "target_prob_baseline": i.target_prob_baseline,
                    "target_prob_candidate": i.target_prob_candidate,
                }
                for i in self.identity
                if i.verdict != Verdict.IDENTICAL
            ][:5],
            "requests": self.requests,
            "seconds": round(self.seconds, 1),
        }


def probe_arm(
    arm: str,
    arm_client: ServerClient,
    target_client: ServerClient,
    tasks: Sequence[Task],
    settings: ProbeSettings,
    *,
    sample_and_match: bool,
    arm_sampling: SamplingSettings | None = None,
    clock: Callable[[], float] = time.monotonic,
    progress: Progress | None = None,
) -> ArmDistribution:
    """Sample from `arm_client`, ask `target_client` (the baseline) at every position.

    Continuations of prefix i use seeds sampling.seed + s for s < settings.seeds; the
    baseline writes its own with the same seeds (sampling ignored, seeded identity).
    `arm_sampling` makes the arm sample otherwise than it is judged (the positive controls:
    a server that ignores temperature is an arm sampling at 0 judged at 0.7)."""
    started = clock()
    sampling = settings.sampling
    own = arm_sampling if arm_sampling is not None else sampling
    positions: list[Position] = []
    outputs: dict[int, list[list[int]]] = {}
    first_logprob: dict[int, float] = {}
    identity: list[SeededIdentity] = []
    requests = 0
    sequence = 0
    for index, task in enumerate(tasks[: settings.prefixes]):
        prompt = chat_prompt_tokens(target_client, task)
        requests += 2
        for s in range(settings.seeds):
            seed = sampling.seed + s
            cand, base, tops = _sample_pair(
                arm_client, target_client, prompt, settings, own=own, seed=seed
            )
            requests += 2 + len(cand)
            positions.extend(_positions(cand, tops, sequence))
            outputs.setdefault(index, []).append(cand)
            if s == 0:
                first_logprob[index] = _log_likelihood(cand, tops)
            if sample_and_match:
                identity.append(
                    seeded_identity(
                        base, cand, _top_at(tops), sequence=sequence, task_id=task.id, seed=seed
                    )
                )
            sequence += 1
        if progress is not None:
            progress(
                f"distribution: {arm} prefix {index + 1}/{min(len(tasks), settings.prefixes)}, "
                f"{len(positions)} positions"
            )
    ignored, logprob = sampling_ignored(outputs, first_logprob)
    return ArmDistribution(
        arm=arm,
        sampling=sampling,
        check=judge(positions, seed=sampling.seed),
        sampling_ignored=ignored,
        ignored_logprob=logprob,
        sample_and_match=sample_and_match,
        identity=tuple(identity),
        requests=requests,
        seconds=clock() - started,
        positions=tuple(positions),
    )


def _sample_pair(
    arm_client: ServerClient,
    target_client: ServerClient,
    prompt: list[int],
    settings: ProbeSettings,
    *,
    own: SamplingSettings,
    seed: int,
) -> tuple[list[int], list[int], list[Top | None]]:
    """One seed's continuation from the arm (sampled its `own` way) and from the baseline
    (sampled as judged), and the baseline's distribution at every position of the arm's:
    2 + len(arm's) requests."""
    sampling = settings.sampling
    cand = continuation(arm_client, prompt, sampling=own, seed=seed, n_predict=settings.tokens)
    base = continuation(
        target_client, prompt, sampling=sampling, seed=seed, n_predict=settings.tokens
    )
    tops = [
        target_distribution(
            target_client, prompt + cand[:j], sampling=sampling, n_probs=settings.n_probs
        )
        for j in range(len(cand))
    ]
    return cand, base, tops


def _positions(cand: list[int], tops: Sequence[Top | None], sequence: int) -> list[Position]:
    """The positions the PIT judges: every one after the first (whose prefix is the prompt
    alone) where the baseline's distribution could be read."""
    return [
        Position(cand[j], top, sequence)
        for j in range(1, len(cand))
        if (top := tops[j]) is not None
    ]


def _log_likelihood(cand: list[int], tops: Sequence[Top | None]) -> float:
    """The baseline's log-probability of the arm's continuation (floored per token, tail mass
    for unlisted tokens): what tells a server that ignores sampling from one that samples."""
    return sum(
        math.log(max(_prob(top, cand[j]), 1e-12))
        for j in range(len(cand))
        if (top := tops[j]) is not None
    )


def is_sample_and_match(spec_type: str | None, draft_sampling: str | None) -> bool:
    """This build verifies by sample-and-match for every n-gram type and for greedy drafting
    (its default); only `--spec-draft-sampling probabilistic` rejection-samples."""
    if not spec_type or spec_type == "none":
        return False
    return not (model_drafter(spec_type) is not None and draft_sampling == "probabilistic")


def correctness(arm: str, category: str, title: str, evidence: dict[str, Any]) -> GuardFinding:
    """A high-severity correctness finding, the kind an identity `mismatch` files."""
    return GuardFinding(
        kind="correctness",
        profile=arm,
        severity="high",
        category=category,
        title=title,
        evidence=evidence,
    )


def findings(results: Sequence[ArmDistribution]) -> list[GuardFinding]:
    """Correctness findings, filed like an identity `mismatch` (category 'distribution' keeps
    their fingerprint apart from the temperature-0 one)."""
    out: list[GuardFinding] = []
    for r in results:
        label = r.sampling.label()
        evidence: dict[str, Any] = {"distribution": r.to_json()}
        if r.sampling_ignored:
            out.append(
                correctness(
                    r.arm,
                    "distribution",
                    f"{r.arm}: sampling ignored at {label}: every seed wrote the same "
                    "output, which the target's own distribution makes improbable "
                    f"(log-probability {r.ignored_logprob:.1f})",
                    evidence,
                )
            )
        elif r.check.verdict == DistributionVerdict.DISTORTED:
            low, high = r.check.excess_ci
            out.append(
                correctness(
                    r.arm,
                    "distribution",
                    f"{r.arm}: output distribution differs from the target's at {label}: "
                    f"{r.check.excess_nats:+.3f} nats/token excess surprisal "
                    f"[{low:+.3f}, {high:+.3f}] over {r.check.tokens} tokens",
                    evidence,
                )
            )
        mismatches = [i for i in r.identity if i.verdict == Verdict.MISMATCH]
        if mismatches:
            out.append(
                correctness(
                    r.arm,
                    "seeded identity",
                    f"{r.arm}: {len(mismatches)} seeded output(s) at {label} took a token "
                    "the target gives no probability",
                    evidence,
                )
            )
    return out
