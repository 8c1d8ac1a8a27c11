"""The racer's price of round 1 and of the exact identity pass against what a real sweep took.

Reads one sweep campaign's stored runs (SQLite, opened read-only), prices its measured round
and its identity pass as the racer did before campaign/round_price.py (each racing arm's mean
warm-up request a task; the probes at EXACT_PROBE_SHARE of the probed arms' round 1) and as it
does now (each task from its size), and prints both beside the seconds the requests took,
overall and per category. No server, seconds.

The calibration is not stored: `--verify` and `--draft-ratio` take the figures the sweep
printed (its report's cost table); the defaults are campaign 1's (2026-12-07, Qwen2.5-Coder
1.5B + 0.5B: "verification cost: 49 tokens in one batch = 8.62 decode steps", 17 tokens 4.03,
9 tokens 2.82, 5 tokens 1.94; draft step 0.56 target steps). `--no-calibration` prices the
prefill from the warm-up alone (the fallback).

    PYTHONPATH=. nice -n 19 .venv/bin/python benchmarks/round_price_real.py --campaign 1
"""

from __future__ import annotations

import argparse
import json
import sqlite3
from collections import Counter, defaultdict
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from watchkeeper.analysis.racing_types import RaceArm, RaceSettings
from watchkeeper.campaign.calibration import Calibration, DraftCost, VerifyCost
from watchkeeper.campaign.racer import EXACT_PROBE_SHARE, Racer
from watchkeeper.campaign.round_price import RoundPrice, round_price
from watchkeeper.load.records import RequestSample, RunPurpose, RunResult, Task

DB = Path.home() / ".local/share/watchkeeper/watchkeeper.db"
TASKSET = Path(__file__).resolve().parent.parent / "jobs/tasksets/standard.jsonl"
VERIFY = ["5:1.94", "9:2.82", "17:4.03", "49:8.62"]


def load_tasks(path: Path, cap: int) -> dict[str, Task]:
    out = {}
    for line in path.read_text().splitlines():
        if line.strip():
            r = json.loads(line)
            tools = tuple(r["tools"]) if r.get("tools") else None
            out[r["id"]] = Task(
                r["id"], r["category"], tuple(r["messages"]), min(cap, r["max_tokens"]), tools
            )
    return out


def load_runs(db: sqlite3.Connection, campaign: int) -> list[RunResult]:
    """The campaign's runs as RunResult, every purpose (identity runs keep theirs)."""
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    cols = (
        "task_id, category, seq, latency_ms, prompt_tokens, completion_tokens, prompt_ms, "
        "predicted_ms, draft_n, draft_n_accepted, error"
    )
    runs = []
    q = "select id, arm, round, is_warmup, purpose from run where campaign_id=? order by id"
    for rid, arm, rnd, warm, purpose in db.execute(q, (campaign,)).fetchall():
        samples = tuple(
            RequestSample(
                row[0],
                row[1],
                row[2],
                t0,
                latency_s=row[3] / 1000.0 if row[3] is not None else None,
                prompt_tokens=row[4],
                completion_tokens=row[5],
                prompt_ms=row[6],
                predicted_ms=row[7],
                draft_n=row[8],
                draft_n_accepted=row[9],
                error=row[10],
            )
            for row in db.execute(
                f"select {cols} from request_sample where run_id=? order by seq", (rid,)
            )
        )
        runs.append(
            RunResult(
                arm, arm, rnd, bool(warm), 1, t0, t0, samples, (), purpose=RunPurpose(purpose)
            )
        )
    return runs


def calibration(verify: Sequence[str], ratio: float, arms: Sequence[str]) -> Calibration:
    """The sweep's printed costs as a Calibration: every batch under some arm's name (the
    racer reads them all), the draft ratio on the arms named with `draft`."""
    batches = [VerifyCost(int(t), float(c)) for t, c in (v.split(":") for v in verify)]
    names = list(arms[1:])
    return Calibration(
        {a: DraftCost(ratio if "draft" in a else 0.0) for a in names},
        {a: batches[i % len(batches)] for i, a in enumerate(names)},
    )


def _mins(s: float) -> str:
    return f"{s / 60:6.1f}"


