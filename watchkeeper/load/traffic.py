"""Task sets from real traffic: a ShareGPT-style conversation file and a JSONL request trace.

The standard task set stays the default; these let a team measure on what its users send.
Both become ordinary `Task`s (written as a task-set file by `watchkeeper import-tasks`), with
the category kept where the source names one and otherwise inferred from the text, so the
bench's per-category figures still mean something. A trace may carry each request's arrival
time; `load_trace` returns those offsets beside the tasks, and `bench --trace` replays them
(load/arrivals.py `trace_schedule`, scaled by `--rate`).

ShareGPT: a JSON list of `{"id", "conversations": [{"from": "human"|"gpt"|"system",
"value"}]}` (`messages` with role/content is accepted too); every conversation becomes one task
ending at its last human turn, the answer that followed it sizing `max_tokens`.
Trace: one JSON object a line with `prompt` (or `messages`), `max_tokens` (or
`output_tokens`), optional `arrival_s` (or `timestamp`), `category` and `id`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from watchkeeper.config.inputs import parse_json, read_text
from watchkeeper.errors import TaskSetError
from watchkeeper.load.records import Task
from watchkeeper.load.tasks import CATEGORIES

DEFAULT_MAX_TOKENS = 256
MAX_TRACE_SPAN_S = 366 * 86400.0
"""A replay longer than a year is a unit mistake (milliseconds read as seconds), not a trace."""
MAX_TOKENS_CAP = 2048
_ROLE = {
    "human": "user",
    "user": "user",
    "gpt": "assistant",
    "assistant": "assistant",
    "chatgpt": "assistant",
    "bard": "assistant",
    "system": "system",
}
_CODE = re.compile(r"```|\bdef |\bclass |\bfunction\b|\bimport |#include|\breturn\b|;\s*$", re.M)
_EDIT = re.compile(r"\b(fix|refactor|rewrite|modify|change|bug|edit)\b", re.I)
_SUMMARY = re.compile(r"\b(summari[sz]e|summary|tl;?dr|key points)\b", re.I)


def infer_category(messages: Sequence[dict[str, Any]], tools: object = None) -> str:
    """One of the standard categories from the text: tool calls, multi-turn, code edit (code
    plus an edit verb), code generation, summary, else prose."""
    if tools:
        return "tool_call"
    users = [m for m in messages if m.get("role") == "user"]
    if len(users) > 1:
        return "multi_turn"
    text = str(users[-1]["content"]) if users else ""
    if _CODE.search(text):
        return "code_edit" if _EDIT.search(text) else "code_gen"
    if re.search(r"\b(write|implement)\b.*\b(function|program|script|code)\b", text, re.I):
        return "code_gen"
    if _SUMMARY.search(text):
        return "summarize"
    return "prose"


def _tokens_of(text: str) -> int:
    """A rough token count (4 characters a token) for sizing an answer's max_tokens."""
    return max(16, min(MAX_TOKENS_CAP, len(text) // 4 + 1))


def _category(raw: dict[str, Any], messages: Sequence[dict[str, Any]], where: str) -> str:
    given = raw.get("category")
    if given is None:
        return infer_category(messages, raw.get("tools"))
    if not isinstance(given, str) or not given:
        raise TaskSetError(f"{where}: category: expected a non-empty string")
    return given


def _sharegpt_messages(turns: Any, where: str) -> list[dict[str, str]]:
    if not isinstance(turns, list) or not turns:
        raise TaskSetError(f"{where}: conversations: expected a non-empty list")
    out = []
    for i, turn in enumerate(turns):
        if not isinstance(turn, dict):
            raise TaskSetError(f"{where}: conversations[{i}]: expected an object")
        who = turn.get("from", turn.get("role"))
        text = turn.get("value", turn.get("content"))
        role = _ROLE.get(str(who).lower())
        if role is None or not isinstance(text, str):
            raise TaskSetError(
                f"{where}: conversations[{i}]: expected from/value (or role/content)"
            )
        out.append({"role": role, "content": text})
    return out


def import_sharegpt(path: Path, *, default_max_tokens: int = DEFAULT_MAX_TOKENS) -> list[Task]:
    """Every conversation with a human turn as one task (skipped: those without one)."""
    raw = _read_json(path)
    items = raw.get("data") if isinstance(raw, dict) else raw
    if not isinstance(items, list):
        raise TaskSetError(f"{path}: expected a JSON list of conversations")
    tasks: list[Task] = []
    for n, item in enumerate(items):
        where = f"{path}: conversation {n}"
        if not isinstance(item, dict):
            raise TaskSetError(f"{where}: expected an object")
        messages = _sharegpt_messages(item.get("conversations", item.get("messages")), where)
        last_user = max((i for i, m in enumerate(messages) if m["role"] == "user"), default=None)
        if last_user is None:
            continue
        prompt = messages[: last_user + 1]
        answer = messages[last_user + 1] if last_user + 1 < len(messages) else None
        max_tokens = (
            _tokens_of(answer["content"])
            if answer and answer["role"] == "assistant"
            else default_max_tokens
        )
        task_id = str(item.get("id") or f"sharegpt-{n}")
        tasks.append(
            Task(
                f"{task_id}" if task_id not in {t.id for t in tasks} else f"{task_id}-{n}",
                _category(item, prompt, where),
                tuple(prompt),
                max_tokens,
            )
        )
    if not tasks:
        raise TaskSetError(f"{path}: no conversation with a human turn")
    return tasks


def load_trace(path: Path) -> tuple[list[Task], list[float] | None]:
    """The trace's requests as tasks in arrival order, and their arrival offsets in seconds
    from the first (None when some line has no arrival time: nothing to replay)."""
    text = read_text(path, "trace", TaskSetError)
    rows: list[tuple[float | None, int, Task]] = []
    seen: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        where = f"{path}:{number}"
        raw = parse_json(line, where, TaskSetError)
        if not isinstance(raw, dict):
            raise TaskSetError(f"{where}: expected a JSON object")
        task = _trace_task(raw, where, len(rows))
        if task.id in seen:  # a task set's ids are unique: refused here, not by its reader
            raise TaskSetError(
                f"{where}: id {task.id!r} is also the id of line {seen[task.id]}",
                hint="every request of a trace needs its own id (or none: one is given)",
            )
        seen[task.id] = number
        rows.append((_arrival(raw, where), number, task))
    if not rows:
        raise TaskSetError(f"{path}: the trace is empty")
    if all(a is not None for a, _, _ in rows):
        # Out of order is replayed in arrival order (a merged log is still a trace).
        rows.sort(key=lambda r: (r[0], r[1]))
        first = rows[0][0] or 0.0
        offsets = [float(a or 0.0) - first for a, _, _ in rows]
        if offsets[-1] > MAX_TRACE_SPAN_S:
            raise TaskSetError(
                f"{path}: the arrivals span {offsets[-1]:.3g} s, more than a year",
                hint="arrival_s is in seconds (milliseconds divided by 1000)",
            )
        return [t for _, _, t in rows], offsets
    return [t for _, _, t in rows], None


def check_replay(name: str, span_s: float, speed: float) -> None:
    """A trace replayed at `speed` x its own pace must end within a year: refused before a
    server starts (`--rate 1e-9` on a one-minute trace would run for centuries)."""
    if span_s / speed > MAX_TRACE_SPAN_S:
        raise TaskSetError(
            f"{name}: replayed at --rate {speed:g} its {span_s:.3g} s take "
            f"{span_s / speed / 86400:.3g} days, more than a year",
            hint="with --trace, --rate is a speed factor (2: twice as fast)",
        )


def _arrival(raw: dict[str, Any], where: str) -> float | None:
    value = raw.get("arrival_s", raw.get("timestamp"))
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TaskSetError(f"{where}: arrival_s: expected seconds as a number")
    # JSON's NaN and Infinity parse as floats: a NaN sorts anywhere and turned a replay into
    # one burst; a negative time is no offset from a start.
    seconds = float(value) if isinstance(value, float) or abs(value) < 2**63 else math.inf
    if not math.isfinite(seconds) or seconds < 0:
        raise TaskSetError(
            f"{where}: arrival_s: expected a finite number of seconds >= 0, got {seconds!r}"
        )
    return seconds


def _trace_task(raw: dict[str, Any], where: str, index: int) -> Task:
    if "messages" in raw:
        messages = _sharegpt_messages(raw["messages"], where)
    elif isinstance(raw.get("prompt"), str) and raw["prompt"]:
        messages = [{"role": "user", "content": raw["prompt"]}]
    else:
        raise TaskSetError(f"{where}: prompt: required non-empty string (or messages)")
    max_tokens = raw.get("max_tokens", raw.get("output_tokens", DEFAULT_MAX_TOKENS))
    if (
        isinstance(max_tokens, bool)
        or not isinstance(max_tokens, int)
        or not 1 <= max_tokens <= 32768
    ):
        raise TaskSetError(f"{where}: max_tokens: expected an integer between 1 and 32768")
    task_id = str(raw.get("id") or f"trace-{index}")
    return Task(task_id, _category(raw, messages, where), tuple(messages), max_tokens)


def _read_json(path: Path) -> Any:
    return parse_json(read_text(path, "ShareGPT file", TaskSetError), str(path), TaskSetError)


def taskset_lines(tasks: Sequence[Task]) -> str:
    """The tasks as a task-set file (load/tasks.py reads it back)."""
    lines = []
    for t in tasks:
        row: dict[str, Any] = {
            "id": t.id,
            "category": t.category,
            "max_tokens": t.max_tokens,
            "messages": list(t.messages),
        }
        if t.tools:
            row["tools"] = list(t.tools)
        lines.append(json.dumps(row, ensure_ascii=False))
    return "\n".join(lines) + "\n"


def category_counts(tasks: Sequence[Task]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for t in tasks:
        counts[t.category] = counts.get(t.category, 0) + 1
    order = {c: i for i, c in enumerate(CATEGORIES)}
    return dict(sorted(counts.items(), key=lambda kv: (order.get(kv[0], 99), kv[0])))
