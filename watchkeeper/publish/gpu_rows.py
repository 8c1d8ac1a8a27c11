"""The report's GPU cost table: one row per arm, 'n/a' wherever NVML measured nothing.

'n/a' and not the report's usual dash: a dash reads as "not applicable to this arm", while a
GPU figure missing on a CPU host (or where NVML cannot see the server's PIDs) is "not
available", and must never read as zero.
"""

from __future__ import annotations

from watchkeeper import format as fmt
from watchkeeper.analysis.bench_types import BenchResult
from watchkeeper.analysis.gpu_cost import ArmGpuCost

NA = "n/a"


def _num(value: float | None, digits: int) -> str:
    return NA if value is None else f"{value:.{digits}f}"


def _mib(value: int | None) -> str:
    return NA if value is None else f"{value / (1 << 20):.0f}"


def _ratio(cost: ArmGpuCost | None, baseline: bool) -> str:
    if baseline:
        return fmt.MISSING
    if cost is None or cost.energy_ratio is None:
        return NA
    verdict = f" {cost.energy_ratio.verdict}" if cost.energy_ratio.has_ci else ""
    return fmt.speedup(cost.energy_ratio) + verdict


def gpu_measured(result: BenchResult) -> bool:
    return any(s.gpu is not None for s in result.arm_stats)


def gpu_rows(result: BenchResult) -> list[list[str]]:
    rows = []
    for arm in result.arms:
        stats = next((s for s in result.arm_stats if s.arm == arm.name), None)
        cost = stats.gpu if stats is not None else None
        rows.append(
            [
                arm.name,
                _mib(cost.peak_vram_bytes if cost else None),
                _mib(cost.steady_vram_bytes if cost else None),
                _num(cost.utilization_percent if cost else None, 0),
                _num(cost.power_watts if cost else None, 0),
                _num(cost.joules_per_token if cost else None, 3),
                _ratio(cost, arm.role == "baseline"),
            ]
        )
    return rows
