"""Identity on the first real CUDA bench (one H100, llama.cpp b11434, SmolLM2 self-draft;
`data/cuda_bench.json.gz` is `../shared/gpu/bench.json.gz`), and unstreamed probes on answers
captured from the real llama-server with SmolLM2 (`data/chat_nonstream_tools_*.json`)."""

from __future__ import annotations

import gzip
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from watchkeeper.analysis.benchmark import ArmSpec, BenchMethod, BenchResult, analyze
from watchkeeper.checks.identity import Verdict, classify_divergence, compare_samples
from watchkeeper.host.info import HostInfo
from watchkeeper.load.probe_client import parse_chat_response
from watchkeeper.load.records import RequestSample, RunPurpose, RunResult

DATA = Path(__file__).parent / "data"
T0 = datetime(2026, 11, 26, 18, 9, tzinfo=UTC)


def cuda_bench() -> dict[str, Any]:
    with gzip.open(DATA / "cuda_bench.json.gz", "rt", encoding="utf-8") as f:
        data: dict[str, Any] = json.load(f)
    return data


def _text_sample(task_id: str, category: str, text: str) -> RequestSample:
    """A probe as the CUDA run had it for tool tasks: text, no token ids."""
    return RequestSample(
        task_id=task_id,
        category=category,
        seq=0,
        started_at=T0,
        completion_tokens=len(text.split()),
        decode_tps_server=300.0,
        finish_reason="stop",
        output_text=text,
        tokens=None,
    )


def _arm(spec: dict[str, Any]) -> ArmSpec:
    return ArmSpec(
        spec["name"],
        spec["role"],
        spec["spec_type"],
        spec["draft_n_max"],
        spec["model"],
        spec["model_sha256"],
        spec["draft_model"],
        spec["draft_sha256"],
        tuple(spec["argv"]),
        speculative=spec["speculative"],
    )


def _rejudge_text_records(data: dict[str, Any]) -> BenchResult:
    """The CUDA run's text-only divergences through today's `analyze`: baseline and candidate
    probes rebuilt from the records' own excerpts, with no token ids (as the run had them)."""
    text = [r for r in data["identity"] if r["basis"] == "text" and r["verdict"] != "identical"]
    arms = [_arm(a) for a in data["arms"]]
    baseline = arms[0].name
    runs: list[RunResult] = []
    for rec in text:
        b = _text_sample(rec["task_id"], rec["category"], rec["baseline_excerpt"])
        c = _text_sample(rec["task_id"], rec["category"], rec["candidate_excerpt"])
        for arm, sample in ((baseline, b), (rec["arm"], c)):
            runs.append(RunResult(arm, arm, 1, False, 1, T0, T0, (sample,), ()))
            runs.append(
                RunResult(arm, arm, 3, True, 1, T0, T0, (sample,), (), purpose=RunPurpose.IDENTITY)
            )
    return analyze(
        campaign_id=2,
        kind="bench",
        host=HostInfo("f", "h", "cpu", 16, 1 << 30, None, "Linux"),
        build_version=data["build_version"],
        build_variant=data["build_variant"],
        started_at=T0,
        finished_at=T0,
        arms=arms,
        runs=runs,
        method=BenchMethod(2, 1, 2, 1, 6, ("tool_call",), 0.0, 42, near_tie_threshold=0.1),
        degenerate_threshold=0.5,
        length_tolerance=10.0,
        identity_overrides={},
        noise_floor=data["extras"]["noise_floor"],
    )


def test_the_cuda_runs_tool_call_divergences_are_unverified_and_file_no_finding() -> None:
    data = cuda_bench()
    before = [
        r for r in data["identity"] if r["task_id"] == "tool_call-01" and r["basis"] == "text"
    ]
    # What main's code said: two mismatches, each a correctness finding claiming a replay.
    assert sorted(r["verdict"] for r in before) == ["identical", "mismatch", "mismatch"]
    claimed = [f for f in data["findings"] if f["kind"] == "correctness"]
    assert len(claimed) == 2 and all("batched replay" in f["title"] for f in claimed)
    result = _rejudge_text_records(data)
    judged = {(r.arm, r.task_id): r for r in result.identity if r.arm != "control"}
    assert {k: r.verdict for k, r in judged.items()} == {
        ("smollm2-selfdraft", "tool_call-01"): "unverified",
        ("smollm2-selfdraft-q8kv", "tool_call-01"): "unverified",
    }
    assert all(r.basis == "text" and r.margin is None for r in judged.values())
    assert not [f for f in result.findings if f.kind == "correctness"]
    stats = result.stats("smollm2-selfdraft")
    assert stats is not None and stats.verdicts == {"unverified": 1}


def test_a_text_divergence_stays_unverified_whatever_the_floor() -> None:
    b = _text_sample("t", "tool_call", "São João, Portugal, 2023.")
    c = _text_sample("t", "tool_call", "São João, a port city in Portugal")
    for floor in (0.0, 1.08, 100.0):
        r = classify_divergence(b, c, replay=None, floor=floor, near_tie_threshold=0.1)
        assert r.verdict == Verdict.UNVERIFIED and r.replay is None


def _captured(name: str) -> RequestSample:
    body = json.loads((DATA / f"chat_nonstream_tools_{name}.json").read_text(encoding="utf-8"))
    base = {"task_id": "tool_call-04", "category": "tool_call", "seq": 0, "started_at": T0}
    return parse_chat_response(base, body, 1.0)


def test_unstreamed_probes_with_tools_carry_every_token_id_on_both_servers() -> None:
    """Captured from the real llama-server b11434 with SmolLM2: tool_call-04 with `tools`,
    `logprobs`, `top_logprobs: 5`, `stream: false` (streamed, the server answers 400)."""
    base, spec = _captured("base"), _captured("spec")
    for s in (base, spec):
        assert s.ok and s.tokens is not None and s.completion_tokens == 27
        assert len(s.tokens) == 27 and all(t.token_id is not None for t in s.tokens)
        assert s.output_text.startswith("1,250 US dollars in Japanese yen")
    assert base.tokens is not None and spec.tokens is not None
    assert all(len(t.top) == 5 for t in base.tokens)
    # The speculative server lists every token of a verification step (draft-accepted or not)
    # with its id but no top-k: only the first token, sampled after the prompt, has one.
    assert spec.draft_n_accepted == 20 and spec.tokens[0].top
    assert all(not t.top for t in spec.tokens[1:])
    result = compare_samples(base, spec, near_tie_threshold=0.1)
    assert result.verdict == Verdict.IDENTICAL and result.basis == "tokens"


def test_an_error_answer_is_a_failed_sample() -> None:
    base = {"task_id": "t", "category": "c", "seq": 0, "started_at": T0}
    s = parse_chat_response(base, {"error": {"message": "boom"}}, 0.1)
    assert not s.ok and "no choices" in (s.error or "")


@pytest.mark.parametrize("name", ["base", "spec"])
def test_captured_answers_report_server_timings(name: str) -> None:
    s = _captured(name)
    assert s.decode_tps_server is not None and s.decode_tps_server > 0
    assert s.prompt_tokens == 66 and s.finish_reason == "stop"
