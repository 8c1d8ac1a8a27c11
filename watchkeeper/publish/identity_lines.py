"""The identity section's lines below the verdict table: which mode judged each arm and why,
the noise floor with its flip rate by margin, every arm's token scores, and the positive
controls' power. Where no control detected anything it says so: "the identity check has no
power on this host", never "no mismatch".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from watchkeeper.checks.gap_floor import GapFloor
from watchkeeper.checks.power import NO_POWER
from watchkeeper.publish import markdown as md


def _band_table(floor: GapFloor) -> list[str]:
    if not floor.bands:
        return []
    rows = [
        "| decode margin (nats) | positions | flips | flip rate |",
        "| --- | ---: | ---: | ---: |",
    ]
    for b in floor.bands:
        rate = f"{b.rate:.1%}" if b.rate is not None else "—"
        rows.append(f"| {b.label()} | {b.positions} | {b.flips} | {rate} |")
    return rows


def identity_section(extras: Mapping[str, Any]) -> str | None:
    """Markdown paragraphs (None when the bench judged no identity)."""
    raw = extras.get("noise_floor")
    modes: Mapping[str, Any] = extras.get("identity_modes") or {}
    if not isinstance(raw, Mapping) and not modes and not extras.get("identity_power"):
        return None
    out: list[str] = []
    for arm, mode in sorted(modes.items()):
        settings = mode.get("settings_differ")
        extra = f" (settings: {'; '.join(settings)})" if settings else ""
        out.append(
            f"- {md.inline(arm)}: judged in the **{mode.get('mode')}** mode against "
            f"{md.inline(str(mode.get('reference')))}: {md.inline(str(mode.get('reason')))}{extra}"
        )
    if out:
        out.insert(
            0,
            "Identity modes (exact: `--ubatch-size 1` on every server for the probes "
            "only, any divergence a mismatch; batched: replay and noise floor):\n",
        )
        out.append("")
    if isinstance(raw, Mapping):
        floor = GapFloor.from_json(raw)
        sentence = (
            f"the replay reproduced the decode exactly at all {floor.replayed} positions (the "
            "exact mode holds: no floor is needed)"
            if floor.exact
            else floor.describe()
        )
        plan = f"; positions: {floor.plan}" if floor.plan else ""
        exact = (
            f"; the replay reproduced the decode exactly at {floor.exact_positions} of "
            f"{floor.replayed}"
            if floor.replayed and not floor.exact
            else ""
        )
        out.append(
            f"A/A control on the baseline server: {sentence}{plan}"
            f"{exact}. Flip rate by the decode's top-1 margin:"
        )
        out.append("")
        out.extend(_band_table(floor))
        out.append("")
    scores: Mapping[str, Any] = extras.get("token_scores") or {}
    for arm, score in sorted(scores.items()):
        out.append(f"- token scores, {md.inline(arm)}: {md.inline(str(score.get('summary')))}")
    if scores:
        out.append("")
    power: Mapping[str, Any] = extras.get("identity_power") or {}
    offline = power.get("offline") or {}
    live = power.get("live") or {}
    if offline:
        out.append(f"Power: {md.inline(str(offline.get('summary')))}.")
    if live:
        out.append(f"Power: {md.inline(str(live.get('summary')))}.")
    detected = (offline.get("detected") or 0) + (1 if live.get("smallest_detected") else 0)
    if (offline or live) and not detected:
        out.append(f"**{NO_POWER}**: a verdict without a mismatch here is not evidence of none.")
    if isinstance(power.get("cost_s"), int | float):
        out.append(f"Identity pass: {power['cost_s'] / 60:.1f} minutes.")
    return "\n".join(out).strip() or None
