"""The unit runs what was measured: an ExecStartPre= that checks the files' digests first.

A unit rendered from a recommendation names a binary and GGUF files by path; nothing stopped
an upgrade of the binary or a re-quantised model under the same name from serving under a
report that measured something else. The record keeps each model's sha256 as the sweep
measured it (`extra.digests.models`, from the arms' `model_sha256`), and `watchkeeper unit`
pins the binary it finds at [service] binary when it renders (the sweep's own binary was built
on the measuring host, so its digest says nothing about the installing host's; what the pin
catches is a binary replaced after the unit was rendered). Before each start the unit hashes
them with `sha256sum` and refuses, one line in the journal naming the file, if one differs.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass

from watchkeeper.analysis.benchmark import BenchResult
from watchkeeper.config.service import ServiceConfig
from watchkeeper.publish.deliverable import RecommendationRecord

SHELL = "/bin/sh"


@dataclass(frozen=True, slots=True)
class Pin:
    path: str
    sha256: str
    what: str
    """'model' (from the sweep's record) or 'binary' (found when the unit was rendered)."""


def record_digests(result: BenchResult) -> dict[str, str]:
    """GGUF file name -> sha256 of every model the sweep's arms ran (the record keeps it)."""
    out: dict[str, str] = {}
    for arm in result.arms:
        ggufs = [a.rsplit("/", 1)[-1] for a in arm.argv if a.endswith(".gguf")]
        for name, sha in zip(ggufs, (arm.model_sha256, arm.draft_sha256), strict=False):
            if sha:
                out[name] = sha
    return out


def model_digests(record: RecommendationRecord) -> dict[str, str]:
    d = record.extra.get("digests")
    models = d.get("models") if isinstance(d, Mapping) else None
    return {str(k): str(v) for k, v in models.items()} if isinstance(models, Mapping) else {}


def pinned_files(
    record: RecommendationRecord, service: ServiceConfig, binary_sha256: str = ""
) -> tuple[Pin, ...]:
    digests = model_digests(record)
    pins = [
        Pin(f"{service.model_dir}/{m}", digests[m], "model")
        for m in record.chosen.models
        if m in digests
    ]
    if binary_sha256:
        pins.append(Pin(service.binary, binary_sha256, "binary"))
    return tuple(pins)


def verify_script(pins: tuple[Pin, ...], unit: str) -> str:
    """sh: each file's sha256 checked, a one-line refusal naming the first that differs."""
    lines = [
        'check() { echo "$2  $1" | sha256sum --check --status 2>/dev/null || { echo "'
        + unit
        + ": refusing to start: $1 is not the $3 that was measured (sha256 $2 expected; "
        'rerun the sweep or re-render the unit with watchkeeper unit)" >&2; exit 1; }; }',
        *(f"check {shlex.quote(p.path)} {p.sha256} {p.what}" for p in pins),
    ]
    if not pins:
        lines.append("true")
    return "; ".join(lines)


def verify_argv(pins: tuple[Pin, ...], unit: str) -> list[str]:
    return [SHELL, "-c", verify_script(pins, unit)]


def pins_note(pins: tuple[Pin, ...], record: RecommendationRecord, service: ServiceConfig) -> str:
    models = [p for p in pins if p.what == "model"]
    said = (
        f"Before each start (ExecStartPre) the models' sha256 are checked against the sweep's "
        f"({', '.join(p.path.rsplit('/', 1)[-1] + ' ' + p.sha256[:12] for p in models)})"
        if models
        else "Before each start no model digest is checked: the record keeps none (rerun the sweep)"
    )
    binary = next((p for p in pins if p.what == "binary"), None)
    if binary is not None:
        said += f", and {service.binary} against the binary found when this unit was rendered "
        said += f"({binary.sha256[:12]})"
    else:
        said += (
            f"; {service.binary} is not pinned (it was not on the host that rendered this "
            "copy: render the unit on the serving host to pin it)"
        )
    return (
        said
        + "; a differing file stops the start with one line naming it. Build measured: "
        + f"{record.build}."
    )
