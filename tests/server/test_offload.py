"""GPU offload as llama-server reports it, and the refusal to measure a partial offload.

The line format is llama.cpp's (src/llama-model.cpp, load_tensors):
    LLAMA_LOG_INFO("%s: offloaded %d/%d layers to GPU\\n", __func__, ...)
printed once per model loaded when the build supports GPU offload (target, then draft).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from watchkeeper.config import Config, ProfileConfig, ServerConfig
from watchkeeper.errors import ServerError
from watchkeeper.server.binary import ServerBinary
from watchkeeper.server.launch import check_offload, parse_devices, prepare, serve
from watchkeeper.server.models import ModelFile
from watchkeeper.server.offload import (
    ListedDevice,
    OffloadEvidence,
    OffloadVerdict,
    draft_loaded,
    gpu_weights_bytes,
    parse_list_devices,
    verify_offload,
)
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


# --- the offload check at this release's default verbosity (server/offload.py) ---------------
#
# cuda_logs/ holds two real starts of llama.cpp 11434 on one H100 (../shared/gpu): the
# product's own server log with `--gpu-layers all` (server_default.log) and the same binary by
# hand with a draft, `-ngl 99 -md ... -ngld 99` (direct.log). Neither prints a layer count.

CUDA_LOGS = Path(__file__).parent / "cuda_logs"
H100 = (ListedDevice("CUDA0", "NVIDIA H100 80GB HBM3", 81559, 80500),)
# That host's nvidia-smi trace (shared/gpu/smi.csv) read 3604 MiB with four SmolLM2 servers up.
ONE_SMOLLM2_SERVER_VRAM = (3604 << 20) // 4


def _real(name: str) -> str:
    return (CUDA_LOGS / name).read_text(encoding="utf-8")


def test_the_real_cuda_logs_print_no_counts_and_no_gpu_warning() -> None:
    for name, draft in (("server_default.log", False), ("direct.log", True)):
        text = _real(name)
        assert parse_offload(text, has_draft=draft) == OffloadReport(None, None, False)
        assert draft_loaded(text) is draft


def test_the_real_cuda_logs_pass_with_full_offload_seen_in_vram(smollm2: ModelFile) -> None:
    weights = gpu_weights_bytes([smollm2.path])
    assert weights is not None and 60 << 20 < weights < smollm2.path.stat().st_size
    evidence = OffloadEvidence(
        parse_offload(_real("server_default.log")), H100, ONE_SMOLLM2_SERVER_VRAM, weights
    )
    verdict = verify_offload(ProfileConfig(model="t"), evidence, cuda=True)
    assert verdict.seen == "full"
    assert (
        verdict.line() == "offload full: server holds 901 MiB of VRAM >= 63 MiB of weights (NVML)"
    )
    both = gpu_weights_bytes([smollm2.path, smollm2.path])
    assert both == 2 * weights
    draft = OffloadEvidence(
        parse_offload(_real("direct.log"), has_draft=True),
        H100,
        ONE_SMOLLM2_SERVER_VRAM,
        both,
        draft_loaded(_real("direct.log")),
    )
    profile = ProfileConfig(model="t", draft_model="d", spec_type="draft-simple")
    assert verify_offload(profile, draft, cuda=True).seen == "full"


def test_without_nvml_the_real_log_passes_but_says_it_did_not_measure() -> None:
    evidence = OffloadEvidence(parse_offload(_real("server_default.log")), H100, None, 63 << 20)
    verdict = verify_offload(ProfileConfig(model="t"), evidence, cuda=True)
    assert verdict.seen == "not measured"
    assert "no NVML" in verdict.detail and "NVIDIA H100 80GB HBM3" in verdict.detail
    hidden = replace(evidence, vram_bytes=0)  # NVML answers, our PIDs are not in its list
    assert "PID namespace" in verify_offload(ProfileConfig(model="t"), hidden, cuda=True).detail


def test_in_a_container_the_devices_growth_over_the_start_verifies_full_offload() -> None:
    """NVML lists no process of the server (a PID namespace): the device's used memory grew by
    901 MiB over its start, which clears the weights, and the verdict says how it was seen."""
    from watchkeeper.host.gpu import BY_DEVICE

    evidence = OffloadEvidence(
        parse_offload(_real("server_default.log")), H100, 901 << 20, 63 << 20,
        vram_source=BY_DEVICE,
    )  # fmt: skip
    verdict = verify_offload(ProfileConfig(model="t"), evidence, cuda=True)
    assert verdict.seen == "full"
    assert verdict.detail == (
        "server holds 901 MiB of VRAM >= 63 MiB of weights (device memory before/after its "
        "start; NVML lists no process of it)"
    )


def test_less_vram_than_the_weights_is_a_partial_offload_naming_both_sizes() -> None:
    """A 14B Q4_K_M target (8.4 GiB on the GPU when fully offloaded) holding 3.2 GiB."""
    evidence = OffloadEvidence(
        parse_offload(_real("server_default.log")), H100, 3277 << 20, 8602 << 20
    )
    with pytest.raises(ServerError, match=r"hold 3277 MiB of VRAM, less than the 8602 MiB"):
        verify_offload(ProfileConfig(model="t"), evidence, cuda=True, log_path=Path("/l"))


def test_a_partial_offload_log_fails_naming_the_counts_even_with_vram_enough() -> None:
    evidence = OffloadEvidence(parse_offload(PARTIAL_LOG), H100, 80 << 30, 1 << 30)
    with pytest.raises(ServerError, match=r"asked for all target layers .* offloaded 20/49"):
        verify_offload(ProfileConfig(model="t"), evidence, cuda=True)
    verdict = verify_offload(
        ProfileConfig(model="t", draft_model="d", spec_type="draft-simple"),
        OffloadEvidence(parse_offload(CUDA_LOG, has_draft=True)),
        cuda=True,
    )
    assert verdict.line() == "offload as asked: target 29/29, draft 25/25 layers (server log)"


# The CUDA backend on a host without a GPU (ggml/src/ggml-cuda/ggml-cuda.cu, ggml_cuda_init, an
# ERROR line) and the arg parser's warning (common/arg.cpp, fprintf): both print at every
# verbosity. The first line's text is cudaGetErrorString's for cudaErrorNoDevice.
CUDA_BUILD_WITHOUT_GPU = """$ /b/llama-server -m /m/target.gguf --gpu-layers all
0.00.012.001 E ggml_cuda_init: failed to initialize CUDA: no CUDA-capable device is detected
warning: no usable GPU found, --gpu-layers option will be ignored
warning: one possible reason is that llama.cpp was compiled without GPU support
"""


def test_a_cuda_build_that_finds_no_gpu_stops_with_a_clear_error() -> None:
    backend_only = "\n".join(CUDA_BUILD_WITHOUT_GPU.splitlines()[:2])
    for text in (CUDA_BUILD_WITHOUT_GPU, backend_only):
        with pytest.raises(ServerError, match="the CUDA build of llama-server found no usable GPU"):
            verify_offload(
                ProfileConfig(model="t"), OffloadEvidence(parse_offload(text)), cuda=True
            )
    with pytest.raises(
        ServerError, match=r"lists no GPU \(llama-server --list-devices: \(none\)\)"
    ):
        verify_offload(
            ProfileConfig(model="t"), OffloadEvidence(OffloadReport(None, None), ()), cuda=True
        )


def test_the_device_list_is_parsed_from_the_real_binary(server_binary: ServerBinary) -> None:
    """The CPU build here lists '(none)': as a CUDA build it would be refused before any start.
    The device line's format is common/arg.cpp's printf (no GPU host in this session)."""
    assert parse_devices(server_binary) == ()
    assert parse_devices(replace(server_binary, variant="cuda")) == ()
    assert parse_list_devices(
        "Available devices:\n  CUDA0: NVIDIA H100 80GB HBM3 (81079 MiB, 80512 MiB free)\n"
    ) == (ListedDevice("CUDA0", "NVIDIA H100 80GB HBM3", 81079, 80512),)
    with pytest.raises(ValueError, match="Available devices"):
        parse_list_devices("error: unknown argument: --list-devices")


def test_a_real_cpu_server_on_this_host_passes_and_asking_it_for_the_gpu_fails(
    real_server: tuple[ServerBinary, ModelFile], tmp_path: Path
) -> None:
    config = Config(
        profiles={
            "cpu": ProfileConfig(model="smollm2-135m-instruct-q4_1", ctx_size=512),
            "gpu": ProfileConfig(
                model="smollm2-135m-instruct-q4_1", ctx_size=512, gpu_layers="all"
            ),
        },
        server=ServerConfig(startup_timeout_s=60),
    )
    with serve(config, prepare(config, "cpu"), log_path=tmp_path / "cpu.log") as running:
        assert running.offload_verdict == OffloadVerdict("none asked", "")
    with (
        pytest.raises(ServerError, match="llama-server found no usable GPU") as info,
        serve(config, prepare(config, "gpu"), log_path=tmp_path / "gpu.log"),
    ):
        pass
    assert "the CUDA build" not in str(info.value)
    assert "no usable GPU found" in (tmp_path / "gpu.log").read_text()
