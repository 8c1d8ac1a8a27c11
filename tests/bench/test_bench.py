"""`watchkeeper bench` on the real llama-server with SmolLM2: baseline, self-draft, n-gram."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from support.taskfiles import copy_task

from watchkeeper.analysis.latency import Slo
from watchkeeper.cli.app import main
from watchkeeper.load.records import RunPurpose
from watchkeeper.nightly.series import run_points
from watchkeeper.server.install import ServerBinary
from watchkeeper.server.models import ModelFile
from watchkeeper.store.db import Database
from watchkeeper.store.history import History
from watchkeeper.store.racing_store import RacingStore
from watchkeeper.store.schema import (
    Campaign,
    Finding,
    OutputCheck,
    Report,
    RequestSampleRow,
    Run,
)

PROFILES = "smollm2-baseline,smollm2-selfdraft,smollm2-ngram"


TASKS = {"prose-01": 24, "tool_call-01": 24, "code_gen-01": 24}
"""The standard set's tasks the bench runs, with their answer lengths: all three have short
prompts (under 100 tokens). The standard set's long-prompt tasks cost the fixture most of its
time in prefill (a 700-token summary or code edit: 3 s on the baseline, 6 s on the self-draft
arm, twice that on the exact identity pass's ubatch-1 servers), and the whole `code_edit-01`
drafted nothing on the n-gram arm (measured 2026-11-29)."""

COPY_TASK = copy_task("copy-01", "summarize", 48)
"""The n-gram arm's task (support/taskfiles.copy_task), so the arm has a bound."""


def bench_tasks() -> list[dict[str, Any]]:
    """The three tasks of `TASKS` in the standard set's order, then `COPY_TASK`: four tasks,
    four categories."""
    chosen = []
    for line in Path("jobs/tasksets/standard.jsonl").read_text().splitlines():
        task = json.loads(line)
        if task["id"] in TASKS:
            chosen.append({**task, "max_tokens": TASKS[task["id"]]})
    assert len(chosen) == 3
    return [*chosen, COPY_TASK]


@pytest.fixture(scope="module")
def bench_run(
    real_server: tuple[ServerBinary, ModelFile], tmp_path_factory: pytest.TempPathFactory
) -> tuple[dict[str, object], Path, str]:
    """One small real bench shared by the assertions below: 4 short-prompt tasks x 3 arms x 3
    rounds, answers of 24 and 48 tokens, one process per arm (`restart_every = 0`: the restarts
    and their rewarms are `test_bench_restarts.py`'s), and the exact identity pass on all 4
    tasks, which the tests below assert on. Quietly: the module 91 s, the bench in it 68 s,
    measured 2026-11-29 (the same bench with a 700-token summary and code edit: 185 s that
    day, 141 s on 2026-11-28; the fixture before that, with restarts, 368 s)."""
    root = tmp_path_factory.mktemp("bench")
    url = f"sqlite:///{root / 'wk.db'}"
    config = root / "watchkeeper.toml"
    config.write_text(
        f'[database]\nurl = "{url}"\n[bench]\nreports_dir = "{root / "reports"}"\nrounds = 3\n'
        "restart_every = 0\n"
    )
    tasks = root / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(t) + "\n" for t in bench_tasks()))
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
    assert speedup["n_pairs"] == 12 and speedup["n_clusters"] == 4 and speedup["n_rounds"] == 3
    assert speedup["verdict"] in {
        "faster",
        "slower",
        "no change",
        "within threshold",
        "inconclusive",
    }
    assert speedup["threshold"] == 0.03


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
    assert verdicts <= {
        "identical",
        "near_tie",
        "batch_variance",
        "mismatch",
        "length_only",
        "unverified",
    }
    # One identity probe per task and speculative arm, after the measured rounds.
    assert len([c for c in checks if c.arm == "smollm2-selfdraft"]) == 4
    control = result["control"]
    assert isinstance(control, dict) and control["identical_rate"] == 1.0


