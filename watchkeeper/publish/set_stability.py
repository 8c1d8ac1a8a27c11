"""check-set's reading of each sweep report's stability line: a soak it cites must be a soak
of that report's own pick.

A set's folder holds its report, `latest.md` and the dated campaign folders (one sweep each),
and one `speculative_soak.json` (dated soak folders keep older ones). On 7 Dec 2026 the
code-edit set's sweep (campaign 3) wrote into its campaign folder a stability line rendered from
the soak of the set before ("Soak campaign 2 ... 36m", made for sweep campaign 1), and
check-set said all agreed: it compared the soak JSON with the record, never a report's line
with the soak it cites. Here every report between the soak markers that cites a soak ("Soak
campaign N: SUBJECT beside ..." from the summary, or "soak of ... on this host: campaign N"
from the store) is held to a committed summary of that campaign and subject, and that summary
to the report's pick by the rule the sweep renders with (publish/soak_lineage.py): the same
sweep campaign, and for the set's own sweep also its subject arm and unit. A report of an
older sweep in the set's folder is known here by its campaign alone (its record was
overwritten). "not yet measured" cites nothing and is never named.
"""

from __future__ import annotations

import re
from pathlib import Path

from watchkeeper.publish.deliverable import RECORD_NAME
from watchkeeper.publish.set_check import DeliverableSet, Disagreement
from watchkeeper.publish.soak_lineage import Pick, mismatch
from watchkeeper.publish.soak_report import BEGIN, END, SOAK_SUMMARY, read_summary
from watchkeeper.publish.soak_summary import SoakSummary

_SWEEP = re.compile(r"^Campaign (\d+) \(sweep\)", re.MULTILINE)
_CITED = (
    re.compile(r"Soak campaign (\d+|None): (\S+) beside"),  # soak_report.stability_line
    # sweep_criteria's line from the store ("latest soak of" before 7 Dec 2026)
    re.compile(r"soak of (?:this sweep's )?(?P<subject>\S+) on this host: campaign (?P<id>\d+)"),
)


def _cited(line: str) -> tuple[str, str] | None:
    """(soak campaign, subject) the stability line cites; None where it cites no soak."""
    m = _CITED[0].search(line)
    if m:
        return m.group(1), m.group(2)
    m = _CITED[1].search(line)
    return (m.group("id"), m.group("subject")) if m else None


def _line(text: str) -> str | None:
    if BEGIN not in text or END not in text:
        return None
    return text.split(BEGIN, 1)[1].split(END, 1)[0].strip("\n")


def _dated(root: Path, s: DeliverableSet) -> list[Path]:
    """The set's dated folders: its children that are no set of their own."""
    folder = root / s.folder
    return sorted(p for p in folder.iterdir() if p.is_dir() and not (p / RECORD_NAME).is_file())


def _reports(root: Path, s: DeliverableSet) -> list[Path]:
    names = [root / s.folder / s.record.report, root / s.folder / "latest.md"]
    names += [p / "report.md" for p in _dated(root, s)]
    return [p for p in dict.fromkeys(names) if p.is_file()]


def _soaks(root: Path, s: DeliverableSet) -> list[tuple[str, SoakSummary]]:
    """Every committed soak summary of the set: its own, then the dated soak folders'."""
    paths = [root / s.folder / SOAK_SUMMARY] + [p / SOAK_SUMMARY for p in _dated(root, s)]
    out: list[tuple[str, SoakSummary]] = []
    for path in paths:
        summary = read_summary(path) if path.is_file() else None
        if summary is not None:
            out.append((path.relative_to(root).as_posix(), summary))
    return out


def check_stability(root: Path, s: DeliverableSet) -> list[Disagreement]:
    """Each report of the set whose stability line cites a soak: that soak is committed and
    soaked the report's own pick."""
    soaks = _soaks(root, s)
    out: list[Disagreement] = []
    for path in _reports(root, s):
        text = path.read_text(encoding="utf-8")
        line = _line(text)
        cited = _cited(line) if line is not None else None
        sweep = _SWEEP.search(text)
        if cited is None or sweep is None:
            continue
        name = path.relative_to(root).as_posix()
        campaign, subject = int(sweep.group(1)), cited[1]
        own = Pick.of(s.record) if campaign == s.record.campaign_id else None
        pick = own or Pick(campaign, subject)
        found = f"soak campaign {cited[0]} of {subject}"
        named = [
            (f, x) for f, x in soaks if str(x.campaign_id) == cited[0] and x.subject == subject
        ]
        if not named:
            out.append(
                Disagreement(
                    name,
                    "stability (soak)",
                    found,
                    "a committed soak summary of it",
                    f"{s.folder.as_posix()}/{SOAK_SUMMARY}",
                )
            )
            continue
        why = [w for _f, x in named if (w := mismatch(x, pick)) is not None]
        if len(why) == len(named):
            out.append(
                Disagreement(
                    name,
                    "stability (soak)",
                    f"{found} ({why[0]})",
                    f"a soak of sweep campaign {campaign}'s pick, or 'not yet measured'",
                    named[0][0],
                )
            )
    return out
