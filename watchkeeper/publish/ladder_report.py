"""The load ladder's page: per level and arm the latency percentiles, goodput and output
tok/s, per candidate the speed-up and goodput ratio with CIs and the crossover, and two plots
(latency against load per arm; speed-up against load with its CI per candidate).

Markdown is plain string building here (no template): a table per section, the figures the
ladder computed, nothing recomputed."""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from watchkeeper.analysis.latency import Estimate, LatencyStats
from watchkeeper.publish.plots import atomic_write

if TYPE_CHECKING:
    from watchkeeper.analysis.ladder import LadderResult

_METRICS = (("ttft_ms", "TTFT"), ("itl_ms", "ITL"), ("tpot_ms", "TPOT"), ("e2e_ms", "E2E"))


def _ci(e: Estimate | None, digits: int = 0) -> str:
    if e is None:
        return "-"
    mark = "*" if e.thin else ""
    if not e.has_ci:
        return f"{e.estimate:.{digits}f}{mark}"
    return f"{e.estimate:.{digits}f} ({e.low:.{digits}f}-{e.high:.{digits}f}){mark}"


def _ratio(e: Estimate | None) -> str:
    if e is None:
        return "-"
    if not e.has_ci:
        return f"{e.estimate:.3f}"
    return f"{e.estimate:.3f} ({e.low:.3f}-{e.high:.3f})"


def render_ladder(result: LadderResult, plot_names: Sequence[str] = ()) -> str:
    lines = [
        f"# Load ladder: {', '.join(result.arms)}",
        "",
        f"Baseline `{result.baseline}`; {result.mode} levels "
        f"{', '.join(lv.load for lv in result.levels)}; wall time {result.wall_s / 60:.1f} min. "
        f"Service levels for goodput: {result.slo}.",
        "",
        "## Crossover",
        "",
    ]
    lines += [f"- {c.sentence}" for c in result.crossovers]
    lines += [
        "",
        "| arm | load | speed-up (95% CI) | verdict | goodput ratio | output tok/s ratio |",
        "|---|---|---|---|---|---|",
    ]
    for c in result.crossovers:
        for lv in c.levels:
            s = lv.speedup
            speed = (
                f"{s.estimate:.3f} ({s.low:.3f}-{s.high:.3f})"
                if s and s.has_ci
                else (f"{s.estimate:.3f}" if s else "-")
            )
            lines.append(
                f"| {c.arm} | {lv.load} | {speed} | {s.verdict if s else '-'} | "
                f"{_ratio(lv.goodput)} | {_ratio(lv.output_tps)} |"
            )
    lines += [
        "",
        "Speed-up: per-request decode tok/s, candidate over baseline, paired by task and round "
        "(the bench's CI, docs/method.md); goodput and output tok/s ratios paired by round, "
        "t interval over rounds.",
        "",
        "## Latency (ms, mean over rounds with 95% CI over rounds)",
        "",
        LATENCY_HEADER,
        "|" + "---|" * 14,
    ]
    for level in result.levels:
        lines += [_latency_row(s) for s in level.latency]
    lines += [
        "",
        "`*`: a tail quantile read from fewer than 1 / (1 - q) values per round (fewer than 100 "
        "for a p99): biased low, its CI is not to be trusted.",
    ]
    for name in plot_names:
        lines += ["", f"![{name}]({name})"]
    return "\n".join(lines) + "\n"


def _latency_row(s: LatencyStats) -> str:
    q = s.value
    good = f"{s.good_fraction:.0%}" if s.good_fraction is not None else "-"
    return (
        f"| {s.arm} | {s.load} | {_ci(q('ttft_ms', 'p50'))} | {_ci(q('ttft_ms', 'p90'))} | "
        f"{_ci(q('ttft_ms', 'p99'))} | {_ci(q('itl_ms', 'p50'), 1)} | "
        f"{_ci(q('itl_ms', 'p99'), 1)} | "
        f"{_ci(q('tpot_ms', 'p50'), 1)} | {_ci(q('e2e_ms', 'p50'))} | {_ci(q('e2e_ms', 'p99'))} | "
        f"{_ci(s.goodput_rps, 2)} | {_ci(s.output_tps, 1)} | {good} | {s.expired} |"
    )


