"""The server as shipped: the settings the unit runs and `soak --recommendation` soaks.

The soak used to start its servers with its own settings (`--cache-ram 0`, as many slots as
its deepest concurrency) while the unit ran the build's 8 GiB prompt cache and one slot, so
"stable under sustained load" was shown for a server nobody installs. Now both read the same
two settings from [service] (`slots`, `cache_ram_mib`) through this module: the unit applies
them to the sweep's measured flags, the soak to the record's profiles before it prepares
them, and a test builds the soak's argv with `server/flags.py` and compares it with the
unit's ExecStart.

Slots are an operator's choice made in one place, not a side effect of a soak: the unit keeps
the slots the sweep measured at unless [service] slots says otherwise, and a soak deeper than
the unit's slots is refused (it would queue in a server that batches nothing, or soak a
setting that does not ship). The prompt cache is bounded by the unit (0: off, what the soak's
memory verdict was measured with); None keeps the build's default (8 GiB in the 11434 build).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pydantic import ValidationError

from watchkeeper.config import ProfileConfig
from watchkeeper.config.service import ServiceConfig
from watchkeeper.errors import ConfigError, SoakError
from watchkeeper.publish.deliverable import ArmRecipe, RecommendationRecord
from watchkeeper.server.flags import SPELLINGS

SERVED_KEYS = ("slots", "cache_ram_mib", "port")
"""The [service] keys the record keeps as its unit was rendered with (`record.extra["served"]`):
the port too, so two sets' units install side by side (the code-edit unit and the default one
bound the same port when each was re-rendered under a config that did not say)."""


@dataclass(frozen=True, slots=True)
class Served:
    """[service]'s serving settings for one arm: slots, and the prompt cache bound in MiB
    (None: the build's default)."""

    slots: int
    cache_ram_mib: int | None
    gpu: bool = False
    """The unit runs on a GPU: its layers are offloaded (-ngl/-ngld, 'all' unless the
    profile names a number), and systemd lets it see the device nodes."""


def served_extra(service: ServiceConfig) -> dict[str, int | None]:
    """What the sweep keeps on its record: the serving settings its unit was rendered with."""
    return {k: getattr(service, k) for k in SERVED_KEYS}


def as_rendered(record: RecommendationRecord, service: ServiceConfig) -> ServiceConfig:
    """[service] with the record's serving settings where the running config is silent.

    The committed default unit serves 4 slots because the sweep's config said so; a soak or a
    re-render under a config without `slots` used to fall back to the 1 slot measured, refuse
    depth 4 on that very unit, or render a different one. A key the running config (or the
    command line) sets to a value still wins: slots are the operator's choice (None, which no
    TOML file can say, counts as unset). A record from before it kept them changes nothing."""
    kept = record.extra.get("served")
    if not isinstance(kept, Mapping):
        return service
    said = {k for k in service.model_fields_set if getattr(service, k) is not None}
    update = {k: kept[k] for k in SERVED_KEYS if k in kept and k not in said}
    if not update:
        return service
    try:
        return ServiceConfig.model_validate({**service.model_dump(exclude_unset=True), **update})
    except ValidationError as exc:
        raise ConfigError(
            f"the recommendation's served settings are invalid: {exc.errors()[0]['msg']}",
            hint="regenerate it with `watchkeeper sweep`, or set [service] slots and "
            "cache_ram_mib yourself",
        ) from None


def wants_gpu(measured_on_gpu: bool, service: ServiceConfig, *, detected: bool) -> bool:
    """[service] gpu: yes/no as said; auto: the sweep measured on a GPU, or this host has one
    (`detected`: host/gpu.py's NVML devices, read by the command)."""
    if service.gpu != "auto":
        return service.gpu == "yes"
    return measured_on_gpu or detected


def served_settings(arm: ArmRecipe, service: ServiceConfig, *, gpu: bool = False) -> Served:
    measured = int(arm.profile.get("slots", 1))
    return Served(service.slots or measured, service.cache_ram_mib, gpu)


def _own_cache_ram(extra: list[str]) -> bool:
    return any(a.split("=", 1)[0] in SPELLINGS["cache_ram"] for a in extra)


def served_profile(profile: ProfileConfig, served: Served) -> ProfileConfig:
    """The profile as the unit runs it: its slots (each keeping the profile's per-slot
    context, as `campaign/load_shape.py:with_slots` does) and `--cache-ram` appended to its
    extra_args unless it sets the flag itself."""
    update: dict[str, object] = {}
    if served.slots != profile.slots:
        per_slot = max(1, profile.ctx_size // max(1, profile.slots))
        update |= {"slots": served.slots, "ctx_size": per_slot * served.slots}
    if served.cache_ram_mib is not None and not _own_cache_ram(profile.extra_args):
        cache_ram = [SPELLINGS["cache_ram"][0], str(served.cache_ram_mib)]
        update["extra_args"] = [*profile.extra_args, *cache_ram]
    if served.gpu and profile.gpu_layers is None:
        update["gpu_layers"] = "all"
    if served.gpu and profile.draft_model and profile.draft_gpu_layers is None:
        update["draft_gpu_layers"] = "all"
    return profile.model_copy(update=update) if update else profile


def served_flags(arm: ArmRecipe, served: Served) -> tuple[str, ...]:
    """The arm's measured flags with the served profile's slots, context and extra args: what
    `server/flags.py:build_argv` gives for `served_profile` (extra args come last there)."""
    profile = ProfileConfig.model_validate(arm.profile)
    shipped = served_profile(profile, served)
    flags = list(arm.flags)
    spec_type = SPELLINGS["spec_type"]
    if not profile.speculative and not any(f in spec_type for f in flags):
        # A record from before the baseline pinned `--spec-type none` (server/flags.py
        # `no_speculation_args`): where build_argv puts it now, after --metrics/--slots.
        after = SPELLINGS["metrics"] + SPELLINGS["slots_endpoint"]
        marks = [i for i, f in enumerate(flags) if f in after]
        if marks:
            flags[marks[-1] + 1 : marks[-1] + 1] = [spec_type[0], "none"]
    for names, value in (
        (SPELLINGS["slots"], shipped.slots),
        (SPELLINGS["ctx_size"], shipped.ctx_size),
    ):
        for i, flag in enumerate(flags[:-1]):
            if flag in names:
                flags[i + 1] = str(value)
    at = len(flags) - len(profile.extra_args)  # build_argv puts offload before the extras
    offload: list[tuple[tuple[str, ...], object]] = [
        (SPELLINGS["gpu_layers"], shipped.gpu_layers),
        (SPELLINGS["draft_gpu_layers"], shipped.draft_gpu_layers),
    ]
    for spellings, layers in offload:
        found = [i for i, f in enumerate(flags) if f in spellings]
        if found:
            at = found[0] + 2
        elif layers is not None:
            flags[at:at] = [spellings[-1], str(layers)]  # -ngl/-ngld: every build has them
            at += 2
    flags += shipped.extra_args[len(profile.extra_args) :]
    return tuple(flags)


def served_arm(arm: ArmRecipe, service: ServiceConfig, *, gpu: bool = False) -> ArmRecipe:
    """The arm with its flags and profile as [service] ships them."""
    served = served_settings(arm, service, gpu=gpu)
    profile = served_profile(ProfileConfig.model_validate(arm.profile), served)
    return ArmRecipe(
        arm.name,
        profile.model_dump(exclude_none=True),
        served_flags(arm, served),
        arm.speculative,
        arm.speedup,
        arm.identity,
    )


def shipped_profiles(
    record: RecommendationRecord, service: ServiceConfig, *, detected_gpu: bool = False
) -> dict[str, ProfileConfig]:
    """The record's arms as the unit would run each of them (the soak's profiles)."""
    service = as_rendered(record, service)
    gpu = wants_gpu(record.gpu, service, detected=detected_gpu)
    arms = [record.baseline, record.chosen, *([record.closest] if record.closest else [])]
    return {
        a.name: served_profile(
            ProfileConfig.model_validate(a.profile), served_settings(a, service, gpu=gpu)
        )
        for a in arms
    }


def check_depth(record: RecommendationRecord, service: ServiceConfig, depth: int) -> None:
    """Refuse a soak deeper than the unit's slots, before any server starts."""
    subject = record.subject or record.chosen
    slots = served_settings(subject, as_rendered(record, service)).slots
    if depth > slots:
        raise SoakError(
            f"--concurrency {depth}: the unit serves {slots} request(s) at once (--parallel "
            f"{slots}), so the soak would not measure the server as shipped",
            hint=f"set [service] slots = {depth} in watchkeeper.toml (the unit and the soak "
            f"then both run {depth} slots; re-render it with `watchkeeper unit`), or soak at "
            f"--concurrency {slots}",
        )
