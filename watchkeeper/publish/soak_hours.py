"""Has each arm been under load long enough, at every depth its unit serves, to say "stable"?

The request asks for a server "stable under sustained load overnight". A soak alternates its
arms block by block, so a 140-minute soak at depth 4 holds about 70 minutes of each arm, and a
unit of 4 slots also serves one request at a time: "stable: met" from it said more than was
measured. Here each arm's own time under load is summed per depth from the soak's block rows
(blocks x block length), and the criterion reads "not yet: N of M hours" until every arm has
the target at depth 1 and at the unit's slots.
"""

from __future__ import annotations

import re

from watchkeeper.config.durations import parse_duration
from watchkeeper.publish.soak_summary import SoakSummary

TARGET_H = 8.0
"""The request's "overnight", per arm and depth ([soak] duration's default, 8h)."""
_BLOCK = re.compile(r"--block[ =](\S+)")


def block_s(s: SoakSummary) -> float | None:
    """One block's length: the summary's own, else the `--block` of the command it records."""
    if s.block_s is not None:
        return s.block_s
    m = _BLOCK.search(s.command or "")
    return float(parse_duration(m.group(1))) if m else None


def unit_slots(s: SoakSummary) -> int | None:
    return None if s.unit is None else s.unit.slots(s.subject)


def arm_hours(s: SoakSummary) -> dict[tuple[str, int], float] | None:
    """Each (arm, depth)'s own time under load in hours; None where the block length or the
    block rows (a soak's JSON before they were kept) are not known."""
    length = block_s(s)
    if length is None or not s.blocks:
        return None
    return {(b.profile, b.concurrency): len(b.rows) * length / 3600 for b in s.blocks}


def hours_shortfall(s: SoakSummary, target_h: float = TARGET_H) -> str:
    """Empty when every arm had `target_h` under load at depth 1 and at the unit's slots; else
    what "not yet" says: the least any arm had, and the depths never soaked."""
    hours = arm_hours(s)
    if hours is None:
        return (
            "not yet: each arm's time under load unknown (the soak kept no block rows or no "
            "block length)"
        )
    depths = sorted({1, unit_slots(s) or max((d for _, d in hours), default=1)})
    named = (s.subject, s.baseline)  # a soak without a baseline has one arm
    arms = sorted({p for p, _ in hours} | {str(a) for a in named if a})
    missing = [d for d in depths if not any((a, d) in hours for a in arms)]
    short = sorted((hours.get((a, d), 0.0), a, d) for a in arms for d in depths if d not in missing)
    if not missing and (not short or short[0][0] >= target_h):
        return ""
    parts = []
    if short and short[0][0] < target_h:
        h, arm, depth = short[0]
        parts.append(
            f"not yet: {h:.1f} of {target_h:g} hours ({arm} at depth {depth}, its own time "
            "under load; the arms alternate blocks)"
        )
    if missing:
        said = " and ".join(str(d) for d in missing)
        parts.append(
            f"{'not yet: ' if not parts else ''}depth {said}, which the unit serves, not soaked"
        )
    return "; ".join(parts)


def overnight_lines(s: SoakSummary, target_h: float = TARGET_H) -> list[str]:
    """The soak page's line under its verdict where the soak falls short of the request's
    criterion: a page opening "**stable**" over about 70 minutes per arm at one depth was read
    as "stable overnight" by a reader who stopped at the first line."""
    short = hours_shortfall(s, target_h)
    if not short:
        return []
    return [
        "The verdict above is on what this soak ran. Stable under sustained load overnight, "
        f"the request's criterion: {short}.",
        "",
    ]
