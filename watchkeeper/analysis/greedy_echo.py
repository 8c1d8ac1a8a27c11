"""At temperature > 0, does an arm write its temperature-0 answers? The silent-greedy failure
(a server that ignores the request's temperature), seen from the throughput requests. Pure.

The distribution check sees it by sampling one prefix under several seeds; this sees it in
the run itself, so a bench, sweep or review at T > 0 without the distribution pass (or on an
arm it does not probe, such as the baseline) still notices. Every arm has a temperature-0
probe per task. A server that ignores temperature writes, at T > 0, its temperature-0 answer
word for word, and with it the same drafts accepted: its acceptance reads exactly like
greedy's. A sampling server writes that path only with the probability its sampler gives it,
prod_i p(token_i) under the request's sampler chain (this build truncates at T = 1 with
top_k, top_p and min_p, then applies the temperature). That probability is bounded above from
the baseline probe's top-k logprobs (raw, T = 1): the known tokens the truncation keeps, then
p(t) = exp(l_t / T) / sum over the kept known tokens of exp(l_j / T); leaving out kept tokens
beyond the top k only raises it. The seed is the same in every round, so each task counts
once, however many rounds echoed it. An arm is flagged when every compared task echoes its
temperature-0 answer and the bound over all of them is below `ECHO_ALPHA`: a false alarm then
has a chance below it even where the target is nearly deterministic (low temperature,
tool-call JSON), since such tasks contribute little to the bound and leave the arm unflagged.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from watchkeeper.analysis.bench_types import BenchResult
from watchkeeper.checks.distribution import correctness
from watchkeeper.checks.guards import GuardFinding
from watchkeeper.load.records import RequestSample, RunPurpose, RunResult, TokenLogprob
from watchkeeper.load.sampling import SamplingSettings

ECHO_ALPHA = 1e-3
"""Largest chance, under correct sampling, of the echo a flagged arm showed."""
MIN_TASKS = 2
SERVER_DEFAULTS = {"top_k": 40, "top_p": 0.95, "min_p": 0.05}
"""This build's sampler defaults, which apply to a key a request leaves out."""


@dataclass(frozen=True, slots=True)
class GreedyEcho:
    arm: str
    temperature: float
    tasks: int
    """Tasks compared (a timed answer and both temperature-0 probes present)."""
    echoed: int
    """Tasks whose every timed answer at `temperature` is the arm's temperature-0 answer."""
    log_bound: float
    """Upper bound on the log-probability, under correct sampling, of the echoes seen."""
    acceptance_at_t: float | None
    acceptance_at_0: float | None

    def to_json(self) -> dict[str, object]:
        return {
            "arm": self.arm,
            "temperature": self.temperature,
            "tasks": self.tasks,
            "echoed": self.echoed,
            "log_bound": self.log_bound,
            "acceptance_at_t": self.acceptance_at_t,
            "acceptance_at_0": self.acceptance_at_0,
            "flagged": self.flagged,
        }

    @property
    def flagged(self) -> bool:
        return (
            self.tasks >= MIN_TASKS
            and self.echoed == self.tasks
            and self.log_bound < math.log(ECHO_ALPHA)
        )


def _same_path(a: str, b: str) -> bool:
    """One answer is the other cut shorter (the probe and the timed request may differ in
    max_tokens)."""
    return bool(a) and bool(b) and (a.startswith(b) or b.startswith(a))


def _kept(logprobs: list[float], sampler: SamplingSettings) -> list[float]:
    """The known (top-k, best first) logprobs the sampler's truncation keeps, at T = 1."""
    top_k = sampler.top_k if sampler.top_k is not None else SERVER_DEFAULTS["top_k"]
    top_p = sampler.top_p if sampler.top_p is not None else SERVER_DEFAULTS["top_p"]
    min_p = sampler.min_p if sampler.min_p is not None else SERVER_DEFAULTS["min_p"]
    kept = logprobs[: int(top_k)] if top_k and top_k > 0 else list(logprobs)
    if top_p < 1.0:
        # The sampler renormalizes over what top_k kept (mass M, between the known tokens'
        # mass and 1) and stops where the share reaches top_p * M. Stopping where the known
        # tokens reach top_p * (their own mass) keeps no more than it does: the bound stays
        # an upper one.
        target = top_p * sum(math.exp(lp) for lp in kept)
        total, cut = 0.0, len(kept)
        for i, lp in enumerate(kept):
            total += math.exp(lp)
            if total >= target:
                cut = i + 1
                break
        kept = kept[:cut]
    if min_p > 0.0 and kept:
        floor = math.log(min_p) + kept[0]
        kept = [lp for lp in kept if lp >= floor]
    return kept


