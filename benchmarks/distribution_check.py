"""How often does the distribution check cry wolf, and what does it catch? (issue 30)

Real SmolLM2-135M servers on this host. The target (the baseline server) is always asked at
the judged sampler; the arm is one of:

- `twin`: a second baseline process (A/A: identical servers),
- `selfdraft` / `ngram`: sample-and-match arms (exact: A/A in distribution),
- `selfdraft-prob`: self-drafting with `--spec-draft-sampling probabilistic` (rejection
  sampling; exact in theory, no upstream test),
- `qwen-twin`, `qwen-draft4`, `qwen-draft4-prob`: the same on Qwen2.5-Coder 1.5B with the
  0.5B draft (`watchkeeper setup --profile qwen-draft4` first), where the draft's
  distribution differs from the target's and rejection sampling has work to do,
- a positive control, an arm-side sampler override on the twin: `greedy` (temperature 0 where
  0.7 is asked: a server that ignores temperature), `hot` (0.8 where 0.7 is asked), `top_p`
  (0.9 where 1.0 is asked).

The judged sampler truncates nothing (top_k 0, top_p 1, min_p 0), so the top_p control has
something to truncate. Each repetition is one check at the bench's default size (12 prefixes x 2 seeds x 32 tokens,
744 tested positions) with its own seeds (`--seed` + 1000 x rep), so repetitions are
independent. Prints one JSON line per repetition and a summary: verdict counts, the
false-alarm or detection rate with a Wilson 95% CI, minutes per check, and for the controls
the mean total-variation distance between the target's and the control's next-token
distributions at the tested positions (n_probs 100, tail lumped: a lower bound) and the tokens
a check needs for 80% power (from the mean surprisal z, which grows with sqrt(tokens)).

Run each under the CPU lock (servers start):

    flock /tmp/wk-cpu.lock .venv/bin/python benchmarks/distribution_check.py --arm twin --reps 8
    flock /tmp/wk-cpu.lock .venv/bin/python benchmarks/distribution_check.py --arm greedy --reps 2
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from watchkeeper.analysis.stats import wilson
from watchkeeper.checks.distribution import (
    ProbeSettings,
    continuation,
    is_sample_and_match,
    probe_arm,
    target_distribution,
)
from watchkeeper.checks.distribution_stats import total_variation
from watchkeeper.checks.replay import chat_prompt_tokens
from watchkeeper.cli.app import unwind_on_sigterm
from watchkeeper.config import Config, ProfileConfig, ServerConfig
from watchkeeper.load.records import Task
from watchkeeper.load.sampling import SamplingSettings
from watchkeeper.load.tasks import load_taskset, select
from watchkeeper.server.endpoints import ServerClient, make_http_client
from watchkeeper.server.launch import prepare, serve
from watchkeeper.server.profiles import QWEN_DRAFT, QWEN_TARGET, SMOLLM2


def _draft4(
    target: str, draft: str, sampling: Literal["probabilistic"] | None = None
) -> ProfileConfig:
    return ProfileConfig(
        model=target,
        draft_model=draft,
        spec_type="draft-simple",
        draft_n_max=4,
        draft_sampling=sampling,
    )


SERVERS: dict[str, ProfileConfig] = {
    "twin": ProfileConfig(model=SMOLLM2),
    "selfdraft": _draft4(SMOLLM2, SMOLLM2),
    "selfdraft-prob": _draft4(SMOLLM2, SMOLLM2, "probabilistic"),
    "ngram": ProfileConfig(model=SMOLLM2, spec_type="ngram-simple"),
    # The Qwen pair: a 0.5B draft for the 1.5B target, so the draft's q differs from the
    # target's p and rejection sampling has work to do (self-drafting SmolLM2 has q ~ p).
    "qwen-twin": ProfileConfig(model=QWEN_TARGET),
    "qwen-draft4": _draft4(QWEN_TARGET, QWEN_DRAFT),
    "qwen-draft4-prob": _draft4(QWEN_TARGET, QWEN_DRAFT, "probabilistic"),
}
CONTROLS: dict[str, dict[str, Any]] = {
    "greedy": {"temperature": 0.0},
    "hot": {"temperature": 0.8},
    "top_p": {"top_p": 0.9},
}
Z_POWER = 2.807 + 0.842
"""z a check must expect for 80% power at alpha 0.01 / 2 tests (two-sided 0.005)."""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arm", required=True, choices=[*SERVERS, *CONTROLS])
    parser.add_argument("--reps", type=int, default=4)
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--prefixes", type=int, default=12)
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, help="append the JSON lines to this file")
    args = parser.parse_args()
    unwind_on_sigterm()
    control = CONTROLS.get(args.arm)
    server_name = "twin" if control is not None else args.arm
    profile = SERVERS[server_name]
    config = Config(
        profiles={"base": ProfileConfig(model=profile.model), "arm": profile},
        server=ServerConfig(startup_timeout_s=120),
    )
    tasks = select(load_taskset(config.bench.resolved_taskset()), per_category=2)
    tasks = tasks[:: max(1, len(tasks) // args.prefixes)][: args.prefixes]
    logs = Path(tempfile.mkdtemp(prefix="wk-dist-"))
    rows: list[dict[str, Any]] = []
    with (
        serve(config, prepare(config, "base"), log_path=logs / "base.log") as base,
        serve(config, prepare(config, "arm"), log_path=logs / "arm.log") as arm,
    ):
        target = make_http_client(base.base_url, request_timeout_s=300)
        arm_client = make_http_client(arm.base_url, request_timeout_s=300)
        try:
            for rep in range(args.reps):
                judged = SamplingSettings(
                    temperature=args.temperature,
                    top_k=0,
                    top_p=1.0,
                    min_p=0.0,
                    seed=args.seed + 1000 * rep,
                )
                own = replace(judged, **control) if control else None
                settings = ProbeSettings(
                    judged, prefixes=args.prefixes, seeds=args.seeds, tokens=args.tokens
                )
                t0 = time.monotonic()
                result = probe_arm(
                    args.arm,
                    arm_client,
                    target,
                    tasks,
                    settings,
                    sample_and_match=is_sample_and_match(profile.spec_type, profile.draft_sampling),
                    arm_sampling=own,
                )
                row: dict[str, Any] = {
                    "arm": args.arm,
                    "rep": rep,
                    "temperature": args.temperature,
                    "verdict": result.verdict,
                    "check_verdict": str(result.check.verdict),
                    "tokens": result.check.tokens,
                    "pit_p": result.check.pit_p,
                    "z": result.check.surprisal_z,
                    "excess": result.check.excess_nats,
                    "ci": result.check.excess_ci,
                    "seeded_identity": result.to_json()["seeded_identity"],
                    "requests": result.requests,
                    "minutes": (time.monotonic() - t0) / 60,
                }
                if own is not None and rep == 0:
                    row["tv"] = _mean_tv(target, tasks, judged, own)
                rows.append(row)
                print(json.dumps(row), flush=True)
                if args.out:
                    with args.out.open("a") as fh:
                        fh.write(json.dumps(row) + "\n")
        finally:
            target.close()
            arm_client.close()
    _summary(args.arm, rows, control is not None)
    return 0


def _mean_tv(
    client: ServerClient,
    tasks: Sequence[Task],
    judged: SamplingSettings,
    own: SamplingSettings,
    *,
    prefixes: int = 2,
    tokens: int = 32,
) -> float:
    """Mean TV between the judged and the control sampler's next-token distributions, along
    continuations the target samples itself (n_probs 100, the rest a shared tail bin)."""
    tvs: list[float] = []
    for task in tasks[:prefixes]:
        prompt = chat_prompt_tokens(client, task)
        cont = continuation(client, prompt, sampling=judged, seed=judged.seed, n_predict=tokens)
        for j in range(1, len(cont)):
            ids = prompt + cont[:j]
            p = dict(target_distribution(client, ids, sampling=judged, n_probs=100) or ())
            q = dict(target_distribution(client, ids, sampling=own, n_probs=100) or ())
            tvs.append(total_variation(p, q))
    return sum(tvs) / len(tvs) if tvs else math.nan


def _summary(arm: str, rows: list[dict[str, Any]], positive: bool) -> None:
    verdicts = Counter(r["verdict"] for r in rows)
    alarms = sum(
        r["check_verdict"] == "distorted" or r["verdict"] == "sampling ignored" for r in rows
    )
    low, high = wilson(alarms, len(rows))
    minutes = sum(r["minutes"] for r in rows) / max(1, len(rows))
    what = "detection rate" if positive else "false-alarm rate"
    print(
        f"{arm}: {dict(verdicts)}; {what} {alarms}/{len(rows)} "
        f"[{low:.2f}, {high:.2f}] (Wilson 95%); {minutes:.1f} min per check"
    )
    zs = [abs(r["z"]) for r in rows if math.isfinite(r["z"])]
    if positive and zs:
        mean_z = sum(zs) / len(zs)
        tokens = rows[0]["tokens"]
        needed = tokens * (Z_POWER / mean_z) ** 2 if mean_z > 0 else math.inf
        tv = next((r["tv"] for r in rows if "tv" in r), math.nan)
        print(
            f"  mean |z| {mean_z:.1f} at {tokens} tokens; ~{needed:.0f} tokens for 80% power "
            f"(~{needed / tokens * minutes:.1f} min); mean TV {tv:.3f}"
        )


if __name__ == "__main__":
    sys.exit(main())
