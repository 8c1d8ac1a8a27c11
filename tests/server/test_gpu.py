"""GPU resources through optional NVML, else nvidia-smi: both absent here, so everything must
quietly be None/empty; with a stand-in pynvml, or a stand-in `nvidia-smi` on PATH printing what
the real one prints, each path is exercised without a GPU."""

from __future__ import annotations

import os
import stat
import sys
import types
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from watchkeeper.host import gpu, info
from watchkeeper.soak.records import Item
from watchkeeper.soak.sampler import ResourceSampler


@pytest.fixture(autouse=True)
def _fresh_probe() -> Iterator[None]:
    gpu.reset()
    yield
    gpu.reset()


def test_without_nvml_every_function_returns_none_or_empty(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails, as without the extra
    monkeypatch.setenv("PATH", "/nonexistent")  # and no nvidia-smi: a host without a GPU
    assert gpu.devices() == []
    assert gpu.driver() is None
    assert gpu.sample() == []
    assert gpu.process_tree_vram_bytes(os.getpid()) is None
    assert not gpu.available()
    assert gpu.memory_used_bytes() is None
    assert gpu.description() is None
    assert gpu.versions() is None
    host = info.collect()
    assert host.gpu is None and host.gpu_driver is None and host.gpu_cuda is None


def test_the_soak_sampler_records_no_vram_on_a_host_without_a_gpu(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)
    monkeypatch.setenv("PATH", "/nonexistent")
    emitted: list[Item] = []
    sampler = ResourceSampler(emit=emitted.append, stuck_after_s=60.0)
    try:
        point = sampler.sample(None)
    finally:
        sampler.close()
    assert point.vram_bytes is None and emitted == [point]


# What nvidia-smi 550 prints on an H100 host (two GPUs for the sums), for the queries host/gpu
# makes; the header is the first lines of plain `nvidia-smi`.
SMI_HEADER = """Wed Nov 25 07:50:01 2026
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 550.54.15              Driver Version: 550.54.15      CUDA Version: 12.4     |
|-----------------------------------------+------------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |
"""
SMI_OUTPUTS = {
    "--query-gpu=name,memory.total --format=csv,noheader": (
        "NVIDIA H100 80GB HBM3, 81559 MiB\nNVIDIA H100 80GB HBM3, 81559 MiB\n"
    ),
    "--query-gpu=memory.used --format=csv,noheader,nounits": "5120\n1024\n",
    "--query-gpu=index,name,memory.total --format=csv,noheader,nounits": (
        "0, NVIDIA H100 80GB HBM3, 81559\n1, NVIDIA H100 80GB HBM3, 81559\n"
    ),
    "": SMI_HEADER,
}


def test_nvidia_smi_output_is_parsed() -> None:
    assert gpu.parse_smi_memory_used("5120\n1024\n") == 6144 << 20
    assert gpu.parse_smi_memory_used("[N/A]\n") is None
    assert gpu.parse_smi_versions(SMI_HEADER) == gpu.GpuDriver("550.54.15", "12.4")
    assert gpu.parse_smi_versions("No devices were found") is None
    devices = gpu.parse_smi_devices(
        SMI_OUTPUTS["--query-gpu=index,name,memory.total --format=csv,noheader,nounits"]
    )
    assert devices == [
        gpu.GpuDevice(0, "NVIDIA H100 80GB HBM3", 81559 << 20),
        gpu.GpuDevice(1, "NVIDIA H100 80GB HBM3", 81559 << 20),
    ]
    assert gpu.parse_smi_devices("garbage\n") == []


def _stand_in_smi(directory: Path) -> None:
    """An `nvidia-smi` that answers each query host/gpu makes with the real tool's text."""
    cases = "\n".join(f"  '{args}') printf '%s' '{text}' ;;" for args, text in SMI_OUTPUTS.items())
    script = directory / "nvidia-smi"
    script.write_text(f'#!/bin/sh\ncase "$*" in\n{cases}\n  *) exit 9 ;;\nesac\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)


def test_without_nvml_the_gpu_is_read_through_nvidia_smi(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _stand_in_smi(tmp_path)
    monkeypatch.setitem(sys.modules, "pynvml", None)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    assert gpu.available()
    assert gpu.memory_used_bytes() == 6144 << 20
    assert gpu.description() == "NVIDIA H100 80GB HBM3, 81559 MiB; NVIDIA H100 80GB HBM3, 81559 MiB"
    assert gpu.versions() == gpu.GpuDriver("550.54.15", "12.4")
    assert [d.memory_total_bytes for d in gpu.devices()] == [81559 << 20] * 2
    host = info.collect()
    assert (host.gpu_driver, host.gpu_cuda) == ("550.54.15", "12.4")
    emitted: list[Item] = []
    sampler = ResourceSampler(emit=emitted.append, stuck_after_s=60.0)
    try:
        assert sampler.sample(None).vram_bytes == 6144 << 20
    finally:
        sampler.close()


def test_nvml_without_a_device_counts_as_no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = types.ModuleType("pynvml")

    def init() -> None:
        raise RuntimeError("NVML Shared Library Not Found")

    fake.nvmlInit = init  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    monkeypatch.setenv("PATH", "/nonexistent")
    assert gpu.sample() == []
    assert gpu.process_tree_vram_bytes(os.getpid()) is None
    assert gpu.memory_used_bytes() is None


@dataclass
class _Proc:
    pid: int
    usedGpuMemory: int | None


@dataclass
class _Mem:
    total: int
    used: int


@dataclass
class _Util:
    gpu: int


def _fake_nvml(pids: list[_Proc]) -> types.ModuleType:
    fake = types.ModuleType("pynvml")
    calls = {
        "nvmlInit": lambda: None,
        "nvmlDeviceGetCount": lambda: 1,
        "nvmlDeviceGetHandleByIndex": lambda i: f"dev{i}",
        "nvmlDeviceGetName": lambda h: b"NVIDIA H100 80GB HBM3",
        "nvmlDeviceGetMemoryInfo": lambda h: _Mem(80 << 30, 5 << 30),
        "nvmlDeviceGetComputeRunningProcesses": lambda h: pids,
        "nvmlDeviceGetUtilizationRates": lambda h: _Util(87),
        "nvmlDeviceGetPowerUsage": lambda h: 312_500,
        "nvmlDeviceGetClockInfo": lambda h, kind: 1980 if kind == 1 else 2619,
        "nvmlSystemGetDriverVersion": lambda: "550.54.15",
        "nvmlSystemGetCudaDriverVersion": lambda: 12040,
        "NVML_CLOCK_SM": 1,
        "NVML_CLOCK_MEM": 2,
    }
    for name, value in calls.items():
        setattr(fake, name, value)
    return fake


def test_vram_of_the_process_tree_and_device_samples_from_nvml(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    me = os.getpid()
    procs = [_Proc(me, 3 << 30), _Proc(999_999_999, 7 << 30), _Proc(me, None)]
    monkeypatch.setitem(sys.modules, "pynvml", _fake_nvml(procs))
    assert gpu.process_tree_vram_bytes(me) == 3 << 30
    (sample,) = gpu.sample()
    assert sample.utilization_percent == 87
    assert sample.power_watts == pytest.approx(312.5)
    assert (sample.sm_clock_mhz, sample.memory_clock_mhz) == (1980, 2619)
    assert sample.memory_used_bytes == 5 << 30
    assert gpu.devices() == [gpu.GpuDevice(0, "NVIDIA H100 80GB HBM3", 80 << 30)]
    assert gpu.driver() == gpu.GpuDriver("550.54.15", "12.4")
    assert gpu.memory_used_bytes() == 5 << 30
    assert gpu.versions() == gpu.GpuDriver("550.54.15", "12.4")
