"""check-set's reading of a set's served ladder: the figures the unit's header states come from
a ladder page that is in the set, measured at the slots the unit serves.

The record keeps each level's figures (`extra["served_ladder"]`, publish/ladder_claim.py) and
the unit is rendered from them; this check holds them to the ladder's own JSON beside its page
(the same campaigns, the same levels) and to the unit's slots, so a re-render after [service]
slots changed, or a ladder page replaced by another run, cannot keep an old figure."""

from __future__ import annotations

import json
from pathlib import Path

from watchkeeper.config.service import ServiceConfig
from watchkeeper.publish.ladder_claim import served_ladder
from watchkeeper.publish.served import as_rendered, served_settings
from watchkeeper.publish.set_check import DeliverableSet, Disagreement


def check_ladder(root: Path, s: DeliverableSet) -> list[Disagreement]:
    ladder = served_ladder(s.record.extra)
    if ladder is None:
        return []
    page = s.folder / ladder.report
    slots = served_settings(s.record.chosen, as_rendered(s.record, ServiceConfig())).slots
    out = []
    if ladder.slots != slots:
        out.append(
            Disagreement(s.json, "served ladder slots", str(ladder.slots), str(slots), s.unit)
        )
    data_path = root / page.parent / "load_ladder.json"
    if not (root / page).is_file() or not data_path.is_file():
        return [
            *out,
            Disagreement(s.json, "served ladder page", "(missing)", page.as_posix(), s.json),
        ]
    data = json.loads(data_path.read_text(encoding="utf-8"))
    ran = [(int(lv["level"]), int(lv["campaign_id"])) for lv in data.get("levels", [])]
    kept = [(c.level, c.campaign_id) for c in ladder.levels]
    if ran != kept:
        out.append(
            Disagreement(
                s.json,
                "served ladder campaigns",
                str(kept),
                str(ran),
                data_path.relative_to(root).as_posix(),
            )
        )
    return out