def _line(name: str, old: float, new: float, actual: float) -> str:
    return (
        f"{name:12s} old {_mins(old)}  new {_mins(new)}  actual {_mins(actual)} min  "
        f"(old {100 * (old / actual - 1):+4.0f}%, new {100 * (new / actual - 1):+4.0f}%)"
        if actual
        else f"{name:12s} nothing measured"
    )


def round_one(runs: list[RunResult], tasks: dict[str, Task], price: RoundPrice) -> None:
    warm = [r for r in runs if r.purpose == RunPurpose.WARMUP]
    measured = [r for r in runs if r.purpose == RunPurpose.MEASURED and r.round == 1]
    flat = sum(
        sum(s.latency_s or 0.0 for s in r.samples) / len(r.samples) for r in warm if r.samples
    )
    arms = sorted({r.arm for r in measured})
    ids = sorted({s.task_id for r in measured for s in r.samples})
    actual: dict[str, float] = defaultdict(float)
    for r in measured:
        for s in r.samples:
            actual[tasks[s.task_id].category] += s.latency_s or 0.0
    print(f"round 1: {len(ids)} tasks x {len(arms)} arms (sum of request latencies)")
    for c in sorted(actual):
        of = [tasks[i] for i in ids if tasks[i].category == c]
        print("  " + _line(c, flat * len(of), price.round_s(of, arms), actual[c]))
    total_new = price.round_s([tasks[i] for i in ids], arms)
    print("  " + _line("all", flat * len(ids), total_new, sum(actual.values())))
    whole = list(tasks.values())
    print(
        f"  the whole set ({len(whole)} tasks): old {_mins(flat * len(whole))} new "
        f"{_mins(price.round_s(whole, arms))} min"
    )


def identity(runs: list[RunResult], tasks: dict[str, Task], price: RoundPrice) -> None:
    probes = [r for r in runs if r.purpose == RunPurpose.IDENTITY]
    if not probes:
        print("identity pass: none stored")
        return
    r1 = [r for r in runs if r.purpose == RunPurpose.MEASURED and r.round == 1]
    measured = {(r.arm, s.task_id): s for r in r1 for s in r.samples if s.ok}
    arms = [r.arm for r in probes]
    ids = sorted({s.task_id for r in probes for s in r.samples})
    round_tasks = len({s.task_id for r in r1 for s in r.samples})
    print(f"identity pass (exact): {len(ids)} tasks x {len(arms)} arms: {', '.join(arms)}")
    by_cat: dict[str, list[str]] = defaultdict(list)
    for i in ids:
        by_cat[tasks[i].category].append(i)
    tot_old = tot_new = tot_act = 0.0
    for c in sorted(by_cat):
        act = sum(s.latency_s or 0.0 for r in probes for s in r.samples if s.task_id in by_cat[c])
        old = 0.0  # the flat share, one probe's part: EXACT_PROBE_SHARE x the arm's mean request
        for a in arms:
            mine = [s.latency_s or 0.0 for r in r1 if r.arm == a for s in r.samples]
            old += EXACT_PROBE_SHARE * len(by_cat[c]) * sum(mine) / max(1, len(mine))
        stand = [
            (i, price.prompt_tokens(tasks[i]), price.answer_tokens(tasks[i])) for i in by_cat[c]
        ]
        new = price.probes_s(stand, arms, measured)
        print("  " + _line(c, old, new, act) + "  (probes alone)")
        tot_old, tot_new, tot_act = tot_old + old, tot_new + new, tot_act + act
    stand = [(i, price.prompt_tokens(tasks[i]), price.answer_tokens(tasks[i])) for i in ids]
    new_all = price.exact_pass_s(stand, arms, measured)
    spent = [s.latency_s or 0.0 for r in probes for s in r.samples]
    print("  " + _line("probes", tot_old, tot_new, tot_act))
    print(
        f"  whole pass, new price with the A/A floor and divergence replays: {_mins(new_all)} "
        f"min; the probes' requests took {_mins(sum(spent))} min (the report's time split "
        f"gives the pass's wall time, server starts and judging included); old over "
        f"{round_tasks} measured tasks: {_mins(tot_old)} min"
    )
    plan = price.exact_pass_s(
        price.category_probes(list(tasks.values()), [tasks[i].category for i in ids]), arms
    )
    print(f"  before round 1 (category means of the set, no round-1 figures): {_mins(plan)} min")


