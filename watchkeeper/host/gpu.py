"""NVIDIA GPU resources: the one place that reads the GPU, through NVML with `nvidia-smi` as
the fallback.

`pynvml` comes from the optional extra `watchkeeper[gpu]` (`nvidia-ml-py`). It is imported
lazily; a host with the driver but without the extra still answers through `nvidia-smi`
(the driver ships it). On a host without either, or without a GPU, every function here returns
None or an empty list and nothing else changes. Callers get plain dataclasses; the text
`nvidia-smi` prints is parsed by pure functions (`parse_smi_*`) so the parsing is tested on a
host without a GPU.
"""

from __future__ import annotations

import importlib
import re
import shutil
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import psutil

from watchkeeper.errors import GpuError

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


def _handles(nvml: Any) -> Iterator[tuple[int, Any]]:
    """(index, handle) of every device NVML can open (one that fails is skipped)."""
    for index in range(int(nvml.nvmlDeviceGetCount())):
        handle = _call(nvml.nvmlDeviceGetHandleByIndex, index)
        if handle is not None:
            yield index, handle


def devices() -> list[GpuDevice]:
    """Every GPU with its memory: NVML, else nvidia-smi; empty without a GPU."""
    nvml = _nvml()
    if nvml is None:
        text = _smi("--query-gpu=index,name,memory.total", "--format=csv,noheader,nounits")
        return parse_smi_devices(text) if text is not None else []
    found: list[GpuDevice] = []
    for index, handle in _handles(nvml):
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
    for _, handle in _handles(nvml):
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
    for index, handle in _handles(nvml):
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


# --- nvidia-smi: the fallback when NVML is not importable ------------------------------------

SMI_TIMEOUT_S = 10


