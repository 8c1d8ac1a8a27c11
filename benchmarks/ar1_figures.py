"""Every figure the soak's AR(1) rule gives on seeded series, as one digest to compare two trees.

The rule (`soak/ar1.py`) was written twice before 7 Dec 2026 (soak/paired.py for the ratio's
interval and its sizing hint, soak/depth.py for the depth slope), and the sizing hint clamped
the corrected lag-1 without the 0 the other two had. This draws `--series` (900) seeded
AR(1) series (2-150 values, true lag-1 -0.6 to 0.95, floors 0 to 0.9, one in 50 constant)
and puts each through the paired interval (every one), the sizing hint (every third) and
the depth slope (every one with 6 or more values), and prints the counts and the sha256 of
every figure's repr. Run it on a tree from before a change and on one after: the same digest
means the change moved no figure, bit for bit.

    PYTHONPATH=. .venv/bin/python benchmarks/ar1_figures.py [--series 900] [--json OUT]
    git archive COMMIT watchkeeper | tar -x -C /tmp/old && \\
        PYTHONPATH=/tmp/old .venv/bin/python benchmarks/ar1_figures.py

(It reads `ar1_t_interval` from soak/ar1.py, or from soak/paired.py on a tree from before.)
"""

from __future__ import annotations

import argparse
import hashlib
import json
from typing import Any

import numpy as np

from watchkeeper.soak import depth, paired

try:
    from watchkeeper.soak.ar1 import ar1_t_interval
except ImportError:  # a tree from before soak/ar1.py
    from watchkeeper.soak.paired import ar1_t_interval

LENGTHS = [2, 3, 4, 6, 8, 12, 20, 29, 30, 31, 45, 80, 150]
FLOORS = [0.0, 0.1, 0.3, 0.5, 0.9]


def one(i: int) -> dict[str, Any]:
    """Series `i`, drawn from its own seed, and every figure the rule gives on it."""
    rng = np.random.default_rng(1000 + i)
    n = int(rng.choice(LENGTHS))
    r = float(rng.uniform(-0.6, 0.95))
    floor = float(rng.choice(FLOORS))
    sd = float(rng.uniform(0.005, 0.06))
    z = rng.standard_normal(n)
    x = np.empty(n)
    x[0] = z[0]
    for t in range(1, n):
        x[t] = r * x[t - 1] + np.sqrt(1 - r * r) * z[t]
    logs = float(rng.normal(0, 0.05)) + sd * x
    if i % 50 == 7:
        logs[:] = logs[0]  # a series that does not vary
    iv = ar1_t_interval(logs.tolist(), floor=floor)
    figures = (iv.mean, iv.low, iv.high, iv.r_estimate, iv.r_used, iv.n_eff)
    row: dict[str, Any] = {
        "i": i,
        "n": n,
        "floor": floor,
        "interval": [repr(float(v)) for v in figures],
    }
    if i % 3 == 0:
        s = paired.pairs_needed(logs.tolist(), threshold=0.03, floor=floor)
        row["pairs_needed"] = None if s is None else [s.low, s.high]
    t_h = np.cumsum(rng.uniform(0.05, 0.2, n))
    values = np.exp(np.log(50.0) + logs + rng.normal(-0.02, 0.02) * (t_h - t_h[0]))
    d = depth.slope_drift(t_h.tolist(), values.tolist(), threshold=0.1, floor=floor)
    row["slope"] = None if d is None else {k: repr(v) for k, v in sorted(d.to_json().items())}
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", type=int, default=900)
    parser.add_argument("--json", help="write every figure here")
    args = parser.parse_args()
    rows = [one(i) for i in range(args.series)]
    text = json.dumps(rows, indent=0, sort_keys=True)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            f.write(text)
    sized = sum("pairs_needed" in r for r in rows)
    slopes = sum(r["slope"] is not None for r in rows)
    negative = sum(float(r["interval"][3]) < 0 for r in rows)
    print(
        f"{len(rows)} series ({negative} with a negative lag-1 estimate), {sized} sized, {slopes} slopes"
    )
    print(f"sha256 of every figure: {hashlib.sha256(text.encode()).hexdigest()}")


if __name__ == "__main__":
    main()
