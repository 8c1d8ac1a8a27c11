"""Hardware fingerprint of this host, so results are only ever compared like with like.

The fingerprint hashes what changes performance (CPU model, core count, memory size, GPU),
not the hostname: a reinstalled box keeps its history, a swapped GPU starts a new series.
"""

from __future__ import annotations

import hashlib
import platform
import socket
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


def collect() -> HostInfo:
    cpu_model = _cpu_model()
    cpu_count = psutil.cpu_count(logical=True) or 1
    memory = psutil.virtual_memory().total
    gpu_name = gpu.description()
    versions = gpu.versions() if gpu_name else None
    driver, cuda = (versions.driver_version, versions.cuda_version) if versions else (None, None)
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
