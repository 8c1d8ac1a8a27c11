"""Which profiles a nightly or a soak judges when the user named none: never a test model.

The built-in defaults used to be `smollm2-ngram` (nightly) and `qwen-baseline,qwen-draft4`
(soak): models of this project's tests, judged silently in place of the user's server. Now
an empty list either takes the sweep's committed recommendation (the soak: its arm beside the
baseline) or refuses with a hint that names the key to set and the profile the sweep would
put there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from watchkeeper.config import Config
from watchkeeper.errors import ConfigError
from watchkeeper.host import gpu as host_gpu
from watchkeeper.publish.deliverable import (
    RECORD_NAME,
    RecommendationRecord,
    read_record,
)
from watchkeeper.publish.served import shipped_profiles


def committed_recommendation(config: Config) -> RecommendationRecord | None:
    path = config.bench.resolved_reports_dir() / RECORD_NAME
    return read_record(path) if path.is_file() else None


def no_profiles(key: str, config: Config, *, flag: str) -> ConfigError:
    """The refusal: the key, the flag, and the recommendation's profile where there is one."""
    record = committed_recommendation(config)
    found = ""
    if record is not None:
        found = (
            f"; the sweep recommends {record.chosen.name} (its [profiles.{record.chosen.name}] "
            f"block is in reports/{record.report})"
        )
    return ConfigError(
        f"{key} is empty: no profile to judge (there is no default: a test model would be "
        "measured in place of your server)",
        hint=f'set {key} = ["your-production-profile"] in watchkeeper.toml or pass {flag}' + found,
    )


def detected_gpu(config: Config) -> bool:
    """[service] gpu = auto on a host with a GPU: the unit offloads, so the soak does too."""
    return config.service.gpu == "auto" and bool(host_gpu.devices())


def with_recommendation(
    config: Config, path: Path | None
) -> tuple[Config, list[str], RecommendationRecord]:
    """The soak of a recommendation: its subject arm (the recommended one, or the closest
    speculative arm when it keeps the baseline) and the baseline, as profiles of `config`,
    each as the unit ships it ([service] slots and cache_ram_mib, publish/served.py)."""
    record = read_record(path or config.bench.resolved_reports_dir() / RECORD_NAME)
    gpu = detected_gpu(config)
    # The record's arms win over same-named profiles of the config: the soak soaks the unit.
    profiles = {**config.profiles, **shipped_profiles(record, config.service, detected_gpu=gpu)}
    names = [a.name for a in (record.subject, record.baseline) if a is not None]
    names = list(dict.fromkeys(names))
    return config.model_copy(update={"profiles": profiles}), names, record


def soak_profiles(
    config: Config,
    profiles: list[str] | None,
    recommendation: Path | None,
    *,
    progress: Callable[[str], None],
) -> tuple[Config, list[str] | None, RecommendationRecord | None]:
    """The soak's profiles: `--recommendation`'s arms; else the ones given or configured;
    else the committed recommendation's, when there is one (else the soak refuses)."""
    use = recommendation is not None or (
        not profiles and not config.soak.profiles and committed_recommendation(config) is not None
    )
    if not use:
        return config, profiles, None
    config, names, record = with_recommendation(config, recommendation)
    progress(
        f"soaking the sweep's recommendation (campaign {record.campaign_id}): "
        + " beside ".join(names)
    )
    return config, names, record


def measured_categories(
    record: RecommendationRecord | None, given: Sequence[str] | None
) -> list[str] | None:
    """The soak's task categories: the ones given; soaking a recommendation, else the ones its
    sweep measured, so a `sweep --category code_edit` unit is soaked on code edits and not on
    prose it was never chosen for. None: every category (a record without per-workload
    picks, or no record)."""
    if given:
        return list(given)
    if record is None or record.workload is None:
        return None
    return [c.category for c in record.workload.categories] or None
