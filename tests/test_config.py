"""Config loading: every error names the file, the key and what was expected."""

from __future__ import annotations

from pathlib import Path

import pytest

from watchkeeper.config import load_config
from watchkeeper.errors import ConfigError
from watchkeeper.server.profiles import BUILTIN_PROFILES, all_profiles, get_profile


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "watchkeeper.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_no_config_file_gives_defaults_and_builtin_profiles() -> None:
    config = load_config(None)
    assert config.source == "<defaults>"
    assert set(BUILTIN_PROFILES) <= set(all_profiles(config))


def test_bad_toml_names_the_file_and_the_position(tmp_path: Path) -> None:
    path = write(tmp_path, "[server\nport = 1\n")
    with pytest.raises(ConfigError, match=rf"{path}: invalid TOML: .*line 1"):
        load_config(path)


def test_unknown_key_is_named_with_its_dotted_path(tmp_path: Path) -> None:
    path = write(tmp_path, "[server]\nprot = 8080\n")
    with pytest.raises(ConfigError, match=r"server\.prot: unknown key"):
        load_config(path)


def test_wrong_type_says_what_was_expected(tmp_path: Path) -> None:
    path = write(tmp_path, '[profiles.p]\nmodel = "m"\ndraft_n_max = "lots"\n')
    with pytest.raises(ConfigError, match=r"profiles\.p\.draft_n_max: .*integer.*'lots'"):
        load_config(path)


def test_missing_config_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "nope.toml")


def test_user_profile_overrides_a_builtin_one_whole(tmp_path: Path) -> None:
    path = write(tmp_path, '[profiles.smollm2-baseline]\nmodel = "mine"\nthreads = 1\n')
    profile = get_profile(load_config(path), "smollm2-baseline")
    assert profile.model == "mine"
    assert profile.threads == 1


def test_unknown_profile_lists_the_known_ones() -> None:
    with pytest.raises(
        ConfigError, match=r"unknown profile 'nope'; known profiles: .*smollm2-selfdraft"
    ):
        get_profile(load_config(None), "nope")


def test_database_url_comes_from_the_environment_first(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = write(tmp_path, '[database]\nurl = "sqlite:///from-file.db"\n')
    monkeypatch.setenv("WATCHKEEPER_DATABASE_URL", "sqlite:///from-env.db")
    assert load_config(path).database.resolved_url() == "sqlite:///from-env.db"


def test_profile_hash_ignores_the_description_but_not_the_flags() -> None:
    base = BUILTIN_PROFILES["qwen-draft4"]
    assert base.model_copy(update={"description": "x"}).config_hash() == base.config_hash()
    assert base.model_copy(update={"draft_n_max": 5}).config_hash() != base.config_hash()


def test_a_profile_may_name_a_running_server_instead_of_a_model(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        '[profiles.prod]\nurl = "http://127.0.0.1:8080/"\ntemperature = 0.7\n'
        'description = "the systemd instance"\n'
        '[profiles.proxy]\nurl = "https://llm.internal/llama"\n',
    )
    config = load_config(path)
    prod = get_profile(config, "prod")
    assert (prod.url, prod.model, prod.external) == ("http://127.0.0.1:8080", "", True)
    assert get_profile(config, "proxy").url == "https://llm.internal/llama"
    assert not BUILTIN_PROFILES["smollm2-baseline"].external


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            'model = "m"\nurl = "http://127.0.0.1:8080"',
            r"profiles\.p: .*either model or url, not both",
        ),
        ("threads = 2", r"profiles\.p: .*needs either model .* or url"),
        ('url = "127.0.0.1:8080"', r"profiles\.p\.url: .*http\(s\) URL"),
        ('url = "ftp://127.0.0.1/"', r"profiles\.p\.url: .*http\(s\) URL"),
        ('url = "http://"', r"profiles\.p\.url: .*http\(s\) URL"),
        ('url = "http://127.0.0.1:99999"', r"profiles\.p\.url: .*invalid port"),
        ('url = "http://127.0.0.1:8080/?x=1"', r"profiles\.p\.url: .*without a query"),
        (
            'url = "http://127.0.0.1:8080"\nthreads = 8\ndraft_n_max = 4',
            r"profiles\.p: .*draft_n_max, threads: only for a server watchkeeper starts",
        ),
    ],
)
def test_a_url_profile_is_refused_with_the_profile_named(
    tmp_path: Path, body: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(write(tmp_path, f"[profiles.p]\n{body}\n"))


def test_a_url_profile_has_its_own_hash_and_old_profiles_keep_theirs() -> None:
    from watchkeeper.config import ProfileConfig

    a = ProfileConfig(url="http://127.0.0.1:8080")
    assert a.config_hash() != ProfileConfig(url="http://127.0.0.1:8081").config_hash()
    # `url` unset is not part of the hash: profiles from before it keep their history (the
    # hashes these two had before the key existed).
    assert BUILTIN_PROFILES["smollm2-baseline"].config_hash() == "4876f44680df7de3"
    assert BUILTIN_PROFILES["qwen-draft4"].config_hash() == "52725e57b8b13f46"
