"""The path of a sweep's configuration through `watchkeeper/server/`: which server module is
entered, in order, while the sweep resolves its candidates for the installed build, plans its
bench and prepares every arm (binary, models, argv), stopping before any server starts.

An "entry" is a call into a function of a server module from code outside that module (a call
inside the module is the same room). Ping-pong between modules (install -> build -> install ->
sdist -> install ...) shows as a long alternating sequence; one module owning one job shows
as few entries. Needs the cached llama-server build and the family's models (`make setup`:
SmolLM2; `watchkeeper setup --profile qwen-draft4` for qwen). Nothing is timed.

    .venv/bin/python benchmarks/server_path.py [--family smollm2|qwen] [--steps 26]
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

from watchkeeper.campaign.sweep_plan import sweep_candidates, sweep_plan
from watchkeeper.config import Config
from watchkeeper.server.launch import prepare

SERVER = "watchkeeper.server."


def trace(run: Any) -> list[str]:
    """The server modules entered while `run()` runs, in order."""
    entered: list[str] = []

    def profile(frame: FrameType, event: str, _arg: object) -> None:
        if event != "call":
            return
        callee = frame.f_globals.get("__name__", "")
        if not callee.startswith(SERVER):
            return
        caller = frame.f_back.f_globals.get("__name__", "") if frame.f_back else ""
        if caller != callee:
            entered.append(callee.removeprefix(SERVER))

    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
    return entered


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--family", default="smollm2", choices=["smollm2", "qwen"])
    parser.add_argument("--steps", type=int, default=26, help="print the first N entries")
    args = parser.parse_args()
    config = Config()

    def configure() -> None:
        cfg, generated = sweep_candidates(
            config, family=args.family, target=None, draft=None, profile=None, progress=print
        )
        plan = sweep_plan(
            cfg, generated, None, rounds=3, taskset=None, per_category=3, max_tokens=64
        )
        for name in plan.profiles:
            prepare(cfg, name, progress=lambda _m: None)

    entered = trace(configure)
    print(f"{len(entered)} entries into server/ modules; the first {args.steps}:")
    print("  " + " -> ".join(entered[: args.steps]))
    first = Counter(entered[: args.steps])
    total = Counter(entered)
    print(f"{'module':<12} {'first ' + str(args.steps):>9} {'all':>6}")
    for module, n in total.most_common():
        print(f"{module:<12} {first.get(module, 0):>9} {n:>6}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    raise SystemExit(main())
