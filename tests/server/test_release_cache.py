"""Builds that name their release, kept side by side in the cache with a prune policy.

No compiler here: the trees are laid out as a build leaves them, with a stand-in
`llama-server` that answers `--version` the way a release-named build does."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from support.releases import PREVIOUS_RELEASE

from watchkeeper.config import Config, ProfileConfig, ServerConfig
from watchkeeper.server import build, cache, identity, install
from watchkeeper.server.binary import ServerBinary
from watchkeeper.server.endpoints import fetch_props, make_http_client
from watchkeeper.server.launch import prepare, serve
from watchkeeper.server.models import ModelFile
from watchkeeper.server.profiles import SMOLLM2


def test_the_build_number_comes_from_the_sdist_version() -> None:
    assert identity.release_number("11434.0.0") == 11434
    assert identity.release_number("dev") is None
    assert "-DLLAMA_BUILD_NUMBER=11434" in identity.release_defines("11434.0.0")
    assert "-DCMAKE_BUILD_RPATH_USE_ORIGIN=ON" in identity.release_defines("11434.0.0")
    assert not any("LLAMA_BUILD_NUMBER" in d for d in identity.release_defines("dev"))


def _fake_build(server: ServerConfig, *, named: bool, used: datetime | None = None) -> Path:
    root = install.build_dir(server)
    binary = root / "build" / "bin" / "llama-server"
    binary.parent.mkdir(parents=True)
    number = identity.release_number(server.llama_cpp_version) if named else 0
    binary.write_text(f"#!/bin/sh\necho 'version: {number} (unknown)'\n")
    binary.chmod(0o755)
    record = identity.build_record(
        server,
        root,
        install.configure_command(server),
        f"version: {number} (unknown)",
        1.0,
        defines=identity.release_defines(server.llama_cpp_version),
    ).record
    if not named:  # a build.json written before builds named their release
        del record["release_defines"], record["build_number"]
    (root / identity.MARKER).write_text(json.dumps(record), encoding="utf-8")
    if used is not None:
        cache.mark_used(root, used)
    return root


def test_a_cached_build_that_does_not_name_its_release_is_not_reused(tmp_path: Path) -> None:
    old = ServerConfig(cache_dir=str(tmp_path), llama_cpp_version="9000.0.0")
    _fake_build(old, named=False)
    assert install.cached_binary(old) is None
    new = ServerConfig(cache_dir=str(tmp_path), llama_cpp_version="9001.0.0")
    _fake_build(new, named=True)
    found = install.cached_binary(new)
    assert found is not None and found.version == "version: 9001 (unknown)"
    assert found.llama_cpp_version == "9001.0.0"


def test_a_finished_tree_replaces_the_one_in_use_in_one_step(tmp_path: Path) -> None:
    root = tmp_path / "11434.0.0"
    (root / "build" / "bin").mkdir(parents=True)
    (root / "build" / "bin" / "llama-server").write_text("old")
    staging = install.staging_dir(root)
    (staging / "build" / "bin").mkdir(parents=True)
    (staging / "build" / "bin" / "llama-server").write_text("new")
    with (root / "build" / "bin" / "llama-server").open() as in_use:
        build.swap_into_place(staging, root)
        assert in_use.read() == "old"  # a reader of the old tree keeps its file
    assert (root / "build" / "bin" / "llama-server").read_text() == "new"
    assert not staging.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["11434.0.0"]
    fresh = tmp_path / "11435.0.0"
    other = install.staging_dir(fresh)
    other.mkdir()
    build.swap_into_place(other, fresh)
    assert fresh.is_dir() and not other.exists()


def test_the_cache_lists_releases_and_prunes_all_but_the_kept_and_recent(tmp_path: Path) -> None:
    now = datetime(2026, 11, 25, 8, 0, tzinfo=UTC)
    for i, version in enumerate(("9000.0.0", "9001.0.0", "9002.0.0", "9003.0.0")):
        server = ServerConfig(cache_dir=str(tmp_path), llama_cpp_version=version)
        _fake_build(server, named=version != "9000.0.0", used=now - timedelta(days=i))
    found = cache.releases(tmp_path)
    assert [r.version for r in found] == ["9000.0.0", "9001.0.0", "9002.0.0", "9003.0.0"]
    assert [r.build_number for r in found] == [None, 9001, 9002, 9003]
    assert all(r.built and r.size_bytes > 0 for r in found)
    # Keep 9003 (configured, least recently used) and the one most recently used other.
    doomed = cache.prune_plan(found, keep={"9003.0.0"}, recent=1)
    assert [r.version for r in doomed] == ["9001.0.0", "9002.0.0"]
    for release in doomed:
        cache.remove(release)
    assert [r.version for r in cache.releases(tmp_path)] == ["9000.0.0", "9003.0.0"]
    figure = cache.disk_figure(tmp_path)
    assert figure.releases == 2 and figure.builds_bytes > 0
    assert figure.line().startswith("build cache: 2 release(s)")


def test_the_built_server_names_its_release_in_version_and_props(
    real_server: tuple[ServerBinary, ModelFile], tmp_path: Path
) -> None:
    binary, _ = real_server
    number = identity.release_number(binary.llama_cpp_version)
    # This build's --version: "version: 0.6.0-dev (build 11434, commit unknown)".
    assert f"(build {number}," in binary.version
    config = Config(
        server=ServerConfig(startup_timeout_s=120),
        profiles={"s": ProfileConfig(model=SMOLLM2, ctx_size=512, threads=1)},
    )
    with serve(config, prepare(config, "s"), log_path=tmp_path / "server.log") as running:
        client = make_http_client(running.base_url, request_timeout_s=10)
        try:
            props = fetch_props(client)
        finally:
            client.close()
    assert str(props.get("build_info", "")).startswith(f"b{number}")


def test_two_real_releases_live_side_by_side_in_the_cache(
    server_binary: ServerBinary, tmp_path: Path
) -> None:
    """The configured release and its predecessor, each built from its own sdist into a tree
    of its own (the first run builds the predecessor: ~7 minutes on 2 cores, less with
    ccache), each naming its release."""
    older = install.ensure_binary(ServerConfig(llama_cpp_version=PREVIOUS_RELEASE), jobs=2)
    assert "(build 11401," in older.version
    assert older.path.parent.parent.parent.name == PREVIOUS_RELEASE
    assert older.sha256 != server_binary.sha256
    found = {r.version: r for r in cache.releases(ServerConfig().resolved_cache_dir())}
    assert found[PREVIOUS_RELEASE].build_number == 11401
    assert found[server_binary.llama_cpp_version].build_number == 11434
