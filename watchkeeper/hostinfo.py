"""Hardware fingerprint of this host, so results are only ever compared like with like.

The fingerprint hashes what changes performance (CPU model, core count, memory size, GPU),
not the hostname: a reinstalled box keeps its history, a swapped GPU starts a new series.
"""

from __future__ import annotations

import hashlib
import platform
import shutil
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path

import psutil


@dataclass(frozen=True, slots=True)
class HostInfo:
    fingerprint: str
    hostname: str
    cpu_model: str
    cpu_count: int
    memory_bytes: int
    gpu: str | None
    os: str


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


def collect() -> HostInfo:
    cpu_model = _cpu_model()
    cpu_count = psutil.cpu_count(logical=True) or 1
    memory = psutil.virtual_memory().total
    gpu = _gpu()
    blob = f"{cpu_model}|{cpu_count}|{memory // (1 << 30)}GiB|{gpu or '-'}"
    return HostInfo(
        fingerprint=hashlib.sha256(blob.encode()).hexdigest()[:16],
        hostname=socket.gethostname(),
        cpu_model=cpu_model,
        cpu_count=cpu_count,
        memory_bytes=memory,
        gpu=gpu,
        os=f"{platform.system()} {platform.release()}",
    )
