"""Tiny task sets written to disk for tests that run the real server (one category, short)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path


def write_taskset(directory: Path, tasks: Sequence[tuple[str, str]], max_tokens: int = 12) -> Path:
    """`tasks.jsonl` with one prose task per (id, prompt)."""
    path = directory / "tasks.jsonl"
    lines = [
        json.dumps(
            {
                "id": tid,
                "category": "prose",
                "max_tokens": max_tokens,
                "messages": [{"role": "user", "content": text}],
            }
        )
        for tid, text in tasks
    ]
    path.write_text("\n".join(lines) + "\n")
    return path
