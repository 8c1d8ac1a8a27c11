"""The round-to-round sd of a task's log ratio that moves every task of a round at once
(`analysis.racing_tasks.ROUND_SD`), measured from committed real A/A data, with a CI.

The one-round interval over tasks floors its variance by INSTANCE_SD^2 + ROUND_SD^2 / rounds
(what tasks cannot average away). Its 2% was assumed. Here it is measured from tables of
log(twin / baseline) per task and round, where both arms are the same build and model:

- `benchmarks/fixtures/aa_nights_2026-11-25.json`: 8 A/A nights, 24 tasks x 6 rounds, fresh
  processes for both arms before every round (`restart_every` 1). Each round's shared shift
  there is the instance's offset plus the round's drift: ROUND_SD^2 = shared^2 - INSTANCE_SD^2.
- `benchmarks/fixtures/racing_smollm2.json`: sweep campaign 1's two twins of the baseline, 18
  tasks x 4 rounds (a second reading; the sweep keeps each arm's process, so its round shift
  is the round's drift alone).

Per table, the two-way (task + round) analysis of variance without replication: the round
mean square MS_r (df R - 1) and the residual MS_e (df (T - 1)(R - 1)); shared^2 = (MS_r -
MS_e) / T (negative: none to see, read as 0). Pooled over tables (sums of squares and df
added), the CI is the exact one for the ratio shared^2 / cell^2 from F = MS_r / MS_e ~ (1 + T
ratio) F(df_r, df_e), times MS_e (Scheffe's; it holds where the point estimate is 0, which a
chi-square on MS_r - MS_e does not), and beside it a percentile bootstrap over the tables
(nights resampled, 2000 draws, seed 0). Cells are
winsorized as the verdicts' statistics do (`table_fit.winsorize_cells`), and the raw cells
are shown too.

    PYTHONPATH=. .venv/bin/python benchmarks/round_sd.py
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path

import numpy as np
from scipy import stats

from watchkeeper.analysis.racing_tasks import INSTANCE_SD, ROUND_SD
from watchkeeper.analysis.table_fit import winsorize_cells

FIXTURES = Path(__file__).parent / "fixtures"


def aa_nights() -> list[np.ndarray]:
    """One tasks x rounds table of log(twin / baseline) per A/A night."""
    data = json.loads((FIXTURES / "aa_nights_2026-11-25.json").read_text())
    return [
        np.asarray([t["log_ratios"] for t in night["tasks"].values()], dtype=float)
        for night in data["tables"]
    ]


def sweep_twins() -> list[np.ndarray]:
    """Campaign 1's twins against the baseline: one table per twin."""
    data = json.loads((FIXTURES / "racing_smollm2.json").read_text())
    tps: dict[str, dict[tuple[str, int], float]] = defaultdict(dict)
    for cell in data["cells"]:
        tps[cell["arm"]][(cell["task_id"], cell["round"])] = cell["tps"]
    base = tps["smollm2-baseline"]
    tasks = sorted({t for t, _ in base})
    rounds = sorted({r for _, r in base})
    return [
        np.asarray([[math.log(tps[arm][(t, r)] / base[(t, r)]) for r in rounds] for t in tasks])
        for arm in ("smollm2-twin1", "smollm2-twin2")
    ]


def sums(table: np.ndarray) -> tuple[float, float, float, float, int]:
    """(SS_rounds, df_rounds, SS_resid, df_resid, tasks) of one complete table."""
    t, r = table.shape
    grand = table.mean()
    rows = table.mean(axis=1, keepdims=True)
    cols = table.mean(axis=0, keepdims=True)
    ss_r = t * float(((cols - grand) ** 2).sum())
    ss_e = float(((table - rows - cols + grand) ** 2).sum())
    return ss_r, float(r - 1), ss_e, float((t - 1) * (r - 1)), t


def shared_var(tables: list[np.ndarray]) -> tuple[float, float, float, float, float, float]:
    """(shared^2 estimate, MS_r, MS_e, df_r, df_e, tasks) pooled over ``tables``."""
    parts = [sums(tb) for tb in tables]
    df_r = sum(p[1] for p in parts)
    df_e = sum(p[3] for p in parts)
    ms_r = sum(p[0] for p in parts) / df_r
    ms_e = sum(p[2] for p in parts) / df_e
    tasks = float(np.mean([p[4] for p in parts]))
    return (ms_r - ms_e) / tasks, ms_r, ms_e, df_r, df_e, tasks


def f_ci(ms_r: float, ms_e: float, df_r: float, df_e: float, tasks: float) -> tuple[float, float]:
    """95% CI of shared^2 from the exact CI of shared^2 / cell^2 (F = MS_r / MS_e)."""
    ratio = ms_r / ms_e
    hi_q, lo_q = stats.f.ppf(0.975, df_r, df_e), stats.f.ppf(0.025, df_r, df_e)
    return (
        max((ratio / float(hi_q) - 1.0) / tasks, 0.0) * ms_e,
        max((ratio / float(lo_q) - 1.0) / tasks, 0.0) * ms_e,
    )


def bootstrap_ci(tables: list[np.ndarray], draws: int = 2000) -> tuple[float, float]:
    rng = np.random.default_rng(0)
    found = []
    for _ in range(draws):
        pick = rng.integers(0, len(tables), len(tables))
        found.append(max(shared_var([tables[i] for i in pick])[0], 0.0))
    low, high = np.percentile(found, [2.5, 97.5])
    return float(low), float(high)


def round_sd_of(shared2: float, instance: bool) -> float:
    """The round's sd from the shared shift's variance (less the instance's where each round
    had fresh processes)."""
    return math.sqrt(max(shared2 - (INSTANCE_SD**2 if instance else 0.0), 0.0))


def report(name: str, tables: list[np.ndarray], instance: bool) -> tuple[float, float]:
    """Print one source's figures; (round sd, its CI's upper end) on winsorized cells."""
    out = (math.nan, math.nan)
    for label, use in (("raw", tables), ("winsorized", [winsorize_cells(t)[0] for t in tables])):
        est, ms_r, ms_e, df_r, df_e, tasks = shared_var(use)
        lo, hi = f_ci(ms_r, ms_e, df_r, df_e, tasks)
        b_lo, b_hi = bootstrap_ci(use)
        per = [round_sd_of(shared_var([t])[0], instance) for t in use]
        sd = round_sd_of(est, instance)
        top = max(round_sd_of(hi, instance), round_sd_of(b_hi, instance))
        print(
            f"{name}, {label}: shared shift sd {math.sqrt(max(est, 0.0)):.4f} "
            f"(cell sd {math.sqrt(ms_e):.4f}, F {ms_r / ms_e:.2f} on {df_r:.0f} and {df_e:.0f} "
            f"df); round sd {sd:.4f}, 95% CI {round_sd_of(lo, instance):.4f}-"
            f"{round_sd_of(hi, instance):.4f} (F), {round_sd_of(b_lo, instance):.4f}-{round_sd_of(b_hi, instance):.4f}"
            f" (bootstrap over {len(use)} tables); per table " + ", ".join(f"{v:.4f}" for v in per)
        )
        out = (sd, top)
    return out


def main() -> None:
    print(f"ROUND_SD now {ROUND_SD}, INSTANCE_SD {INSTANCE_SD}")
    sd, top = report("A/A nights (8 x 24 tasks x 6 rounds, fresh processes)", aa_nights(), True)
    report("sweep twins (2 x 18 tasks x 4 rounds, kept processes)", sweep_twins(), False)
    print(f"for task_interval.py: --round-sd {sd:.4f} and {top:.4f}")


if __name__ == "__main__":
    main()
