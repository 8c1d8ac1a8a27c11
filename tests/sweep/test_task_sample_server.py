"""A real SmolLM2 sweep of a 36-task set whose budget cannot hold one round of every task:
the racer measures a seeded stratified sample (analysis/task_sample.py), says so before
round 1, shows each task of the round, and every racing arm ends with a CI for the set."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

from watchkeeper.commands.sweep import sweep_command
from watchkeeper.config import load_config
from watchkeeper.config.requests import SweepRequest
from watchkeeper.server.install import ServerBinary
from watchkeeper.server.models import ModelFile
from watchkeeper.server.profiles import SMOLLM2

CATS = ("code_edit", "code_gen", "multi_turn", "prose", "summarize", "tool_call")


def _taskset(path: Path) -> Path:
    """36 short tasks, 6 a category: a prompt of a few tokens, 8-token answers."""
    words = ("red", "blue", "green", "seven", "river", "stone")
    lines = [
        json.dumps(
            {
                "id": f"{cat}-{i}",
                "category": cat,
                "max_tokens": 8,
                "messages": [{"role": "user", "content": f"Say {w} {w} {w}."}],
            }
        )
        for cat in CATS
        for i, w in enumerate(words)
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_budget_too_small_for_one_round_samples_the_set_and_answers_for_it(
    real_server: tuple[ServerBinary, ModelFile], tmp_path: Path
) -> None:
    """A budget of seconds: not one round of 36 tasks fits, nor the least sample (12 tasks,
    2 a category), which runs anyway and the plan says by how much it passes the budget.
    Identity in the batched mode and three arms (the baseline, its A/A control, one n-gram
    arm) keep it short: 61 s and 96 s under nice 19 on the shared two-core host at load 11-20
    (7 Dec 2026, with two n-gram arms then)."""
    config_path = tmp_path / "watchkeeper.toml"
    config_path.write_text(
        f'[database]\nurl = "sqlite:///{tmp_path / "wk.db"}"\n'
        f'[bench]\nreports_dir = "{tmp_path / "reports"}"\nidentity_mode = "batched"\n'
    )
    seen: list[str] = []
    request = SweepRequest(
        target=SMOLLM2,  # no draft model: the n-gram arms, which race round 1
        taskset=_taskset(tmp_path / "tasks.jsonl"),
        per_category=None,
        service_file=tmp_path / "llama-server.service",
        budget=0.05,
        max_tokens=8,
        max_arms=3,
    )
    result = sweep_command(load_config(config_path), request, progress=seen.append)
    assert "12 of 36 tasks (stratified by category, seed 42)" in result.plan, result.plan
    assert "passes the" in result.plan and "after the identity probes' reserve" in result.plan
    assert any(m.startswith("race plan: CIs over tasks: ") for m in seen)
    # The round measured the sample, two of each category, and showed every task of it.
    with sqlite3.connect(tmp_path / "wk.db") as con:
        measured = {
            task
            for (task,) in con.execute(
                "SELECT DISTINCT s.task_id FROM run r JOIN request_sample s ON s.run_id = r.id "
                "WHERE r.purpose = 'measured'"
            ).fetchall()
        }
    assert len(measured) == 12, measured
    assert all(sum(t.startswith(c) for t in measured) == 2 for c in CATS), measured
    ticks = [m for m in seen if re.match(r"round 1: task \d+/12 \(\w+\), \d+\.\d min$", m)]
    assert len(ticks) == 12 and ticks[-1].startswith("round 1: task 12/12 ("), seen
    # Every arm that raced round 1 has its CI for the set, from the 12 tasks it ran.
    assert result.race is not None and result.race.rounds == 1
    raced = {a for a, n in result.race.rounds_by_arm.items() if n >= 1} - {f"{SMOLLM2}-baseline"}
    assert raced and set(result.task_cis) == raced, (raced, result.task_cis)
    assert f"{SMOLLM2}-aa-control" in raced  # the A/A control has its interval too
    for ci in result.task_cis.values():
        assert ci["tasks"] == 12 and ci["of"] == 36 and ci["low"] < ci["estimate"] < ci["high"], ci
    report = (tmp_path / "reports" / "speculative_benchmark.md").read_text()
    assert "95% CI over 12 of 36 tasks (a stratified sample" in report
