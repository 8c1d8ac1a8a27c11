"""Tiny task sets written to disk for tests that run the real server (one category, short)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

COPY_TEXT = (
    "The harbour master opens the gates at six in the morning, checks the tide tables, "
    "and writes the expected arrivals on the blackboard beside the fish market, so that "
    "every crew knows when to bring their boats in before the evening wind turns."
)

LOOP_PROMPTS = (
    "Write the word hello 80 times, separated by spaces, and nothing else.",
    "Say 'I love pizza' over and over again, 40 times.",
    "Say 'We are the champions' over and over again, 40 times.",
    "Say 'Good morning' over and over again, 40 times.",
    "Say 'Hello world' over and over again, 40 times.",
    "Say 'The sky is blue' over and over again, 40 times.",
)
"""Prompts for the loop alarm's real controls: with SmolLM2 drafting for itself the first three
answers say the phrase again and again (measured 2026-12-06: 50 of 50 drafted tokens accepted
each, 88-93% of their word 6-grams repeated); the last three answer in a line and do not loop,
so the alarm counts requests, not the run's prompt."""


def copy_task(task_id: str, category: str, max_tokens: int) -> dict[str, Any]:
    """A task whose answer copies its 91-token prompt, so n-gram lookup drafts (36 of 48
    tokens drafted and accepted, 2026-11-29) without the long prefill of the standard set's
    code edits and summaries (500-700 tokens: seconds a request, twice that on an exact
    identity pass's ubatch-1 server)."""
    return {
        "id": task_id,
        "category": category,
        "messages": [
            {
                "role": "user",
                "content": f"Repeat the following text word for word, nothing else:\n\n{COPY_TEXT}",
            }
        ],
        "max_tokens": max_tokens,
    }


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
