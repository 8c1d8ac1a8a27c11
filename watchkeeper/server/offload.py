"""Did the server get the GPU offload its profile asked for? Decided from what survives this
llama-server's default verbosity, and from what NVML measures.

What was looked at (llama.cpp 11434, the release `setup` builds; real logs of it on an H100 are
the fixtures of tests/server/test_offload.py):

- libllama's `load_tensors: offloaded N/M layers to GPU` is an INFO message of libllama, which
  common/log.cpp maps to the TRACE level (4); the server's default threshold is 3, so a default
  start prints none of it (nine terse `srv`/`cmn` lines instead). `-lv 4` brings it back, but
  also ~70 per-request trace lines (each request's sampler chain, prompt cache and HTTP
  lines): the measured server would no longer be the one the user runs. Not used; when a build
  or a user's `extra_args` does print the lines, their exact counts are read first.
- `/props` and `/slots` name the model, context and slots but no device or layer count.
- `--list-devices` prints the devices the build can offload to ("Available devices:" then
  "  CUDA0: NVIDIA H100 80GB HBM3 (81079 MiB, 80512 MiB free)", or "  (none)"): a CUDA build
  that finds no GPU is refused before any server starts (`flags.list_devices`).
- Lines that always print (fprintf, or ERROR level): "warning: no usable GPU found,
  --gpu-layers option will be ignored" (arg parsing), "ggml_cuda_init: failed to initialize
  CUDA: ..." (the CUDA backend), and "loading draft model '...'" (the draft was loaded).
- NVML: the VRAM the server's process tree holds, against the bytes full offload must put on
  the GPU, read from each GGUF's tensor table (`server/gguf.py`: everything but the input
  embedding, which llama.cpp never offloads). Holding less than that is proof of a partial
  offload; holding more is consistent with full offload (for a tiny model the CUDA context
  alone exceeds its weights, so it proves little there; for the 14B targets users run it does).

The choice, in order: layer counts when printed (exact); a no-GPU line or an empty device
list stops the run; then NVML's VRAM against the weights; where NVML cannot attribute VRAM to
the process (no NVML, or a container whose PID namespace hides the process from it), the
start is accepted on `--gpu-layers all` alone (llama.cpp then offloads every layer or fails to
load: `--fit` never lowers a layer count the user set) and the verdict says "not measured".
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from watchkeeper.config import ProfileConfig
from watchkeeper.errors import ServerError
from watchkeeper.server.flags import effective_gpu_layers
from watchkeeper.server.gguf import GgufError, read_weights
from watchkeeper.server.process import Offload, OffloadReport

MIB = 1 << 20
_DEVICE = re.compile(r"^\s+(\S+): (.*) \((\d+) MiB, (\d+) MiB free\)\s*$")
_DRAFT_LOADED = "loading draft model"


@dataclass(frozen=True, slots=True)
class ListedDevice:
    """One line of `llama-server --list-devices`."""

    name: str
    description: str
    total_mib: int
    free_mib: int


def parse_list_devices(text: str) -> tuple[ListedDevice, ...]:
    """The devices `--list-devices` printed (common/arg.cpp, common_print_available_devices);
    empty for '  (none)'. Raises ValueError when the text is not that listing at all."""
    if "Available devices:" not in text:
        raise ValueError("no 'Available devices:' line")
    found: list[ListedDevice] = []
    for line in text.split("Available devices:", 1)[1].splitlines():
        match = _DEVICE.match(line)
        if match is not None:
            name, description, total, free = match.groups()
            found.append(ListedDevice(name, description, int(total), int(free)))
    return tuple(found)


@dataclass(frozen=True, slots=True)
class OffloadEvidence:
    """Everything known about one start's offload."""

    log: OffloadReport
    devices: tuple[ListedDevice, ...] | None = None
    """`--list-devices` of the binary (None: not asked, e.g. a CPU build)."""
    vram_bytes: int | None = None
    """VRAM of the server's process tree (NVML); None where NVML cannot attribute any."""
    gpu_weights_bytes: int | None = None
    """Bytes full offload puts on the GPU, target and draft together (GGUF tensor tables)."""
    draft_loaded: bool = False
    """The log's 'loading draft model' line (printed at the default verbosity)."""
    vram_source: str = "NVML"
    """How `vram_bytes` was attributed (`host/gpu.attribute_vram`): by process, or by the
    device's growth over the start where NVML lists no process of the server."""


