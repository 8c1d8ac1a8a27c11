"""Where does a depth-4 soak's block-to-block noise come from: the host, or the blocks' mix?

The 130-minute depth-4 soak of the committed unit
(reports/2026-11-28-soak-c4-shuffled/speculative_soak.json, 28 Nov 2026)
measured its 2-minute blocks' aggregate throughput scattering 10.0% (baseline) and 7.6%
(ngram-mod) around their trends, three times what the depth-4 simulation assumed, so its drift
CIs never reached the 10% threshold. Two explanations predict different things:

- **the mix**: each block draws a different stretch of the shuffled task set (prompts of 100-900
  tokens, answers of 96-192), so blocks differ in how much prefill stalls the other slots.
  Then a block that sends *the same requests in the same order every time* scatters far less.
- **the host**: the VM's capacity itself wanders on a scale of minutes. Then the fixed block
  scatters as much, and the server's CPU seconds per block (or the host's steal time) show
  where the time went.

This runs one server with the unit's ExecStart flags (the baseline arm, `--parallel 4`), sends
the same fixed block (two tasks of every category, in a fixed order, 4 in flight, temperature
0, no logprobs, the soak's request shape) back to back for `--minutes`, and prints per block:
wall seconds, completion tokens, tokens per wall second, the server's CPU seconds, tokens per
CPU second, and the host's steal; then the sd of log throughput around a straight line, its
lag-1 autocorrelation, and the same for tokens per CPU second.

    .venv/bin/python benchmarks/depth4_host_wander.py --minutes 20 [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from watchkeeper.cli.app import unwind_on_sigterm
from watchkeeper.load.client import chat
from watchkeeper.load.records import Task
from watchkeeper.load.tasks import load_taskset
from watchkeeper.server.endpoints import make_http_client
from watchkeeper.server.process import ManagedServer, free_port
from watchkeeper.soak.ar1 import lag1

ROOT = Path(__file__).resolve().parents[1]
UNIT = ROOT / "systemd" / "llama-server-speculative.service"


def unit_flags(unit: Path) -> list[str]:
    """The unit's ExecStart flags after the binary, without --model/--host/--port."""
    line = next(x for x in unit.read_text().splitlines() if x.startswith("ExecStart="))
    argv = shlex.split(line.removeprefix("ExecStart="))[1:]
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
            continue
        if arg in ("--model", "--host", "--port"):
            skip = True
            continue
        out.append(arg)
    return out


def fixed_block(tasks: list[Task], per_category: int) -> list[Task]:
    seen: dict[str, int] = {}
    block = []
    for task in tasks:
        if seen.get(task.category, 0) < per_category:
            seen[task.category] = seen.get(task.category, 0) + 1
            block.append(task)
    # interleave categories so the long prompts do not all arrive together
    return sorted(block, key=lambda t: (int(t.id.rsplit("-", 1)[1]), t.category))


def steal_s() -> float:
    with open("/proc/stat") as f:
        fields = f.readline().split()
    return int(fields[8]) / psutil.cpu_count() / 100.0  # USER_HZ=100, per core


def cpu_s(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return float(t.user + t.system)


def run_block(client: Any, block: list[Task], proc: psutil.Process) -> dict[str, Any]:
    c0, s0, t0 = cpu_s(proc), steal_s(), time.perf_counter()
    with ThreadPoolExecutor(4) as pool:
        samples = list(
            pool.map(lambda it: chat(client, it[1], seq=it[0], top_logprobs=0), enumerate(block))
        )
    wall = time.perf_counter() - t0
    errors = [s.error for s in samples if s.error]
    if errors:
        raise SystemExit(f"request failed: {errors[0]}")
    tokens = sum(int(s.completion_tokens or 0) for s in samples)
    cpu = cpu_s(proc) - c0
    return {
        "wall_s": wall,
        "tokens": tokens,
        "prompt_tokens": sum(int(s.prompt_tokens or 0) for s in samples),
        "tps": tokens / wall,
        "cpu_s": cpu,
        "tokens_per_cpu_s": tokens / cpu if cpu > 0 else math.nan,
        "steal_s": steal_s() - s0,
    }


def detrended_sd(values: list[float]) -> tuple[float, float]:
    y = np.log(np.asarray(values, float))
    x = np.arange(y.size, dtype=float)
    resid = y - np.polyval(np.polyfit(x, y, 1), x)
    return float(resid.std(ddof=2)), lag1(resid)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=20.0)
    parser.add_argument("--per-category", type=int, default=2)
    parser.add_argument("--binary", default=None, help="llama-server (default: the cached build)")
    parser.add_argument("--model", default=None, help="GGUF (default: the installed Qwen)")
    parser.add_argument("--json", help="write the rows and summary here")
    args = parser.parse_args()
    unwind_on_sigterm()
    binary = args.binary or str(
        sorted((Path.home() / ".cache/watchkeeper/llama.cpp").glob("*/build/bin/llama-server"))[-1]
    )
    model = args.model or str(
        next((Path.home() / ".cache/watchkeeper").rglob("qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"))
    )
    block = fixed_block(load_taskset(ROOT / "jobs/tasksets/standard.jsonl"), args.per_category)
    port = free_port()
    argv = (binary, "--model", model, *unit_flags(UNIT), "--host", "127.0.0.1", "--port", str(port))
    print("server:", " ".join(argv[2:]), flush=True)
    print(f"block: {len(block)} tasks ({', '.join(t.id for t in block)}), 4 in flight", flush=True)
    rows: list[dict[str, Any]] = []
    with ManagedServer(argv, port=port, log_path=Path("/tmp/depth4_host_wander.log")) as server:
        proc = psutil.Process(server.info.pid)
        client = make_http_client(server.info.base_url, request_timeout_s=600, pool_size=4)
        run_block(client, block, proc)  # warm-up, set aside
        deadline = time.monotonic() + args.minutes * 60
        while time.monotonic() < deadline:
            row = run_block(client, block, proc)
            rows.append(row)
            print(
                f"block {len(rows):3d}: {row['wall_s']:6.1f} s, {row['tokens']} tok, "
                f"{row['tps']:5.2f} tok/s, cpu {row['cpu_s']:6.1f} s "
                f"({row['tokens_per_cpu_s']:.3f} tok/cpu-s), steal {row['steal_s']:.2f} s",
                flush=True,
            )
        client.close()
    sd, r1 = detrended_sd([r["tps"] for r in rows])
    sd_cpu, r1_cpu = detrended_sd([r["tokens_per_cpu_s"] for r in rows])
    token_spread = (min(r["tokens"] for r in rows), max(r["tokens"] for r in rows))
    summary = {
        "blocks": len(rows),
        "median_wall_s": float(np.median([r["wall_s"] for r in rows])),
        "sd_log_tps": sd,
        "lag1_tps": r1,
        "sd_log_tokens_per_cpu_s": sd_cpu,
        "lag1_tokens_per_cpu_s": r1_cpu,
        "tokens_min_max": token_spread,
        "steal_s_total": sum(r["steal_s"] for r in rows),
    }
    print(
        f"\n{len(rows)} fixed blocks of {summary['median_wall_s']:.0f} s (median): throughput sd "
        f"{sd:.1%} around its line (lag-1 {r1:+.2f}); tokens per CPU second sd {sd_cpu:.1%} "
        f"(lag-1 {r1_cpu:+.2f}); completion tokens per block {token_spread[0]}-{token_spread[1]}; "
        f"steal {summary['steal_s_total']:.1f} s in all"
    )
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "summary": summary}, indent=1))


if __name__ == "__main__":
    main()
