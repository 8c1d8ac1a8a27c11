"""Sampling settings as part of a measurement: what every request sends, per command and profile.

Acceptance, and so the speed-up, depends on the temperature: a drafter's guess matches a
greedy target far more often than a sampled one. A figure measured at temperature 0 says
little about a service that samples at 0.7, so the sampler is part of what is measured: it is
in every request, every report's method line, `--json`, and the series a run belongs to.

Where the values come from, last wins: the command's section (`[bench]`: temperature, top_k,
top_p, min_p, seed), the command line (`--temperature` ...), then the profile's own keys. A
profile's keys are for an arm that must sample differently from the rest, which is what the
distribution check's positive controls are (`temperature = 0` in an arm asked for 0.7 is a
server that ignores temperature).

Unset top_k / top_p / min_p are not sent, so the server's defaults (this build: top_k 40,
top_p 0.95, min_p 0.05) apply. At temperature 0 the seed does nothing and is left out of the
series key, so greedy series keep the key they had before sampling settings existed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from watchkeeper.config import Config, ProfileConfig
    from watchkeeper.server.launch import PreparedProfile

SAMPLER_KEYS = ("temperature", "top_k", "top_p", "min_p")


@dataclass(frozen=True, slots=True)
class SamplingSettings:
    temperature: float = 0.0
    top_k: int | None = None
    top_p: float | None = None
    min_p: float | None = None
    seed: int = 42

    @property
    def greedy(self) -> bool:
        return self.temperature <= 0.0

    def request_fields(self) -> dict[str, Any]:
        """The keys a llama-server request carries for this sampler."""
        fields: dict[str, Any] = {"temperature": self.temperature, "seed": self.seed}
        for key in ("top_k", "top_p", "min_p"):
            value = getattr(self, key)
            if value is not None:
                fields[key] = value
        return fields

    def label(self) -> str:
        """One line for a report's method section."""
        if self.greedy and self.top_k is None and self.top_p is None and self.min_p is None:
            return "temperature 0 (greedy)"
        parts = [f"temperature {self.temperature:g}"]
        for key in ("top_k", "top_p", "min_p"):
            value = getattr(self, key)
            parts.append(f"{key} {value:g}" if value is not None else f"{key} server default")
        parts.append(f"seed {self.seed}")
        return ", ".join(parts)

    def profile_fields(self) -> dict[str, Any]:
        """What a profile records of this sampler (and so its config hash, and the series
        key): nothing at the greedy default, the sampler keys that are set otherwise."""
        fields = {k: getattr(self, k) for k in ("top_k", "top_p", "min_p")}
        fields = {k: v for k, v in fields.items() if v is not None}
        if not self.greedy:
            fields["temperature"] = self.temperature
            fields["sampling_seed"] = self.seed
        return fields

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def with_profile(self, profile: ProfileConfig) -> SamplingSettings:
        """This sampler with the profile's own keys on top (an arm-side override)."""
        overrides = {
            k: getattr(profile, k) for k in SAMPLER_KEYS if getattr(profile, k) is not None
        }
        if profile.sampling_seed is not None:
            overrides["seed"] = profile.sampling_seed
        return replace(self, **overrides) if overrides else self


def _over(given: Mapping[str, float | int | None] | None) -> Callable[[str, Any], Any]:
    """(key, configured) -> the given value, else the configured one (None: not given)."""
    over = given or {}

    def key(name: str, configured: Any) -> Any:
        value = over.get(name)
        return configured if value is None else value

    return key


def command_sampling(
    config: Config, *, given: Mapping[str, float | int | None] | None = None
) -> SamplingSettings:
    """The sampler of a bench-shaped command (bench, sweep, nightly, review-pr): the request's
    `given` keys (`--temperature` and friends, `--seed`; None: not given) over [bench]'s.
    The command resolves it once and hands it to the engine on its plan
    (`BenchPlan.sampling`), so the config is never rewritten with a run's choices."""
    b, key = config.bench, _over(given)
    return SamplingSettings(
        temperature=key("temperature", b.temperature), top_k=key("top_k", b.top_k),
        top_p=key("top_p", b.top_p), min_p=key("min_p", b.min_p), seed=key("seed", b.seed),
    )  # fmt: skip


def soak_sampling(
    config: Config, seed: int, *, given: Mapping[str, float | int | None] | None = None
) -> SamplingSettings:
    """The soak's load sampler: the request's `given` keys (`--temperature` and friends; None:
    not given) over [soak]'s, with the soak's own seed, the one that also orders its tasks."""
    s, key = config.soak, _over(given)
    return SamplingSettings(
        temperature=key("temperature", s.temperature), top_k=key("top_k", s.top_k),
        top_p=key("top_p", s.top_p), min_p=key("min_p", s.min_p), seed=seed,
    )  # fmt: skip


def profile_with_sampling(profile: ProfileConfig, sampling: SamplingSettings) -> ProfileConfig:
    """The profile as measured: the command's sampler folded in (profile keys win), so a run
    at temperature 0.7 never shares a series with one at 0."""
    effective = sampling.with_profile(profile)
    fields = effective.profile_fields()
    current = {k: getattr(profile, k) for k in fields}
    return profile if current == fields else profile.model_copy(update=fields)


def sampling_label(sampling: SamplingSettings, prepared: Sequence[PreparedProfile]) -> str:
    """The method line: the command's sampler, then every arm that samples otherwise."""
    own = [
        f"{p.name}: {sampling.with_profile(p.profile).label()}"
        for p in prepared
        if sampling.with_profile(p.profile) != sampling
    ]
    return sampling.label() + (f" (arm overrides: {'; '.join(own)})" if own else "")
