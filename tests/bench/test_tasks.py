"""Task sets: the shipped one is complete, malformed lines are reported by line and field."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from watchkeeper.config import BenchConfig
from watchkeeper.errors import TaskSetError
from watchkeeper.load.tasks import CATEGORIES, cap_tokens, load_taskset, select


def test_standard_taskset_has_at_least_48_tasks_in_all_six_categories() -> None:
    tasks = load_taskset(BenchConfig().resolved_taskset())
    counts = Counter(t.category for t in tasks)
    assert len(tasks) >= 48
    assert set(counts) == set(CATEGORIES)
    assert min(counts.values()) >= 8
    assert all(t.tools for t in tasks if t.category == "tool_call")


def test_code_edit_and_summarize_tasks_carry_long_inputs() -> None:
    tasks = load_taskset(BenchConfig().resolved_taskset())
    for task in tasks:
        if task.category in ("code_edit", "summarize"):
            assert len(task.messages[-1]["content"]) > 1200, task.id


def test_malformed_json_line_is_reported_with_its_line_number(tmp_path: Path) -> None:
    good = json.dumps(
        {
            "id": "a",
            "category": "prose",
            "max_tokens": 8,
            "messages": [{"role": "user", "content": "hi"}],
        }
    )
    path = tmp_path / "t.jsonl"
    path.write_text(good + "\n{not json\n", encoding="utf-8")
    with pytest.raises(TaskSetError, match=rf"{path}:2: <line>: invalid JSON"):
        load_taskset(path)


@pytest.mark.parametrize(
    ("patch", "field"),
    [
        ({"max_tokens": 0}, "max_tokens"),
        ({"messages": []}, "messages"),
        ({"messages": [{"role": "robot", "content": "x"}]}, r"messages\[0\]\.role"),
        ({"tools": [{"type": "function"}]}, r"tools\[0\]"),
        ({"colour": "red"}, "colour"),
    ],
)
def test_invalid_field_is_named(tmp_path: Path, patch: dict[str, object], field: str) -> None:
    task = {
        "id": "a",
        "category": "prose",
        "max_tokens": 8,
        "messages": [{"role": "user", "content": "hi"}],
        **patch,
    }
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(task) + "\n", encoding="utf-8")
    with pytest.raises(TaskSetError, match=rf":1: {field}"):
        load_taskset(path)


def test_duplicate_ids_are_refused(tmp_path: Path) -> None:
    line = json.dumps(
        {
            "id": "a",
            "category": "prose",
            "max_tokens": 8,
            "messages": [{"role": "user", "content": "hi"}],
        }
    )
    path = tmp_path / "t.jsonl"
    path.write_text(f"{line}\n{line}\n", encoding="utf-8")
    with pytest.raises(TaskSetError, match="duplicate id 'a' \\(first on line 1\\)"):
        load_taskset(path)


def test_per_category_selection_keeps_the_first_tasks_of_each_category() -> None:
    tasks = load_taskset(BenchConfig().resolved_taskset())
    chosen = select(tasks, per_category=1)
    assert [t.category for t in chosen] == sorted(
        {t.category for t in chosen}, key=[t.category for t in chosen].index
    )
    assert len(chosen) == len(CATEGORIES)


def test_a_token_cap_cuts_longer_answers_only_and_zero_keeps_every_task_as_it_is() -> None:
    tasks = load_taskset(Path("jobs/tasksets/standard.jsonl"))
    capped = cap_tokens(tasks, 100)
    assert [t.max_tokens for t in capped] == [min(t.max_tokens, 100) for t in tasks]
    assert {t.max_tokens for t in capped} == {96, 100}
    assert cap_tokens(tasks, 0) == list(tasks)
