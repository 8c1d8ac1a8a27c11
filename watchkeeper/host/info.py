"""Hardware fingerprint of this host, so results are only ever compared like with like.

The fingerprint hashes what changes performance (CPU model, core count, memory size, GPU),
not the hostname: a reinstalled box keeps its history, a swapped GPU starts a new series.
"""

from __future__ import annotations

import hashlib
import platform
import re
import shutil
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path

import psutil

from watchkeeper.host import gpu


@dataclass(frozen=True, slots=True)
class HostInfo:
    fingerprint: str
    hostname: str
    cpu_model: str
    cpu_count: int
    memory_bytes: int
    gpu: str | None
    os: str
    gpu_driver: str | None = None
    """NVIDIA driver version (NVML, else nvidia-smi); None without a GPU."""
    gpu_cuda: str | None = None
    """CUDA version the driver supports (e.g. '12.4'); None without a GPU."""


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _gpu() -> str | None:
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        result = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = result.stdout.strip()
    return "; ".join(text.splitlines()) if result.returncode == 0 and text else None


def _gpu_versions() -> tuple[str | None, str | None]:
    """(driver, CUDA) versions: NVML when the optional extra is installed, else nvidia-smi."""
    found = gpu.driver()
    if found is not None:
        return found.driver_version, found.cuda_version
    if shutil.which("nvidia-smi") is None:
        return None, None
    try:
        result = subprocess.run(
            ["nvidia-smi"], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None, None
    driver = re.search(r"Driver Version:\s*([\d.]+)", result.stdout)
    cuda = re.search(r"CUDA Version:\s*([\d.]+)", result.stdout)
    return (driver.group(1) if driver else None, cuda.group(1) if cuda else None)


def collect() -> HostInfo:
    cpu_model = _cpu_model()
    cpu_count = psutil.cpu_count(logical=True) or 1
    memory = psutil.virtual_memory().total
    gpu_name = _gpu()
    if gpu_name is None:
        gpu_name = (
            "; ".join(f"{d.name}, {d.memory_total_bytes // (1 << 20)} MiB" for d in gpu.devices())
            or None
        )
    driver, cuda = _gpu_versions() if gpu_name else (None, None)
    # The driver is not part of the fingerprint: a driver update must not start a new series.
    blob = f"{cpu_model}|{cpu_count}|{memory // (1 << 30)}GiB|{gpu_name or '-'}"
    return HostInfo(
        fingerprint=hashlib.sha256(blob.encode()).hexdigest()[:16],
        hostname=socket.gethostname(),
        cpu_model=cpu_model,
        cpu_count=cpu_count,
        memory_bytes=memory,
        gpu=gpu_name,
        os=f"{platform.system()} {platform.release()}",
        gpu_driver=driver,
        gpu_cuda=cuda,
    )
