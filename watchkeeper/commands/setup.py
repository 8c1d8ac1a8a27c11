"""`watchkeeper setup`: everything slow, once, cached: the llama-server build and the models."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from watchkeeper.config import Config
from watchkeeper.host import gpu
from watchkeeper.nightly.reference import prune_snapshots, snapshot_root
from watchkeeper.server.binary import ServerBinary
from watchkeeper.server.install import ensure_binary
from watchkeeper.server.models import ModelFile, ModelStore
from watchkeeper.server.profiles import get_profile
from watchkeeper.store.db import open_database
from watchkeeper.store.references import ReferenceStore

DEFAULT_SETUP_PROFILES = ("smollm2-baseline",)


@dataclass(frozen=True, slots=True)
class SetupResult:
    binary: ServerBinary
    models: tuple[ModelFile, ...]


def models_for_profiles(config: Config, profiles: Sequence[str]) -> list[str]:
    names: list[str] = []
    for profile_name in profiles:
        profile = get_profile(config, profile_name)
        for model in (profile.model, profile.draft_model):
            if model and model not in names:
                names.append(model)
    return names


def require_nvml(config: Config) -> None:
    """On the GPU path (server.cuda) with a GPU listed, NVML must answer: without it every
    VRAM, power and energy figure of a GPU run is n/a. Refused before a five-minute build, in
    one line with the fix. A build box with nvcc but no GPU is left alone."""
    if config.server.cuda:
        gpu.require_nvml()


def default_setup_models(config: Config) -> list[str]:
    """The models `setup` fetches when asked for none: those of the profiles the config
    defines (the user's own GGUFs need no fetch), else SmolLM2's, the test model. A host with
    its own models and no network so never insists on fetching SmolLM2."""
    if config.profiles:
        return models_for_profiles(config, list(config.profiles))
    return models_for_profiles(config, DEFAULT_SETUP_PROFILES)


def run_setup(
    config: Config,
    *,
    models: Sequence[str] | None = None,
    profiles: Sequence[str] | None = None,
    progress: Callable[[str], None],
) -> SetupResult:
    require_nvml(config)
    with Progress(
        TextColumn("[bold]llama-server build"),
        BarColumn(),
        TextColumn("{task.percentage:>3.0f}%"),
        TimeElapsedColumn(),
        transient=True,
    ) as bar:
        task = bar.add_task("build", total=100)
        binary = ensure_binary(
            config.server, progress=progress, percent=lambda p: bar.update(task, completed=p)
        )
    wanted = list(models or [])
    if not wanted:
        wanted = models_for_profiles(config, profiles) if profiles else default_setup_models(config)
    store = ModelStore(config, progress=progress)
    result = SetupResult(binary, tuple(store.ensure(name) for name in wanted))
    prune_reference_snapshots(config, progress)
    return result


def prune_reference_snapshots(config: Config, progress: Callable[[str], None]) -> None:
    """Delete snapshot files no active nightly reference runs (a re-pin leaves the old ones)."""
    root = snapshot_root(config.server.resolved_cache_dir())
    if not root.is_dir():
        return
    with open_database(config.database.resolved_url()) as db:
        keep: set[str] = set()
        for ref in ReferenceStore(db).history():
            if ref.active:
                keep |= {ref.binary_sha256, ref.model_sha256, ref.draft_sha256 or ""}
    for path in prune_snapshots(root, keep):
        progress(f"pruned unreferenced snapshot {path}")
