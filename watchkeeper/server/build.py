"""Compile llama-server from an unpacked sdist with cmake (its identity and build.json are
`identity.py`'s).

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

from watchkeeper.errors import InstallError
from watchkeeper.server.identity import MARKER

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
