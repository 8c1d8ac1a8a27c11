"""`analyze` with replay verdicts from the caller: only `mismatch` is a correctness finding."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from watchkeeper.analysis.benchmark import (
    ArmSpec,
    BenchMethod,
    BenchResult,
    analyze,
)
from watchkeeper.checks.identity import IdentityResult, Verdict, compare_samples
from watchkeeper.host.info import HostInfo
from watchkeeper.load.records import (
    Alternative,
    RequestSample,
    RunPurpose,
    RunResult,
    TokenLogprob,
)

T0 = datetime(2025, 3, 14, 9, 0, tzinfo=UTC)
FLOOR = {"floor": 0.03, "positions": 16, "disagreements": 0, "quantile": 0.99}
EVIDENCE = {
    "target_token": {"id": 3, "text": " c", "logprob": -0.4},
    "candidate_token": {"id": 3, "text": " c", "logprob": -1.9},
    "baseline_token": {"id": 2, "text": " b", "logprob": -0.3},
    "margin": 1.6,
    "floor": 0.03,
}


def _tok(token_id: int, text: str, runner_up: tuple[int, str, float]) -> TokenLogprob:
    top = (Alternative(token_id, text, -0.3), Alternative(*runner_up))
    return TokenLogprob(token_id, text, -0.3, top)


def _sample(tokens: tuple[TokenLogprob, ...], tps: float = 50.0) -> RequestSample:
    return RequestSample(
        task_id="t1",
        category="prose",
        seq=0,
        started_at=T0,
        completion_tokens=len(tokens),
        decode_tps_server=tps,
        finish_reason="length",
        output_text="".join(t.text for t in tokens),
        tokens=tokens,
    )


def _run(arm: str, rnd: int, sample: RequestSample, *, probe: bool = False) -> RunResult:
    purpose = RunPurpose.IDENTITY if probe else RunPurpose.MEASURED
    return RunResult(arm, arm, rnd, probe, 1, T0, T0, (sample,), (), purpose=purpose)


BASE = (_tok(1, "a", (9, "z", -5.0)), _tok(2, " b", (3, " c", -1.9)))
CAND = (_tok(1, "a", (9, "z", -5.0)), _tok(3, " c", (2, " b", -1.9)))


def _analyze(overrides: dict[tuple[str, str], IdentityResult] | None) -> BenchResult:
    arms = [
        ArmSpec("base", "baseline", None, None, "m", "a" * 64, None, None, ()),
        ArmSpec("spec", "candidate", "ngram-simple", None, "m", "a" * 64, None, None, ()),
    ]
    plain = replace(_sample(BASE), tokens=None)
    runs = [
        _run("base", 1, plain),
        _run("spec", 1, replace(plain, decode_tps_server=60.0)),
        _run("base", 2, _sample(BASE), probe=True),
        _run("spec", 2, _sample(CAND), probe=True),
    ]
    return analyze(
        campaign_id=1,
        kind="bench",
        host=HostInfo("f", "h", "cpu", 2, 1 << 30, None, "Linux"),
        build_version="b1",
        build_variant="cpu",
        started_at=T0,
        finished_at=T0,
        arms=arms,
        runs=runs,
        method=BenchMethod(1, 0, 0, 1, 1, ("prose",), 0.0, 1, near_tie_threshold=0.1),
        degenerate_threshold=0.5,
        length_tolerance=10.0,
        identity_overrides=overrides,
        noise_floor=FLOOR if overrides is not None else None,
    )


def _override(verdict: Verdict) -> dict[tuple[str, str], IdentityResult]:
    base = compare_samples(_sample(BASE), _sample(CAND), near_tie_threshold=0.1)
    assert base.verdict == Verdict.MISMATCH  # what compare_samples alone says
    return {("spec", "t1"): replace(base, verdict=verdict, replay=EVIDENCE)}


def _correctness(result: BenchResult) -> list[object]:
    return [f for f in result.findings if f.kind == "correctness"]


def test_without_overrides_compare_samples_decides_and_a_mismatch_is_a_finding() -> None:
    result = _analyze(None)
    assert [r.verdict for r in result.identity] == ["mismatch"]
    assert len(_correctness(result)) == 1
    assert result.extras["noise_floor"] is None


def test_batch_variance_from_the_replay_is_no_correctness_finding() -> None:
    result = _analyze(_override(Verdict.BATCH_VARIANCE))
    (record,) = result.identity
    assert record.verdict == "batch_variance" and record.compared == "mismatch"
    assert record.replay == EVIDENCE
    assert _correctness(result) == []
    assert result.stats("spec") is not None
    assert result.stats("spec").verdicts == {"batch_variance": 1}  # type: ignore[union-attr]
    assert result.extras["noise_floor"] == FLOOR
    assert result.extras["compare_samples_verdicts"] == {"spec": {"mismatch": 1}}
    assert result.to_json()["identity"][0]["replay"]["floor"] == 0.03


def test_a_mismatch_the_replay_confirms_is_a_high_correctness_finding() -> None:
    result = _analyze(_override(Verdict.MISMATCH))
    (finding,) = _correctness(result)
    assert finding.severity == "high"  # type: ignore[attr-defined]
    assert "noise floor" in finding.title  # type: ignore[attr-defined]
    (record,) = result.identity
    assert record.verdict == "mismatch" and record.compared is None
