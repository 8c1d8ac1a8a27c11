"""The pinned reference: what identifies a system under test, and its snapshot on disk.

A system is identified by what can change its speed: the llama-server binary, the model and
draft files (all by sha256), the profile's flags and the host. Tonight's current system is
measured against the pinned one inside the same run; when the two identities are equal the
night is an A/A night, a live measurement of the detector's false alarms.

The reference's binary (with the shared libraries of its build that it loads) and model files
are kept in the cache by content hash, so a rebuild or an upgrade never destroys what the
reference runs. Models are hard-linked where the file system allows it (a 1 GB model costs
nothing twice).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from watchkeeper.config import ProfileConfig
from watchkeeper.errors import ConfigError, InstallError
from watchkeeper.server.binary import ServerBinary
from watchkeeper.server.install import needed_files, starts
from watchkeeper.server.launch import PreparedProfile
from watchkeeper.server.models import ModelFile

REFERENCE_SUFFIX = "@reference"


@dataclass(frozen=True, slots=True)
class PinnedSystem:
    host_fingerprint: str
    profile: str
    binary_sha256: str
    model_sha256: str
    draft_sha256: str | None
    config_hash: str

    @property
    def digest(self) -> str:
        blob = json.dumps(
            [
                self.host_fingerprint,
                self.profile,
                self.binary_sha256,
                self.model_sha256,
                self.draft_sha256,
                self.config_hash,
            ]
        )
        return hashlib.sha256(blob.encode()).hexdigest()


def identify(prepared: PreparedProfile, host_fingerprint: str) -> PinnedSystem:
    if prepared.binary is None or prepared.model is None:
        raise ConfigError(
            f"profile {prepared.name}: the nightly pins a binary and model files, which a "
            "server watchkeeper did not start (a url profile, server.external_url) does not "
            "expose",
            hint="run the nightly on a host where watchkeeper starts llama-server itself",
        )
    return PinnedSystem(
        host_fingerprint,
        prepared.name,
        prepared.binary.sha256,
        prepared.model.sha256,
        prepared.draft.sha256 if prepared.draft else None,
        prepared.profile.config_hash(),
    )


def _link_or_copy(source: Path, target: Path) -> None:
    if target.exists():
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    partial.unlink(missing_ok=True)
    try:
        os.link(source, partial)
    except OSError:
        shutil.copy2(source, partial)
    os.replace(partial, target)


def snapshot_binary(binary: ServerBinary, root: Path) -> Path:
    """Copy the binary and the shared libraries it loads (`needed_files`) under its sha256,
    and prove the copy starts (`--version`) before it becomes the reference: a snapshot that
    cannot start is removed and refused."""
    folder = root / "binaries" / binary.sha256
    target = folder / binary.path.name
    if target.is_file():
        return target
    staging = folder.with_name(folder.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    for source in needed_files(binary.path):
        shutil.copy2(source, staging / source.name)  # a symlinked soname: its file
    failure = starts(staging / binary.path.name)
    if failure is not None:
        shutil.rmtree(staging, ignore_errors=True)
        raise InstallError(
            f"reference pin: the snapshot of {binary.path} does not start ({failure})",
            hint="pin a llama-server that runs `--version` with the libraries of its build "
            "beside it (or in llama.cpp's lib folder)",
        )
    shutil.rmtree(folder, ignore_errors=True)
    os.replace(staging, folder)
    return target


def snapshot_model(model: ModelFile, root: Path) -> Path:
    target = root / "models" / f"{model.sha256}.gguf"
    _link_or_copy(model.path, target)
    return target


def snapshot_root(cache: Path) -> Path:
    return cache / "snapshots"


def reference_arm(
    prepared: PreparedProfile,
    *,
    binary_path: Path,
    binary_version: str,
    binary_sha256: str,
    model_path: Path,
    model_sha256: str,
    draft_path: Path | None,
    draft_sha256: str | None,
    config: ProfileConfig,
) -> PreparedProfile:
    """The reference as an arm: the snapshot files with the pinned flags, under its own name."""
    model = ModelFile(
        prepared.model.name if prepared.model else "reference-model",
        model_path,
        model_sha256,
        model_path.stat().st_size,
    )
    draft = None
    if draft_path is not None and draft_sha256 is not None:
        name = prepared.draft.name if prepared.draft else "reference-draft"
        draft = ModelFile(name, draft_path, draft_sha256, draft_path.stat().st_size)
    variant = prepared.binary.variant if prepared.binary else "cpu"
    binary = ServerBinary(binary_path, binary_version, variant, binary_sha256)
    return PreparedProfile(
        prepared.name + REFERENCE_SUFFIX, config, binary, model, draft, prepared.help
    )


def prune_snapshots(root: Path, keep_sha256: set[str]) -> list[Path]:
    """Delete snapshots no reference points at; returns what was removed."""
    removed: list[Path] = []
    for folder in sorted((root / "binaries").glob("*")):
        if folder.is_dir() and folder.name not in keep_sha256:
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    for model in sorted((root / "models").glob("*.gguf")):
        if model.stem not in keep_sha256:
            model.unlink(missing_ok=True)
            removed.append(model)
    return removed
