"""The load ladder's page: per candidate and level every metric's reading side by side
(SLO attainment, E2E and TTFT p90, decode speed-up; the deciding one in bold) and the
crossover; acceptance per drafting arm and level; per level and arm the latency percentiles
(ITL per chunk with tokens per chunk), goodput and output tok/s; and plots (latency against
load per arm; the deciding metric and the decode speed-up against load; acceptance).

Markdown is plain string building here (no template): a table per section, the figures the
ladder computed, nothing recomputed."""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from watchkeeper.analysis.crossover import Crossover, LevelRatios
from watchkeeper.analysis.latency import Estimate, LatencyStats
from watchkeeper.analysis.load_compare import CROSSOVER_METRICS, LABELS
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
    ]
    if result.saturation:
        lines += [
            "Saturation (every request slot busy, completed requests over wall time): "
            + ", ".join(f"`{arm}` {rate:.3g} req/s" for arm, rate in result.saturation)
            + ".",
            "",
        ]
    lines += ["## Crossover", ""]
    lines += [f"- {c.sentence}" for c in result.crossovers]
    lines += ["", *_readings_table(result)]
    lines += [
        "",
        f"The crossover is decided on **{LABELS[result.metric]}** (`--crossover-metric "
        f"{result.metric}`); every metric's reading is shown, its state in brackets. SLO "
        "attainment: the candidate's share of requests meeting the service levels minus the "
        "baseline's, paired by round (defined where a round has no good request); p90 "
        "columns: the baseline's p90 over the candidate's (above 1: the candidate is faster); "
        "decode: per-request decode tok/s, candidate over baseline, paired by task and round "
        "(the bench's CI, docs/method.md); goodput and output tok/s ratios paired by round. "
        "All t intervals over rounds. `oversaturated`: the baseline completed under 95% of "
        "the offered rate or its TTFT grew through the round; such a level stays out of the "
        "crossover.",
        "",
        *acceptance_lines(result),
        "## Latency (ms, mean over rounds with 95% CI over rounds)",
        "",
        LATENCY_HEADER,
        "|" + "---|" * 15,
    ]
    for level in result.levels:
        lines += [_latency_row(s) for s in level.latency]
    lines += [
        "",
        "`*`: a tail quantile read from fewer than 1 / (1 - q) values per round (fewer than 100 "
        "for a p99): biased low, its CI is not to be trusted. " + ITL_NOTE + _trim_note(result),
    ]
    for name in plot_names:
        lines += ["", f"![{name}]({name})"]
    return "\n".join(lines) + "\n"


ITL_NOTE = (
    "ITL is read per chunk: llama-server streams each token as its own event, but a "
    "speculating arm's accepted tokens leave together microseconds apart, so pieces closer "
    "than 1 ms are joined into one chunk and `tok/chunk` says how many tokens a chunk carried "
    "(1.0: one token per step). A speculating arm's ITL is then the time between verification "
    "steps, not per token, and TPOT carries the comparison between arms."
)


def _trim_note(result: LadderResult) -> str:
    trimmed = {s.trimmed for lv in result.levels for s in lv.latency if s.trimmed}
    if not trimmed:
        return ""
    return (
        f" Open-loop levels: the first and last {max(trimmed):.0%} of each round's arrivals "
        "(ramp-up, drain) are left out of the figures; saturation is read from all of them."
    )


def _cell(c: Crossover, lv: LevelRatios, metric: str) -> str:
    r = lv.reading(metric)
    if r is None:
        return "-"
    mark = "**" if metric == c.metric else ""
    return f"{mark}{r.text()} [{r.state}]{mark}"


