"""`--fit-context N`: start each arm's server at N tokens of context and read back what it got.

llama.cpp's own `--fit` shrinks what the user left unset until the model fits free memory and
says so in its log; here the context is set, so the start either allocates all of it or fails
(out of device memory): a start that comes up, read back through /props, is the measurement.
The verdicts and their lines are `analysis/fit.py`'s.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, replace
from pathlib import Path

from watchkeeper.analysis.bench_types import BenchResult
from watchkeeper.analysis.fit import FitCheck, parse_n_ctx, props_n_ctx
from watchkeeper.config import Config
from watchkeeper.config.paths import runs_log_dir
from watchkeeper.errors import ServerError
from watchkeeper.host import gpu
from watchkeeper.server.endpoints import fetch_props, make_http_client
from watchkeeper.server.gguf import GgufError, read_context_length
from watchkeeper.server.launch import PreparedProfile, prepare, start

Progress = Callable[[str], None]


def _cache_types(prepared: PreparedProfile) -> str:
    p = prepared.profile
    return f"{p.cache_type_k or 'f16'}/{p.cache_type_v or 'f16'}"


def model_context(prepared: PreparedProfile) -> int | None:
    """The target model's training context (its GGUF), None where unknown or unreadable."""
    if prepared.model is None:
        return None
    try:
        return read_context_length(prepared.model.path)
    except (OSError, GgufError):
        return None


def fit_one(config: Config, prepared: PreparedProfile, context: int, log_path: Path) -> FitCheck:
    """The arm started at `context`, or at its model's maximum where that is shorter (what
    llama-server would cap it to): a memory answer, with the model's limit beside it."""
    limit = model_context(prepared)
    started_at = min(context, limit) if limit else context
    at_context = replace(
        prepared, profile=prepared.profile.model_copy(update={"ctx_size": started_at})
    )
    total = sum(d.memory_total_bytes for d in gpu.devices()) or None
    try:
        running = start(config, at_context, log_path=log_path)
    except ServerError as exc:
        first = str(exc).splitlines()[0] if str(exc) else "start failed"
        why = [ln for ln in exc.log_tail.splitlines() if "memory" in ln or "alloc" in ln]
        first = f"{first}: {why[-1].strip()}" if why else first
        return FitCheck(
            prepared.name,
            context,
            None,
            None,
            None,
            total,
            _cache_types(prepared),
            first,
            model_context=limit,
        )
    assert running.managed is not None
    try:
        with make_http_client(running.base_url, request_timeout_s=30.0) as client:
            props = fetch_props(client)
        vram, source = running.vram()
        rss = running.managed.rss_bytes() or None
    finally:
        running.stop_monitor()
        running.managed.stop()
    got = props_n_ctx(props)
    if got is None:
        got = parse_n_ctx(log_path.read_text(encoding="utf-8", errors="replace"))
    return FitCheck(
        prepared.name,
        context,
        got,
        vram or None,
        rss,
        total,
        _cache_types(prepared),
        model_context=limit,
        vram_source=source if vram and source != gpu.BY_PROCESS else "",
    )


def fit_at_context(
    config: Config,
    prepared: Sequence[PreparedProfile],
    context: int,
    log_dir: Path,
    *,
    progress: Progress,
) -> tuple[FitCheck, ...]:
    """Every managed arm started alone at `context` (external arms are not ours to restart)."""
    checks = []
    for p in prepared:
        if p.external_url:
            progress(f"fit {p.name}: external server, not started at another context")
            continue
        limit = model_context(p)
        at = (
            f"{limit} tokens of context (the model's maximum; {context} asked)"
            if limit and limit < context
            else f"{context} tokens of context"
        )
        progress(f"fit {p.name}: starting at {at}")
        check = fit_one(config, p, context, log_dir / f"{p.name}-fit-{context}.log")
        progress(check.line())
        checks.append(check)
    return tuple(checks)


def fit_before_bench(
    config: Config, profiles: Sequence[str], context: int | None, *, progress: Progress
) -> tuple[FitCheck, ...]:
    """The bench's fit check: `--fit-context`, else `bench.fit_context` (0: none)."""
    wanted = context if context is not None else config.bench.fit_context
    if not wanted:
        return ()
    prepared = [prepare(config, name, progress=progress) for name in profiles]
    return fit_at_context(config, prepared, wanted, runs_log_dir(), progress=progress)


def with_fit(result: BenchResult, checks: tuple[FitCheck, ...]) -> BenchResult:
    """`extras["fit_at_context"]` for --json (nothing added without a fit check)."""
    if not checks:
        return result
    rows = [
        {
            **asdict(c),
            "fits": c.fits,
            "limited_by_model": c.limited_by_model,
            "measured_context": c.measured_context,
            "line": c.line(),
        }
        for c in checks
    ]
    return replace(result, extras={**result.extras, "fit_at_context": rows})
