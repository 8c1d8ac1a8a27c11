"""Does a committed deliverable set agree with itself? (`watchkeeper check-set`)

A set is a folder holding a sweep's `speculative_recommendation.json` (reports/, and one per
workload such as reports/code-edit/) with what was made from it: its report, its systemd unit
(`extra.unit`), the soak of that unit, the jobs that guard it, and the README and docs lines
that quote it. Each was written at a different time by a different command, and they drifted:
two units bound one port and shared one Documentation path, a job said the sweep ran with 4
slots when it measured 1, `latest.md` was a sweep in one folder and a nightly in the other.

The JSON is the source: every other file is compared with what it implies (the unit is
re-rendered from it with [service]'s defaults and the serving settings it keeps, as `watchkeeper
unit` would), and each disagreement names the file, the field and both values. The prose
checks (README, docs, job comments) live in `publish/set_prose.py`.
"""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from watchkeeper.config.service import ServiceConfig
from watchkeeper.publish.deliverable import RECORD_NAME, RecommendationRecord, read_record
from watchkeeper.publish.served import as_rendered, served_arm
from watchkeeper.publish.soak_report import headline_text, render
from watchkeeper.publish.soak_summary import SoakSummary
from watchkeeper.publish.systemd import render_unit
from watchkeeper.publish.verify import model_digests
from watchkeeper.server.flags import SPELLINGS

