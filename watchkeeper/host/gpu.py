"""NVIDIA GPU resources through NVML, when there is one.

`pynvml` comes from the optional extra `watchkeeper[gpu]` (`nvidia-ml-py`). It is imported
lazily: on a host without the library, without the driver or without a GPU, every function
here returns None or an empty list and nothing else changes. NVML is the one external system
of this module; callers get plain dataclasses.
"""

from __future__ import annotations

import contextlib
import importlib
import threading
from dataclasses import dataclass
from typing import Any

import psutil

_lock = threading.Lock()
_state: dict[str, Any] = {}


@dataclass(frozen=True, slots=True)
class GpuDevice:
    index: int
    name: str
    memory_total_bytes: int


@dataclass(frozen=True, slots=True)
class GpuDriver:
    driver_version: str | None
    cuda_version: str | None
    """The CUDA version the driver supports (e.g. '12.4'), not the toolkit's."""


@dataclass(frozen=True, slots=True)
class GpuSample:
    """One device at one moment."""

    index: int
    utilization_percent: int | None
    memory_used_bytes: int | None
    power_watts: float | None
    sm_clock_mhz: int | None
    memory_clock_mhz: int | None


def _nvml() -> Any | None:
    """The initialised pynvml module, or None (no library, no driver, no GPU)."""
    with _lock:
        if "module" in _state:
            return _state["module"]
        module: Any | None = None
        try:
            candidate = importlib.import_module("pynvml")
            candidate.nvmlInit()
            if int(candidate.nvmlDeviceGetCount()) > 0:
                module = candidate
        except Exception:  # ImportError, NVMLError_*: all mean "no GPU here"
            module = None
        _state["module"] = module
        return module


def reset() -> None:
    """Forget the NVML probe (tests; a driver installed while running)."""
    with _lock:
        _state.clear()


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _call(fn: Any, *args: object) -> Any | None:
    try:
        return fn(*args)
    except Exception:  # NVMLError_NotSupported on some boards (e.g. power)
        return None


def devices() -> list[GpuDevice]:
    nvml = _nvml()
    if nvml is None:
        return []
    found: list[GpuDevice] = []
    for index in range(int(nvml.nvmlDeviceGetCount())):
        handle = _call(nvml.nvmlDeviceGetHandleByIndex, index)
        if handle is None:
            continue
        name = _call(nvml.nvmlDeviceGetName, handle)
        memory = _call(nvml.nvmlDeviceGetMemoryInfo, handle)
        found.append(
            GpuDevice(
                index,
                _text(name) if name is not None else "unknown GPU",
                int(memory.total) if memory is not None else 0,
            )
        )
    return found


def driver() -> GpuDriver | None:
    nvml = _nvml()
    if nvml is None:
        return None
    version = _call(nvml.nvmlSystemGetDriverVersion)
    cuda = _call(nvml.nvmlSystemGetCudaDriverVersion)
    cuda_text = f"{int(cuda) // 1000}.{int(cuda) % 1000 // 10}" if cuda else None
    return GpuDriver(_text(version) if version is not None else None, cuda_text)


def _tree_pids(pid: int) -> set[int]:
    try:
        root = psutil.Process(pid)
        return {pid, *(child.pid for child in root.children(recursive=True))}
    except psutil.Error:
        return {pid}


def process_tree_vram_bytes(pid: int) -> int | None:
    """VRAM used by a process and its descendants over all GPUs; None without NVML (0 when
    NVML answers but the process holds no GPU memory, e.g. a CPU build)."""
    nvml = _nvml()
    if nvml is None:
        return None
    pids = _tree_pids(pid)
    total = 0
    for index in range(int(nvml.nvmlDeviceGetCount())):
        handle = _call(nvml.nvmlDeviceGetHandleByIndex, index)
        if handle is None:
            continue
        for proc in _call(nvml.nvmlDeviceGetComputeRunningProcesses, handle) or []:
            used = getattr(proc, "usedGpuMemory", None)
            if getattr(proc, "pid", None) in pids and used is not None:
                total += int(used)
    return total


def sample() -> list[GpuSample]:
    """Utilisation, memory, power and clocks of every GPU (empty without NVML)."""
    nvml = _nvml()
    if nvml is None:
        return []
    out: list[GpuSample] = []
    for index in range(int(nvml.nvmlDeviceGetCount())):
        handle = _call(nvml.nvmlDeviceGetHandleByIndex, index)
        if handle is None:
            continue
        util = _call(nvml.nvmlDeviceGetUtilizationRates, handle)
        memory = _call(nvml.nvmlDeviceGetMemoryInfo, handle)
        power_mw = _call(nvml.nvmlDeviceGetPowerUsage, handle)
        sm_clock = _call(nvml.nvmlDeviceGetClockInfo, handle, getattr(nvml, "NVML_CLOCK_SM", 1))
        mem_clock = _call(nvml.nvmlDeviceGetClockInfo, handle, getattr(nvml, "NVML_CLOCK_MEM", 2))
        out.append(
            GpuSample(
                index=index,
                utilization_percent=int(util.gpu) if util is not None else None,
                memory_used_bytes=int(memory.used) if memory is not None else None,
                power_watts=float(power_mw) / 1000.0 if power_mw is not None else None,
                sm_clock_mhz=int(sm_clock) if sm_clock is not None else None,
                memory_clock_mhz=int(mem_clock) if mem_clock is not None else None,
            )
        )
    return out


class VramSampler:
    """Background peak of a process tree's VRAM (None throughout on a host without NVML)."""

    def __init__(self, pid: int, interval_s: float = 1.0) -> None:
        self._pid = pid
        self._interval = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="vram-sampler", daemon=True)
        self.peak_bytes: int | None = None
        self.last_bytes: int | None = None

    def sample(self) -> int | None:
        self.last_bytes = process_tree_vram_bytes(self._pid)
        if self.last_bytes is not None:
            self.peak_bytes = max(self.peak_bytes or 0, self.last_bytes)
        return self.last_bytes

    def _loop(self) -> None:
        while not self._stop.is_set():
            if self.sample() is None:
                return  # no NVML: nothing to watch
            self._stop.wait(self._interval)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        with contextlib.suppress(RuntimeError):
            self._thread.join(timeout=5)
