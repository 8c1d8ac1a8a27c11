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
    """One arm started at the asked context."""

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

    @property
    def fits(self) -> bool:
        return (
            self.error is None
            and self.got_context is not None
            and (self.got_context >= self.context)
        )

    def line(self) -> str:
        answer = "yes" if self.fits else "no"
        head = f"fit {self.arm} at {self.context} tokens (KV {self.cache_types}): {answer}"
        if self.error is not None:
            return f"{head}: did not start: {self.error}"
        got = f"got {self.got_context}" if self.got_context is not None else "context unknown"
        vram = (
            f"VRAM {self.vram_bytes / MIB:.0f} MiB"
            + (f" of {self.gpu_total_bytes / MIB:.0f}" if self.gpu_total_bytes else "")
            if self.vram_bytes is not None
            else "VRAM not measured (no NVML)"
        )
        rss = f"RAM {self.rss_bytes / MIB:.0f} MiB" if self.rss_bytes is not None else "RAM n/a"
        return f"{head} ({got}; {vram}; {rss})"


def fit_section(checks: tuple[FitCheck, ...] | list[FitCheck]) -> str:
    """The report's 'Fit at context' section (empty without checks)."""
    if not checks:
        return ""
    lines = [
        f"## Fit at {checks[0].context} tokens of context",
        "",
        "Each arm's server was started at this context and asked what it got (/props, its log),",
        "with the VRAM of its processes (NVML) and its RAM: measured, not estimated.",
        "",
        *(f"- {c.line()}" for c in checks),
        "",
    ]
    return "\n".join(lines)
