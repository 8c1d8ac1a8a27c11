"""GPU offload as llama-server reports it, and the refusal to measure a partial offload.

The line format is llama.cpp's (src/llama-model.cpp, load_tensors):
    LLAMA_LOG_INFO("%s: offloaded %d/%d layers to GPU\\n", __func__, ...)
printed once per model loaded when the build supports GPU offload (target, then draft).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from watchkeeper.config import ProfileConfig
from watchkeeper.errors import ServerError
from watchkeeper.server.launch import check_offload
from watchkeeper.server.process import Offload, OffloadReport, _library_env, parse_offload

CUDA_LOG = """$ /b/llama-server -m /m/target.gguf --gpu-layers all -md /m/draft.gguf
load_tensors: loading model tensors, this can take a while... (mmap = true)
load_tensors: offloading output layer to GPU
load_tensors: offloading 28 repeating layers to GPU
load_tensors: offloaded 29/29 layers to GPU
load_tensors:        CUDA0 model buffer size =   934.70 MiB
load_tensors:   CPU_Mapped model buffer size =   125.19 MiB
srv    load_model: loading draft model '/m/draft.gguf'
load_tensors: offloading output layer to GPU
load_tensors: offloading 23 repeating layers to GPU
load_tensors: offloaded 25/25 layers to GPU
"""

PARTIAL_LOG = """$ /b/llama-server -m /m/target.gguf --gpu-layers all
load_tensors: offloading output layer to GPU
load_tensors: offloading 19 repeating layers to GPU
load_tensors: offloaded 20/49 layers to GPU
"""

CPU_LOG = """$ /b/llama-server -m /m/target.gguf
load_tensors: loading model tensors, this can take a while... (mmap = true)
load_tensors:   CPU_Mapped model buffer size =   100.00 MiB
"""

CPU_BUILD_ASKED_FOR_GPU = """$ /b/llama-server -m /m/target.gguf --gpu-layers all
warning: no usable GPU found, --gpu-layers option will be ignored
warning: one possible reason is that llama.cpp was compiled without GPU support
"""


def test_target_and_draft_offload_are_read_from_the_log() -> None:
    report = parse_offload(CUDA_LOG, has_draft=True)
    assert report.target == Offload(29, 29)
    assert report.draft == Offload(25, 25)
    assert report.target.full and report.draft.full


def test_only_the_last_start_in_an_appended_log_counts() -> None:
    report = parse_offload(CUDA_LOG + PARTIAL_LOG)
    assert report.target == Offload(20, 49)
    assert not report.target.full
    assert report.draft is None


def test_a_cpu_run_reports_nothing_or_zero_layers() -> None:
    assert parse_offload(CPU_LOG) == OffloadReport(None, None)
    zero = parse_offload("$ x\nload_tensors: offloaded 0/31 layers to GPU\n")
    assert zero.target == Offload(0, 31)
    assert parse_offload(CPU_BUILD_ASKED_FOR_GPU).no_gpu_warning


def test_full_offload_asked_and_got_passes() -> None:
    profile = ProfileConfig(model="t", draft_model="d", spec_type="draft-simple")
    check_offload(profile, parse_offload(CUDA_LOG, has_draft=True), cuda=True)


def test_full_offload_asked_and_partial_got_is_a_clear_error() -> None:
    profile = ProfileConfig(model="t", gpu_layers="all")
    with pytest.raises(ServerError, match=r"asked for all target layers .* offloaded 20/49"):
        check_offload(profile, parse_offload(PARTIAL_LOG), cuda=False, log_path=Path("/l"))


def test_cpu_build_default_asks_for_nothing_and_explicit_all_fails() -> None:
    check_offload(ProfileConfig(model="t"), parse_offload(CPU_LOG), cuda=False)
    with pytest.raises(ServerError, match="found no usable GPU"):
        check_offload(
            ProfileConfig(model="t", gpu_layers="all"),
            parse_offload(CPU_BUILD_ASKED_FOR_GPU),
            cuda=False,
        )


def test_an_explicit_layer_count_is_met_when_that_many_are_offloaded() -> None:
    check_offload(ProfileConfig(model="t", gpu_layers=20), parse_offload(PARTIAL_LOG), cuda=True)
    with pytest.raises(ServerError, match="asked for 30 target layers"):
        check_offload(
            ProfileConfig(model="t", gpu_layers=30), parse_offload(PARTIAL_LOG), cuda=True
        )


def test_a_started_server_keeps_glibc_defaults_and_loads_its_own_libraries(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The daemon's unit caps its own malloc arenas; the server it measures must not inherit
    that, or it would run unlike the production server it stands for."""
    monkeypatch.setenv("MALLOC_ARENA_MAX", "2")
    monkeypatch.setenv("LD_LIBRARY_PATH", "/opt/elsewhere")
    env = _library_env(str(tmp_path / "bin" / "llama-server"))
    assert "MALLOC_ARENA_MAX" not in env
    assert env["LD_LIBRARY_PATH"] == f"{(tmp_path / 'bin').resolve()}:/opt/elsewhere"
