"""Sampling settings travel from the config and the command line into every timed request,
the method line and the series key (through the profile's hash), and greedy runs keep the
series they had before sampling settings existed."""

from __future__ import annotations

from pathlib import Path

from watchkeeper.cli.app import build_parser
from watchkeeper.cli.common import apply_sampling
from watchkeeper.config import Config, ProfileConfig
from watchkeeper.load.client import build_payload
from watchkeeper.load.records import Task
from watchkeeper.load.runner import arm_load_settings
from watchkeeper.load.sampling import (
    SamplingSettings,
    apply_overrides,
    command_sampling,
    profile_with_sampling,
    sampling_label,
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


def test_command_line_overrides_the_config(tmp_path: Path) -> None:
    config = Config()
    args = build_parser().parse_args(
        ["bench", "--temperature", "0.7", "--top-p", "0.9", "--seed", "5"]
    )
    got = apply_sampling(args, config)
    assert command_sampling(got) == SamplingSettings(temperature=0.7, top_p=0.9, seed=5)
    assert got.soak.temperature == 0.7
    assert apply_sampling(build_parser().parse_args(["bench"]), config) is config
    soak = build_parser().parse_args(["soak", "--seed", "9", "--temperature", "0.2"])
    got = apply_sampling(soak, config)
    assert got.bench.seed == config.bench.seed and got.soak.temperature == 0.2
    assert apply_overrides(config) is config
