"""Terminal tables (rich). Pure presentation of result dataclasses."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

if TYPE_CHECKING:
    from watchkeeper.commands.run import RunCommandResult


def fmt(value: float | None, spec: str = ".1f", none: str = "—") -> str:
    return none if value is None else format(value, spec)


def print_run_summary(console: Console, result: RunCommandResult) -> None:
    s = result.summary
    table = Table(title=f"watchkeeper run · {result.profile} · campaign {result.campaign_id}")
    for column in ("requests", "errors", "median decode tok/s", "client tok/s",
                   "median TTFT ms", "acceptance"):
        table.add_column(column, justify="right")
    acceptance = "—" if s.acceptance_rate is None else (
        f"{s.acceptance_rate:.1%} ({s.accepted_tokens}/{s.draft_tokens})"
    )
    table.add_row(str(s.requests), str(s.errors), fmt(s.median_decode_tps),
                  fmt(s.median_decode_tps_client), fmt(s.median_ttft_ms, ".0f"), acceptance)
    console.print(table)
    console.print(f"stored in {result.database}")
    if result.error:
        console.print(f"[red]run error:[/red] {result.error}")
