"""`watchkeeper sweep` on SmolLM2: every spec type the build supports, a recommendation and a
systemd unit for it."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest
from support.taskfiles import copy_task

from watchkeeper.campaign.sweep_plan import sweep_profiles
from watchkeeper.commands.sweep import sweep_command
from watchkeeper.config import load_config
from watchkeeper.config.requests import SweepRequest
from watchkeeper.daemon.jobdefs import parse_job
from watchkeeper.errors import ConfigError
from watchkeeper.server.install import ServerBinary
from watchkeeper.server.models import ModelFile


def test_sweep_candidates_come_from_the_builds_spec_types() -> None:
    names = list(sweep_profiles("qwen", ("none", "draft-simple", "ngram-simple", "ngram-mod")))
    assert names == [
        "qwen-baseline",
        "qwen-sweep-draft4",
        "qwen-sweep-draft8",
        "qwen-sweep-draft16",
        "qwen-sweep-ngram-simple",
        "qwen-sweep-ngram-mod",
    ]
    assert list(sweep_profiles("qwen", ("none", "ngram-simple"))) == [
        "qwen-baseline",
        "qwen-sweep-ngram-simple",
    ]


def test_sweep_recommends_conservatively_and_writes_a_service_file(
    real_server: tuple[ServerBinary, ModelFile], tmp_path: Path
) -> None:
    tasks = tmp_path / "tasks.jsonl"
    lines = [json.loads(x) for x in Path("jobs/tasksets/standard.jsonl").read_text().splitlines()]
    picked = [t for t in lines if t["id"] in ("prose-02", "prose-03")]
    # The code task copies a short prompt, so the n-gram arms draft, without the 500-token
    # prefill of the standard set's code edits (the exact identity pass prefills it a token at
    # a time).
    picked.append(copy_task("copy-code", "code_edit", 32))
    for t in picked:
        t["max_tokens"] = 32
    tasks.write_text("\n".join(json.dumps(t) for t in picked) + "\n")
    config_path = tmp_path / "watchkeeper.toml"
    config_path.write_text(
        f'[database]\nurl = "sqlite:///{tmp_path / "wk.db"}"\n'
        f'[bench]\nreports_dir = "{tmp_path / "reports"}"\nrounds = 1\n'
    )
    service = tmp_path / "systemd" / "llama-server-speculative.service"
    request = SweepRequest(
        family="smollm2",
        rounds=2,
        taskset=tasks,
        per_category=None,
        service_file=service,
        identity_as_served=True,
        max_arms=11,  # tiers 0-2: the methods and the chain, not the knob variants
    )
    result = sweep_command(load_config(config_path), request, progress=lambda _m: None)
    arms = [a.name for a in result.bench.arms]
    assert arms[0] == "smollm2-baseline" and "smollm2-sweep-draft16" in arms
    assert len(arms) == 11 and "smollm2-sweep-ngram-mod+draft4" in arms
    assert any(name.startswith("smollm2-sweep-ngram") for name in arms)
    # The A/A control: a second baseline server, measured in every round the race ran, with
    # its own role, its reading on the report's first screen, never named by the answer.
    control = "smollm2-aa-control"
    assert arms[1] == control
    assert next(a.role for a in result.bench.arms if a.name == control) == "control"
    assert result.race is not None and control in result.race.active
    assert result.race.rounds_by_arm[control] == result.race.rounds
    assert result.bench.stats(control) is not None
    assert result.bench.stats(control).speedup is not None  # type: ignore[union-attr]
    # SmolLM2 drafting for itself costs a whole target step per drafted token: no acceptance
    # could make it tie the baseline, so the ceiling rule drops every length unmeasured.
    assert result.race is not None
    ceiling = {d.arm for d in result.race.drops if d.rule == "ceiling" and d.round == 0}
    assert ceiling == {f"smollm2-sweep-draft{n}" for n in (4, 8, 16)}  # not the chain's
    assert result.race.rounds_by_arm["smollm2-sweep-ngram-mod+draft4"] >= 1
    assert all(result.race.rounds_by_arm[a] == 0 for a in ceiling)
    report_text = (tmp_path / "reports" / "speculative_benchmark.md").read_text()
    assert "dropped before round 1, unmeasured (ceiling)" in report_text
    # Tasks and rounds planned before round 1, from the warm-up's price of a round: three
    # tasks are too few for a CI over tasks, and two rounds too few for one over rounds.
    assert "Planned before round 1: CIs over rounds: 3 tasks, ~" in report_text
    assert "fewer than the 12 tasks a CI over tasks needs" in report_text
    # Identity on every arm a recommendation could name: each survivor was probed, unless the
    # report says why not (no estimate a recommendation could name, or the pass's budget).
    for arm in result.race.active:
        stats = result.bench.stats(arm)
        probed = stats is not None and sum(stats.verdicts.values()) > 0
        assert arm in ("smollm2-baseline", control) or probed or f"Not on {arm}: " in report_text
    # ...in both modes: as served on the rounds' servers, then exact; the report says both and
    # where the time went.
    served = result.bench.extras.get("identity_served") or {}
    exact_probed = {r.arm for r in result.bench.identity}
    assert set(served) == exact_probed - {"smollm2-baseline", "control"}, (served, exact_probed)
    for s in served.values():
        assert s["probes"] == 2 and sum(s["counts"].values()) == 2, s
    split = result.bench.extras["time_split"]["seconds"]
    assert {"server starts", "cost calibration", "measured rounds", "identity, exact"} <= set(
        split
    ), split
    assert ("identity, as served" in split) is bool(served)
    assert len(result.bench.extras["time_split"]["rounds"]) == result.race.rounds
    assert "Where the time went: " in report_text
    assert f"A/A control ({control}, a second server with the baseline's settings): " in (
        report_text
    )
    # ...on the first task of each category (the default `identity_per_category` of 1): the
    # probes prefill a token at a time in the exact mode, so the sweep probes a subset.
    with sqlite3.connect(tmp_path / "wk.db") as con:
        probed_tasks = {
            task
            for (task,) in con.execute(
                "SELECT DISTINCT s.task_id FROM run r JOIN request_sample s ON s.run_id = r.id "
                "WHERE r.purpose = 'identity'"
            ).fetchall()
        }
        measured_tasks = {
            task
            for (task,) in con.execute(
                "SELECT DISTINCT s.task_id FROM run r JOIN request_sample s ON s.run_id = r.id "
                "WHERE r.purpose = 'measured'"
            ).fetchall()
        }
    assert probed_tasks == {"prose-02", "copy-code"}, probed_tasks
    assert measured_tasks == {"prose-02", "prose-03", "copy-code"}, measured_tasks
    assert "They ran on 2 of the 3 measured tasks" in report_text
    record = json.loads((tmp_path / "reports" / "speculative_recommendation.json").read_text())
    assert control not in {record["chosen"]["name"], (record.get("closest") or {}).get("name")}
    assert str(tmp_path) not in json.dumps(record) and "/.cache/" not in json.dumps(record)
    # The serving settings its unit was rendered with ([service] unset: the slots measured).
    assert record["extra"]["served"] == {"slots": None, "cache_ram_mib": 0, "port": 8080}
    # One process per arm for the sweep, reusing its prompt cache: round 2 prefills almost
    # nothing of the prompts round 1 already sent (llama-server's own counter says so).
    with sqlite3.connect(tmp_path / "wk.db") as con:
        rows = con.execute(
            "SELECT r.metrics_before, r.metrics_after, s.prompt_tokens FROM run r "
            "JOIN request_sample s ON s.run_id = r.id WHERE r.arm = 'smollm2-baseline' "
            "AND r.purpose = 'measured' AND r.round = 2"
        ).fetchall()
    assert rows, "the baseline ran round 2"
    key = "llamacpp:prompt_tokens_total"
    before, after = json.loads(rows[0][0]), json.loads(rows[0][1])
    prefilled = after[key] - before[key]
    sent = sum(r[2] or 0 for r in rows)
    assert sent > 100 and prefilled < 0.2 * sent, (prefilled, sent)
    # ...except the spec types that learn across requests: a fresh process every round, so
    # round 2 does not draft from round 1's answers (their rewarm is stored, not measured).
    with sqlite3.connect(tmp_path / "wk.db") as con:
        renewed = {
            arm
            for (arm,) in con.execute(
                "SELECT arm FROM run WHERE purpose = 'rewarm' AND round = 2"
            ).fetchall()
        }
    # An arm that drafted nothing in round 1 left the race (the idle rule): the real server
    # reported no draft token for any of its requests. (Here ngram-mod, learning from three
    # 32-token answers on a fresh process, drafted nothing; ngram-cache did.)
    idle = {d.arm for d in result.race.drops if d.rule == "idle"}
    with sqlite3.connect(tmp_path / "wk.db") as con:
        for arm in idle:
            drafted = con.execute(
                "SELECT COALESCE(SUM(s.draft_n), 0) FROM run r JOIN request_sample s "
                "ON s.run_id = r.id WHERE r.arm = ? AND r.purpose = 'measured'",
                (arm,),
            ).fetchone()[0]
            assert drafted == 0, (arm, drafted)
    assert all(result.race.rounds_by_arm[a] == 1 for a in idle)
    learners = {"smollm2-sweep-ngram-mod", "smollm2-sweep-ngram-cache"}
    assert renewed == learners - idle and renewed, (renewed, idle)
    logs = {p.name for p in tmp_path.rglob("*.log")}
    assert all(f"{arm}-p1.log" in logs for arm in renewed), logs
    assert "smollm2-baseline-p1.log" not in logs
    # The answer is the setting the unit runs (the mix's pick), and the headline names it.
    rec = result.recommendation
    if rec.setting is not None:
        best = rec.workload.best if rec.workload is not None else None
        assert best is not None and best.low is not None and best.low > 1.0
        assert rec.headline.startswith(f"{rec.setting}: ")
        assert "ExecStart" in service.read_text() and rec.setting in service.read_text()
    else:
        assert rec.headline.startswith("keep the baseline")
    unit = service.read_text()
    exec_start = next(line for line in unit.splitlines() if line.startswith("ExecStart="))
    assert exec_start.split("=", 1)[1].startswith("/")
    assert "--port 8080" in exec_start
    assert "Restart=on-failure" in unit and "NoNewPrivileges=yes" in unit
    assert (tmp_path / "reports" / "speculative_benchmark.md").is_file()
    if shutil.which("systemd-analyze"):
        check = subprocess.run(
            ["systemd-analyze", "verify", str(service)], capture_output=True, text=True, check=False
        )
        assert "Unknown key" not in check.stderr and "Invalid" not in check.stderr, check.stderr


@pytest.mark.parametrize("family", ["gpt"])
def test_unknown_sweep_family_is_a_clear_error(family: str) -> None:
    with pytest.raises(ConfigError, match="unknown sweep family 'gpt'; known: qwen, smollm2"):
        sweep_profiles(family, ())


def test_identity_probes_per_category_0_probe_every_task_and_below_0_is_refused() -> None:
    """0 is the command line's "every measured task" wherever the request comes from (it
    used to be an error when the command was called directly); a negative count is refused by
    the request's bound, from the CLI and from a job file alike."""
    assert SweepRequest(identity_per_category=0).probe_tasks() is None
    assert SweepRequest().probe_tasks() == 1
    assert SweepRequest(identity_per_category=3).probe_tasks() == 3
    with pytest.raises(ConfigError, match="identity_per_category: Input should be greater"):
        SweepRequest.from_cli({"identity_per_category": -1})
    with pytest.raises(ConfigError, match="args.identity_per_category"):
        parse_job(
            "sweep",
            {"kind": "sweep", "cron": "0 1 * * *", "args": {"identity_per_category": -1}},
            source="t.toml",
        )
