"""Task sets: JSON Lines files of chat requests, validated with line numbers.

A malformed line is reported as `file:line: field: problem` before any server starts, so a
typo in a hand-edited task set fails in a second, not after an hour of load.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from watchkeeper.config.inputs import read_text
from watchkeeper.errors import TaskSetError
from watchkeeper.load.records import Task

CATEGORIES = ("prose", "tool_call", "code_gen", "code_edit", "summarize", "multi_turn")
_ROLES = {"system", "user", "assistant", "tool"}
_KEYS = {"id", "category", "messages", "max_tokens", "tools"}


def _fail(path: Path, line: int, field: str, problem: str) -> TaskSetError:
    return TaskSetError(f"{path}:{line}: {field}: {problem}")


def parse_task(raw: Any, *, path: Path, line: int) -> Task:
    if not isinstance(raw, dict):
        raise _fail(path, line, "<line>", "expected a JSON object")
    unknown = set(raw) - _KEYS
    if unknown:
        raise _fail(
            path, line, sorted(unknown)[0], f"unknown field (allowed: {', '.join(sorted(_KEYS))})"
        )
    task_id = raw.get("id")
    if not isinstance(task_id, str) or not task_id:
        raise _fail(path, line, "id", "required non-empty string")
    category = raw.get("category")
    if not isinstance(category, str) or not category:
        raise _fail(path, line, "category", "required non-empty string")
    messages = raw.get("messages")
    if not isinstance(messages, list) or not messages:
        raise _fail(path, line, "messages", "required non-empty list")
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        if not isinstance(message, dict):
            raise _fail(path, line, where, "expected an object with role and content")
        if message.get("role") not in _ROLES:
            raise _fail(path, line, f"{where}.role", f"expected one of {', '.join(sorted(_ROLES))}")
        if not isinstance(message.get("content"), str):
            raise _fail(path, line, f"{where}.content", "expected a string")
    max_tokens = raw.get("max_tokens")
    if (
        not isinstance(max_tokens, int)
        or isinstance(max_tokens, bool)
        or not 1 <= max_tokens <= 32768
    ):
        raise _fail(path, line, "max_tokens", "expected an integer between 1 and 32768")
    tools = raw.get("tools")
    if tools is not None:
        if not isinstance(tools, list) or not tools:
            raise _fail(path, line, "tools", "expected a non-empty list of tool definitions")
        for index, tool in enumerate(tools):
            function = tool.get("function") if isinstance(tool, dict) else None
            if not isinstance(function, dict) or not isinstance(function.get("name"), str):
                raise _fail(
                    path,
                    line,
                    f"tools[{index}]",
                    "expected {type: function, function: {name, ...}}",
                )
    return Task(
        id=task_id,
        category=category,
        messages=tuple(messages),
        max_tokens=max_tokens,
        tools=tuple(tools) if tools else None,
    )


def load_taskset(path: Path) -> list[Task]:
    text = read_text(path, "task set", TaskSetError)
    tasks: list[Task] = []
    seen: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as exc:
            raise _fail(
                path, number, "<line>", f"invalid JSON: {exc.msg} at column {exc.colno}"
            ) from exc
        except RecursionError:
            raise _fail(path, number, "<line>", "invalid JSON: nested too deeply") from None
        except ValueError:  # Python's int digit limit: a number of thousands of digits
            raise _fail(path, number, "<line>", "a number with thousands of digits") from None
        task = parse_task(raw, path=path, line=number)
        if task.id in seen:
            raise _fail(
                path, number, "id", f"duplicate id {task.id!r} (first on line {seen[task.id]})"
            )
        seen[task.id] = number
        tasks.append(task)
    if not tasks:
        raise TaskSetError(f"{path}: task set is empty")
    return tasks


def select(
    tasks: Sequence[Task],
    *,
    limit: int | None = None,
    categories: Sequence[str] | None = None,
    per_category: int | None = None,
) -> list[Task]:
    """A deterministic subset: by category, the first N of each, then an overall limit."""
    chosen = [t for t in tasks if not categories or t.category in categories]
    if categories:
        missing = set(categories) - {t.category for t in tasks}
        if missing:
            raise TaskSetError(f"no tasks in categories: {', '.join(sorted(missing))}")
    if per_category is not None:
        counts: dict[str, int] = {}
        kept = []
        for task in chosen:
            counts[task.category] = counts.get(task.category, 0) + 1
            if counts[task.category] <= per_category:
                kept.append(task)
        chosen = kept
    if limit is not None:
        chosen = chosen[:limit]
    return chosen


def cap_tokens(tasks: Sequence[Task], limit: int) -> list[Task]:
    """Every task's answer cut at `limit` tokens (0: the tasks' own). Both arms of a paired
    campaign get the same tasks, so a cap keeps the comparison like for like and buys rounds."""
    if limit <= 0:
        return list(tasks)
    return [replace(t, max_tokens=min(t.max_tokens, limit)) for t in tasks]


REPEAT_MARK = "~"


def repeat_tasks(tasks: Sequence[Task], n: int) -> list[Task]:
    """`n` requests cycling through `tasks`; the k-th repeat of a task gets the id
    `<id>~<k>`, so each request of a round is its own cell of the paired table (a load of 8
    in flight from 6 tasks) and the repeats of one task are still recognisable."""
    if not tasks:
        return []
    out = []
    for i in range(n):
        task = tasks[i % len(tasks)]
        k = i // len(tasks)
        out.append(task if k == 0 else replace(task, id=f"{task.id}{REPEAT_MARK}{k}"))
    return out