SOAK_JSON = "speculative_soak.json"
SOAK_MD = "speculative_soak.md"
FIELD_FLAGS = {
    "slots": SPELLINGS["slots"],
    "context": SPELLINGS["ctx_size"],
    "cache": SPELLINGS["cache_ram"],
    "port": SPELLINGS["port"],
}
"""The argv fields a disagreement is named by (the rest is `argv`)."""
_CAMPAIGN = re.compile(r"^Campaign (\d+) \((\w+)\)", re.MULTILINE)
_SHA_ROW = re.compile(r"^\| (\S+) \| (\S+) \| ([0-9a-f]{64}) \| (\S+) \| (\S+) \|$", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class Disagreement:
    """One field two files disagree on: ``file`` says ``found``, ``source`` says ``expected``."""

    file: str
    field: str
    found: str
    expected: str
    source: str

    @property
    def text(self) -> str:
        return f"{self.file}: {self.field}: {self.found}, but {self.source} says {self.expected}"


@dataclass(frozen=True, slots=True)
class DeliverableSet:
    folder: Path
    """Relative to the repository root (reports, reports/code-edit)."""
    record: RecommendationRecord

    @property
    def json(self) -> str:
        return f"{self.folder.as_posix()}/{RECORD_NAME}"

    @property
    def unit(self) -> str:
        return str(self.record.extra.get("unit", ""))


def find_sets(root: Path) -> list[Path]:
    """Every folder under reports/ holding a recommendation, relative to ``root``."""
    found = sorted((root / "reports").glob(f"**/{RECORD_NAME}"))
    return [p.parent.relative_to(root) for p in found]


def load_set(root: Path, folder: Path) -> DeliverableSet:
    return DeliverableSet(folder, read_record(root / folder / RECORD_NAME))


def expected_unit(s: DeliverableSet) -> str:
    """The unit as `watchkeeper unit` renders it from the JSON with [service]'s defaults."""
    return render_unit(s.record, ServiceConfig(), filename=Path(s.unit).name)


def unit_directives(text: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in text.splitlines():
        if line and not line.startswith(("#", "[")) and "=" in line:
            key, value = line.split("=", 1)
            out.setdefault(key, []).append(value)
    return out


def exec_words(value: str) -> list[str]:
    return shlex.split(value.replace("%%", "%").replace("$$", "$"))


def flag_value(argv: Iterable[str], names: tuple[str, ...]) -> str:
    words = list(argv)
    for i, w in enumerate(words[:-1]):
        if w in names:
            return words[i + 1]
    return "(absent)"


def _argv_fields(
    file: str, found: list[str], expected: list[str], source: str, label: str = ""
) -> list[Disagreement]:
    """Named fields first (slots, context, cache, port, model), then the argv as a whole."""
    out = [
        Disagreement(file, f"{label}{name}", fv, ev, source)
        for name, names in FIELD_FLAGS.items()
        if (fv := flag_value(found, names)) != (ev := flag_value(expected, names))
    ]
    fm = [Path(w).name for w in found if w.endswith(".gguf")]
    em = [Path(w).name for w in expected if w.endswith(".gguf")]
    if fm != em:
        out.append(Disagreement(file, f"{label}model", " ".join(fm), " ".join(em), source))
    if not out and found != expected:
        out.append(
            Disagreement(file, f"{label}argv", shlex.join(found), shlex.join(expected), source)
        )
    return out


def _unpinned(want: list[str], soaked: list[str]) -> list[str]:
    """`want` without the baseline's `--spec-type none` when the soak ran without any
    `--spec-type`: soaks from before the pin (issue 70) ran the build's default, which on the
    measured build (11434) is `none` too (tests/server/test_baseline_real.py), so the same
    server; the pin is a guard against a later build's default, not a different setting."""
    if "--spec-type" in soaked:
        return want
    for i, word in enumerate(want[:-1]):
        if word == "--spec-type" and want[i + 1] == "none":
            return want[:i] + want[i + 2 :]
    return want


def check_unit(root: Path, s: DeliverableSet) -> list[Disagreement]:
    if not s.unit:
        return [Disagreement(s.json, "unit", "(none)", "a unit path (extra.unit)", "the set")]
    path = root / s.unit
    if not path.is_file():
        return [Disagreement(s.unit, "path", "(missing)", s.unit, s.json)]
    text = path.read_text(encoding="utf-8")
    want = expected_unit(s)
    found, expected = unit_directives(text), unit_directives(want)
    out: list[Disagreement] = []
    for key in sorted(set(found) | set(expected)):
        f, e = found.get(key, []), expected.get(key, [])
        if f == e:
            continue
        if key == "ExecStart" and f and e:
            out += _argv_fields(s.unit, exec_words(f[0]), exec_words(e[0]), s.json)
        else:
            field = "model digest (ExecStartPre)" if key == "ExecStartPre" else key
            out.append(Disagreement(s.unit, field, " | ".join(f), " | ".join(e), s.json))
    if not out and text != want:
        a, b = text.splitlines(), want.splitlines()
        i = next(
            (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
        )
        got = repr(a[i]) if i < len(a) else "(end)"
        exp = repr(b[i]) if i < len(b) else "(end)"
        out.append(Disagreement(s.unit, f"line {i + 1}", got, exp, s.json))
    return out


def check_report(root: Path, s: DeliverableSet) -> list[Disagreement]:
    """The sweep report the JSON names: its campaign, headline, build, load and digests."""
    name = f"{s.folder.as_posix()}/{s.record.report}"
    path = root / name
    if not path.is_file():
        return [Disagreement(name, "path", "(missing)", name, s.json)]
    text = path.read_text(encoding="utf-8")
    out = _campaign(name, text, s)
    r = s.record
    for field, value in (("headline", r.headline), ("build", r.build), ("load", r.load)):
        if value and value not in text:
            out.append(Disagreement(name, field, "(not in the report)", repr(value), s.json))
    spec = r.subject
    if spec is not None and spec.speedup:
        figure = spec.speedup.split(" (", 1)[0]
        if figure not in text:
            out.append(Disagreement(name, "figure", "(absent)", figure, s.json))
    out += _paths_and_mix(name, text, s)
    digests = model_digests(r)  # publish/verify.py: what the unit checks before start
    for arm, model, sha in ((m[0], m[1], m[2]) for m in _SHA_ROW.findall(text)):
        want = digests.get(f"{model}.gguf")
        if want is not None and want != sha and arm in _arm_names(r):
            out.append(Disagreement(name, f"model digest ({arm})", sha, want, s.json))
    return out


_REC_ARG = re.compile(r"--recommendation (\S+?\.json)")
_OUTPUT_ARG = re.compile(r"--output /etc/systemd/system/(\S+?\.service)")
WITHDRAWN_MIX = "with a t interval over the rounds"
"""The mix interval's wording before it carried the tasks (withdrawn 2026-11-28, docs/sweep.md)."""


def _paths_and_mix(name: str, text: str, s: DeliverableSet) -> list[Disagreement]:
    """The commands a report gives name this set's own record and unit, and its mix interval
    is the one the sweep now computes (rounds and tasks)."""
    out = [
        Disagreement(name, "path (--recommendation)", m, s.json, s.json)
        for m in _REC_ARG.findall(text)
        if m != s.json
    ]
    unit = Path(s.unit).name
    out += [
        Disagreement(name, "path (--output)", m, unit, s.json)
        for m in _OUTPUT_ARG.findall(text)
        if unit and m != unit
    ]
    if WITHDRAWN_MIX in text:
        out.append(
            Disagreement(
                name,
                "mix interval",
                "over rounds only (withdrawn)",
                "rounds and tasks",
                "docs/sweep.md",
            )
        )
    w = s.record.workload
    if w is not None and len(w.mix) == 1 and len(w.categories) == 1:
        c = w.categories[0]
        if (w.mix_low, w.mix_high) != (c.low, c.high):
            out.append(
                Disagreement(
                    s.json,
                    "figure (mix CI)",
                    w.mix_speedup,
                    f"{c.speedup} (a one-category mix is that category)",
                    s.json,
                )
            )
    return out


def _arm_names(r: RecommendationRecord) -> set[str]:
    return {a.name for a in (r.chosen, r.baseline, r.closest) if a is not None}


def _campaign(name: str, text: str, s: DeliverableSet) -> list[Disagreement]:
    m = _CAMPAIGN.search(text)
    found = f"{m.group(2)} campaign {m.group(1)}" if m else "(no campaign line)"
    want = f"sweep campaign {s.record.campaign_id}"
    return [] if found == want else [Disagreement(name, "campaign", found, want, s.json)]


def check_latest(root: Path, s: DeliverableSet) -> list[Disagreement]:
    """In a set, `latest.md` is the set's answer (its sweep), in every set alike."""
    path = root / s.folder / "latest.md"
    if not path.is_file():
        return []
    return _campaign(f"{s.folder.as_posix()}/latest.md", path.read_text(encoding="utf-8"), s)


def check_soak(root: Path, s: DeliverableSet) -> list[Disagreement]:
    """The soak of the set's unit: the same sweep, the unit's path and each arm's flags."""
    name = f"{s.folder.as_posix()}/{SOAK_JSON}"
    path = root / name
    if not path.is_file():
        return []
    soak: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    r = s.record
    out: list[Disagreement] = []
    if soak.get("sweep_campaign") != r.campaign_id:
        out.append(
            Disagreement(
                name, "campaign", str(soak.get("sweep_campaign")), str(r.campaign_id), s.json
            )
        )
    unit = soak.get("unit") or {}
    if unit.get("path") != s.unit:
        out.append(Disagreement(name, "unit path", str(unit.get("path")), s.unit, s.json))
    subject = r.subject
    if subject is not None and soak.get("subject") != subject.name:
        out.append(Disagreement(name, "subject", str(soak.get("subject")), subject.name, s.json))
    service = as_rendered(r, ServiceConfig())
    if soak.get("cache_ram_mib") != service.cache_ram_mib:
        out.append(
            Disagreement(
                name, "cache", str(soak.get("cache_ram_mib")), str(service.cache_ram_mib), s.json
            )
        )
    for arm_name, flags in (unit.get("flags") or {}).items():
        arm = next((a for a in (r.chosen, r.baseline, r.closest) if a and a.name == arm_name), None)
        if arm is None:
            out.append(
                Disagreement(name, f"arm {arm_name}", "soaked", "not an arm of the set", s.json)
            )
            continue
        want = _unpinned(list(served_arm(arm, service).flags), list(flags))
        out += _argv_fields(name, list(flags), want, s.json, f"{arm_name} ")
    slots = int(flag_value(served_arm(r.chosen, service).flags, FIELD_FLAGS["slots"]))
    for row in soak.get("series", []):
        if int(row.get("concurrency", 0)) > slots:
            out.append(
                Disagreement(name, "depth", str(row["concurrency"]), f"at most {slots}", s.json)
            )
    md = root / s.folder / SOAK_MD
    if md.is_file():
        out += _soak_md(
            md.read_text(encoding="utf-8"), soak, f"{s.folder.as_posix()}/{SOAK_MD}", name
        )
    return out


def _soak_md(text: str, soak: Mapping[str, Any], file: str, source: str) -> list[Disagreement]:
    """The soak report is its JSON rendered (publish/soak_report.py:render): the verdict line
    first, then the first line that differs."""
    summary = SoakSummary.from_json(soak)
    want = render(summary)
    if text == want:
        return []
    a, b = text.splitlines(), want.splitlines()
    verdict = headline_text(summary)
    if verdict not in a:
        got = next((x for x in a if x.startswith("**")), "(none)")
        return [Disagreement(file, "verdict", repr(got), repr(verdict), source)]
    i = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    got = repr(a[i][:120]) if i < len(a) else "(end)"
    exp = repr(b[i][:120]) if i < len(b) else "(end)"
    return [Disagreement(file, f"line {i + 1}", got, exp, f"{source} rendered")]


def job_set(job: Mapping[str, Any], sets: list[DeliverableSet]) -> DeliverableSet | None:
    """The set a job guards: its `recommendation`, or for a soak without profiles, the default
    set (reports/), whose recommendation `soak` takes when [soak] profiles is empty."""
    args = job.get("args", {})
    rec = args.get("recommendation")
    if rec:
        return next((s for s in sets if s.json == str(rec)), None)
    if job.get("kind") == "soak" and not args.get("profiles"):
        return next((s for s in sets if s.folder == Path("reports")), None)
    return None


def check_jobs(
    root: Path, sets: list[DeliverableSet], only: list[DeliverableSet] | None = None
) -> list[Disagreement]:
    """Each job that guards a set (of ``only``, default all): its categories are the set's,
    its soak depths the unit's; a job naming a recommendation no set holds is named too."""
    out: list[Disagreement] = []
    for path in sorted((root / "jobs").glob("*.toml")):
        name = f"jobs/{path.name}"
        job = tomllib.loads(path.read_text(encoding="utf-8"))
        rec = job.get("args", {}).get("recommendation")
        s = job_set(job, sets)
        if rec and s is None:
            out.append(
                Disagreement(name, "recommendation", str(rec), "a committed set", "reports/")
            )
            continue
        if s is None or (only is not None and s not in only):
            continue
        args = job["args"]
        workload = s.record.workload
        known = {c.category for c in workload.categories} if workload else set()
        for cat in args.get("categories", []):
            if known and cat not in known:
                out.append(Disagreement(name, "category", cat, ", ".join(sorted(known)), s.json))
        depths = [int(d) for d in args.get("concurrency", [])]
        service = as_rendered(s.record, ServiceConfig())
        slots = int(flag_value(served_arm(s.record.chosen, service).flags, FIELD_FLAGS["slots"]))
        for d in depths:
            if d > slots:
                out.append(Disagreement(name, "depth", str(d), f"at most {slots} slots", s.unit))
        if depths and slots not in depths:
            out.append(
                Disagreement(name, "depths", str(depths), f"including {slots} (the unit's)", s.unit)
            )
    return out


def check_side_by_side(root: Path, sets: list[DeliverableSet]) -> list[Disagreement]:
    """Two units installed on one host: no shared name, port or Documentation path."""
    out: list[Disagreement] = []
    seen: dict[tuple[str, str], str] = {}
    for s in sets:
        path = root / s.unit
        if not s.unit or not path.is_file():
            continue
        d = unit_directives(path.read_text(encoding="utf-8"))
        argv = exec_words(d.get("ExecStart", [""])[0])
        for field, value in (
            ("name", Path(s.unit).name),
            ("port", flag_value(argv, ("--port",))),
            ("Documentation", d.get("Documentation", [""])[0]),
        ):
            other = seen.setdefault((field, value), s.unit)
            if other != s.unit:
                out.append(
                    Disagreement(s.unit, field, value, f"another {field} (it has {value})", other)
                )
    return out
