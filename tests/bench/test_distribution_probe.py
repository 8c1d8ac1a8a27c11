"""The distribution probe: seeded identity and findings on hand-built values, then real
SmolLM2 servers at temperature 0.7: a self-drafting arm (sample-and-match, exact) is not
called distorted and writes the baseline's seeded tokens; an arm that ignores temperature
(samples greedily) is caught as `distorted` and as `sampling ignored`."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from watchkeeper.checks.distribution import (
    ArmDistribution,
    ProbeSettings,
    continuation,
    findings,
    is_sample_and_match,
    probe_arm,
    seeded_identity,
    target_distribution,
)
from watchkeeper.checks.distribution_stats import DistributionVerdict, judge
from watchkeeper.checks.identity import Verdict
from watchkeeper.config import Config, ProfileConfig, ServerConfig
from watchkeeper.load.records import Task
from watchkeeper.load.sampling import SamplingSettings
from watchkeeper.server.endpoints import ServerClient, fetch_slots, make_http_client
from watchkeeper.server.install import ServerBinary
from watchkeeper.server.launch import prepare, serve
from watchkeeper.server.models import ModelFile
from watchkeeper.server.profiles import SMOLLM2

WARM = SamplingSettings(temperature=0.7, top_k=0, top_p=1.0, min_p=0.0, seed=4242)


def test_seeded_identity_judges_the_first_difference_by_the_targets_mass() -> None:
    tops = [((1, 0.9), (2, 0.1))] * 3
    same = seeded_identity([1, 1, 1], [1, 1, 1], tops.__getitem__, sequence=0, task_id="t", seed=1)
    assert same.verdict == Verdict.IDENTICAL
    boundary = seeded_identity([1, 1], [1, 2], tops.__getitem__, sequence=0, task_id="t", seed=1)
    assert boundary.verdict == Verdict.BATCH_VARIANCE and boundary.first_divergence == 1
    assert boundary.target_prob_candidate == pytest.approx(0.1)
    off = seeded_identity([1, 1], [1, 7], tops.__getitem__, sequence=0, task_id="t", seed=1)
    assert off.verdict == Verdict.MISMATCH and off.target_prob_candidate == 0.0


def test_which_arms_are_sample_and_match() -> None:
    assert is_sample_and_match("ngram-simple", None)
    assert is_sample_and_match("draft-simple", None)
    assert is_sample_and_match("draft-simple", "greedy")
    assert not is_sample_and_match("draft-simple", "probabilistic")
    assert not is_sample_and_match(None, None) and not is_sample_and_match("none", None)


def test_a_distorted_or_ignoring_arm_is_a_correctness_finding() -> None:
    greedy = judge([])
    ignoring = ArmDistribution(
        "arm", WARM, greedy, sampling_ignored=True, ignored_logprob=-40.0, sample_and_match=True
    )
    (finding,) = findings([ignoring])
    assert finding.kind == "correctness" and finding.category == "distribution"
    assert "sampling ignored at temperature 0.7" in finding.title
    assert finding.evidence["distribution"]["verdict"] == "sampling ignored"
    assert findings([ArmDistribution("arm", WARM, greedy, False, None, False)]) == []


# --- real servers -----------------------------------------------------------------------------

TASKS = [
    Task(f"t{i}", "prose", ({"role": "user", "content": text},), 64)
    for i, text in enumerate(
        [
            "Write a short story about a lighthouse keeper.",
            "Describe the sea at night in a few sentences.",
            "What do people eat for breakfast around the world?",
            "Tell me about your favourite animal.",
            "Explain why the sky is blue.",
            "Give advice to someone learning to cook.",
        ]
    )
]


@pytest.fixture(scope="module")
def servers(
    real_server: tuple[ServerBinary, ModelFile], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[ServerClient, ServerClient]]:
    """(baseline, self-drafting arm) on SmolLM2-135M."""
    config = Config(
        profiles={
            "base": ProfileConfig(model=SMOLLM2, ctx_size=2048),
            "spec": ProfileConfig(
                model=SMOLLM2,
                draft_model=SMOLLM2,
                spec_type="draft-simple",
                draft_n_max=4,
                ctx_size=2048,
            ),
        },
        server=ServerConfig(startup_timeout_s=60),
    )
    logs = tmp_path_factory.mktemp("distribution")
    with (
        serve(config, prepare(config, "base"), log_path=logs / "base.log") as base,
        serve(config, prepare(config, "spec"), log_path=logs / "spec.log") as spec,
    ):
        clients = [make_http_client(s.base_url, request_timeout_s=120) for s in (base, spec)]
        try:
            yield clients[0], clients[1]
        finally:
            for c in clients:
                c.close()


def test_the_servers_answer_what_the_probe_needs(
    servers: tuple[ServerClient, ServerClient],
) -> None:
    base, spec = servers
    assert any(s.get("speculative") for s in fetch_slots(spec))
    prompt = [1, 2, 3, 4]
    top = target_distribution(base, prompt, sampling=WARM, n_probs=10)
    assert len(top) == 10 and 0.0 < sum(p for _, p in top) <= 1.0 + 1e-6
    a = continuation(base, prompt, sampling=WARM, seed=1, n_predict=12)
    b = continuation(base, prompt, sampling=WARM, seed=1, n_predict=12)
    c = continuation(base, prompt, sampling=WARM, seed=2, n_predict=12)
    assert len(a) == 12 and a == b and a != c


def test_aa_selfdraft_keeps_the_distribution_and_the_seeded_tokens(
    servers: tuple[ServerClient, ServerClient],
) -> None:
    base, spec = servers
    settings = ProbeSettings(WARM, prefixes=6, seeds=2, tokens=24)
    result = probe_arm("spec", spec, base, TASKS, settings, sample_and_match=True)
    assert result.check.tokens == 6 * 2 * 23
    assert result.check.verdict != DistributionVerdict.DISTORTED, result.check.reason
    assert not result.sampling_ignored
    assert all(i.verdict != Verdict.MISMATCH for i in result.identity)
    assert sum(i.verdict == Verdict.IDENTICAL for i in result.identity) >= 10
    assert findings([result]) == []


def test_a_server_that_ignores_temperature_is_caught(
    servers: tuple[ServerClient, ServerClient],
) -> None:
    base, spec = servers
    settings = ProbeSettings(WARM, prefixes=6, seeds=2, tokens=24)
    greedy = SamplingSettings(temperature=0.0, seed=WARM.seed)
    result = probe_arm(
        "spec", spec, base, TASKS, settings, sample_and_match=False, arm_sampling=greedy
    )
    assert result.check.verdict == DistributionVerdict.DISTORTED
    assert result.check.excess_nats < 0 and "colder" in result.check.reason
    assert result.sampling_ignored and result.verdict == "sampling ignored"
    assert [f.category for f in findings([result])] == ["distribution"]
