"""A host that looks like a GPU host without one: an `nvidia-smi` on PATH that lists an H100
the way the real tool does (`-L`, the CSV queries host/gpu makes), and a stand-in `pynvml`
module whose device memory can be made to grow (a server starting) and whose process list can
be empty (NVML inside a container whose PID namespace hides the server)."""

from __future__ import annotations

import stat
import types
from dataclasses import dataclass, field
from pathlib import Path

H100 = "NVIDIA H100 80GB HBM3"
SMI_OUTPUTS = {
    "-L": f"GPU 0: {H100} (UUID: GPU-4a1c2b7e-0000-0000-0000-000000000000)\n",
    "--query-gpu=name,memory.total --format=csv,noheader": f"{H100}, 81559 MiB\n",
    "--query-gpu=memory.used --format=csv,noheader,nounits": "512\n",
    "--query-gpu=index,name,memory.total --format=csv,noheader,nounits": f"0, {H100}, 81559\n",
}


def stand_in_smi(directory: Path) -> Path:
    """Write `directory/nvidia-smi`, answering each query with the real tool's text."""
    cases = "\n".join(f"  '{args}') printf '%s' '{text}' ;;" for args, text in SMI_OUTPUTS.items())
    script = directory / "nvidia-smi"
    script.write_text(f'#!/bin/sh\ncase "$*" in\n{cases}\n  *) exit 9 ;;\nesac\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


@dataclass
class Proc:
    pid: int
    usedGpuMemory: int | None  # NVML's own field name


@dataclass
class Mem:
    total: int
    used: int


@dataclass
class Util:
    gpu: int


@dataclass
class FakeDevice:
    """One GPU: `used` is what NVML reports now; `procs` what it lists as compute processes."""

    used: int = 512 << 20
    total: int = 80 << 30
    procs: list[Proc] = field(default_factory=list)


def fake_nvml(device: FakeDevice) -> types.ModuleType:
    """A `pynvml` reading `device` live (a test changes `device.used` to start a server)."""
    fake = types.ModuleType("pynvml")
    calls = {
        "nvmlInit": lambda: None,
        "nvmlDeviceGetCount": lambda: 1,
        "nvmlDeviceGetHandleByIndex": lambda i: f"dev{i}",
        "nvmlDeviceGetName": lambda h: H100.encode(),
        "nvmlDeviceGetMemoryInfo": lambda h: Mem(device.total, device.used),
        "nvmlDeviceGetComputeRunningProcesses": lambda h: list(device.procs),
        "nvmlDeviceGetUtilizationRates": lambda h: Util(87),
        "nvmlDeviceGetPowerUsage": lambda h: 312_500,
        "nvmlDeviceGetClockInfo": lambda h, kind: 1980,
        "nvmlSystemGetDriverVersion": lambda: "580.159.04",
        "nvmlSystemGetCudaDriverVersion": lambda: 13000,
    }
    for name, value in calls.items():
        setattr(fake, name, value)
    return fake
