"""The real-server positive controls, each run N times beside a one-core busy loop (issue 58).

A positive control is a test that must catch a slower build, a stall or a regression. Its
claim holds only if a neighbour on a shared CI machine cannot flip it, so each one is run
`--runs` times, one after another, with this whole script under `scripts/neighbour.sh` (one
busy core for the whole loop), and the count of passes goes into the test's docstring. Each run
is its own pytest process, so no fixture or server outlives a run. Prints one line per run as it
ends and a table at the end; `--json` keeps every run's outcome and minutes.

    flock /tmp/wk-measure.lock scripts/neighbour.sh -- .venv/bin/python \
        benchmarks/controls_beside_neighbour.py --runs 10 [--only soak_reference] [--json F]

Never beside another measurement: the neighbour is the one load this script means to add.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CONTROLS = {
    "soak_reference": "tests/soak/test_soak_reference.py::"
    "test_a_soak_beside_the_reference_files_a_slower_build_and_never_an_identical_one",
    "stall_real": "tests/nightly/test_stall_real.py::"
    "test_a_build_that_stalls_on_a_few_requests_is_not_called_no_change",
    "soak_drift": "tests/soak/test_soak_faults.py::"
    "test_a_server_restarted_as_a_slower_build_halfway_shows_as_throughput_drift",
    "daemon_nights": "tests/daemon/test_daemon_nights.py::"
    "test_the_daemon_passes_two_aa_nights_then_files_one_issue_for_a_slower_build",
}
"""Short name -> pytest node id of each real-server positive control."""


@dataclass
class Outcome:
    control: str
    run: int
    passed: bool
    minutes: float
    tail: str
    """The last lines pytest printed: on a failure, the assertion that failed; on a pass, what
    the test printed."""


def run_once(node: str) -> tuple[bool, str]:
    proc = subprocess.run(
        # -rP: what a passing control prints (its figures) reaches the tail too.
        [sys.executable, "-m", "pytest", "-q", "-rP", "-p", "no:cacheprovider", node],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
    return proc.returncode == 0, tail


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10, help="runs of each control (10)")
    parser.add_argument(
        "--only", action="append", choices=sorted(CONTROLS), help="these controls (repeatable)"
    )
    parser.add_argument("--json", type=Path, help="write every run's outcome here")
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    chosen = args.only or list(CONTROLS)

    outcomes: list[Outcome] = []
    for name in chosen:
        for k in range(1, args.runs + 1):
            start = time.monotonic()
            passed, tail = run_once(CONTROLS[name])
            minutes = (time.monotonic() - start) / 60
            outcomes.append(Outcome(name, k, passed, minutes, tail))
            word = "passed" if passed else "FAILED"
            print(f"{name} run {k}/{args.runs}: {word} in {minutes:.1f} min", flush=True)
            if not passed:
                print(tail, flush=True)
            if args.json:
                args.json.write_text(json.dumps([asdict(o) for o in outcomes], indent=1))

    print(f"\n{'control':<16} {'runs':>4} {'passed':>6} {'minutes':>8}  (median a run)")
    for name in chosen:
        mine = [o for o in outcomes if o.control == name]
        total = sum(o.minutes for o in mine)
        median = sorted(o.minutes for o in mine)[len(mine) // 2]
        passes = sum(o.passed for o in mine)
        print(f"{name:<16} {len(mine):>4} {passes:>6} {total:>8.1f}  ({median:.1f})")
    return 0 if all(o.passed for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