def _smi(*args: str) -> str | None:
    """stdout of `nvidia-smi ARGS`, or None (not installed, failed, timed out: no GPU here)."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        result = subprocess.run(
            [exe, *args], capture_output=True, text=True, timeout=SMI_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return result.stdout if result.returncode == 0 else None


def parse_smi_devices(text: str) -> list[GpuDevice]:
    """`--query-gpu=index,name,memory.total --format=csv,noheader,nounits` lines
    ('0, NVIDIA H100 80GB HBM3, 81559'; memory in MiB) as devices."""
    found: list[GpuDevice] = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.rsplit(",", 1)]
        head = [p.strip() for p in parts[0].split(",", 1)] if parts else []
        if len(parts) != 2 or len(head) != 2:
            continue
        try:
            found.append(GpuDevice(int(head[0]), head[1], int(float(parts[1])) << 20))
        except ValueError:
            continue
    return found


def parse_smi_memory_used(text: str) -> int | None:
    """Bytes used over all GPUs from `--query-gpu=memory.used --format=csv,noheader,nounits`
    (one MiB figure per GPU); None when no line is a number."""
    values: list[int] = []
    for line in text.split():
        try:
            values.append(int(float(line)))
        except ValueError:
            continue
    return sum(values) << 20 if values else None


def parse_smi_versions(text: str) -> GpuDriver | None:
    """Driver and CUDA versions from the header plain `nvidia-smi` prints."""
    driver_match = re.search(r"Driver Version:\s*([\d.]+)", text)
    cuda_match = re.search(r"CUDA Version:\s*([\d.]+)", text)
    if driver_match is None and cuda_match is None:
        return None
    return GpuDriver(
        driver_match.group(1) if driver_match else None,
        cuda_match.group(1) if cuda_match else None,
    )


def smi_description() -> str | None:
    """'NVIDIA H100 80GB HBM3, 81559 MiB' per GPU ('; '-joined), as `nvidia-smi` prints it."""
    text = _smi("--query-gpu=name,memory.total", "--format=csv,noheader")
    if text is None or not text.strip():
        return None
    return "; ".join(text.strip().splitlines())


# --- what callers use: NVML first, nvidia-smi otherwise -------------------------------------


def available() -> bool:
    """True when either NVML or nvidia-smi can be asked (the sampler reads VRAM only then)."""
    return _nvml() is not None or shutil.which("nvidia-smi") is not None


def memory_used_bytes() -> int | None:
    """Used memory summed over every GPU: NVML, else nvidia-smi; None without a GPU."""
    nvml = _nvml()
    if nvml is not None:
        total: int | None = None
        for _, handle in _handles(nvml):
            memory = _call(nvml.nvmlDeviceGetMemoryInfo, handle)
            if memory is not None:
                total = (total or 0) + int(memory.used)
        return total
    text = _smi("--query-gpu=memory.used", "--format=csv,noheader,nounits")
    return parse_smi_memory_used(text) if text is not None else None


def description() -> str | None:
    """One line naming every GPU and its memory, for the host fingerprint; None without one.

    nvidia-smi's text first, NVML's devices second: the order the fingerprint was defined
    with, so a host that has both keeps its fingerprint (and its history)."""
    text = smi_description()
    if text is not None:
        return text
    return (
        "; ".join(f"{d.name}, {d.memory_total_bytes // (1 << 20)} MiB" for d in devices()) or None
    )


def versions() -> GpuDriver | None:
    """(driver, CUDA) versions: NVML, else the header of plain `nvidia-smi`."""
    found = driver()
    if found is not None:
        return found
    text = _smi()
    return parse_smi_versions(text) if text is not None else None


# --- per-arm cost: one reading of the device and of a process tree ---------------------------


@dataclass(frozen=True, slots=True)
class GpuReading:
    """The GPU at one moment, as one arm's cost sampler sees it: device power and utilisation
    (all GPUs: the bench's arms take turns, so a request's window is that arm's), and the VRAM
    of that arm's process tree (None where NVML lists none of its PIDs)."""

    at: datetime
    power_watts: float | None
    utilization_percent: float | None
    tree_vram_bytes: int | None
    device_memory_used_bytes: int | None = None


BY_PROCESS = "NVML, by process"
BY_DEVICE = "device memory before/after its start; NVML lists no process of it"


def attribute_vram(pid: int, before_bytes: int | None) -> tuple[int | None, str]:
    """The VRAM of the process tree rooted at `pid` and how it was attributed: NVML's
    per-process figures, else the device's growth since `before_bytes` (read just before the
    server started), else NVML's answer as it is (0: it lists no process; None: no NVML)
    with no source."""
    by_process = process_tree_vram_bytes(pid)
    if by_process:
        return by_process, BY_PROCESS
    grown = vram_since(before_bytes)
    if grown:
        return grown, BY_DEVICE
    return by_process, ""


def read_for_tree(
    pid: int, at: datetime, *, fallback_vram_bytes: int | None = None
) -> GpuReading | None:
    """One reading for the process tree rooted at `pid`; None without NVML. Where NVML lists
    none of the tree's PIDs, its VRAM is `fallback_vram_bytes` (the device's growth over the
    server's start, `vram_since`), else None."""
    nvml = _nvml()
    if nvml is None:
        return None
    devices = sample()
    powers = [d.power_watts for d in devices if d.power_watts is not None]
    utils = [d.utilization_percent for d in devices if d.utilization_percent is not None]
    used = [d.memory_used_bytes for d in devices if d.memory_used_bytes is not None]
    vram = process_tree_vram_bytes(pid)
    return GpuReading(
        at=at,
        power_watts=sum(powers) if powers else None,
        utilization_percent=sum(utils) / len(utils) if utils else None,
        tree_vram_bytes=vram or fallback_vram_bytes,
        device_memory_used_bytes=sum(used) if used else None,
    )


def nvml_available() -> bool:
    """Whether NVML answers (per-process VRAM, power): the GPU cost is measured only then."""
    return _nvml() is not None


NVML_FIX = (
    "install the NVML binding: pip install 'watchkeeper[gpu]' (nvidia-ml-py; `make venv` "
    "installs it when nvidia-smi lists a GPU; offline: from the bundle, see the README's GPU "
    "section)"
)


def nvml_problem() -> str | None:
    """Why NVML does not answer on a host expected to have a GPU (None when it does): the
    binding is missing (the `gpu` extra was not installed), or it is there but the driver's
    library did not initialise or lists no device. Without NVML the VRAM, power and energy of
    a GPU run are all 'n/a': the GPU path refuses up front instead of measuring without them."""
    if _nvml() is not None:
        return None
    try:
        importlib.import_module("pynvml")
    except ImportError:
        return "NVML's Python binding (nvidia-ml-py, the `gpu` extra) is not installed"
    return "NVML is installed but did not initialise or lists no GPU (is the driver loaded?)"


def require_nvml() -> None:
    """Where a GPU is listed, NVML must answer: refused in one line with the fix (GpuError,
    exit 2) before anything slow runs. A host that lists no GPU (a build box) passes."""
    if not devices():
        return
    problem = nvml_problem()
    if problem is not None:
        raise GpuError(f"a GPU is listed but {problem}", hint=NVML_FIX)


def vram_since(before_bytes: int | None) -> int | None:
    """The device memory used now less `before_bytes` (read just before a server started):
    what that server took, where NVML lists no process to attribute it by (a container's PID
    namespace hides the process from NVML). None without a reading either side or when the
    figure is not positive (another process freed memory meanwhile: no attribution)."""
    if before_bytes is None:
        return None
    now = memory_used_bytes()
    if now is None or now <= before_bytes:
        return None
    return now - before_bytes


def parse_smi_trace(text: str) -> list[GpuReading]:
    """A `nvidia-smi --query-gpu=timestamp,memory.used,utilization.gpu[,power.draw]
    --format=csv -l 1` trace ('2026/11/26 18:09:07.671, 3604 MiB, 73 %, 312.50 W'): the
    device's memory stands in for the tree's (one arm up at a time, or a single-arm run)."""
    out: list[GpuReading] = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        try:
            at = datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").replace(tzinfo=UTC)
        except ValueError:
            continue  # the header, or a line nvidia-smi printed instead of a sample
        values = [_smi_number(p) for p in parts[1:]]
        memory = values[0] if values else None
        memory_bytes = int(memory) << 20 if memory is not None else None
        out.append(
            GpuReading(
                at=at,
                power_watts=values[2] if len(values) > 2 else None,
                utilization_percent=values[1] if len(values) > 1 else None,
                tree_vram_bytes=memory_bytes,
                device_memory_used_bytes=memory_bytes,
            )
        )
    return out


def _smi_number(text: str) -> float | None:
    try:
        return float(text.split(maxsplit=1)[0])
    except (ValueError, IndexError):
        return None  # '[N/A]', '[Not Supported]'
