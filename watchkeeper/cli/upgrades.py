"""Commands about llama.cpp releases: `cache` (the builds on disk), `bisect`, `upgrade-check`."""

from __future__ import annotations

import argparse
from typing import Any

from watchkeeper.cli.common import add_common, out, progress, split
from watchkeeper.config import Config


def cmd_cache(args: argparse.Namespace, config: Config) -> int:
    from watchkeeper.server.cache import disk_figure, prune_plan, releases, remove

    cache_dir = config.server.resolved_cache_dir()
    found = releases(cache_dir)
    for r in found:
        named = f"b{r.build_number}" if r.build_number is not None else "unnamed (build 0)"
        state = "built" if r.built else "source only"
        used = r.last_used.strftime("%Y-%m-%d %H:%M") if r.last_used else "never"
        out.print(
            f"{r.key:<22} {r.variant:<5} {named:<18} {state:<12} "
            f"{r.size_bytes / 2**20:>7.0f} MiB  last used {used}"
        )
    if args.prune:
        keep = {config.server.llama_cpp_version, *(split(args.keep) or [])}
        for doomed in prune_plan(found, keep=keep, recent=args.recent):
            progress(f"removing {doomed.path} ({doomed.size_bytes / 2**20:.0f} MiB)")
            remove(doomed, progress)
    out.print(disk_figure(cache_dir).line())
    return 0


def register(sub: Any) -> None:
    """Add this group's subcommands to the main parser."""
    p = sub.add_parser(
        "cache",
        help="the llama.cpp builds on disk: releases, sizes, and --prune",
        description="List the cached llama.cpp release builds (version, variant, build "
        "number, size, last use) and the disk they take; --prune removes all but the "
        "configured release, --keep and the --recent most recently used.",
    )
    add_common(p)
    p.add_argument("--prune", action="store_true", help="remove releases the policy drops")
    p.add_argument("--keep", metavar="V1,V2", help="versions never pruned (besides the configured)")
    p.add_argument(
        "--recent", type=int, default=3, metavar="N", help="keep the N most recently used others"
    )
    p.set_defaults(handler=cmd_cache)
