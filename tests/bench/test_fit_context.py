"""`--fit-context`: each arm started at the asked context, and what it got read back.

The log line is the real one (cuda_logs/server_default.log, llama.cpp 11434 on an H100); the
starts are real SmolLM2 servers on this CPU host, where VRAM is not measured (no NVML) and
the answer rests on the context the server reports and its RAM.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from watchkeeper.analysis.fit import FitCheck, fit_section, parse_n_ctx, props_n_ctx
from watchkeeper.campaign.fit import fit_at_context
from watchkeeper.config import Config, ProfileConfig, ServerConfig
from watchkeeper.server.binary import ServerBinary
from watchkeeper.server.gguf import GgufError, read_context_length
from watchkeeper.server.launch import prepare
from watchkeeper.server.models import ModelFile

CUDA_LOGS = Path(__file__).parent.parent / "server" / "cuda_logs"


def test_the_context_is_read_from_the_real_log_line_and_from_props() -> None:
    assert parse_n_ctx((CUDA_LOGS / "server_default.log").read_text()) == 4096
    assert parse_n_ctx((CUDA_LOGS / "direct.log").read_text()) == 4 * 8192
    assert parse_n_ctx("no such line") is None
    props = {"default_generation_settings": {"n_ctx": 8192}, "total_slots": 4}
    assert props_n_ctx(props) == 32768
    assert props_n_ctx({}) is None


def test_the_answer_names_the_numbers_and_says_what_was_not_measured() -> None:
    gpu = FitCheck("draft4", 32768, 32768, 9100 << 20, 1 << 30, 81559 << 20, "q8_0/q8_0")
    assert gpu.fits
    assert gpu.line() == (
        "fit draft4 at 32768 tokens (KV q8_0/q8_0): yes "
        "(got 32768; VRAM 9100 MiB of 81559; RAM 1024 MiB)"
    )
    short = FitCheck("x", 32768, 16384, None, 300 << 20)
    assert not short.fits and "no (got 16384; VRAM not measured (no NVML)" in short.line()
    oom = FitCheck("y", 131072, None, None, None, error="llama-server exited with code 1")
    assert not oom.fits and oom.line().endswith(
        "no: did not start: llama-server exited with code 1"
    )
    assert fit_section([]) == ""
    assert "- fit draft4 at 32768 tokens" in fit_section([gpu])


def test_a_model_shorter_than_asked_is_said_apart_from_memory() -> None:
    # SmolLM2 trains at 8192: asked 32768 on the H100, the server came up with 8192.
    capped = FitCheck("selfdraft", 32768, 8192, 901 << 20, 400 << 20, 81559 << 20,
                      model_context=8192)  # fmt: skip
    assert capped.limited_by_model and capped.measured_context == 8192 and capped.fits
    assert capped.line() == (
        "fit selfdraft at 32768 tokens (KV f16/f16): the model's context is 8192, shorter than "
        "asked; in memory at 8192: yes (got 8192; VRAM 901 MiB of 81559; RAM 400 MiB)"
    )
    # The old reading of the same start: a memory "no" that was a statement about the model.
    assert not FitCheck("selfdraft", 32768, 8192, 901 << 20, 400 << 20).fits
    oom = FitCheck("big", 131072, None, None, None, model_context=131072, error="out of memory")
    assert not oom.limited_by_model and not oom.fits
    assert oom.line().endswith("(KV f16/f16): no: did not start: out of memory")
    short = FitCheck("x", 32768, 4096, None, 1 << 30, model_context=8192)
    assert not short.fits and "in memory at 8192: no (got 4096" in short.line()
    by_device = FitCheck("d", 4096, 4096, 901 << 20, None, vram_source="device memory before/after")
    assert "VRAM 901 MiB, device memory before/after; RAM n/a" in by_device.line()


def _tiny_gguf(path: Path, key: str, kind: int, value: bytes) -> None:
    def string(text: str) -> bytes:
        return struct.pack("<Q", len(text)) + text.encode()

    kv = string("general.name") + struct.pack("<I", 8) + string("tiny")
    kv += string("llama.rope.scaling.original_context_length") + struct.pack("<II", 4, 1)
    kv += string(key) + struct.pack("<I", kind) + value
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, 3) + kv)


def test_the_models_context_is_read_from_its_gguf(tmp_path: Path) -> None:
    path = tmp_path / "m.gguf"
    _tiny_gguf(path, "llama.context_length", 4, struct.pack("<I", 8192))
    assert read_context_length(path) == 8192
    _tiny_gguf(path, "qwen2.context_length", 10, struct.pack("<Q", 32768))
    assert read_context_length(path) == 32768
    _tiny_gguf(path, "llama.block_count", 4, struct.pack("<I", 30))
    assert read_context_length(path) is None
    path.write_bytes(b"GGML")
    with pytest.raises(GgufError):
        read_context_length(path)


def test_real_servers_started_at_the_asked_context_on_a_cpu_host(
    real_server: tuple[ServerBinary, ModelFile], tmp_path: Path
) -> None:
    config = Config(
        profiles={
            "base": ProfileConfig(model="smollm2-135m-instruct-q4_1", ctx_size=512),
            "q8kv": ProfileConfig(
                model="smollm2-135m-instruct-q4_1",
                ctx_size=512,
                cache_type_k="q8_0",
                cache_type_v="q8_0",
            ),
        },
        server=ServerConfig(startup_timeout_s=60),
    )
    said: list[str] = []
    # 32768 asked of SmolLM2, trained at 8192: each arm is measured at 8192 and said so.
    checks = fit_at_context(
        config,
        [prepare(config, "base"), prepare(config, "q8kv")],
        32768,
        tmp_path,
        progress=said.append,
    )
    assert [c.arm for c in checks] == ["base", "q8kv"]
    for check in checks:
        assert check.fits and check.got_context == 8192
        assert check.limited_by_model and check.model_context == 8192
        assert check.vram_bytes is None  # absent on this host, never 0
        assert check.rss_bytes is not None and check.rss_bytes > 50 << 20
        assert "VRAM not measured (no NVML)" in check.line()
    assert checks[1].cache_types == "q8_0/q8_0"
    assert "fit q8kv: starting at 8192 tokens of context (the model's maximum; 32768 asked)" in said
    assert any(
        line.startswith(
            "fit q8kv at 32768 tokens (KV q8_0/q8_0): the model's context is 8192, shorter than "
            "asked; in memory at 8192: yes"
        )
        for line in said
    )
    assert "n_ctx_slot = 8192" in (tmp_path / "base-fit-32768.log").read_text()
