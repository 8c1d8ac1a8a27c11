"""`--fit-context`: each arm started at the asked context, and what it got read back.

The log line is the real one (cuda_logs/server_default.log, llama.cpp 11434 on an H100); the
starts are real SmolLM2 servers on this CPU host, where VRAM is not measured (no NVML) and
the answer rests on the context the server reports and its RAM.
"""

from __future__ import annotations

from pathlib import Path

from watchkeeper.analysis.fit import FitCheck, fit_section, parse_n_ctx, props_n_ctx
from watchkeeper.campaign.fit import fit_at_context
from watchkeeper.config import Config, ProfileConfig, ServerConfig
from watchkeeper.server.binary import ServerBinary
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
    checks = fit_at_context(
        config,
        [prepare(config, "base"), prepare(config, "q8kv")],
        8192,
        tmp_path,
        progress=said.append,
    )
    assert [c.arm for c in checks] == ["base", "q8kv"]
    for check in checks:
        assert check.fits and check.got_context == 8192
        assert check.vram_bytes is None  # absent on this host, never 0
        assert check.rss_bytes is not None and check.rss_bytes > 50 << 20
        assert "VRAM not measured (no NVML)" in check.line()
    assert checks[1].cache_types == "q8_0/q8_0"
    assert any(line.startswith("fit q8kv at 8192 tokens (KV q8_0/q8_0): yes") for line in said)
    assert "n_ctx_slot = 8192" in (tmp_path / "base-fit-8192.log").read_text()
