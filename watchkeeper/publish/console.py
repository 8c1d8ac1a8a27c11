"""Terminal tables (rich). Pure presentation of result dataclasses."""

from __future__ import annotations

from typing import Protocol

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from watchkeeper.analysis.aa_control import control_reading
from watchkeeper.analysis.benchmark import BenchResult, CategoryStats
from watchkeeper.analysis.summary import RunSummary
from watchkeeper.checks.gap_floor import GapFloor
from watchkeeper.format import MISSING, fixed, share, speedup
from watchkeeper.publish.gpu_rows import gpu_measured, gpu_rows


def plain(value: object) -> str:
    """`value` as text rich prints as written: a stored title holding `[/INST]` or a path
    with `[x]` in it is text, not markup (rich raised MarkupError on the first)."""
    return escape(str(value))


VERDICTS = ("identical", "near_tie", "batch_variance", "length_only", "unverified", "mismatch")


class RunView(Protocol):
    """What the run table prints of `commands.run.RunCommandResult`: a protocol, so this
    module does not import a command (a layer above it)."""

    @property
    def campaign_id(self) -> int: ...
    @property
    def profile(self) -> str: ...
    @property
    def database(self) -> str: ...
    @property
    def summary(self) -> RunSummary: ...
    @property
    def error(self) -> str | None: ...


def fmt(value: float | None, spec: str = ".1f") -> str:
    return fixed(value, spec)


def print_run_summary(console: Console, result: RunView) -> None:
    s = result.summary
    table = Table(title=f"watchkeeper run · {result.profile} · campaign {result.campaign_id}")
    for column in (
        "requests",
        "errors",
        "median decode tok/s",
        "client tok/s",
        "median TTFT ms",
        "acceptance",
    ):
        table.add_column(column, justify="right")
    acceptance = (
        MISSING
        if s.acceptance_rate is None
        else (f"{s.acceptance_rate:.1%} ({s.accepted_tokens}/{s.draft_tokens})")
    )
    table.add_row(
        str(s.requests),
        str(s.errors),
        fmt(s.median_decode_tps),
        fmt(s.median_decode_tps_client),
        fmt(s.median_ttft_ms, ".0f"),
        acceptance,
    )
    console.print(table)
    console.print(f"stored in {plain(result.database)}")
    if result.error:
        console.print(f"[red]run error:[/red] {plain(result.error)}")


def _ci(stats: CategoryStats) -> str:
    s = stats.speedup
    return speedup(s) if s is None or not s.has_ci else f"{speedup(s)} {s.verdict}"


def print_gpu_cost(console: Console, result: BenchResult) -> None:
    """The report's GPU cost table, or one line saying it was not measured (never zeros)."""
    if not gpu_measured(result):
        console.print("GPU cost: n/a (NVML measured nothing here: no VRAM, power or energy)")
        return
    table = Table(title="GPU cost")
    columns = ("arm", "peak VRAM MiB", "steady VRAM MiB", "util %", "W", "J/token", "J/token x")
    for column in columns:
        table.add_column(column, justify="left" if column == "arm" else "right")
    for row in gpu_rows(result):
        table.add_row(*row)
    console.print(table)


def print_bench(console: Console, result: BenchResult) -> None:
    table = Table(
        title=f"watchkeeper {result.kind} · campaign {result.campaign_id} · "
        f"{result.method.rounds} rounds x {result.method.tasks} tasks"
    )
    for column in (
        "arm",
        "spec",
        "decode tok/s",
        "speed-up [95% CI]",
        "acceptance",
        "identical",
        "predicted",
        "efficiency",
        "errors",
    ):
        table.add_column(column, justify="left" if column in ("arm", "spec") else "right")
    for arm, arm_stats in zip(result.arms, result.arm_stats, strict=True):
        o = arm_stats.overall
        spec = arm.spec_type or "none"
        if arm.draft_n_max:
            spec += f"/{arm.draft_n_max}"
        table.add_row(
            arm.name,
            spec,
            fmt(o.median_tps),
            _ci(o),
            share(o.acceptance_rate),
            share(o.identical_rate),
            fmt(arm_stats.bound.predicted_speedup, ".2f") + "x" if arm_stats.bound else MISSING,
            share(arm_stats.efficiency),
            f"{o.errors}/{o.requests}",
        )
    console.print(table)
    if (aa := control_reading(result)) is not None:
        console.print(plain(aa.line()))
    print_gpu_cost(console, result)
    categories = sorted({c.category for c in result.categories})
    cat_table = Table(title="speed-up by category")
    cat_table.add_column("category")
    candidates = [a.name for a in result.arms if a.role == "candidate"]
    for name in candidates:
        cat_table.add_column(name, justify="right")
    for category in categories:
        row = [category]
        for name in candidates:
            stats = result.stats(name, category)
            row.append(_ci(stats) if stats else MISSING)
        cat_table.add_row(*row)
    console.print(cat_table)
    for arm, arm_stats in zip(result.arms, result.arm_stats, strict=True):
        verdicts = arm_stats.overall.verdicts
        if arm.role == "candidate" and verdicts:
            counts = ", ".join(f"{v} {verdicts[v]}" for v in VERDICTS if verdicts.get(v))
            console.print(f"identity {plain(arm.name)}: {plain(counts)}")
    floor = result.extras.get("noise_floor")
    if isinstance(floor, dict):
        console.print(f"A/A on the baseline server: {plain(GapFloor.from_json(floor).describe())}")
    for name, mode in sorted((result.extras.get("identity_modes") or {}).items()):
        console.print(
            f"identity mode {plain(name)}: {plain(mode.get('mode'))} ({plain(mode.get('reason'))})"
        )
    power = result.extras.get("identity_power") or {}
    for control in ("offline", "live"):
        if isinstance(power.get(control), dict):
            console.print(str(power[control].get("summary")))
    if result.control is not None:
        console.print(
            f"control (baseline vs its previous pass): identical "
            f"{share(result.control.identical_rate)} of {result.control.requests}"
        )
    for finding in result.findings:
        console.print(
            f"[yellow]finding[/yellow] [{plain(finding.severity)}] {plain(finding.title)}"
        )
    if result.report_path:
        console.print(f"report: {plain(result.report_path)}")
