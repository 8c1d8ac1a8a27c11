"""What acceptance pays on this host: the target alone against the target with synthetic
acceptance (llama.cpp's `--spec-synth-len`) at `--rates`, draft length `--draft-n`, paired by
rounds, and the break-even acceptance with its 95% CI (`campaign/verify_price.py`,
`analysis/verify_price.py`).

Writes a tiny random drafter with the target's tokenizer first (`scripts/tiny_draft_gguf.py`,
the build's synthetic acceptance needs a drafter to run; its own cost is next to nothing), then
one bench campaign (speed only, answers cut at `--max-tokens`, `--per-category` tasks of each
category of the standard task set), and `verify_price.json` plus the campaign's report in
`--out`. Copy `verify_price.json` into the sweep's reports directory and the next sweep report
gets its section "What acceptance pays here". Times a llama-server: run it under the
measurement lock, on a quiet host.

    flock /tmp/wk-measure.lock .venv/bin/python benchmarks/verify_price_real.py \\
        --target qwen-baseline --out reports/verify-price [--config watchkeeper.toml] \\
        [--draft-n 4] [--rates 0.25,0.5,0.75] [--rounds 3] [--per-category 1] \\
        [--max-tokens 64] [--db wk.db]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from watchkeeper.campaign.verify_price import VerifyPricePlan, run_verify_price
from watchkeeper.cli.app import unwind_on_sigterm
from watchkeeper.config import DatabaseConfig, load_config
from watchkeeper.format import share
from watchkeeper.server.launch import prepare

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "tiny_draft_gguf.py"


def _gguf_py(binary_path: Path) -> Path:
    """The sdist's gguf-py beside the build (its source tree is kept in the cache)."""
    for parent in binary_path.parents:
        if (parent / "src" / "llama.cpp" / "gguf-py").is_dir():
            return parent / "src" / "llama.cpp" / "gguf-py"
    raise SystemExit(f"no src/llama.cpp/gguf-py above {binary_path}: pass a cached build")


def write_drafter(out: Path, target_gguf: Path, binary_path: Path) -> Path:
    argv = [sys.executable, str(SCRIPT), str(out), "--gguf-py", str(_gguf_py(binary_path))]
    done = subprocess.run(
        [*argv, "--tokenizer-from", str(target_gguf)], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"tiny_draft_gguf.py failed:\n{done.stderr[-2000:]}")
    return out


def _rates(text: str) -> tuple[float, ...]:
    return tuple(float(x) for x in text.split(",") if x.strip())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", required=True, help="the profile whose model is priced")
    parser.add_argument("--config", type=Path, default=None)
    parser.add_argument("--draft-n", type=int, default=4)
    parser.add_argument("--rates", type=_rates, default=(0.25, 0.5, 0.75))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--per-category", type=int, default=1)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--db", type=Path, help="SQLite file to keep (default: a temporary one)")
    args = parser.parse_args()
    unwind_on_sigterm()
    start = time.monotonic()

    def progress(message: str) -> None:
        print(f"[{(time.monotonic() - start) / 60:5.1f} min] {message}", flush=True)

    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        db = args.db.resolve() if args.db else Path(tmp) / "wk.db"
        config = load_config(args.config)
        config = config.model_copy(update={"database": DatabaseConfig(url=f"sqlite:///{db}")})
        target = prepare(config, args.target, progress=progress)
        if target.model is None or target.binary is None:
            raise SystemExit(f"profile {args.target} names no local model and build to price")
        drafter = write_drafter(
            Path(tmp) / "tiny-draft.gguf", target.model.path, target.binary.path
        )
        progress(f"drafter: {drafter.name} ({drafter.stat().st_size / 2**20:.0f} MiB)")
        plan = VerifyPricePlan(
            target=args.target, drafter=drafter, draft_n=args.draft_n, rates=args.rates,
            rounds=args.rounds, per_category=args.per_category, max_tokens=args.max_tokens,
        )  # fmt: skip
        vp, result = run_verify_price(config, plan, out=out, progress=progress)
    print(f"\ncampaign {result.campaign_id}: {args.target}, draft length {args.draft_n}")
    for a in vp.arms:
        print(
            f"{a.arm:32} asked {share(a.asked, 0):>4}  counted {share(a.acceptance)} "
            f"({a.accepted}/{a.drafted})  speed-up {a.speedup:.3f}x  c {a.cost:.3f}"
        )
    ci = f" ({vp.cost_low:.3f}-{vp.cost_high:.3f})" if vp.cost_low and vp.cost_high else ""
    print(f"c (plain step / speculative step) {vp.cost:.3f}{ci} over {vp.rounds} rounds")
    print(f"break-even acceptance at n {args.draft_n}: {vp.break_even.text()}")


if __name__ == "__main__":
    main()
