"""Built-in server profiles, and the merge with the user's own.

The built-ins make `watchkeeper run --profile smollm2-selfdraft` work with no config file.
A user profile with the same name replaces the built-in one whole (no field-level merge:
a half-inherited profile is a surprise nobody wants to debug at night).
"""

from __future__ import annotations

from watchkeeper.config import Config, ProfileConfig
from watchkeeper.errors import ConfigError

SMOLLM2 = "smollm2-135m-instruct-q4_1"
QWEN_TARGET = "qwen2.5-coder-1.5b-instruct-q4_k_m"
QWEN_DRAFT = "qwen2.5-coder-0.5b-instruct-q4_k_m"

BUILTIN_PROFILES: dict[str, ProfileConfig] = {
    "smollm2-baseline": ProfileConfig(
        model=SMOLLM2, description="SmolLM2-135M alone (fast test baseline)"
    ),
    "smollm2-selfdraft": ProfileConfig(
        model=SMOLLM2,
        draft_model=SMOLLM2,
        spec_type="draft-simple",
        draft_n_max=4,
        description="SmolLM2-135M drafting for itself (acceptance should be ~1.0)",
    ),
    "smollm2-ngram": ProfileConfig(
        model=SMOLLM2, spec_type="ngram-simple", description="SmolLM2-135M with n-gram drafting"
    ),
    "qwen-baseline": ProfileConfig(model=QWEN_TARGET, description="Qwen2.5-Coder 1.5B alone"),
    **{
        f"qwen-draft{n}": ProfileConfig(
            model=QWEN_TARGET,
            draft_model=QWEN_DRAFT,
            spec_type="draft-simple",
            draft_n_max=n,
            description=f"Qwen2.5-Coder 1.5B with the 0.5B draft, n_max {n}",
        )
        for n in (4, 8, 16)
    },
    "qwen-ngram": ProfileConfig(
        model=QWEN_TARGET,
        spec_type="ngram-simple",
        description="Qwen2.5-Coder 1.5B, n-gram drafting",
    ),
}


def all_profiles(config: Config) -> dict[str, ProfileConfig]:
    return {**BUILTIN_PROFILES, **config.profiles}


def get_profile(config: Config, name: str) -> ProfileConfig:
    profiles = all_profiles(config)
    try:
        return profiles[name]
    except KeyError:
        raise ConfigError(
            f"unknown profile {name!r}; known profiles: {', '.join(sorted(profiles))}",
            hint="define it under [profiles.NAME] in watchkeeper.toml",
        ) from None