def test_divergences_carry_replay_evidence_and_only_a_mismatch_is_a_finding(
    bench_run: tuple[dict, Path, str],
) -> None:
    """The default exact mode: probes on --ubatch-size 1 servers, whose A/A replay reproduces
    the decode at every position; every divergence carries its evidence, and only a mismatch
    is a correctness finding."""
    result, _, _ = bench_run
    floor = result["extras"]["noise_floor"]
    assert floor is not None and floor["replayed"] > 0
    assert floor["exact_positions"] == floor["replayed"]  # the exact mode holds on the CPU
    modes = result["extras"]["identity_modes"]
    assert {m["mode"] for m in modes.values()} == {"exact"}
    assert set(result["extras"]["token_scores"]) == {"smollm2-selfdraft", "smollm2-ngram"}
    assert result["extras"]["identity_power"]["offline"]["blind_fraction"] == 0.0
    identity = result["identity"]
    assert isinstance(identity, list)
    judged = [r for r in identity if r["arm"] != "control"]
    for record in judged:
        if record["verdict"] != "identical":
            assert record["replay"] is not None, record
            assert record["verdict"] in ("mismatch", "length_only"), record
    counts: dict[str, dict[str, int]] = {}
    for record in judged:
        per_arm = counts.setdefault(record["arm"], {})
        per_arm[record["verdict"]] = per_arm.get(record["verdict"], 0) + 1
    before = result["extras"]["compare_samples_verdicts"]
    print(f"\nidentity verdicts per arm: {counts}")
    print(f"compare_samples alone: {before}")
    print(f"noise floor: {json.dumps(floor)}")
    for record in judged:
        if record["verdict"] != "identical":
            print(f"  {record['arm']} {record['task_id']}: {record['verdict']} "
                  f"(compare_samples: {record['compared'] or record['verdict']}) "
                  f"{json.dumps(record['replay'])}")  # fmt: skip
    mismatches = {r["arm"] for r in judged if r["verdict"] == "mismatch"}
    findings = result["findings"]
    assert isinstance(findings, list)
    assert {f["profile"] for f in findings if f["kind"] == "correctness"} == mismatches


def test_arms_run_back_to_back_per_task_in_alternating_order(
    bench_run: tuple[dict, Path, str],
) -> None:
    _, _, url = bench_run
    db = Database(url)
    with db.session() as s:
        runs = {r.id: r for r in s.scalars(select(Run)).all()}
        samples = s.scalars(select(RequestSampleRow)).all()
        campaign = s.scalars(select(Campaign)).one()
        reports = s.scalars(select(Report)).all()
        findings = s.scalars(select(Finding)).all()
    db.close()
    arms = PROFILES.split(",")
    for rnd in (1, 2, 3):
        for seq in range(4):
            sent = sorted(
                (x.started_at, runs[x.run_id].arm)
                for x in samples
                if runs[x.run_id].round == rnd and x.seq == seq and not runs[x.run_id].is_warmup
            )
            expected = arms if (rnd + seq) % 2 == 0 else arms[::-1]
            assert [a for _, a in sent] == expected, (rnd, seq)
    # Warm-up runs (3) and identity probe runs (3) are kept out of every figure. One process
    # per arm here (`restart_every = 0`), so no rewarm: fresh processes between rounds and
    # their rewarms are test_bench_restarts.py's.
    assert sum(r.is_warmup for r in runs.values()) == 6
    assert not [r for r in runs.values() if r.purpose == RunPurpose.REWARM]
    probes = sorted(r.arm for r in runs.values() if r.purpose == RunPurpose.IDENTITY)
    assert probes == sorted(arms)
    assert {r.purpose for r in runs.values() if r.is_warmup} == {
        RunPurpose.WARMUP,
        RunPurpose.IDENTITY,
    }
    assert {(r.round, r.is_warmup) for r in runs.values() if r.purpose == RunPurpose.IDENTITY} == {
        (4, True)
    }  # the probes follow the 3 measured rounds
    assert campaign.status == "completed" and campaign.kind == "bench"
    assert len(reports) == 1
    assert all(f.title for f in findings)


def test_throughput_requests_carry_no_logprobs_and_identity_probes_carry_top_5(
    bench_run: tuple[dict, Path, str],
) -> None:
    _, _, url = bench_run
    db = Database(url)
    with db.session() as s:
        runs = {r.id: r for r in s.scalars(select(Run)).all()}
        samples = s.scalars(select(RequestSampleRow)).all()
    db.close()
    measured = [x for x in samples if not runs[x.run_id].is_warmup]
    probes = [x for x in samples if runs[x.run_id].purpose == RunPurpose.IDENTITY]
    assert measured and all(x.output_tokens is None for x in measured)
    with_tokens = [x for x in probes if x.output_tokens]
    # Probes go unstreamed (load/probe_client.py): every probe carries its token ids with
    # top-5, tool calls included (streamed, the server refuses logprobs with tools).
    assert probes and len(with_tokens) == len(probes)
    assert any(x.category == "tool_call" for x in with_tokens)
    # The baseline samples every token itself: top-5 on each. A speculative server lists its
    # draft-accepted tokens with an empty top-k, so there every token has an id and every
    # token the target sampled (non-empty top-k) carries all five alternatives.
    baseline = PROFILES.split(",", maxsplit=1)[0]
    for x in with_tokens:
        assert all(tok[0] is not None for tok in x.output_tokens)
        tops = [len(tok[3]) for tok in x.output_tokens]
        if runs[x.run_id].arm == baseline:
            assert all(n >= 5 for n in tops)
        else:
            assert tops[0] >= 5 and all(n == 0 or n >= 5 for n in tops)


