"""Does an arm fit at a context the user names? The answer of a real start, not an estimate.

`campaign/fit.py` starts the arm's server at that context (llama.cpp allocates the KV cache for
all of it at start, so a start that comes up has room for it) and reads back what it got:
/props' per-slot n_ctx times its slots, the log's `n_ctx_slot = N` line (printed at the default
verbosity), the VRAM of the process tree (NVML) and its RSS. A start that fails (out of device
memory) or comes up with less context than asked is a "no". On a host without NVML the RAM is
reported and VRAM is said not to be measured; a CPU build fits when its RAM does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

_N_CTX_SLOT = re.compile(r"n_slots = (\d+), n_ctx_slot = (\d+)")
MIB = 1 << 20


def parse_n_ctx(log_text: str) -> int | None:
    """Total context of the last start from `load_model: initializing, n_slots = 1,
    n_ctx_slot = 4096, ...` (slots x per-slot context); None without that line."""
    found = _N_CTX_SLOT.findall(log_text)
    if not found:
        return None
    slots, per_slot = found[-1]
    return int(slots) * int(per_slot)


def props_n_ctx(props: dict[str, Any]) -> int | None:
    """Total context from /props: default_generation_settings.n_ctx (per slot) x total_slots."""
    settings = props.get("default_generation_settings")
    per_slot = settings.get("n_ctx") if isinstance(settings, dict) else None
    slots = props.get("total_slots", 1)
    if not isinstance(per_slot, int) or not isinstance(slots, int):
        return None
    return per_slot * max(slots, 1)


@dataclass(frozen=True, slots=True)
class FitCheck:
    """One arm started at the asked context, or at its model's own maximum where that is
    shorter: llama-server caps a slot's context at the model's training context (SmolLM2:
    8192), so asking past it says something about the model, not about memory. The two
    answers are kept apart: `limited_by_model` (the model's context is shorter than asked)
    and `fits` (the start at `measured_context` came up with all of it: memory)."""

    arm: str
    context: int
    got_context: int | None
    """What the server reports: /props, else its log line (None: it did not start)."""
    vram_bytes: int | None
    """VRAM of the server's process tree (NVML); None: not measured (no NVML, a CPU host)."""
    rss_bytes: int | None
    gpu_total_bytes: int | None = None
    cache_types: str = "f16/f16"
    """K/V cache types the arm runs with (a q8_0 cache takes about half of f16's room)."""
    error: str | None = None
    """Why the start failed (its first line), e.g. a CUDA out-of-memory."""
    model_context: int | None = None
    """The target model's training context from its GGUF (None: the file does not say)."""
    vram_source: str = ""
    """How the VRAM was attributed (`host/gpu.attribute_vram`): by process or by the device's
    growth over the start; empty: by process, or not measured."""

    @property
    def limited_by_model(self) -> bool:
        return self.model_context is not None and self.model_context < self.context

    @property
    def measured_context(self) -> int:
        """The context the server was started at: the asked one, or the model's maximum."""
        limit = self.model_context
        return limit if limit is not None and limit < self.context else self.context

    @property
    def fits(self) -> bool:
        """Memory: the start at `measured_context` came up with all of it."""
        return (
            self.error is None
            and self.got_context is not None
            and (self.got_context >= self.measured_context)
        )

    def _figures(self) -> str:
        got = f"got {self.got_context}" if self.got_context is not None else "context unknown"
        if self.vram_bytes is None:
            vram = "VRAM not measured (no NVML)"
        else:
            vram = f"VRAM {self.vram_bytes / MIB:.0f} MiB" + (
                f" of {self.gpu_total_bytes / MIB:.0f}" if self.gpu_total_bytes else ""
            )
            vram += f", {self.vram_source}" if self.vram_source else ""
        rss = f"RAM {self.rss_bytes / MIB:.0f} MiB" if self.rss_bytes is not None else "RAM n/a"
        return f"{got}; {vram}; {rss}"

    def line(self) -> str:
        answer = "yes" if self.fits else "no"
        head = f"fit {self.arm} at {self.context} tokens (KV {self.cache_types}): "
        if self.limited_by_model:
            head += (
                f"the model's context is {self.model_context}, shorter than asked; "
                f"in memory at {self.measured_context}: "
            )
        head += answer
        if self.error is not None:
            return f"{head}: did not start: {self.error}"
        return f"{head} ({self._figures()})"


def fit_section(checks: tuple[FitCheck, ...] | list[FitCheck]) -> str:
    """The report's 'Fit at context' section (empty without checks)."""
    if not checks:
        return ""
    lines = [
        f"## Fit at {checks[0].context} tokens of context",
        "",
        "Each arm's server was started at this context (or at its model's own maximum where",
        "that is shorter: llama-server caps a slot's context there) and asked what it got",
        "(/props, its log), with the VRAM of its processes (NVML) and its RAM: measured, not",
        "estimated.",
        "",
        *(f"- {c.line()}" for c in checks),
        "",
    ]
    return "\n".join(lines)
