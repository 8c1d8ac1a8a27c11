"""The prose about a deliverable set, checked against the set (`watchkeeper check-set`).

README paragraphs, docs pages and job comments quote a set's figures and describe its unit;
they were written by hand and drifted from what was committed (a figure from a withdrawn
sweep, "the sweep ran with 4 slots" of a sweep that measured 1, "the one to install" of a unit
that does not speculate, a soak sold as settled whose drift was never judged). A paragraph (or
list item) is tied to a set when it names the set's folder or its unit; then every speed-up it
quotes must be one the set's files hold, and what it says of the unit must be true of it.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from watchkeeper.publish.ladder_claim import served_ladder
from watchkeeper.publish.set_check import (
    SOAK_JSON,
    SOAK_MD,
    DeliverableSet,
    Disagreement,
    job_set,
)

_FIGURE = re.compile(
    r"(\d+\.\d+)x \((?:95% CI (?:over \d+ (?:of \d+ )?tasks )?)?(\d+\.\d+)[-\u2013](\d+\.\d+)"
)
"""A quoted speed-up with its interval: '1.38x (1.22-1.55', '1.38x (95% CI 1.22-1.55' or, a
one-round sweep's over its tasks, '1.04x (95% CI over 36 tasks 0.97-1.12'."""
_SWEEP_SLOTS = re.compile(r"sweep ran with[^.]*?slots = (\d+)")
_REQUESTS = re.compile(r"\((\d+) requests")
_SPEC = re.compile(r"--spec-type[ =]([a-z0-9-]+)")
UNRESOLVED_WORDS = ("unresolved", "not judged", "not yet")


@dataclass(frozen=True, slots=True)
class Block:
    file: str
    line: int
    text: str

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


def blocks(text: str, file: str) -> Iterator[Block]:
    """Paragraphs and list items (a list item ends where the next one starts)."""
    start, lines = 0, list[str]()
    for i, line in enumerate([*text.splitlines(), ""]):
        if not line.strip() or line.lstrip().startswith(("- ", "| ", "#")):
            if lines:
                yield Block(file, start + 1, " ".join(lines))
            lines = []
            if not line.strip() or line.lstrip().startswith(("| ", "#")):
                continue
        if not lines:
            start = i
        lines.append(line.strip())


def job_comments(path: Path) -> str:
    return " ".join(
        line.lstrip("# ").strip()
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.startswith("#")
    )


def markers(s: DeliverableSet) -> tuple[str, ...]:
    """What names the set in prose: its unit, and its folder's files."""
    folder = s.folder.as_posix()
    own = (
        (f"{folder}/speculative_", f"{folder}/latest.md")
        if folder == "reports"
        else (f"{folder}/",)
    )
    return (Path(s.unit).name, *own) if s.unit else own


def _sources(root: Path, s: DeliverableSet) -> str:
    """Every text the set's figures may come from."""
    texts = []
    for name in (s.record.report, SOAK_MD, SOAK_JSON, "speculative_recommendation.json"):
        path = root / s.folder / name
        if path.is_file():
            texts.append(path.read_text(encoding="utf-8"))
    # The unit's header states the served ladder's figures (publish/ladder_claim.py).
    if s.unit and (root / s.unit).is_file():
        texts.append((root / s.unit).read_text(encoding="utf-8"))
    # The header states the rungs at 1 and at the slots; prose may quote any rung the record
    # keeps (its page prints them to three places, which the figure pattern does not read).
    ladder = served_ladder(s.record.extra)
    if ladder is not None:
        texts.extend(f"{c.decode_text()} {c.e2e_text()}" for c in ladder.levels)
    return "\n".join(texts)


def _soak(root: Path, s: DeliverableSet) -> dict[str, Any] | None:
    path = root / s.folder / SOAK_JSON
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def soak_resolved(soak: dict[str, Any]) -> bool:
    """Every arm at every depth judged for drift, and every arm's memory growth judged."""
    series = {(r["profile"], r["concurrency"]) for r in soak.get("series", [])}
    drifted = {(r["profile"], r["concurrency"]) for r in soak.get("drift", [])}
    rss = soak.get("rss") or {}
    return series <= drifted and all(v.get("judged") for v in rss.values())


_NAMED = re.compile(r"\]\(([^)\s#]+)|`?((?:\.\./)?reports/[\w./-]+\.md)")


def named_files(root: Path, b: Block) -> str:
    """The text of the reports a block names (links, or paths in the text): a figure it quotes
    from an earlier campaign it names is that campaign's, not the set's."""
    here = (root / b.file).parent
    texts = []
    for link, bare in _NAMED.findall(b.text):
        for base in (here, root):
            path = (base / (link or bare)).resolve()
            if path.suffix == ".md" and path.is_file():
                texts.append(path.read_text(encoding="utf-8"))
                break
    return "\n".join(texts)


def check_block(root: Path, b: Block, s: DeliverableSet, sources: str) -> list[Disagreement]:
    r = s.record
    out: list[Disagreement] = []
    known = set(_FIGURE.findall(sources)) | set(_FIGURE.findall(named_files(root, b)))
    for fig in _FIGURE.findall(b.text):
        if fig not in known:
            text = f"{fig[0]}x ({fig[1]}-{fig[2]})"
            out.append(Disagreement(b.where, "figure", text, "no such figure", s.json))
    measured = str(r.chosen.profile.get("slots", 1))
    for m in _SWEEP_SLOTS.findall(b.text):
        if m != measured:
            out.append(Disagreement(b.where, "slots (measured)", m, measured, s.json))
    unit = Path(s.unit).name
    if unit and unit in b.text:
        spec = r.chosen.profile.get("spec_type")
        said = _SPEC.findall(b.text)
        if said and spec and said[0] != spec:
            out.append(Disagreement(b.where, "argv (--spec-type)", said[0], str(spec), s.json))
        if (
            "the one to install" in b.text
            and not r.speculates
            and "does not speculate" not in b.text
        ):
            out.append(
                Disagreement(
                    b.where,
                    "claim",
                    "'the one to install'",
                    "its unit does not speculate (say so beside it)",
                    s.json,
                )
            )
    soak = _soak(root, s)
    if soak is not None and f"{s.folder.as_posix()}/{SOAK_MD}" in b.text:
        for n in _REQUESTS.findall(b.text):
            if int(n) != int(soak.get("requests", -1)):
                out.append(
                    Disagreement(
                        b.where, "figure (soak requests)", n, str(soak["requests"]), SOAK_JSON
                    )
                )
        if not soak_resolved(soak) and not any(w in b.text for w in UNRESOLVED_WORDS):
            out.append(
                Disagreement(
                    b.where,
                    "claim",
                    "the soak without its status",
                    "unresolved (drift or memory not judged): say so",
                    f"{s.folder.as_posix()}/{SOAK_JSON}",
                )
            )
    return out


def check_prose(root: Path, sets: list[DeliverableSet]) -> list[Disagreement]:
    """README, docs/*.md and job comments, each block against the sets it names."""
    out: list[Disagreement] = []
    sources = {s.json: _sources(root, s) for s in sets}
    pages = [root / "README.md", *sorted((root / "docs").glob("*.md"))]
    for page in pages:
        if not page.is_file():
            continue
        name = page.relative_to(root).as_posix()
        for b in blocks(page.read_text(encoding="utf-8"), name):
            for s in sets:
                if any(m in b.text for m in markers(s)):
                    out += check_block(root, b, s, sources[s.json])
    for path in sorted((root / "jobs").glob("*.toml")):
        guarded = job_set(tomllib.loads(path.read_text(encoding="utf-8")), sets)
        if guarded is not None:
            b = Block(f"jobs/{path.name}", 1, job_comments(path))
            out += check_block(root, b, guarded, sources[guarded.json])
    return out
