"""Does watchkeeper's own memory level off through a soak?

The daemon soaks every night for months, so anything the soak keeps per request is a leak.
This runs a real soak in-process (SmolLM2, SQLite in a scratch folder), samples the process's
RSS and tracemalloc's traced Python memory every `--every` seconds, and prints both series,
their Theil-Sen slopes after a warm-up, and the allocation sites that grew most between the end
of the warm-up and the end of the soak. RSS growing while traced memory stays flat points at the
allocator (fragmentation, per-thread arenas), not at Python objects kept alive.

    .venv/bin/python benchmarks/soak_memory.py [--duration 20m] [--block 1m]
        [--profiles smollm2-baseline] [--concurrency 1,2] [--every 30]
"""

from __future__ import annotations

import argparse
import gc
import os
import tempfile
import threading
import time
import tracemalloc
from pathlib import Path

import psutil

from watchkeeper.commands.soak import soak_command
from watchkeeper.config import Config, DatabaseConfig, SoakConfig
from watchkeeper.soak.durations import parse_duration
from watchkeeper.soak.verdicts import theil_sen

FRAMES = 8


def sampler(
    stop: threading.Event,
    every_s: float,
    points: list[tuple[float, float, float, int]],
    counter: list[int],
) -> None:
    """(seconds, RSS MB, traced MB, requests) every `every_s` until stopped."""
    me = psutil.Process()
    t0 = time.monotonic()
    while True:
        traced, _ = tracemalloc.get_traced_memory()
        points.append(
            (time.monotonic() - t0, me.memory_info().rss / 2**20, traced / 2**20, counter[0])
        )
        if stop.wait(every_s):
            return


def slope(points: list[tuple[float, float]]) -> str:
    if len(points) < 3:
        return "not enough samples"
    trend = theil_sen([tuple(zip(*points, strict=True))])  # type: ignore[list-item]
    if trend is None:
        return "not enough samples"
    return f"{trend.slope:+.1f} MB/h (95% CI {trend.low:+.1f}..{trend.high:+.1f})"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--duration", default="20m")
    parser.add_argument("--block", default="1m")
    parser.add_argument("--profiles", default="smollm2-baseline")
    parser.add_argument("--concurrency", default="1,2")
    parser.add_argument("--every", type=float, default=30.0)
    parser.add_argument("--warmup", type=float, default=0.25, help="share of the soak ignored")
    args = parser.parse_args()
    duration_s = parse_duration(args.duration)
    scratch = Path(tempfile.mkdtemp(prefix="wk-soak-memory-"))
    os.environ.setdefault("WATCHKEEPER_DATA_DIR", str(scratch / "data"))
    config = Config(
        database=DatabaseConfig(url=f"sqlite:///{scratch / 'wk.db'}"),
        soak=SoakConfig(sample_interval_s=10.0, probe_interval_s=30.0, flush_interval_s=5.0),
    )
    tracemalloc.start(FRAMES)
    stop, counter = threading.Event(), [0]
    points: list[tuple[float, float, float, int]] = []
    warm_snapshot: list[tracemalloc.Snapshot] = []

    def on_sample(_key: object, _sample: object) -> None:
        counter[0] += 1  # a count, not the samples: the benchmark must not be the leak

    def take_warm_snapshot() -> None:
        gc.collect()
        warm_snapshot.append(tracemalloc.take_snapshot())

    watcher = threading.Thread(
        target=sampler, args=(stop, args.every, points, counter), daemon=True
    )
    timer = threading.Timer(duration_s * args.warmup, take_warm_snapshot)
    watcher.start()
    timer.start()
    t0 = time.monotonic()
    result = soak_command(
        config,
        duration=args.duration,
        block=args.block,
        profiles=args.profiles.split(","),
        concurrency=[int(c) for c in args.concurrency.split(",")],
        per_category=1,
        seed=3,
        fresh=True,
        on_sample=on_sample,
        progress=lambda m: print(f"  · {m}", flush=True),
    )
    wall = time.monotonic() - t0
    timer.cancel()
    stop.set()
    watcher.join()
    gc.collect()
    end_snapshot = tracemalloc.take_snapshot()
    print()
    print(f"soak {args.duration} (wall {wall:.0f} s), {counter[0]} requests, {result.status}")
    print(f"{'t (s)':>8} {'RSS MB':>8} {'traced MB':>10} {'requests':>9}")
    for t, rss, traced, n in points:
        print(f"{t:8.0f} {rss:8.1f} {traced:10.2f} {n:9d}")
    warm = [p for p in points if p[0] >= duration_s * args.warmup]
    print()
    print(f"after the first {args.warmup:.0%} ({len(warm)} samples):")
    print(f"  RSS slope     {slope([(t / 3600, rss) for t, rss, _, _ in warm])}")
    print(f"  traced slope  {slope([(t / 3600, tr) for t, _, tr, _ in warm])}")
    if warm and warm[-1][3] > warm[0][3]:
        grown = (warm[-1][1] - warm[0][1]) * 2**10 / (warm[-1][3] - warm[0][3])
        print(f"  RSS per request after warm-up  {grown:+.2f} KB")
    if warm_snapshot:
        print()
        print("allocation sites that grew most after the warm-up (tracemalloc):")
        for stat in end_snapshot.compare_to(warm_snapshot[0], "traceback")[:8]:
            frame = stat.traceback[0]
            print(
                f"  {stat.size_diff / 1024:+9.1f} KB {stat.count_diff:+7d} blocks  "
                f"{frame.filename}:{frame.lineno}"
            )


if __name__ == "__main__":
    main()
