"""GPU resources through optional NVML: absent here, so everything must quietly be None/empty;
with a stand-in pynvml the sampling logic is exercised without a GPU."""

from __future__ import annotations

import os
import sys
import types
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from watchkeeper.host import gpu, info


@pytest.fixture(autouse=True)
def _fresh_probe() -> Iterator[None]:
    gpu.reset()
    yield
    gpu.reset()


def test_without_nvml_every_function_returns_none_or_empty(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails, as without the extra
    assert gpu.devices() == []
    assert gpu.driver() is None
    assert gpu.sample() == []
    assert gpu.process_tree_vram_bytes(os.getpid()) is None
    sampler = gpu.VramSampler(os.getpid(), interval_s=0.01)
    sampler.start()
    sampler.stop()
    assert sampler.peak_bytes is None
    host = info.collect()
    if host.gpu is None:  # this machine: no GPU
        assert host.gpu_driver is None and host.gpu_cuda is None


def test_nvml_without_a_device_counts_as_no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = types.ModuleType("pynvml")

    def init() -> None:
        raise RuntimeError("NVML Shared Library Not Found")

    fake.nvmlInit = init  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    assert gpu.sample() == []
    assert gpu.process_tree_vram_bytes(os.getpid()) is None


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
