"""`sampling ignored` from the throughput requests: an arm that, at temperature > 0, writes its
temperature-0 answers word for word, judged against the chance the sampler gives that path."""

from __future__ import annotations

import math
from datetime import UTC, datetime

from watchkeeper.analysis.bench_types import BenchResult
from watchkeeper.analysis.greedy_echo import (
    echo_finding,
    greedy_echo,
    token_log_bound,
    with_echoes,
)
from watchkeeper.load.records import Alternative, RequestSample, RunPurpose, RunResult, TokenLogprob
from watchkeeper.load.sampling import SamplingSettings

T0 = datetime(2026, 11, 25, tzinfo=UTC)
HOT = SamplingSettings(temperature=0.7, top_k=0, top_p=1.0, min_p=0.0)


def _token(i: int, logprobs: list[float]) -> TokenLogprob:
    """A token (id 0, the best) with its alternatives (ids 0, 1, ...), as a probe keeps them."""
    top = tuple(Alternative(k, f"t{k}", lp) for k, lp in enumerate(logprobs))
    return TokenLogprob(0, f"w{i} ", logprobs[0], top)


def _sample(task: str, text: str, *, tokens: list[TokenLogprob] | None = None) -> RequestSample:
    return RequestSample(
        task,
        "prose",
        0,
        T0,
        completion_tokens=len(text.split()),
        output_text=text,
        tokens=tuple(tokens) if tokens else None,
        draft_n=10,
        draft_n_accepted=9,
    )


# A moderately confident target: the best token at p ~ 0.6 among five (T = 1).
SPREAD = [math.log(p) for p in (0.6, 0.2, 0.1, 0.06, 0.04)]
# A near-deterministic target (tool-call JSON): the best token at p ~ 0.999.
SURE = [math.log(p) for p in (0.999, 0.0005, 0.0003, 0.0001, 0.0001)]


def _probes(shape: list[float], tasks: int = 4, words: int = 24) -> dict[str, RequestSample]:
    text = " ".join(f"w{i}" for i in range(words)) + " "
    return {
        f"t{k}": _sample(f"t{k}", text, tokens=[_token(i, shape) for i in range(words)])
        for k in range(tasks)
    }


def test_the_bound_is_the_softmax_at_the_temperature_over_what_the_sampler_keeps() -> None:
    token = _token(0, SPREAD)
    exact = math.exp(SPREAD[0] / 0.7) / sum(math.exp(x / 0.7) for x in SPREAD)
    assert math.isclose(token_log_bound(token, HOT), math.log(exact), rel_tol=1e-9)
    # min_p 0.2 keeps only 0.6 and 0.2 (>= 0.12): the token's share grows, the bound with it.
    truncated = SamplingSettings(temperature=0.7, top_k=0, top_p=1.0, min_p=0.2)
    kept = math.exp(SPREAD[0] / 0.7) / sum(math.exp(x / 0.7) for x in SPREAD[:2])
    assert math.isclose(token_log_bound(token, truncated), math.log(kept), rel_tol=1e-9)
    # top_p 0.9 over the known mass 1.0 stops at 0.9 (0.6 + 0.2 + 0.1): three tokens kept.
    nucleus = SamplingSettings(temperature=0.7, top_k=0, top_p=0.9, min_p=0.0)
    three = math.exp(SPREAD[0] / 0.7) / sum(math.exp(x / 0.7) for x in SPREAD[:3])
    assert math.isclose(token_log_bound(token, nucleus), math.log(three), rel_tol=1e-9)
    # Known tokens with half the mass: the sampler's renormalized share may reach top_p
    # sooner than the known tokens' share of the whole; the bound stops where it surely has.
    half = _token(0, [math.log(p) for p in (0.3, 0.1, 0.05, 0.03, 0.02)])
    two = math.exp(math.log(0.3) / 0.7) / sum(math.exp(math.log(p) / 0.7) for p in (0.3, 0.1))
    assert math.isclose(
        token_log_bound(half, SamplingSettings(temperature=0.7, top_k=0, top_p=0.75, min_p=0.0)),
        math.log(two),
        rel_tol=1e-9,
    )
    # top_k 1 leaves one token: the sampler has no choice, the bound claims nothing.
    assert token_log_bound(token, SamplingSettings(temperature=0.7, top_k=1)) == 0.0
    # A token emitted by speculative verification carries no alternatives: no claim.
    assert token_log_bound(TokenLogprob(0, "x", 0.0, ()), HOT) == 0.0