def token_log_bound(token: TokenLogprob, sampler: SamplingSettings) -> float:
    """Upper bound on log p(token) under `sampler` from the token's top alternatives (0: no
    information, e.g. a token speculative verification emitted without probabilities)."""
    ranked = sorted((a.logprob for a in token.top), reverse=True)
    if not ranked or sampler.temperature <= 0:
        return 0.0
    if token.token_id not in {a.token_id for a in token.top}:
        ranked = sorted([*ranked, token.logprob], reverse=True)
    kept = _kept(ranked, sampler)
    if not kept or token.logprob < kept[-1]:
        return 0.0  # the token is outside what the bound can see: claim nothing
    scaled = [lp / sampler.temperature for lp in kept]
    peak = max(scaled)
    log_denom = peak + math.log(sum(math.exp(x - peak) for x in scaled))
    return min(0.0, token.logprob / sampler.temperature - log_denom)


def _acceptance(samples: Sequence[RequestSample]) -> float | None:
    drafted = sum(s.draft_n or 0 for s in samples)
    accepted = sum(s.draft_n_accepted or 0 for s in samples)
    return accepted / drafted if drafted else None


def greedy_echo(
    arm: str,
    sampler: SamplingSettings,
    timed: Sequence[RequestSample],
    probes: Mapping[str, RequestSample],
    base_probes: Mapping[str, RequestSample],
) -> GreedyEcho | None:
    """`timed`: the arm's measured requests at `temperature`; `probes`, `base_probes`: the
    arm's and the baseline's temperature-0 probes by task. None at temperature 0."""
    if sampler.greedy:
        return None
    by_task: dict[str, list[RequestSample]] = {}
    for s in timed:
        if s.ok and s.output_text:
            by_task.setdefault(s.task_id, []).append(s)
    tasks = echoed = 0
    log_bound = 0.0
    compared: list[RequestSample] = []
    for task_id, answers in by_task.items():
        probe, base = probes.get(task_id), base_probes.get(task_id)
        if probe is None or base is None or not probe.ok or not base.ok or not base.tokens:
            continue
        tasks += 1
        compared.append(probe)
        if not all(_same_path(a.output_text, probe.output_text) for a in answers):
            continue
        echoed += 1
        if not _same_path(probe.output_text, base.output_text):
            continue  # the baseline's probe is another path: its logprobs bound nothing here
        n = min(*(a.completion_tokens or len(base.tokens) for a in answers), len(base.tokens))
        log_bound += sum(token_log_bound(t, sampler) for t in base.tokens[:n])
    return GreedyEcho(
        arm,
        sampler.temperature,
        tasks,
        echoed,
        log_bound,
        _acceptance([a for answers in by_task.values() for a in answers]),
        _acceptance(compared),
    )


def echo_finding(echo: GreedyEcho, label: str) -> GuardFinding:
    """`sampling ignored`, filed as the distribution check files it (a correctness finding,
    category 'distribution')."""
    acc = ""
    if echo.acceptance_at_t is not None and echo.acceptance_at_0 is not None:
        acc = (
            f"; acceptance {echo.acceptance_at_t:.0%} at temperature {echo.temperature:g} "
            f"vs {echo.acceptance_at_0:.0%} at 0"
        )
    return correctness(
        echo.arm,
        "distribution",
        f"{echo.arm}: sampling ignored at {label}: all {echo.tasks} tasks wrote their "
        f"temperature-0 answers word for word (chance under sampling <= "
        f"{math.exp(echo.log_bound):.1e}){acc}",
        {"greedy_echo": echo.to_json()},
    )


def echoes(
    runs: Sequence[RunResult], baseline: str, samplers: Mapping[str, SamplingSettings]
) -> list[GreedyEcho]:
    """Every arm's echo check (the baseline's too: a baseline that ignores temperature makes
    the whole run a temperature-0 run), from the measured runs and the identity probes."""
    probes = {
        r.arm: {s.task_id: s for s in r.samples} for r in runs if r.purpose == RunPurpose.IDENTITY
    }
    out = []
    for arm, sampler in samplers.items():
        timed = [
            s for r in runs if r.arm == arm and r.purpose == RunPurpose.MEASURED for s in r.samples
        ]
        echo = greedy_echo(arm, sampler, timed, probes.get(arm, {}), probes.get(baseline, {}))
        if echo is not None:
            out.append(echo)
    return out


def with_echoes(
    result: BenchResult, runs: Sequence[RunResult], samplers: Mapping[str, SamplingSettings]
) -> BenchResult:
    """The bench's result with the echo checks: flagged arms as correctness findings, every
    arm's check in `extras["greedy_echo"]` (nothing added at temperature 0)."""
    found = echoes(runs, result.baseline.name, samplers)
    if not found:
        return result
    flagged = [echo_finding(e, samplers[e.arm].label()) for e in found if e.flagged]
    return replace(
        result,
        findings=(*result.findings, *flagged),
        extras={**result.extras, "greedy_echo": [e.to_json() for e in found]},
    )
