"""The soak tests' task set and fast soak settings (seconds, not minutes)."""

from __future__ import annotations

from pathlib import Path

import psutil

from support import taskfiles
from watchkeeper.config import SoakConfig

TASKS = [
    ("count", "Count from one to ten in words."),
    ("colors", "Name three colors."),
    ("capital", "What is the capital of France?"),
    ("animal", "Name an animal that lives in the sea."),
]


def write_taskset(tmp_path: Path, max_tokens: int = 12) -> Path:
    return taskfiles.write_taskset(tmp_path, TASKS, max_tokens)


def soak_settings(**overrides: object) -> SoakConfig:
    values: dict[str, object] = {
        "slice": "5s",
        "sample_interval_s": 1.0,
        "probe_interval_s": 4.0,
        "flush_interval_s": 1.0,
        "ramp_s": 0.5,
        "restart_backoff_s": 0.2,
        "restart_backoff_cap_s": 1.0,
        "request_timeout_s": 60.0,
        "rss_warmup_s": 0.0,
        "leak_min_span_s": 3600.0,
    }
    values.update(overrides)
    return SoakConfig.model_validate(values)


def live_llama_servers() -> list[psutil.Process]:
    """The llama-server processes this test process started and that still run (a zombie left
    by an earlier test's stopped server is not one)."""
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            if "llama-server" in child.name() and child.status() != psutil.STATUS_ZOMBIE:
                found.append(child)
        except psutil.NoSuchProcess:
            continue
    return found