def test_an_arm_that_writes_its_temperature_0_answers_at_0_7_is_flagged() -> None:
    probes = _probes(SPREAD)
    timed = [_sample(t, p.output_text) for t, p in probes.items() for _ in range(3)]
    echo = greedy_echo("spec", HOT, timed, probes, probes)
    assert echo is not None and echo.flagged
    assert (echo.tasks, echo.echoed) == (4, 4)
    # 4 tasks x 24 tokens at p <= 0.74 each, counted once per task (the seed repeats).
    assert echo.log_bound < math.log(1e-3)
    finding = echo_finding(echo, "temperature 0.7")
    assert finding.kind == "correctness" and finding.category == "distribution"
    assert "sampling ignored" in finding.title and "4 tasks" in finding.title
    assert finding.evidence["greedy_echo"]["flagged"] is True


def test_a_nearly_deterministic_target_reproducing_itself_is_not_flagged() -> None:
    probes = _probes(SURE)
    timed = [_sample(t, p.output_text) for t, p in probes.items()]
    echo = greedy_echo("spec", HOT, timed, probes, probes)
    assert echo is not None and echo.echoed == echo.tasks == 4
    assert not echo.flagged  # the sampler itself makes this path likely


def test_one_task_that_sampled_another_answer_clears_the_arm() -> None:
    probes = _probes(SPREAD)
    timed = [_sample(t, p.output_text) for t, p in probes.items()]
    timed[2] = _sample("t2", "w0 w1 something else entirely ")
    echo = greedy_echo("spec", HOT, timed, probes, probes)
    assert echo is not None and echo.echoed == 3 and not echo.flagged


def test_a_shorter_timed_answer_on_the_same_path_still_counts_as_an_echo() -> None:
    probes = _probes(SPREAD)
    timed = [_sample(t, " ".join(p.output_text.split()[:10]) + " ") for t, p in probes.items()]
    echo = greedy_echo("spec", HOT, timed, probes, probes)
    assert echo is not None and echo.echoed == 4 and echo.flagged


def test_temperature_0_runs_and_arms_without_probes_are_not_judged() -> None:
    probes = _probes(SPREAD)
    timed = [_sample(t, p.output_text) for t, p in probes.items()]
    assert greedy_echo("spec", SamplingSettings(), timed, probes, probes) is None
    echo = greedy_echo("spec", HOT, timed, {}, probes)
    assert echo is not None and echo.tasks == 0 and not echo.flagged


def _run(arm: str, purpose: RunPurpose, samples: list[RequestSample]) -> RunResult:
    return RunResult(arm, arm, 1, False, 1, T0, T0, tuple(samples), (), purpose=purpose)


def test_the_bench_result_carries_every_arm_check_and_a_finding_for_the_echoing_one(
    result: BenchResult,
) -> None:
    base, spec = result.baseline.name, next(a.name for a in result.arms if a.role != "baseline")
    probes = _probes(SPREAD)
    sampled = [_sample(t, f"sampled {t} answer ") for t in probes]
    echoed = [_sample(t, p.output_text) for t, p in probes.items()]
    runs = [
        _run(base, RunPurpose.IDENTITY, list(probes.values())),
        _run(spec, RunPurpose.IDENTITY, list(probes.values())),
        _run(base, RunPurpose.MEASURED, sampled),
        _run(spec, RunPurpose.MEASURED, echoed),
    ]
    judged = with_echoes(result, runs, {base: HOT, spec: HOT})
    checks = {e["arm"]: e for e in judged.extras["greedy_echo"]}
    assert checks[base]["flagged"] is False and checks[spec]["flagged"] is True
    new = judged.findings[len(result.findings) :]
    assert [f.profile for f in new] == [spec] and new[0].kind == "correctness"
    assert "temperature 0.7" in new[0].title
    # At temperature 0 nothing is judged and the result is the one given.
    greedy = SamplingSettings()
    assert with_echoes(result, runs, {base: greedy, spec: greedy}) is result
