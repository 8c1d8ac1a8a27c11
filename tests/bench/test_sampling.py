"""Sampling settings travel from the config and the command line into every timed request,
the method line and the series key (through the profile's hash), and greedy runs keep the
series they had before sampling settings existed."""

from __future__ import annotations

import argparse
from dataclasses import replace
from typing import Any

from watchkeeper.campaign.bench_plan import BenchPlan
from watchkeeper.cli.app import build_parser
from watchkeeper.cli.common import sampler_of
from watchkeeper.config import Config, ProfileConfig
from watchkeeper.config.requests import SoakRequest, SweepRequest
from watchkeeper.load.client import build_payload
from watchkeeper.load.records import Task
from watchkeeper.load.runner import arm_load_settings
from watchkeeper.load.sampling import (
    SamplingSettings,
    command_sampling,
    profile_with_sampling,
    sampling_label,
    soak_sampling,
)
from watchkeeper.server.launch import PreparedProfile

TASK = Task(id="t", category="chat", messages=({"role": "user", "content": "hi"},), max_tokens=8)


def _prepared(name: str, profile: ProfileConfig) -> PreparedProfile:
    return PreparedProfile(name, profile, None, None, None, None)


def test_request_fields_send_only_what_is_set() -> None:
    assert SamplingSettings().request_fields() == {"temperature": 0.0, "seed": 42}
    warm = SamplingSettings(temperature=0.7, top_k=0, top_p=1.0, min_p=0.0, seed=7)
    assert warm.request_fields() == {
        "temperature": 0.7,
        "seed": 7,
        "top_k": 0,
        "top_p": 1.0,
        "min_p": 0.0,
    }
    payload = build_payload(TASK, temperature=0.0, top_logprobs=0, seed=1, sampling=warm)
    assert payload["temperature"] == 0.7 and payload["top_k"] == 0 and payload["seed"] == 7
    assert "logprobs" not in payload and "top_logprobs" not in payload
    # Every request prefills unless its caller asks to reuse the prompt cache (the sweep).
    assert payload["cache_prompt"] is False
    reuse = build_payload(TASK, temperature=0.0, top_logprobs=0, seed=1, cache_prompt=True)
    assert reuse["cache_prompt"] is True


def test_labels_say_what_was_sent() -> None:
    assert SamplingSettings().label() == "temperature 0 (greedy)"
    assert SamplingSettings(temperature=0.7, top_p=0.9).label() == (
        "temperature 0.7, top_k server default, top_p 0.9, min_p server default, seed 42"
    )


def test_greedy_keeps_the_profile_and_its_series_a_sampler_gets_its_own() -> None:
    profile = ProfileConfig(model="m", spec_type="ngram-simple")
    assert profile_with_sampling(profile, SamplingSettings(seed=3)) is profile
    warm = profile_with_sampling(profile, SamplingSettings(temperature=0.7))
    assert warm.temperature == 0.7 and warm.sampling_seed == 42
    assert warm.config_hash() != profile.config_hash()
    other_seed = profile_with_sampling(profile, SamplingSettings(temperature=0.7, seed=1))
    assert other_seed.config_hash() != warm.config_hash()


def test_a_profile_key_overrides_the_command_for_that_arm_only() -> None:
    command = SamplingSettings(temperature=0.7)
    base = _prepared("base", ProfileConfig(model="m"))
    control = _prepared("greedy-control", ProfileConfig(model="m", temperature=0.0))
    settings = arm_load_settings([base, control], command, concurrency=2)
    assert settings["base"].sampling == command and settings["base"].concurrency == 2
    assert settings["greedy-control"].sampling == SamplingSettings(temperature=0.0)
    assert settings["base"].top_logprobs == 0
    label = sampling_label(command, [base, control])
    assert label.startswith("temperature 0.7,")
    assert "arm overrides: greedy-control: temperature 0 (greedy)" in label


def test_command_line_overrides_the_config() -> None:
    """A command's given keys go over the config's section, resolved once by the command
    (`command_sampling`, `soak_sampling`); the config itself is never rewritten."""
    config = Config()
    configured = command_sampling(config)

    def parsed(*argv: str) -> dict[str, Any]:
        return vars(build_parser().parse_args(list(argv)))

    bench = parsed("bench", "--temperature", "0.7", "--top-p", "0.9", "--seed", "5")
    assert command_sampling(config, given=sampler_of(argparse.Namespace(**bench))) == replace(
        configured, temperature=0.7, top_p=0.9, seed=5
    )
    plain = argparse.Namespace(**parsed("bench"))
    assert command_sampling(config, given=sampler_of(plain)) == configured
    sweep = SweepRequest.from_cli(parsed("sweep", "--temperature", "0.2", "--seed", "9"))
    assert command_sampling(config, given=sweep.sampler()) == replace(
        configured, temperature=0.2, seed=9
    )
    soak = SoakRequest.from_cli(parsed("soak", "--seed", "9", "--temperature", "0.2"))
    # The soak's --seed orders its tasks and is its sampler's seed, never [bench]'s.
    assert soak_sampling(config, 3, given=soak.sampler()).seed == 3
    assert soak_sampling(config, 3, given=soak.sampler()).temperature == 0.2
    assert config == Config()


def test_a_plan_carries_its_commands_sampler_else_the_configs() -> None:
    config = Config()
    plan = BenchPlan(profiles=("a", "b"), tasks=(TASK,), rounds=1, warmup_rounds=0,
                     warmup_tasks=0, concurrency=1)  # fmt: skip
    assert plan.sampler(config) == command_sampling(config)
    asked = SamplingSettings(temperature=0.5, seed=11)
    assert replace(plan, sampling=asked).sampler(config) == asked
