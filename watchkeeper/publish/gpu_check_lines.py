"""What `watchkeeper gpu-check` prints after its bench: per arm, how its offload was verified,
its VRAM, power, J/token and energy ratio with a CI, its speed-up with a CI, its identity
verdicts and the mode that judged them; then the A/A floor, the positive controls' detection
and the fit check. And what was not measured: the check passes only when nothing is missing.

It reads the bench's JSON (`BenchResult.to_json()`), so a stored `bench --json` (the H100 run
in tests) gives the same lines as the live result. A figure absent is named as missing, never
printed as 0; a ratio without a CI ("insufficient replicates") counts as missing: a GPU check
that cannot say whether speculation helps has not checked it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from watchkeeper.checks.gap_floor import GapFloor

NA = "n/a"
NO_CI = "insufficient replicates"
MIB = 1 << 20


@dataclass(frozen=True, slots=True)
class GpuCheckSummary:
    lines: tuple[str, ...]
    missing: tuple[str, ...]
    """'ARM: what' for every figure the check needs and did not get."""

    @property
    def complete(self) -> bool:
        return not self.missing


def _ratio(value: Any) -> tuple[str, bool]:
    """'0.42x [0.41, 0.43] slower', and whether it has a CI."""
    if not isinstance(value, Mapping) or value.get("estimate") is None:
        return NA, False
    verdict = str(value.get("verdict") or "")
    if verdict == NO_CI:
        return f"{value['estimate']:.2f}x (no CI: {NO_CI})", False
    return (f"{value['estimate']:.2f}x [{value['low']:.2f}, {value['high']:.2f}] {verdict}", True)


def _num(value: Any, unit: str, digits: int = 0) -> str:
    return NA if value is None else f"{value:.{digits}f} {unit}".rstrip()


def _mib(value: Any) -> str:
    return NA if value is None else f"{value / MIB:.0f} MiB"


def _offload(arm: str, extras: Mapping[str, Any], missing: list[str]) -> str:
    verdict = (extras.get("offload") or {}).get(arm)
    if not isinstance(verdict, Mapping):
        missing.append(f"{arm}: offload not recorded")
        return f"offload {NA}"
    seen, detail = verdict.get("seen"), verdict.get("detail")
    if seen not in {"full", "as asked"}:
        missing.append(f"{arm}: offload {seen}")
    return f"offload {seen}: {detail}" if detail else f"offload {seen}"


def _cost(arm: str, cost: Any, baseline: bool, missing: list[str]) -> str:
    cost = cost if isinstance(cost, Mapping) else {}
    for key, what in (
        ("peak_vram_bytes", "VRAM"),
        ("power_watts", "power"),
        ("joules_per_token", "J/token"),
    ):
        if cost.get(key) is None:
            missing.append(f"{arm}: {what}")
    text = (
        f"VRAM peak {_mib(cost.get('peak_vram_bytes'))}, steady "
        f"{_mib(cost.get('steady_vram_bytes'))}; power {_num(cost.get('power_watts'), 'W')}; "
        f"{_num(cost.get('joules_per_token'), 'J/token', 3)}"
    )
    if baseline:
        return text
    ratio, has_ci = _ratio(cost.get("energy_ratio"))
    if not has_ci:
        missing.append(f"{arm}: energy ratio with a CI")
    return f"{text}; energy/token vs baseline {ratio}"


def _identity(arm: str, stats: Mapping[str, Any], extras: Mapping[str, Any]) -> str:
    verdicts: Mapping[str, int] = stats["overall"].get("verdicts") or {}
    counts = ", ".join(f"{k} {v}" for k, v in sorted(verdicts.items()) if v) or "none judged"
    mode = (extras.get("identity_modes") or {}).get(arm)
    how = f"{mode.get('mode')} mode ({mode.get('reason')})" if isinstance(mode, Mapping) else NA
    return f"identity: {counts}; {how}"


def _arm_lines(
    arm: Mapping[str, Any], stats: Mapping[str, Any], extras: Mapping[str, Any]
) -> tuple[list[str], list[str]]:
    name, baseline = str(arm["name"]), arm.get("role") == "baseline"
    missing: list[str] = []
    overall = stats["overall"]
    lines = [
        f"{name} ({'baseline' if baseline else 'candidate'}): "
        f"{_num(overall.get('median_tps'), 'tok/s', 1)} median",
        f"  {_offload(name, extras, missing)}",
        f"  {_cost(name, stats.get('gpu'), baseline, missing)}",
    ]
    if not baseline:
        speed, has_ci = _ratio(overall.get("speedup"))
        if not has_ci:
            missing.append(f"{name}: speed-up with a CI")
        lines.append(f"  speed-up {speed}")
        if arm.get("speculative", True):
            lines.append(f"  {_identity(name, stats, extras)}")
            if not overall.get("verdicts"):
                missing.append(f"{name}: identity verdicts")
            if not isinstance((extras.get("identity_modes") or {}).get(name), Mapping):
                missing.append(f"{name}: identity mode")
    return lines, missing


def _floor_line(extras: Mapping[str, Any], missing: list[str]) -> str:
    floor = extras.get("noise_floor")
    if not isinstance(floor, Mapping):
        missing.append("A/A floor")
        return f"A/A floor on the baseline server: {NA}"
    return f"A/A floor on the baseline server: {GapFloor.from_json(floor).describe()}"


def _control_lines(extras: Mapping[str, Any], missing: list[str]) -> list[str]:
    power: Mapping[str, Any] = extras.get("identity_power") or {}
    lines = []
    for control in ("offline", "live"):
        found = power.get(control)
        if isinstance(found, Mapping):
            lines.append(str(found.get("summary")))  # names its control itself
        else:
            missing.append(f"{control} positive control")
            lines.append(f"{control} positive control: not run")
    return lines


def gpu_check_summary(data: Mapping[str, Any]) -> GpuCheckSummary:
    """The printout of one GPU check from its bench's JSON."""
    extras: Mapping[str, Any] = data.get("extras") or {}
    stats_by_arm = {s["arm"]: s for s in data.get("arm_stats") or []}
    method = data.get("method") or {}
    lines = [
        f"build {data.get('build_version')} ({data.get('build_variant')}) on "
        f"{(data.get('host') or {}).get('gpu') or 'no GPU'}; {method.get('rounds')} rounds x "
        f"{method.get('tasks')} tasks"
    ]
    missing: list[str] = []
    for arm in data.get("arms") or []:
        stats = stats_by_arm.get(arm["name"])
        if stats is None:
            missing.append(f"{arm['name']}: not measured")
            continue
        arm_lines, arm_missing = _arm_lines(arm, stats, extras)
        lines += arm_lines
        missing += arm_missing
    lines.append(_floor_line(extras, missing))
    lines += _control_lines(extras, missing)
    lines += [str(row.get("line")) for row in extras.get("fit_at_context") or []]
    return GpuCheckSummary(tuple(lines), tuple(missing))


def verdict_lines(summary: GpuCheckSummary, wall_s: float, budget_s: float) -> Sequence[str]:
    """The closing lines: every figure measured (exit 0), or what was not."""
    head = f"gpu-check: {wall_s:.0f} s wall (budget {budget_s:.0f} s)"
    if summary.complete:
        return [f"{head}: every figure measured"]
    return [f"{head}: {len(summary.missing)} not measured:", *(f"  - {m}" for m in summary.missing)]