@dataclass(frozen=True, slots=True)
class OffloadVerdict:
    """What the check concluded, in one line for the progress stream and the report."""

    seen: str
    """'full' (measured), 'as asked' (layer counts met), 'none asked', 'not measured'."""
    detail: str

    def line(self) -> str:
        return f"offload {self.seen}: {self.detail}" if self.detail else f"offload {self.seen}"


def gpu_weights_bytes(paths: Sequence[Path]) -> int | None:
    """Lower bound of the VRAM full offload of these models takes; None if one is unreadable."""
    total = 0
    for path in paths:
        try:
            total += read_weights(path).gpu_bytes
        except (OSError, GgufError):
            return None
    return total


def draft_loaded(log_text: str) -> bool:
    """Whether the last start in a server log loaded a draft model."""
    lines = log_text.splitlines()
    starts = [i for i, ln in enumerate(lines) if ln.startswith("$ ")]
    run = lines[starts[-1] :] if starts else lines
    return any(_DRAFT_LOADED in ln for ln in run)


def _count(offload: Offload | None) -> str:
    return f"{offload.layers}/{offload.total}" if offload is not None else "?"


def _mib(value: int) -> str:
    return f"{value / MIB:.0f} MiB"


def verify_offload(
    profile: ProfileConfig,
    evidence: OffloadEvidence,
    *,
    cuda: bool,
    log_path: Path | None = None,
) -> OffloadVerdict:
    """Raise ServerError when the offload asked for is provably not the one obtained (a run on
    a CPU/GPU split nobody asked for would be measured as the profile's); else say how it
    was seen. A CPU build asked for no layers passes with 'none asked'."""
    target, draft = effective_gpu_layers(profile, cuda=cuda)
    asked = [(r, w) for r, w in (("target", target), ("draft", draft)) if w not in (None, 0)]
    if not asked:
        return OffloadVerdict("none asked", "")
    where = f" (log: {log_path})" if log_path else ""
    first_role, first_wanted = asked[0]
    build = "the CUDA build of llama-server" if cuda else "llama-server"
    if evidence.log.no_gpu_warning:
        raise ServerError(
            f"profile asked for {first_wanted} {first_role} layers on the GPU but {build} "
            f"found no usable GPU{where}",
            hint="use a CUDA build (server.cuda = true) on a GPU host, or unset gpu_layers",
        )
    if evidence.devices is not None and not evidence.devices:
        raise ServerError(
            f"profile asked for {first_wanted} {first_role} layers on the GPU but {build} "
            "lists no GPU (llama-server --list-devices: (none))",
            hint="is the NVIDIA driver loaded (nvidia-smi)? is CUDA_VISIBLE_DEVICES empty?",
        )
    counted = {"target": evidence.log.target, "draft": evidence.log.draft}
    if all(counted[role] is not None for role, _ in asked):
        for role, wanted in asked:
            got = counted[role]
            assert got is not None
            expected = got.total if wanted == "all" else min(int(wanted), got.total)
            if got.layers < expected:
                raise ServerError(
                    f"profile asked for {wanted} {role} layers on the GPU but llama-server "
                    f"offloaded {got.layers}/{got.total}{where}",
                    hint="not enough free VRAM? lower gpu_layers, ctx_size or the KV cache type",
                )
        counts = ", ".join(f"{r} {_count(counted[r])}" for r, _ in asked)
        return OffloadVerdict("as asked", f"{counts} layers (server log)")
    all_asked = all(w == "all" for _, w in asked)
    vram, weights = evidence.vram_bytes, evidence.gpu_weights_bytes
    if all_asked and vram and weights:
        if vram < weights:
            raise ServerError(
                f"profile asked for all {' and '.join(r for r, _ in asked)} layers on the GPU "
                f"but llama-server's processes hold {_mib(vram)} of VRAM, less than the "
                f"{_mib(weights)} of weights full offload puts there{where}",
                hint="not enough free VRAM? lower gpu_layers, ctx_size or the KV cache type",
            )
        return OffloadVerdict(
            "full",
            f"server holds {_mib(vram)} of VRAM >= {_mib(weights)} of weights "
            f"({evidence.vram_source or 'NVML'})",
        )
    device = evidence.devices[0].description if evidence.devices else "a GPU"
    why = (
        "no NVML"
        if vram is None
        else "NVML attributes no VRAM to its processes (a container's PID namespace?)"
    )
    return OffloadVerdict(
        "not measured",
        f"{why}; the build lists {device} and printed no no-GPU warning",
    )
