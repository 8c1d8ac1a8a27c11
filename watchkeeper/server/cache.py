"""The build cache: several llama.cpp releases side by side, what they take on disk, and which
of them may go.

Each release lives in `<cache>/llama.cpp/<version>[-cuda]` (one tree per version and variant,
`install.build_dir`), so an upgrade check or a bisect builds the releases it needs beside the
configured one without touching it. A bisect over 250 releases would fill a disk at ~215 MB a
tree (source 180 MB, build 35 MB), hence the prune policy: keep the configured release, the
releases named in `keep` (a bisect's good and bad ends, an upgrade's candidate) and the
`recent` most recently used others; remove the rest. Reference snapshots (`snapshots/`) are
copies of their own and are never touched here.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from watchkeeper.errors import ConfigError
from watchkeeper.server.build import build_lock
from watchkeeper.server.identity import MARKER
from watchkeeper.server.sdist import version_key

LAST_USED = "last_used"
DEFAULT_KEEP_RECENT = 3

Progress = Callable[[str], None]


def _quiet(_: str) -> None:
    return None


@dataclass(frozen=True, slots=True)
class CachedRelease:
    version: str
    variant: str
    path: Path
    size_bytes: int
    built: bool
    """A finished build (build.json and the binary are there), not an unpacked source only."""
    build_number: int | None
    """What `--version` says (b<N>); None for a build made before builds named their release."""
    last_used: datetime | None

    @property
    def key(self) -> str:
        return self.path.name


def tree_bytes(path: Path) -> int:
    """Bytes of the files under `path` (hard links counted once, as the disk holds them)."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for folder, _dirs, files in os.walk(path):
        for name in files:
            try:
                st = os.lstat(os.path.join(folder, name))
            except OSError:
                continue
            if (st.st_dev, st.st_ino) in seen:
                continue
            seen.add((st.st_dev, st.st_ino))
            total += st.st_blocks * 512
    return total


def builds_root(cache_dir: Path) -> Path:
    return cache_dir / "llama.cpp"


def mark_used(root: Path, now: datetime) -> None:
    """Record that a build was just used (the prune policy keeps the recently used ones)."""
    if root.is_dir():
        (root / LAST_USED).write_text(now.isoformat(), encoding="utf-8")


def _last_used(root: Path) -> datetime | None:
    for name in (LAST_USED, MARKER):
        path = root / name
        try:
            if name == LAST_USED:
                return datetime.fromisoformat(path.read_text(encoding="utf-8").strip())
            return datetime.fromtimestamp(path.stat().st_mtime, UTC)
        except (OSError, ValueError):
            continue
    return None


def releases(cache_dir: Path) -> list[CachedRelease]:
    """Every release tree in the cache, oldest version first (staging folders excluded)."""
    root = builds_root(cache_dir)
    if not root.is_dir():
        return []
    found: list[CachedRelease] = []
    for tree in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        version, _, variant = tree.name.partition("-")
        try:
            record = json.loads((tree / MARKER).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            record = {}
        number = record.get("build_number") if isinstance(record, dict) else None
        built = bool(record) and (tree / "build" / "bin" / "llama-server").is_file()
        found.append(
            CachedRelease(
                version,
                variant or "cpu",
                tree,
                tree_bytes(tree),
                built,
                int(number) if isinstance(number, int) else None,
                _last_used(tree),
            )
        )
    return sorted(found, key=lambda r: (version_key(r.version), r.variant))


def prune_plan(
    found: Iterable[CachedRelease],
    *,
    keep: set[str],
    recent: int = DEFAULT_KEEP_RECENT,
    named: Iterable[str] = (),
) -> list[CachedRelease]:
    """The releases the policy removes: everything except the versions in `keep` and the
    `recent` most recently used others (never used counts as oldest). A version the user
    `named` to keep must be cached: a mistyped `--keep` would otherwise keep nothing and
    prune the very release it meant to keep, so it is refused before anything is removed."""
    found = list(found)
    cached = {r.version for r in found} | {r.key for r in found}
    missing = sorted(set(named) - cached)
    if missing:
        raise ConfigError(
            f"--keep {', '.join(missing)}: not a cached release; nothing was removed",
            hint="`watchkeeper cache` lists the cached releases (first column)",
        )
    keep = keep | {r.version for r in found if r.key in set(named)}
    others = [r for r in found if r.version not in keep]
    epoch = datetime.min.replace(tzinfo=UTC)
    others.sort(key=lambda r: r.last_used or epoch, reverse=True)
    return others[recent:]


def remove(release: CachedRelease, progress: Progress = _quiet) -> None:
    """Delete one release tree under its build lock (never while a build of it runs); the
    tree is renamed away first, so a reader sees it whole or not at all."""
    with build_lock(release.path, progress):
        if not release.path.exists():
            return
        doomed = release.path.with_name(f".{release.path.name}.removing")
        shutil.rmtree(doomed, ignore_errors=True)
        os.rename(release.path, doomed)
        shutil.rmtree(doomed, ignore_errors=True)


@dataclass(frozen=True, slots=True)
class DiskFigure:
    builds_bytes: int
    downloads_bytes: int
    releases: int

    @property
    def total_bytes(self) -> int:
        return self.builds_bytes + self.downloads_bytes

    def line(self) -> str:
        return (
            f"build cache: {self.releases} release(s), {self.builds_bytes / 2**20:.0f} MiB of "
            f"builds + {self.downloads_bytes / 2**20:.0f} MiB of sdists = "
            f"{self.total_bytes / 2**20:.0f} MiB"
        )


def disk_figure(cache_dir: Path) -> DiskFigure:
    root = builds_root(cache_dir)
    downloads = cache_dir / "downloads"
    return DiskFigure(
        tree_bytes(root) if root.is_dir() else 0,
        tree_bytes(downloads) if downloads.is_dir() else 0,
        len(releases(cache_dir)),
    )
