"""How much does the harness itself distort what it measures?

Sends the standard task set through SmolLM2 once and compares, request by request, the decode
rate the client sees (tokens between first and last streamed token over wall time) with the
server's own `timings.predicted_per_second`, and reports the client's CPU time per token.

    .venv/bin/python benchmarks/harness_overhead.py [--tasks 24] [--profile smollm2-baseline]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from watchkeeper.cli.app import unwind_on_sigterm
from watchkeeper.config import Config
from watchkeeper.load.runner import LoadSettings, run_tasks
from watchkeeper.load.tasks import load_taskset, select
from watchkeeper.server.endpoints import make_http_client
from watchkeeper.server.launch import prepare, serve


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tasks", type=int, default=24)
    parser.add_argument("--profile", default="smollm2-baseline")
    args = parser.parse_args()
    unwind_on_sigterm()
    config = Config()
    tasks = select(
        load_taskset(config.bench.resolved_taskset()), per_category=max(1, args.tasks // 6)
    )
    prepared = prepare(config, args.profile)
    with (
        tempfile.TemporaryDirectory() as tmp,
        serve(config, prepared, log_path=Path(tmp) / "server.log") as server,
        make_http_client(server.base_url, request_timeout_s=300) as client,
    ):
        run_tasks(client, tasks[:2], LoadSettings())  # warm-up
        cpu0, wall0 = time.process_time(), time.perf_counter()
        samples = run_tasks(client, tasks, LoadSettings())
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    ok = [s for s in samples if s.ok and s.decode_tps_client and s.decode_tps_server]
    ratios = [s.decode_tps_client / s.decode_tps_server for s in ok]  # type: ignore[operator]
    tokens = sum(s.completion_tokens or 0 for s in ok)
    within = sum(1 for r in ratios if abs(r - 1) <= 0.05)
    print(f"profile                     {args.profile}")
    print(f"requests (ok/total)         {len(ok)}/{len(samples)}")
    print(f"median server tok/s         {statistics.median(s.decode_tps_server for s in ok):.1f}")  # type: ignore[type-var]
    print(f"median client tok/s         {statistics.median(s.decode_tps_client for s in ok):.1f}")  # type: ignore[type-var]
    print(f"median client/server ratio  {statistics.median(ratios):.3f}")
    print(
        f"ratio p10..p90              {statistics.quantiles(ratios, n=10)[0]:.3f}..{statistics.quantiles(ratios, n=10)[-1]:.3f}"
    )
    print(f"within 5% of server         {within}/{len(ratios)} ({within / len(ratios):.0%})")
    print(
        f"client CPU per token        {cpu / tokens * 1e6:.0f} us ({cpu:.2f} s CPU over {tokens} tokens, {wall:.1f} s wall)"
    )
    print(f"client CPU share of wall    {cpu / wall:.1%}")


if __name__ == "__main__":
    main()
