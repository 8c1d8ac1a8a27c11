"""The project's own GPU check: on a GPU host with the cache filled and no network, build the
CUDA llama-server (offline, from the sdist in the download cache) and run a short bench of the
SmolLM2 profiles through the default `server.cuda = true` path (no `server.binary`), then print
each arm's offload, VRAM, energy per token and speed-up, and the wall time. Planned to fit 10
minutes on one GPU: ~5 min build (16 cores), 4 fit starts, a 4-arm x 6-task x 2-round bench.

    python benchmarks/gpu_check.py              # refuses (exit 3) without an NVIDIA GPU
    python benchmarks/gpu_check.py --cpu        # the same steps on the CPU build (n/a for GPU)
    python benchmarks/gpu_check.py --dry-run    # print the config and commands, run nothing

Exit 0: every arm offloaded as asked and measured; 1: a step failed or a GPU figure is
missing on a GPU host; 3: no GPU (and no --cpu).
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from watchkeeper.host import gpu

PROFILES = "smollm2-baseline,smollm2-selfdraft,smollm2-ngram,smollm2-selfdraft-q8kv"
LIMIT_S = 600


def config_text(folder: Path, *, cuda: bool, cache_dir: str) -> str:
    cache = f'cache_dir = "{cache_dir}"\n' if cache_dir else ""
    return (
        f"[server]\ncuda = {'true' if cuda else 'false'}\n{cache}"
        f'[database]\nurl = "sqlite:///{folder / "wk.db"}"\n'
        f'[bench]\nreports_dir = "{folder / "reports"}"\n'
        '[profiles.smollm2-selfdraft-q8kv]\nmodel = "smollm2-135m-instruct-q4_1"\n'
        'draft_model = "smollm2-135m-instruct-q4_1"\nspec_type = "draft-simple"\n'
        'draft_n_max = 4\ncache_type_k = "q8_0"\ncache_type_v = "q8_0"\n'
    )


def _mib(value: Any) -> str:
    return "n/a" if value is None else f"{value / (1 << 20):.0f}"


def _num(value: Any, digits: int) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def summary(result: dict[str, Any], stderr: str) -> tuple[list[str], bool]:
    """Lines to print, and whether every arm has its GPU figures."""
    lines = [ln.lstrip("· ") for ln in stderr.splitlines() if "offload" in ln or "fit " in ln]
    lines.append("")
    lines.append("arm | tok/s | speed-up | peak VRAM MiB | J/token | energy/token vs baseline")
    complete = True
    for stats in result.get("arm_stats", []):
        overall, cost = stats["overall"], stats.get("gpu")
        speed = overall.get("speedup")
        ratio = (cost or {}).get("energy_ratio")
        complete = complete and cost is not None and cost.get("joules_per_token") is not None
        lines.append(
            " | ".join(
                [
                    stats["arm"],
                    _num(overall.get("median_tps"), 1),
                    "—" if speed is None else f"{speed['estimate']:.2f}x",
                    _mib((cost or {}).get("peak_vram_bytes")),
                    _num((cost or {}).get("joules_per_token"), 3),
                    "—" if ratio is None else f"{ratio['estimate']:.2f}x",
                ]
            )
        )
    return lines, complete


def _run(cmd: list[str], timeout_s: float, *, capture: bool) -> tuple[int, str, str]:
    """Run a watchkeeper command; past the budget it gets SIGINT (as Ctrl-C: it stops the
    servers it started) and 30 s to unwind before SIGKILL. Raises TimeoutExpired then."""
    pipe = subprocess.PIPE if capture else None
    with subprocess.Popen(cmd, stdout=pipe, stderr=pipe, text=True) as proc:
        try:
            out, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGINT)
            try:
                proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()
            raise
    return proc.returncode, out or "", err or ""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu", action="store_true", help="run the CPU path on a host without GPU")
    parser.add_argument("--dry-run", action="store_true")
    parser.add_argument("--cache-dir", default="", help="server.cache_dir (default: the usual)")
    parser.add_argument("--profiles", default=PROFILES)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--fit-context", type=int, default=32768)
    parser.add_argument("--watchkeeper", default=str(Path(sys.executable).parent / "watchkeeper"))
    args = parser.parse_args()
    started = time.monotonic()
    found = gpu.devices()
    if not found and not args.cpu and not args.dry_run:
        print(
            "gpu-check: no NVIDIA GPU on this host (NVML and nvidia-smi list none): nothing to "
            "check; --cpu runs the same steps on the CPU build (GPU figures n/a)",
            file=sys.stderr,
        )
        return 3
    cuda = bool(found)
    print(f"gpu-check: {'; '.join(d.name for d in found) or 'no GPU: CPU path'}", flush=True)
    folder = Path(tempfile.mkdtemp(prefix="wk-gpu-check-"))
    config = folder / "wk.toml"
    config.write_text(config_text(folder, cuda=cuda, cache_dir=args.cache_dir))
    wk = [args.watchkeeper]
    setup = [*wk, "setup", *(["--cuda"] if cuda else []), "--config", str(config)]
    setup += ["--profile", "smollm2-baseline"]
    bench = [*wk, "bench", "--config", str(config), "--profiles", args.profiles]
    bench += ["--per-category", "1", "--rounds", str(args.rounds), "--json"]
    bench += ["--fit-context", str(args.fit_context)]
    if args.dry_run:
        print(config.read_text())
        print(" ".join(setup))
        print(" ".join(bench))
        return 0
    try:
        if _run(setup, LIMIT_S, capture=False)[0] != 0:
            print("gpu-check: setup failed", file=sys.stderr)
            return 1
        left = max(60, LIMIT_S - int(time.monotonic() - started))
        code, stdout, stderr = _run(bench, left, capture=True)
    except subprocess.TimeoutExpired as exc:
        print(
            f"gpu-check: over the {LIMIT_S} s budget in: {' '.join(exc.cmd[:3])}; files in {folder}"
        )
        return 1
    (folder / "bench.err").write_text(stderr)
    (folder / "bench.json").write_text(stdout)
    if code != 0:
        print(stderr[-3000:], file=sys.stderr)
        print(f"gpu-check: bench failed (exit {code}); logs in {folder}")
        return 1
    result = json.loads(stdout)
    lines, complete = summary(result, stderr)
    print("\n".join(lines))
    print(f"report: {result.get('report_path')}")
    print(f"gpu-check: {time.monotonic() - started:.0f} s wall, files in {folder}")
    return 0 if complete or not cuda else 1


if __name__ == "__main__":
    sys.exit(main())
