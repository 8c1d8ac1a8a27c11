"""Is a server process a replicate? The A/A instance effect, measured.

Two processes of the same llama-server binary, model and flags may run a few percent apart for
their whole lives (where their threads and memory land). Inside one process pair, rounds cannot
see that offset: a night that keeps its two servers up reports a CI that is too narrow for a
claim about the *systems*. This measures it: one A/A run (`smollm2-baseline` against its twin,
back to back per task, as the nightly) with fresh processes for both arms every
`--restart-every` rounds, then a one-way ANOVA of the per-round log ratios (geometric mean over
tasks, outlier cells winsorized as the verdicts do) grouped by process pair:

- F and its p-value: do pairs differ by more than their rounds do?
- the instance component sd_I = sqrt((MS_between - MS_within) / rounds per pair) and the
  round sd_R = sqrt(MS_within), both on the log scale;
- what that means for one night of R rounds: sd of its ratio when one process pair serves the
  whole night, sqrt(sd_I^2 + sd_R^2 / R), against fresh processes every round,
  sqrt((sd_I^2 + sd_R^2) / R).

    .venv/bin/python benchmarks/instance_effect.py [--rounds 24] [--restart-every 3]
        [--per-category 2] [--runs 1] [--reuse FILE] [--json]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import statistics
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats as scistats

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.detector import Table, as_array, measure_aa_night
from watchkeeper.analysis.table_fit import winsorize
from watchkeeper.cli.app import unwind_on_sigterm


def round_ratios(table: Table) -> np.ndarray:
    """Per-round log ratio: the mean over tasks of the winsorized task x round table."""
    array, _ = winsorize(as_array(table))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.asarray(np.nanmean(array, axis=0), dtype=float)


def anova(per_round: np.ndarray, every: int) -> dict[str, Any]:
    groups = [per_round[i : i + every] for i in range(0, len(per_round), every)]
    groups = [g[~np.isnan(g)] for g in groups if np.count_nonzero(~np.isnan(g)) >= 2]
    k = statistics.mean(len(g) for g in groups)
    result = scistats.f_oneway(*groups)
    means = [float(np.mean(g)) for g in groups]
    ms_within = float(np.mean([np.var(g, ddof=1) for g in groups]))
    ms_between = k * float(np.var(means, ddof=1))
    sd_i = math.sqrt(max(0.0, (ms_between - ms_within) / k))
    return {
        "pairs": len(groups),
        "rounds_per_pair": k,
        "pair_ratios": [math.exp(m) for m in means],
        "F": float(result.statistic),
        "p": float(result.pvalue),
        "sd_instance": sd_i,
        "sd_round": math.sqrt(ms_within),
    }


def night_sd(sd_i: float, sd_r: float, rounds: int) -> tuple[float, float]:
    """(one process pair all night, fresh processes every round)."""
    return (
        math.sqrt(sd_i**2 + sd_r**2 / rounds),
        math.sqrt((sd_i**2 + sd_r**2) / rounds),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=24)
    parser.add_argument("--restart-every", type=int, default=3)
    parser.add_argument("--per-category", type=int, default=2)
    parser.add_argument("--runs", type=int, default=1, help="independent A/A runs")
    parser.add_argument("--night-rounds", type=int, default=12, help="rounds of a nightly")
    parser.add_argument("--reuse", help="tables JSON: loaded when it exists, else saved")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    args.warmup_all = False
    unwind_on_sigterm()
    reuse = Path(args.reuse) if args.reuse else None
    tables: list[Table] = (
        json.loads(reuse.read_text())["tables"] if reuse and reuse.exists() else []
    )
    out: dict[str, Any] = {"runs": []}
    with contextlib.redirect_stdout(sys.stderr if args.json else sys.stdout):
        for i in range(len(tables), args.runs):
            print(
                f"A/A run {i + 1}/{args.runs}: {args.rounds} rounds, fresh processes every "
                f"{args.restart_every} rounds ...",
                flush=True,
            )
            tables.append(measure_aa_night(args, i + 1))
            print(f"  done in {tables[-1]['minutes']:.1f} min", flush=True)
            if reuse is not None:
                reuse.write_text(json.dumps({"tables": tables}))
        for table in tables:
            every = int(table.get("restart_every") or args.restart_every)
            a = anova(round_ratios(table), every)
            held, fresh = night_sd(a["sd_instance"], a["sd_round"], args.night_rounds)
            a.update(
                minutes=table["minutes"],
                tasks=len(table["tasks"]),
                restart_every=every,
                night_sd_one_pair=held,
                night_sd_fresh_every_round=fresh,
            )
            out["runs"].append(a)
            pairs = ", ".join(f"{r:.3f}" for r in a["pair_ratios"])
            print(
                f"run {table['night']}: {a['tasks']} tasks, {a['pairs']} process pairs x "
                f"{a['rounds_per_pair']:.0f} rounds, {table['minutes']:.1f} min\n"
                f"  pair ratios: {pairs}\n"
                f"  F = {a['F']:.2f}, p = {a['p']:.3g}; sd instance {a['sd_instance']:.2%}, "
                f"sd round {a['sd_round']:.2%}\n"
                f"  a {args.night_rounds}-round night's ratio sd: {held:.2%} with one process "
                f"pair, {fresh:.2%} with fresh processes every round"
            )
    if args.json:
        print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
