"""Task sets from real traffic: ShareGPT conversations and JSONL request traces."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from watchkeeper.cli.app import main
from watchkeeper.errors import TaskSetError
from watchkeeper.load.records import Task
from watchkeeper.load.tasks import load_taskset, repeat_tasks
from watchkeeper.load.traffic import (
    category_counts,
    import_sharegpt,
    infer_category,
    load_trace,
    taskset_lines,
)

SHAREGPT = [
    {
        "id": "c1",
        "conversations": [
            {"from": "human", "value": "Write a Python function that reverses a list."},
            {"from": "gpt", "value": "def rev(xs):\n    return xs[::-1]\n" * 10},
        ],
    },
    {
        "id": "c2",
        "conversations": [
            {"from": "system", "value": "Be brief."},
            {"from": "human", "value": "Tell me about tides."},
            {"from": "gpt", "value": "The moon pulls."},
            {"from": "human", "value": "And the sun?"},
            {"from": "gpt", "value": "It pulls too."},
        ],
    },
    {"id": "c3", "category": "summarize", "conversations": [{"from": "human", "value": "hi"}]},
    {"id": "c4", "conversations": [{"from": "gpt", "value": "no question here"}]},
]


def test_sharegpt_conversations_become_tasks_with_categories(tmp_path: Path) -> None:
    path = tmp_path / "sharegpt.json"
    path.write_text(json.dumps(SHAREGPT))
    tasks = import_sharegpt(path)
    assert [t.id for t in tasks] == ["c1", "c2", "c3"]  # c4 has no human turn
    assert [t.category for t in tasks] == ["code_gen", "multi_turn", "summarize"]
    assert tasks[0].max_tokens == len(SHAREGPT[0]["conversations"][1]["value"]) // 4 + 1  # type: ignore[index]
    # the multi-turn task ends at the last human turn, earlier answers kept as assistant turns
    assert [m["role"] for m in tasks[1].messages] == ["system", "user", "assistant", "user"]
    assert tasks[2].max_tokens == 256  # no answer to size it: the default
    out = tmp_path / "tasks.jsonl"
    out.write_text(taskset_lines(tasks))
    assert load_taskset(out) == tasks
    assert category_counts(tasks) == {"code_gen": 1, "summarize": 1, "multi_turn": 1}


def test_a_trace_keeps_its_arrivals_in_order(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    lines = [
        {"prompt": "Summarize: the cat sat.", "max_tokens": 20, "arrival_s": 105.5},
        {"prompt": "Fix this bug: ```x = 1 +```", "output_tokens": 40, "arrival_s": 100.0},
        {"id": "r3", "messages": [{"role": "user", "content": "hello"}], "arrival_s": 101.0},
    ]
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    tasks, offsets = load_trace(path)
    assert offsets == [0.0, 1.0, 5.5]
    assert [t.category for t in tasks] == ["code_edit", "prose", "summarize"]
    assert [t.max_tokens for t in tasks] == [40, 256, 20]
    assert tasks[1].id == "r3"


def test_a_trace_without_every_arrival_has_nothing_to_replay(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    path.write_text('{"prompt": "a", "arrival_s": 1}\n{"prompt": "b"}\n')
    tasks, offsets = load_trace(path)
    assert len(tasks) == 2 and offsets is None


@pytest.mark.parametrize(
    ("line", "field"),
    [
        ('{"max_tokens": 3}', "prompt"),
        ('{"prompt": "a", "max_tokens": 0}', "max_tokens"),
        ('{"prompt": "a", "arrival_s": "soon"}', "arrival_s"),
        ("[1]", "JSON object"),
    ],
)
def test_a_bad_trace_line_names_its_line_and_field(tmp_path: Path, line: str, field: str) -> None:
    path = tmp_path / "trace.jsonl"
    path.write_text('{"prompt": "fine"}\n' + line + "\n")
    with pytest.raises(TaskSetError, match=rf"trace.jsonl:2: .*{field}"):
        load_trace(path)


def test_inference_of_categories() -> None:
    user = lambda text: [{"role": "user", "content": text}]  # noqa: E731
    assert infer_category(user("Please refactor:\n```py\nx=1\n```")) == "code_edit"
    assert infer_category(user("tl;dr of this article please")) == "summarize"
    assert infer_category(user("What is love?")) == "prose"
    assert infer_category(user("x"), tools=[{"type": "function"}]) == "tool_call"


def test_repeated_tasks_get_their_own_ids() -> None:
    tasks = [Task(i, "prose", ({"role": "user", "content": i},), 4) for i in ("a", "b")]
    out = repeat_tasks(tasks, 5)
    assert [t.id for t in out] == ["a", "b", "a~1", "b~1", "a~2"]


def test_import_tasks_writes_a_task_set(tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    trace.write_text(json.dumps({"prompt": "Summarize: a b c", "max_tokens": 9}) + "\n")
    out = tmp_path / "tasks.jsonl"
    assert main(["import-tasks", str(trace), "--format", "trace", "--out", str(out)]) == 0
    row = json.loads(out.read_text())
    assert row["category"] == "summarize" and row["max_tokens"] == 9
