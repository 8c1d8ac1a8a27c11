"""`watchkeeper unit`: the recommended llama-server unit, rendered for this (or any) host.

The sweep commits its answer as `reports/speculative_recommendation.json`; this command turns
it into a systemd unit with the installing host's binary, model directory, user, group, host
and port ([service] in watchkeeper.toml, each overridable on the command line), so the host
that measured and the host that serves need not be the same machine.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from watchkeeper.config import Config
from watchkeeper.config.service import ServiceConfig
from watchkeeper.errors import ConfigError
from watchkeeper.host import gpu as host_gpu
from watchkeeper.host.digest import file_sha256
from watchkeeper.publish.deliverable import RECORD_NAME, RecommendationRecord, read_record
from watchkeeper.publish.systemd import render_unit, unit_name, write_service


@dataclass(frozen=True, slots=True)
class UnitResult:
    text: str
    profile: str
    speculates: bool
    recommendation: Path
    path: Path | None
    category: str | None = None
    note: str = ""
    """For the operator, on stderr: the category keeps the baseline, and why."""

    def to_json(self) -> dict[str, Any]:
        return {
            "profile": self.profile,
            "category": self.category,
            "speculates": self.speculates,
            "recommendation": str(self.recommendation),
            "path": str(self.path) if self.path else None,
            "unit": self.text,
        }


def service_settings(config: Config, overrides: Mapping[str, Any]) -> ServiceConfig:
    """[service] with the command line's values over it, validated as the file's are. Only the
    keys someone set stay set, so the record's serving settings fill the rest
    (publish/served.py:as_rendered)."""
    given = {k: v for k, v in overrides.items() if v is not None}
    try:
        return ServiceConfig.model_validate(
            {**config.service.model_dump(exclude_unset=True), **given}
        )
    except ValidationError as exc:
        err = exc.errors()[0]
        key = ".".join(str(p) for p in err["loc"])
        raise ConfigError(
            f"service.{key}: {err['msg']}", hint="see [service] in docs/configuration.md"
        ) from None


def unit_command(
    config: Config,
    *,
    recommendation: Path | None = None,
    output: Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    category: str | None = None,
) -> UnitResult:
    """``category``: the unit for that one category, its pick from the record (the baseline
    where it keeps it), instead of the whole workload's setting."""
    source = recommendation or config.bench.resolved_reports_dir() / RECORD_NAME
    record = read_record(source)
    note = ""
    if category is not None:
        record, note = for_category(record, category, source)
    service = service_settings(config, overrides or {})
    if output is not None and (
        output.name.endswith("\\") or any(ord(c) < 0x20 or ord(c) == 0x7F for c in str(output))
    ):
        raise ConfigError(
            f"--output {str(output)!r}: a unit's file name is written into its header comment, "
            "so it holds no control character and does not end in a backslash",
            hint="name it like llama-server-speculative.service",
        )
    # auto: a GPU on this host counts, whatever the sweep's host had (NVML, else nvidia-smi).
    detected = service.gpu == "auto" and bool(host_gpu.devices())
    # The binary found here is pinned: a later swap stops the start (publish/verify.py).
    binary = Path(service.binary)
    pin = file_sha256(binary) if binary.is_file() else ""
    text = render_unit(
        record,
        service,
        filename=output.name if output else unit_name(record),
        gpu_detected=detected,
        binary_sha256=pin,
    )
    if output is not None:
        write_service(output, text)
    return UnitResult(text, record.chosen.name, record.speculates, source, output, category, note)


def for_category(
    record: RecommendationRecord, category: str, source: Path
) -> tuple[RecommendationRecord, str]:
    """The record as one category's answer: its pick as the chosen arm, or the baseline with
    the category's closest arm, and the note saying it keeps the baseline."""
    workload = record.workload
    if workload is None or not workload.categories:
        raise ConfigError(
            f"{source} holds no pick per category (written before the sweep kept them)",
            hint="rerun `watchkeeper sweep` to get one, or drop --category",
        )
    pick = workload.pick(category)
    if pick is None:
        known = ", ".join(c.category for c in workload.categories)
        raise ConfigError(f"--category {category!r} is not a category of {source} ({known})")
    if pick.profile is not None and pick.recipe is not None:
        return replace(
            record,
            chosen=pick.recipe,
            headline=f"{category}: {pick.profile}, {pick.speedup}",
            meaning=f"for {category} tasks alone, {pick.profile} ({pick.reason})",
        ), ""
    closest = pick.recipe if pick.recipe is not None and pick.recipe.speculative else None
    note = f"{category} keeps the baseline: {pick.reason}"
    return replace(
        record,
        chosen=record.baseline,
        closest=closest,
        headline=f"{category}: keep the baseline",
        meaning=f"for {category} tasks alone, keep the baseline ({pick.reason})",
    ), note