def _readings_table(result: LadderResult) -> list[str]:
    lines = [
        "| arm | load | state | SLO attainment (cand - base) | E2E p90 (base / cand) | "
        "TTFT p90 (base / cand) | decode speed-up | goodput ratio | output tok/s ratio |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for c in result.crossovers:
        for lv in c.levels:
            over = f" (oversaturated: {', '.join(lv.oversaturated)})" if lv.oversaturated else ""
            cells = " | ".join(_cell(c, lv, m) for m in CROSSOVER_METRICS)
            lines.append(
                f"| {c.arm} | {lv.load} | {c.state(lv)}{over} | {cells} | "
                f"{_ratio(lv.goodput)} | {_ratio(lv.output_tps)} |"
            )
    return lines


def acceptance_lines(result: LadderResult) -> list[str]:
    """Acceptance per drafting arm and level: the rate and tokens per target step (the mean
    accepted length plus one), each a mean over rounds with its t interval."""
    rows = [
        f"| {s.arm} | {lv.load} | {_ci(s.acceptance, 3)} | {_ci(s.tokens_per_step, 2)} | "
        f"{_ci(s.tokens_per_chunk, 2)} |"
        for lv in result.levels
        for s in lv.latency
        if s.acceptance is not None
    ]
    if not rows:
        return []
    return [
        "## Acceptance under load (mean over rounds, 95% CI over rounds)",
        "",
        "| arm | load | acceptance rate | tokens per step | tok/chunk |",
        "|---|---|---|---|---|",
        *rows,
        "",
        "Acceptance rate: accepted over drafted tokens (the requests' draft_n_accepted / "
        "draft_n); tokens per step: output tokens over target decode steps (tokens - "
        "accepted), the mean accepted length plus the target's own token.",
        "",
    ]


def _latency_row(s: LatencyStats) -> str:
    q = s.value
    good = f"{s.good_fraction:.0%}" if s.good_fraction is not None else "-"
    over = " (oversaturated)" if s.oversaturated else ""
    return (
        f"| {s.arm} | {s.load}{over} | {_ci(q('ttft_ms', 'p50'))} | {_ci(q('ttft_ms', 'p90'))} | "
        f"{_ci(q('ttft_ms', 'p99'))} | {_ci(s.chunk_itl.get('p50'), 1)} | "
        f"{_ci(s.chunk_itl.get('p99'), 1)} | {_ci(s.tokens_per_chunk, 2)} | "
        f"{_ci(q('tpot_ms', 'p50'), 1)} | {_ci(q('e2e_ms', 'p50'))} | {_ci(q('e2e_ms', 'p99'))} | "
        f"{_ci(s.goodput_rps, 2)} | {_ci(s.output_tps, 1)} | {good} | {s.expired} |"
    )


LATENCY_HEADER = (
    "| arm | load | TTFT p50 | TTFT p90 | TTFT p99 | ITL p50 per chunk | ITL p99 per chunk | "
    "tok/chunk | TPOT p50 | E2E p50 | E2E p99 | goodput req/s | output tok/s | good | expired |"
)


def latency_lines(stats: Sequence[LatencyStats]) -> list[str]:
    """A bench's latency table (ms, mean over rounds with 95% CI), for the console."""
    if not stats:
        return []
    return [
        f"Latency at {stats[0].load} (ms, 95% CI over rounds; goodput: {stats[0].slo})",
        LATENCY_HEADER,
        "|" + "---|" * 15,
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
    """Per candidate against load, with 95% CIs: the deciding metric's reading (top) and the
    per-request decode speed-up (bottom), each with its line of no change."""
    metrics = [result.metric] if result.metric == "decode" else [result.metric, "decode"]
    fig = _figure(len(metrics))
    axes = fig.subplots(len(metrics), 1, squeeze=False)
    for ax, metric in zip(axes[:, 0], metrics, strict=True):
        null = 0.0 if metric == "goodput" else 1.0
        for c in result.crossovers:
            pts = [(lv.level, r) for lv in c.levels if (r := lv.reading(metric)) is not None]
            if not pts:
                continue
            ys = [r.estimate for _, r in pts]
            lo = [max(0.0, r.estimate - r.low) for _, r in pts]
            hi = [max(0.0, r.high - r.estimate) for _, r in pts]
            ax.errorbar([x for x, _ in pts], ys, yerr=[lo, hi], fmt="-o", capsize=4, label=c.arm)
        ax.axhline(null, color="grey", linewidth=1)
        ax.set_xscale("log", base=2)
        ax.set_xlabel(result.unit)
        decides = " (decides)" if metric == result.metric else ""
        ax.set_ylabel(f"{LABELS[metric]}{decides}", fontsize=8)
        ax.legend(fontsize=7)
    return _png(fig)


def acceptance_plot(result: LadderResult) -> bytes | None:
    """Per drafting arm: acceptance rate against load with its 95% CI (None: nobody drafts)."""
    series: dict[str, list[tuple[float, Estimate]]] = {}
    for lv in result.levels:
        for s in lv.latency:
            if s.acceptance is not None:
                series.setdefault(s.arm, []).append((lv.level, s.acceptance))
    if not series:
        return None
    fig = _figure(1)
    ax = fig.subplots()
    for arm, pts in series.items():
        ys = [e.estimate for _, e in pts]
        lo = [e.estimate - e.low if e.has_ci else 0.0 for _, e in pts]
        hi = [e.high - e.estimate if e.has_ci else 0.0 for _, e in pts]
        ax.errorbar([x for x, _ in pts], ys, yerr=[lo, hi], fmt="-o", capsize=4, label=arm)
    ax.set_xscale("log", base=2)
    ax.set_ylim(0.0, 1.05)
    ax.set_xlabel(result.unit)
    ax.set_ylabel("acceptance rate")
    ax.legend()
    return _png(fig)


def write_ladder_report(result: LadderResult, directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    plots = {
        "load_ladder_latency.png": latency_plot(result),
        "load_ladder_speedup.png": speedup_plot(result),
    }
    if (accepted := acceptance_plot(result)) is not None:
        plots["load_ladder_acceptance.png"] = accepted
    for name, data in plots.items():
        atomic_write(directory / name, data)
    path = directory / "load_ladder.md"
    atomic_write(path, render_ladder(result, list(plots)).encode())
    return path
