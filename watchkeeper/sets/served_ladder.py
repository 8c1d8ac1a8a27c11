"""`watchkeeper served-ladder`: the pick's speed-up at every load its unit serves, measured on
the servers exactly as the unit runs them.

A sweep measures one request at a time on one slot; the unit it renders may serve four slots
with the host prompt cache off. The committed code-edit pick was sold at 1.96x from one slot
while its unit served four, where its soak showed about 1.2x (unpaired, no CI). This command
runs the paired load ladder (`commands/ladder.py`, unchanged) over the record's baseline and
pick as `publish/served.py:shipped_profiles` gives them (the unit's slots, context per slot and
`--cache-ram`), at 1, 2, 4, ... up to the unit's slots, on the sweep's own workload, then keeps
each level's decode speed-up and E2E p90 ratio (with their CIs) on the record
(`extra["served_ladder"]`, `publish/ladder_claim.py`) so the unit's header states the speed-up
at 1 and at its slots from this measurement, and re-renders the unit.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from watchkeeper.campaign.bench_plan import Progress
from watchkeeper.campaign.ladder import level_ratios
from watchkeeper.commands.ladder import ladder_command
from watchkeeper.config import Config
from watchkeeper.errors import ConfigError
from watchkeeper.host import info as host_info
from watchkeeper.load.shape import LoadShape
from watchkeeper.publish.deliverable import (
    RecommendationRecord,
    hardware_text,
    read_record,
    write_record,
)
from watchkeeper.publish.ladder_claim import LevelClaim, ServedLadder, level_claim
from watchkeeper.publish.served import as_rendered, served_settings, shipped_profiles
from watchkeeper.publish.systemd import render_unit, unit_name, write_service
from watchkeeper.store.db import Database

DEFAULT_ROUNDS = 3


def served_levels(slots: int) -> list[int]:
    """1, 2, 4, ... below the unit's slots, and the slots themselves: the load it serves at
    most is always measured, and one request at a time is always the first rung."""
    levels, level = [], 1
    while level < slots:
        levels.append(level)
        level *= 2
    return [*levels, slots]


@dataclass(frozen=True, slots=True)
class ServedLadderResult:
    ladder: ServedLadder
    record: Path
    report: Path
    unit: Path | None


def served_ladder_command(
    config: Config,
    *,
    recommendation: Path,
    levels: Sequence[int] | None = None,
    rounds: int | None = None,
    taskset: Path | None = None,
    per_category: int | None = None,
    max_tokens: int = 0,
    level_min_requests: int | None = None,
    out: Path | None = None,
    unit_dir: Path | None = None,
    progress: Progress,
    database: Database | None = None,
) -> ServedLadderResult:
    """`out`: the ladder report's folder (default: `served-ladder/` beside the record).
    `unit_dir`: where the re-rendered unit goes (default: the sweep's own path, the record's
    `extra.unit`; no unit is written when the record names none)."""
    record = read_record(recommendation)
    if not record.speculates:
        raise ConfigError(
            f"{recommendation} keeps the baseline: there is no pick to measure at its load",
            hint="the ladder of a speculating record's pick; `watchkeeper bench --load-ladder` "
            "compares any two profiles",
        )
    service = as_rendered(record, config.service)
    served = served_settings(record.chosen, service)
    wanted = sorted(set(levels)) if levels else served_levels(served.slots)
    if wanted[-1] > served.slots or wanted[0] < 1:
        raise ConfigError(
            f"levels {','.join(map(str, wanted))}: the unit serves 1 to {served.slots} "
            f"request(s) at once (--parallel {served.slots})",
            hint="a deeper level would queue in a server that batches no more; set [service] "
            "slots and re-render the unit to serve more",
        )
    profiles = shipped_profiles(record, config.service)
    arms = [record.baseline.name, record.chosen.name]
    folder = out or recommendation.parent / "served-ladder"
    categories = (
        [c.category for c in record.workload.categories] if record.workload is not None else []
    )
    measured = config.model_copy(
        update={
            "profiles": {**config.profiles, **{a: profiles[a] for a in arms}},
            "bench": config.bench.model_copy(update={"reports_dir": str(folder)}),
        }
    )
    shape = LoadShape(max_tokens=max_tokens)
    if level_min_requests is not None:
        shape = replace(shape, level_min_requests=level_min_requests)
    progress(
        f"served ladder: {record.chosen.name} against {record.baseline.name} at "
        f"{', '.join(f'c{lv}' for lv in wanted)}, {served.slots} slot(s) per server as the unit "
        f"serves them (cache-ram {served.cache_ram_mib})"
    )
    result = ladder_command(
        measured,
        profiles=arms,
        levels=[float(lv) for lv in wanted],
        rates=False,
        rounds=rounds or DEFAULT_ROUNDS,
        taskset=taskset,
        limit=None,
        per_category=per_category,
        concurrency=None,
        shape=shape,
        progress=progress,
        database=database,
        metric="decode",
        categories=categories or None,
        slots=served.slots,
    )
    claims: list[LevelClaim] = [
        level_claim(
            level_ratios(lv.level, lv.load, lv.result, record.chosen.name),
            lv.campaign_id,
            slots=served.slots,
        )
        for lv in result.levels
    ]
    report = Path(result.report_path or folder / "load_ladder.md")
    (report.parent / "load_ladder.json").write_text(
        json.dumps(result.to_json(), indent=2) + "\n", encoding="utf-8"
    )
    ladder = ServedLadder(
        arm=record.chosen.name,
        baseline=record.baseline.name,
        slots=served.slots,
        ctx_per_slot=int(profiles[record.chosen.name].ctx_size // served.slots),
        cache_ram_mib=served.cache_ram_mib,
        report=_relative(report, recommendation.parent),
        rounds=rounds or DEFAULT_ROUNDS,
        max_tokens=max_tokens,
        levels=tuple(claims),
        wall_s=result.wall_s,
        hardware=hardware_text(host_info.collect()),
    )
    record = replace(record, extra={**record.extra, "served_ladder": ladder.to_json()})
    write_record(recommendation, record)
    unit = _rerender(config, record, unit_dir)
    return ServedLadderResult(ladder, recommendation, report, unit)


def _relative(path: Path, base: Path) -> str:
    try:
        return str(path.resolve().relative_to(base.resolve()))
    except ValueError:
        return str(path)


def _rerender(config: Config, record: RecommendationRecord, unit_dir: Path | None) -> Path | None:
    named = record.extra.get("unit")
    if not named and unit_dir is None:
        return None
    name = unit_name(record)
    path = (unit_dir / name) if unit_dir is not None else Path(str(named))
    write_service(path, render_unit(record, config.service, filename=name))
    return path
