"""Hand the memory a finished job freed back to the operating system.

A night's jobs peak far above the daemon's resting level (the digest reads a night's samples,
the nightly holds two arms' results), and glibc keeps the pages of freed heap chunks resident
unless they sit at the very top of the heap: the daemon's RSS at rest then tracks the highest
peak it has ever had, not what it holds, and a months-long daemon looks like a leak to anyone
watching its RSS. `malloc_trim(0)` walks every arena and returns the whole free pages
(`madvise(MADV_DONTNEED)`), so after each job the resting RSS is what the daemon actually keeps.

Only glibc has `malloc_trim`; elsewhere (musl, macOS) this does nothing and says so.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import platform
from dataclasses import dataclass
from functools import cache
from typing import Any

import psutil


@dataclass(frozen=True, slots=True)
class Released:
    rss_before: int
    rss_after: int
    trimmed: bool
    """False where the C library has no malloc_trim (the figures are then only gc's)."""

    @property
    def released(self) -> int:
        return self.rss_before - self.rss_after


@cache
def _malloc_trim() -> Any | None:
    if platform.libc_ver()[0] != "glibc":
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None
    trim = getattr(libc, "malloc_trim", None)
    if trim is not None:
        trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


def release_free_memory() -> Released:
    """A full collection (cycles the job left), then malloc_trim. Safe with other threads
    running: glibc locks each arena while it trims it."""
    process = psutil.Process()
    before = process.memory_info().rss
    gc.collect()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
    return Released(before, process.memory_info().rss, trim is not None)
