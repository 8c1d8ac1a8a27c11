"""`.venv/bin/python scripts/ladder_reread.py REPORT_DIR`: a stored ladder's crossover lines
read again with the current `analysis.crossover`, without measuring anything. Every level's
readings are in the ladder's JSON; the crossover lines of its page and the JSON's crossover
entries are replaced, nothing else. (Used once: the 2026-11-28 rate ladder, measured before
a curve that costs at every level stopped being named non-monotone.)"""

import json
import sys
from pathlib import Path

from watchkeeper.analysis.crossover import LevelRatios, crossover
from watchkeeper.analysis.load_compare import Reading

folder = Path(sys.argv[1])
data = json.loads((folder / "load_ladder.json").read_text())
unit = "concurrent requests" if data["mode"] == "concurrency" else "requests/s"
metric = data["crossover_metric"]
md = (folder / "load_ladder.md").read_text()
new = []
for old in data["crossovers"]:
    levels = []
    for lv in old["levels"]:
        readings = tuple(
            Reading(
                r["metric"],
                r["estimate"],
                r["low"],
                r["high"],
                r["rounds"],
                r["state"],
                r["rounds_needed"],
            )
            for r in lv["readings"].values()
        )
        levels.append(
            LevelRatios(
                lv["level"],
                lv["load"],
                None,
                None,
                None,
                readings,
                tuple(lv["oversaturated"]),
                data["baseline"],
            )
        )
    c = crossover(old["arm"], levels, unit, metric)
    entry = dict(old)
    entry.update({k: v for k, v in c.to_json().items() if k != "levels"})
    new.append(entry)
    if c.sentence != old["sentence"]:
        assert f"- {old['sentence']}" in md, old["arm"]
        md = md.replace(f"- {old['sentence']}", f"- {c.sentence}")
        print(f"{old['arm']}:\n  was: {old['sentence']}\n  now: {c.sentence}")
data["crossovers"] = new
(folder / "load_ladder.json").write_text(json.dumps(data, indent=2) + "\n")
(folder / "load_ladder.md").write_text(md)