def test_the_campaign_keeps_its_slo_and_every_run_gives_a_good_fraction_series_point(
    bench_run: tuple[dict, Path, str],
) -> None:
    """The nightly's good-fraction series (nightly/series.py) judges each run by the SLO its
    campaign recorded, read back from the real bench's rows."""
    _, _, url = bench_run
    db = Database(url)
    records = History(db).run_records()
    db.close()
    assert records and all(r.slo == Slo(500.0, 50.0, None) for r in records)
    for r in records:
        good = [p for k, p in run_points(r).items() if k.metric == "good_fraction"]
        assert len(good) == 1 and good[0].attempts == len(r.samples)
        assert all(s.latency_ms is not None for s in r.samples if s.ok)


def test_the_probes_own_speed_is_shown_beside_the_clean_median_and_read_by_no_figure(
    bench_run: tuple[dict, Path, str],
) -> None:
    result, _, _ = bench_run
    for stats in result["arm_stats"]:
        assert stats["probe_median_tps"] > 0, stats["arm"]
        # The clean median comes from the measured rounds only: a probe run is never pooled.
        assert stats["overall"]["requests"] == 4 * 3, stats["arm"]
    text = Path(str(result["report_path"])).read_text()
    assert "identity probes' own median decode tok/s, read by no figure: smollm2-baseline" in text


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


def test_the_measured_speedup_never_beats_the_bound_beyond_its_ci(
    bench_run: tuple[dict[str, Any], Path, str],
) -> None:
    """The bound uses the counters' accepted length and the measured n+1 batch cost; a CI that
    lies wholly above it must come with a note naming the suspect input, never efficiency > 1."""
    result, _, _ = bench_run
    # Each candidate must have drafted (without an acceptance there is no bound): the n-gram
    # arm drafts only where an answer copies 12 tokens of its prompt, as `COPY_TASK` does.
    ngram = arm(result, "smollm2-ngram")["overall"]["acceptance_rate"]  # type: ignore[index]
    assert ngram is not None, "the n-gram arm drafted nothing: no answer copied its prompt"
    specs = {a["name"]: a for a in result["arms"]}
    for name in PROFILES.split(",")[1:]:
        stats: dict[str, Any] = arm(result, name)
        bound, speedup = stats["bound"], stats["overall"]["speedup"]
        spec = specs[name]
        print(
            f"\n{name}: bound {bound['predicted_speedup']:.3f}x (tokens/step "
            f"{bound['tokens_per_step']:.2f}, draft cost {bound['draft_cost_per_step']:.2f}, "
            f"verify cost {bound['verify_cost']:.2f} at {bound['verify_tokens']:.1f} tokens; "
            f"i.i.d. tokens/step {bound['iid_tokens_per_step']:.2f}), measured "
            f"{speedup['estimate']:.3f}x [{speedup['low']:.3f}, {speedup['high']:.3f}], "
            f"efficiency {stats['efficiency']}, note {stats['bound_note']}; calibration: "
            f"{spec['verify_cost']} steps for {spec['verify_tokens']} tokens ({spec['verify_note']})"
        )
        assert bound["method"] == "measured"
        assert spec["verify_cost"] is not None and spec["verify_tokens"] is not None
        if stats["efficiency"] is None:
            assert stats["bound_note"], name
        else:
            assert stats["bound_note"] is None
            assert speedup["low"] <= bound["predicted_speedup"], name
            assert stats["efficiency"] <= speedup["high"] / bound["predicted_speedup"]


def test_bench_json_carries_each_speculative_arms_acceptance_per_draft_position(
    bench_run: tuple[dict, Path, str],
) -> None:
    result, _, url = bench_run
    curves = {c["arm"]: c for c in result["extras"]["acceptance_curves"]}  # type: ignore[index]
    selfdraft = curves["smollm2-selfdraft"]
    assert len(selfdraft["rates"]) == 4  # n_max 4: one rate per draft position
    assert selfdraft["consistent"] and selfdraft["drafts"] > 0
    assert selfdraft["rates"] == sorted(selfdraft["rates"], reverse=True)
    db = Database(url)
    try:
        stored = RacingStore(db).curves(int(result["campaign_id"]))  # type: ignore[arg-type]
    finally:
        db.close()
    assert [p for p, _, _ in stored["smollm2-selfdraft"]] == [0, 1, 2, 3]
    if "smollm2-ngram" in curves:  # n-gram drafting proposes only where the context repeats
        assert curves["smollm2-ngram"]["consistent"]