LATENCY_HEADER = (
    "| arm | load | TTFT p50 | TTFT p90 | TTFT p99 | ITL p50 | ITL p99 | TPOT p50 | "
    "E2E p50 | E2E p99 | goodput req/s | output tok/s | good | expired |"
)


def latency_lines(stats: Sequence[LatencyStats]) -> list[str]:
    """A bench's latency table (ms, mean over rounds with 95% CI), for the console."""
    if not stats:
        return []
    return [
        f"Latency at {stats[0].load} (ms, 95% CI over rounds; goodput: {stats[0].slo})",
        LATENCY_HEADER,
        "|" + "---|" * 14,
        *(_latency_row(s) for s in stats),
    ]


def _figure(rows: int) -> Figure:
    fig = Figure(figsize=(8.0, 3.2 * rows), dpi=110, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _png(fig: Figure) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", metadata={"Software": None})
    fig.clear()
    return buffer.getvalue()


def latency_plot(result: LadderResult) -> bytes:
    """Per arm: TTFT and E2E p50/p90/p99 against load, with the CI over rounds as error bars."""
    arms = list(result.arms)
    fig = _figure(len(arms))
    axes = fig.subplots(len(arms), 1, squeeze=False)
    for ax, arm in zip(axes[:, 0], arms, strict=True):
        for metric, label in (("ttft_ms", "TTFT"), ("e2e_ms", "E2E")):
            for stat, style in (("p50", "-o"), ("p90", "--s"), ("p99", ":^")):
                xs, ys, lo, hi = [], [], [], []
                for lv in result.levels:
                    s = next((x for x in lv.latency if x.arm == arm), None)
                    e = s.value(metric, stat) if s else None
                    if e is None:
                        continue
                    xs.append(lv.level)
                    ys.append(e.estimate)
                    lo.append(e.estimate - e.low if e.has_ci else 0.0)
                    hi.append(e.high - e.estimate if e.has_ci else 0.0)
                if xs:
                    ax.errorbar(
                        xs, ys, yerr=[lo, hi], fmt=style, label=f"{label} {stat}", capsize=3
                    )
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(arm)
        ax.set_xlabel(result.unit)
        ax.set_ylabel("ms")
        ax.legend(fontsize=7, ncols=2)
    return _png(fig)


def speedup_plot(result: LadderResult) -> bytes:
    """Per candidate: the speed-up against load with its 95% CI, and the line at 1."""
    fig = _figure(1)
    ax = fig.subplots()
    for c in result.crossovers:
        pts = [(lv.level, lv.speedup) for lv in c.levels if lv.speedup is not None]
        if not pts:
            continue
        xs = [x for x, _ in pts]
        ys = [s.estimate for _, s in pts]
        lo = [s.estimate - s.low for _, s in pts]
        hi = [s.high - s.estimate for _, s in pts]
        ax.errorbar(xs, ys, yerr=[lo, hi], fmt="-o", capsize=4, label=c.arm)
    ax.axhline(1.0, color="grey", linewidth=1)
    ax.set_xscale("log", base=2)
    ax.set_xlabel(result.unit)
    ax.set_ylabel(f"speed-up over {result.baseline}")
    ax.legend()
    return _png(fig)


def write_ladder_report(result: LadderResult, directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    plots = {
        "load_ladder_latency.png": latency_plot(result),
        "load_ladder_speedup.png": speedup_plot(result),
    }
    for name, data in plots.items():
        atomic_write(directory / name, data)
    path = directory / "load_ladder.md"
    atomic_write(path, render_ladder(result, list(plots)).encode())
    return path
