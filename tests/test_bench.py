"""`watchkeeper bench` on the real llama-server with SmolLM2: baseline, self-draft, n-gram."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import select

from watchkeeper.cli import main
from watchkeeper.server.install import ServerBinary
from watchkeeper.server.models import ModelFile
from watchkeeper.store.db import Database
from watchkeeper.store.schema import Campaign, Finding, OutputCheck, Report, Run

PROFILES = "smollm2-baseline,smollm2-selfdraft,smollm2-ngram"


@pytest.fixture(scope="module")
def bench_run(
    real_server: tuple[ServerBinary, ModelFile], tmp_path_factory: pytest.TempPathFactory
) -> tuple[dict[str, object], Path, str]:
    """One small real bench shared by the assertions below (it takes about a minute)."""
    root = tmp_path_factory.mktemp("bench")
    url = f"sqlite:///{root / 'wk.db'}"
    config = root / "watchkeeper.toml"
    config.write_text(
        f'[database]\nurl = "{url}"\n[bench]\nreports_dir = "{root / "reports"}"\nrounds = 2\n'
    )
    tasks = root / "tasks.jsonl"
    chosen = []
    for line in Path("jobs/tasksets/standard.jsonl").read_text().splitlines():
        task = json.loads(line)
        if task["id"] in ("prose-01", "code_edit-01", "summarize-02", "tool_call-01"):
            task["max_tokens"] = 48
            chosen.append(json.dumps(task))
    tasks.write_text("\n".join(chosen) + "\n")
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(
            [
                "bench",
                "--config",
                str(config),
                "--profiles",
                PROFILES,
                "--taskset",
                str(tasks),
                "--json",
            ]
        )
    assert code == 0
    return json.loads(out.getvalue()), root, url


def arm(result: dict[str, object], name: str) -> dict[str, object]:
    stats = result["arm_stats"]
    assert isinstance(stats, list)
    return next(s for s in stats if s["arm"] == name)


def test_bench_reports_a_speedup_with_a_confidence_interval(
    bench_run: tuple[dict, Path, str],
) -> None:
    result, _, _ = bench_run
    speedup = arm(result, "smollm2-selfdraft")["overall"]["speedup"]  # type: ignore[index]
    assert speedup["low"] <= speedup["estimate"] <= speedup["high"]
    assert speedup["n_pairs"] == 8 and speedup["n_clusters"] == 4


def test_self_drafting_accepts_nearly_every_draft_token(bench_run: tuple[dict, Path, str]) -> None:
    result, _, _ = bench_run
    selfdraft = arm(result, "smollm2-selfdraft")
    assert selfdraft["overall"]["acceptance_rate"] > 0.9  # type: ignore[index]
    assert selfdraft["bound"]["cost_ratio"] == 1.0  # type: ignore[index]
    # A model drafting for itself costs one target step per draft token: it cannot win.
    assert 0.5 < selfdraft["bound"]["predicted_speedup"] <= 1.0  # type: ignore[index]
    assert selfdraft["efficiency"] is not None


def test_every_speculative_task_gets_an_identity_verdict_and_the_control_is_recorded(
    bench_run: tuple[dict, Path, str],
) -> None:
    result, _, url = bench_run
    db = Database(url)
    with db.session() as s:
        checks = s.scalars(select(OutputCheck)).all()
        verdicts = {c.verdict for c in checks}
        arms = {c.arm for c in checks}
    db.close()
    assert arms == {"smollm2-selfdraft", "smollm2-ngram", "control"}
    assert verdicts <= {"identical", "near_tie", "mismatch", "length_only"}
    assert len([c for c in checks if c.arm == "smollm2-selfdraft"]) == 8
    control = result["control"]
    assert isinstance(control, dict) and control["identical_rate"] == 1.0


def test_runs_are_interleaved_and_warmups_are_kept_apart(bench_run: tuple[dict, Path, str]) -> None:
    _, _, url = bench_run
    db = Database(url)
    with db.session() as s:
        runs = s.scalars(select(Run).order_by(Run.id)).all()
        campaign = s.scalars(select(Campaign)).one()
        reports = s.scalars(select(Report)).all()
        findings = s.scalars(select(Finding)).all()
    db.close()
    measured = [(r.arm, r.round) for r in runs if not r.is_warmup]
    assert [a for a, rnd in measured if rnd == 1] == PROFILES.split(",")
    assert [a for a, rnd in measured if rnd == 2] == PROFILES.split(",")[::-1]
    assert sum(r.is_warmup for r in runs) == 3
    assert campaign.status == "completed" and campaign.kind == "bench"
    assert len(reports) == 1
    assert all(f.title for f in findings)


def test_the_report_has_plots_argv_and_models_with_sha256(
    bench_run: tuple[dict, Path, str],
) -> None:
    result, root, _ = bench_run
    report = Path(str(result["report_path"]))
    text = report.read_text()
    assert "--spec-type draft-simple" in text
    assert "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53" in text
    assert (report.parent / "speedup.png").read_bytes().startswith(b"\x89PNG")
    assert (root / "reports" / "latest.md").is_file()