def replan(
    runs: list[RunResult],
    tasks: dict[str, Task],
    costs: Calibration | None,
    *,
    budget_min: float,
    before_s: float,
    identity: Sequence[str],
) -> None:
    """The racer's plan before round 1 on this campaign's warm-up, as it was (no task list)
    and as it is now, with the time the sweep had spent before round 1."""
    warm = [r for r in runs if r.purpose == RunPurpose.WARMUP]
    names = [r.arm for r in warm]
    whole = list(tasks.values())
    chosen = [tasks[i] for i in identity]
    for label, given in (("old", ()), ("new", whole)):
        racer = Racer(
            [RaceArm(a, 0.0, baseline=(i == 0)) for i, a in enumerate(names)],
            RaceSettings(seed=42),
            budget_s=budget_min * 60.0,
            clock=iter([0.0, before_s]).__next__,
            progress=lambda _m: None,
            probe_share=EXACT_PROBE_SHARE,
        )
        racer.costs = costs
        racer.probe_count, racer.probe_fraction = len(chosen), len(chosen) / len(whole)

        def probes(r: Racer = racer) -> tuple[Task, ...]:  # BenchPlan.probe_tasks
            ids = r.sampled()
            if ids is None:
                return tuple(chosen)
            left = Counter(t.category for t in chosen)
            out = []
            for t in whole:
                if t.id in ids and left[t.category] > 0:
                    left[t.category] -= 1
                    out.append(t)
            return tuple(out)

        racer.probe_tasks = probes
        got = racer.plan_rounds(warm, len(whole), [(t.id, t.category) for t in whole], given)
        print(f"  {label} plan: {got.why}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--db", type=Path, default=DB)
    ap.add_argument("--campaign", type=int, default=1)
    ap.add_argument("--taskset", type=Path, default=TASKSET)
    ap.add_argument("--max-tokens", type=int, default=64, help="the sweep's answer cap")
    ap.add_argument("--verify", nargs="*", default=VERIFY, help="TOKENS:STEPS batches")
    ap.add_argument("--draft-ratio", type=float, default=0.56)
    ap.add_argument("--no-calibration", action="store_true")
    ap.add_argument("--budget", type=float, default=40.05, help="the sweep's budget, minutes")
    args = ap.parse_args()
    db = sqlite3.connect(f"file:{args.db}?mode=ro", uri=True)
    runs = load_runs(db, args.campaign)
    tasks = load_tasks(args.taskset, args.max_tokens)
    warm = [r for r in runs if r.purpose == RunPurpose.WARMUP]
    arms = [r.arm for r in warm]
    costs = None if args.no_calibration else calibration(args.verify, args.draft_ratio, arms)
    price = round_price(warm, list(tasks.values()), arms, arms[0], costs)
    if price is None:
        raise SystemExit("no warm-up timings: the racer prices as before")
    print(
        f"campaign {args.campaign}: {price.how}; {price.tokens_per_char:.3f} tokens a "
        f"character, answers at {price.answer_share:.0%} of the cap, decode step "
        f"{price.step_s * 1000:.1f} ms"
    )
    for a, r in price.rates.items():
        pre = f"{r.prefill_s * 1000:5.1f}" if r.prefill_s else "   --"
        print(f"  {a:32s} prefill {pre} ms/token, decode {r.decode_s * 1000:6.1f} ms/token")
    round_one(runs, tasks, price)
    identity(runs, tasks, price)
    started, params = db.execute(
        "select started_at, params from campaign where id=?", (args.campaign,)
    ).fetchone()
    first = db.execute(
        "select min(started_at) from run where campaign_id=? and purpose='measured'",
        (args.campaign,),
    ).fetchone()[0]
    before = (datetime.fromisoformat(first) - datetime.fromisoformat(started)).total_seconds()
    print(f"the plan before round 1 ({before / 60:.1f} min spent, budget {args.budget} min):")
    ids = json.loads(params).get("identity_tasks") or []
    replan(runs, tasks, costs, budget_min=args.budget, before_s=before, identity=ids)


if __name__ == "__main__":
    main()
