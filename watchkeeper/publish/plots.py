"""PNG plots for the benchmark report.

Figures are built on `matplotlib.figure.Figure` with an explicit Agg canvas instead of pyplot:
pyplot keeps global state (current figure, interactive backend) that a long-running agent
would leak, and it would pick a GUI backend on a desktop. PNGs carry no software/time metadata
so the same result renders to the same bytes and reports diff cleanly.
"""

from __future__ import annotations

import io
import math
import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from watchkeeper.analysis.acceptance import result_curves
from watchkeeper.analysis.benchmark import ALL, BenchResult
from watchkeeper.nightly.digest import RatioPlotData, SeriesPlotData
from watchkeeper.server.spec_knobs import model_drafter

_DPI = 110
_SIZE = (8.0, 4.5)


def atomic_write(path: Path, data: bytes) -> None:
    """Readers (a web server, `latest.md` viewers) must never see a half-written file."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        # mkstemp creates 0600; reports are meant to be served and read by others.
        os.fchmod(fd, 0o644)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _new_figure() -> Figure:
    fig = Figure(figsize=_SIZE, dpi=_DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _png(fig: Figure) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", metadata={"Software": None})
    fig.clear()
    return buffer.getvalue()


def _legend(fig: Figure, ax: Axes, *, below: bool = False) -> None:
    """Matplotlib warns on a legend without labelled artists (e.g. arm names starting "_")."""
    handles, labels = ax.get_legend_handles_labels()
    if not handles:
        return
    if below:  # bars reach the top of the axes; a legend inside would cover them
        fig.legend(handles, labels, loc="outside lower center", ncols=len(handles))
    else:
        ax.legend(handles, labels)


def _candidates(result: BenchResult) -> list[str]:
    return [a.name for a in result.arms if a.role == "candidate"]


def _categories(result: BenchResult) -> list[str]:
    present = {c.category for c in result.categories}
    ordered = [c for c in result.method.categories if c in present]
    return ordered + sorted(present - set(ordered))


def _offsets(n: int, width: float) -> list[float]:
    return [(i - (n - 1) / 2) * width for i in range(n)]


def _speedup(result: BenchResult) -> Figure | None:
    groups = [*_categories(result), ALL]
    arms = _candidates(result)
    if not any(
        (s := result.stats(arm, cat)) is not None and s.speedup is not None
        for arm in arms
        for cat in groups
    ):
        return None
    fig = _new_figure()
    ax = fig.add_subplot()
    for arm, offset in zip(arms, _offsets(len(arms), 0.8 / max(len(arms), 1)), strict=True):
        xs: list[float] = []
        ys: list[float] = []
        err: list[list[float]] = [[], []]
        for i, cat in enumerate(groups):
            stats = result.stats(arm, cat)
            if stats is None or stats.speedup is None:
                continue
            ci = stats.speedup
            xs.append(i + offset)
            ys.append(ci.estimate)
            err[0].append(max(ci.estimate - ci.low, 0.0))
            err[1].append(max(ci.high - ci.estimate, 0.0))
        if xs:
            ax.errorbar(xs, ys, yerr=err, fmt="o", capsize=4, label=arm)
    ax.axhline(1.0, color="grey", linestyle="--", linewidth=1)
    ax.set_xticks(range(len(groups)), groups)
    ax.set_ylabel(f"decode speed-up vs baseline ({result.method.confidence:.0%} CI)")
    ax.set_title("Speed-up per category")
    _legend(fig, ax)
    return fig


def _tps(result: BenchResult) -> Figure | None:
    raw = result.extras.get("tps_samples")
    if not isinstance(raw, dict):
        return None
    known = [a.name for a in result.arms]
    names = [n for n in known if n in raw] + sorted(str(n) for n in raw if n not in known)
    series: list[tuple[str, list[float]]] = []
    for name in names:
        values = raw.get(name)
        if not isinstance(values, Sequence):
            continue
        clean = [float(v) for v in values if isinstance(v, int | float) and math.isfinite(float(v))]
        if clean:
            series.append((name, clean))
    if not series:
        return None
    fig = _new_figure()
    ax = fig.add_subplot()
    data = [values for _, values in series]
    ax.boxplot(data, tick_labels=[name for name, _ in series], showfliers=False)
    for i, values in enumerate(data, start=1):
        # Even spread instead of random jitter: same input, same picture.
        spread = _offsets(len(values), 0.3 / max(len(values), 1))
        ax.plot([i + d for d in spread], values, ".", alpha=0.4, color="tab:blue")
    ax.set_ylabel("decode tok/s per request (server timings)")
    ax.set_title("Decode throughput per request")
    return fig


def _acceptance(result: BenchResult) -> Figure | None:
    points: list[tuple[int, float, str]] = []
    for arm in result.arms:
        if model_drafter(arm.spec_type) is None or arm.draft_n_max is None:
            continue
        stats = result.stats(arm.name)
        if stats is not None and stats.acceptance_rate is not None:
            points.append((arm.draft_n_max, stats.acceptance_rate * 100, arm.name))
    if not points:
        return None
    points.sort()
    fig = _new_figure()
    ax = fig.add_subplot()
    ax.plot([p[0] for p in points], [p[1] for p in points], "o-")
    for n_max, rate, name in points:
        ax.annotate(name, (n_max, rate), textcoords="offset points", xytext=(4, 4))
    ax.set_xticks(sorted({p[0] for p in points}))
    ax.set_ylim(0, 100)
    ax.set_xlabel("draft n_max")
    ax.set_ylabel("acceptance rate (%)")
    ax.set_title("Draft acceptance vs draft length")
    return fig


def _acceptance_curve(result: BenchResult) -> Figure | None:
    curves = [c for c in result_curves(result) if c.rates]
    if not curves:
        return None
    fig = _new_figure()
    ax = fig.add_subplot()
    for c in curves:
        xs = list(range(1, len(c.rates) + 1))
        ax.plot(xs, [r * 100 for r in c.rates], "o-", markersize=3, label=c.arm)
    ax.set_ylim(0, 105)
    ax.set_xlabel("draft position")
    ax.set_ylabel("steps accepting at least this many tokens (%)")
    ax.set_title("Acceptance per draft position")
    _legend(fig, ax)
    return fig


def _identity(result: BenchResult) -> Figure | None:
    groups = [*_categories(result), ALL]
    arms = _candidates(result)
    control = result.control.identical_rate if result.control is not None else None
    has_bars = any(
        (s := result.stats(arm, cat)) is not None and s.identical_rate is not None
        for arm in arms
        for cat in groups
    )
    if not has_bars and control is None:
        return None
    fig = _new_figure()
    ax = fig.add_subplot()
    width = 0.8 / max(len(arms), 1)
    for arm, offset in zip(arms, _offsets(len(arms), width), strict=True):
        xs: list[float] = []
        ys: list[float] = []
        for i, cat in enumerate(groups):
            stats = result.stats(arm, cat)
            if stats is not None and stats.identical_rate is not None:
                xs.append(i + offset)
                ys.append(stats.identical_rate * 100)
        if xs:
            ax.bar(xs, ys, width=width, label=arm)
    if control is not None:
        ax.axhline(
            control * 100,
            color="black",
            linestyle=":",
            linewidth=1,
            label="control (baseline vs itself)",
        )
    ax.set_xticks(range(len(groups)), groups)
    ax.set_ylim(0, 105)
    ax.set_ylabel("identical to baseline (%)")
    ax.set_title("Identical output at temperature 0")
    _legend(fig, ax, below=True)
    return fig


_PLOTS: dict[str, Callable[[BenchResult], Figure | None]] = {
    "speedup": _speedup,
    "tps": _tps,
    "acceptance": _acceptance,
    "acceptance_curve": _acceptance_curve,
    "identity": _identity,
}


def make_plots(result: BenchResult, folder: Path) -> dict[str, str]:
    """Plots with nothing to show are skipped, so the report never embeds an empty chart."""
    folder.mkdir(parents=True, exist_ok=True)
    written: dict[str, str] = {}
    for key, build in _PLOTS.items():
        fig = build(result)
        if fig is None:
            continue
        name = f"{key}.png"
        atomic_write(folder / name, _png(fig))
        written[key] = name
    return written


def history_png(data: SeriesPlotData) -> bytes:
    """A series' run values over time: excluded runs as crosses, the reported night in
    colour, the first bad run of a change point as a dashed line."""
    fig = _new_figure()
    ax = fig.add_subplot()
    order = {run: i for i, (run, _, _) in enumerate(data.points)}
    good = [(order[r], v) for r, v, g in data.points if g]
    bad = [(order[r], v) for r, v, g in data.points if not g]
    night = [(order[r], v) for r, v, _ in data.points if r in set(data.highlight_runs)]
    if good:
        xs, ys = [x for x, _ in good], [y for _, y in good]
        ax.plot(xs, ys, marker="o", ms=4, lw=1, color="#4c72b0", label="run")
    if bad:
        xs, ys = [x for x, _ in bad], [y for _, y in bad]
        ax.scatter(xs, ys, marker="x", color="#999999", label="excluded run")
    if night:
        xs, ys = [x for x, _ in night], [y for _, y in night]
        ax.scatter(xs, ys, s=60, color="#dd8452", zorder=3, label="this night")
    if data.change_run is not None and data.change_run in order:
        ax.axvline(order[data.change_run] - 0.5, ls="--", color="#c44e52", label="change point")
    ax.set_xlabel("run (oldest first)")
    ax.set_ylabel(f"value ({data.direction.value})")
    ax.set_title(data.title)
    ax.grid(alpha=0.3)
    _legend(fig, ax)
    return _png(fig)


def ratio_png(data: RatioPlotData) -> bytes:
    """A nightly series: current/reference per night with its 95% CI as a band, the
    threshold band around 1, A/A nights hollow, tonight in colour."""
    fig = _new_figure()
    ax = fig.add_subplot()
    xs = list(range(len(data.points)))
    ys = [p[1] for p in data.points]
    lows = [p[2] if p[2] is not None else p[1] for p in data.points]
    highs = [p[3] if p[3] is not None else p[1] for p in data.points]
    ax.axhspan(
        1 - data.threshold, 1 + data.threshold, color="#dddddd", alpha=0.6, label="threshold"
    )
    ax.axhline(1.0, color="#888888", lw=0.8)
    ax.fill_between(xs, lows, highs, color="#4c72b0", alpha=0.25, label="95% CI")
    ax.plot(xs, ys, marker="o", ms=4, lw=1, color="#4c72b0", label="current / reference")
    aa = [(x, p[1]) for x, p in zip(xs, data.points, strict=True) if p[4]]
    if aa:
        ax.scatter(
            [x for x, _ in aa],
            [y for _, y in aa],
            s=50,
            facecolors="none",
            edgecolors="#55a868",
            zorder=3,
            label="A/A night",
        )
    night = [(x, p[1]) for x, p in zip(xs, data.points, strict=True) if p[0] in data.highlight]
    if night:
        ax.scatter(
            [x for x, _ in night],
            [y for _, y in night],
            s=60,
            color="#dd8452",
            zorder=4,
            label="this night",
        )
    ax.set_xlabel("night (oldest first)")
    ax.set_ylabel("decode tok/s, current / reference")
    ax.set_title(data.series)
    ax.grid(alpha=0.3)
    _legend(fig, ax)
    return _png(fig)
